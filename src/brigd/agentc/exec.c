/*
 * exec.c - the agent client's exec (see agentc.h): the request, its stdin, and the
 * collection of a buffered command's output.
 */
#include "agentc_internal.h"

#include <string.h>
#include <sys/socket.h>

/* Appends what fits of p[0..n) to b.  With a budget the buffer grows in steps it
 * grants (doubling from 64 KiB, at most 1 MiB at a time, never past the limit), so
 * what it holds is what was granted. */
static void keep(brig_buf *b, brig_exec_result *res, bool *truncated, const uint8_t *p, size_t n,
                 size_t limit, const brig_exec_budget *budget)
{
    size_t room = b->len < limit ? limit - b->len : 0;
    if (n > room) {
        *truncated = true;
        n = room;
    }
    if (n && budget && b->len + n + 1 > b->cap) {
        size_t cap = b->cap < (64u << 10) ? (64u << 10)
                                          : b->cap + (b->cap < (1u << 20) ? b->cap : (1u << 20));
        if (cap < b->len + n + 1)
            cap = b->len + n + 1;
        if (cap > limit + 1)
            cap = limit + 1;
        if (budget->grow(budget->cls, cap - b->cap)) {
            b->data = brig_xrealloc(b->data, cap);
            b->cap = cap;
        } else {
            *truncated = res->budget_exceeded = true;
            n = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0;
        }
    }
    if (n)
        brig_buf_append(b, p, n);
}

void brig_exec_req_dispose(brig_exec_req *req)
{
    free(req->stdin_data);
    req->stdin_data = NULL;
}

void brig_exec_result_dispose(brig_exec_result *res)
{
    brig_buf_dispose(&res->out);
    brig_buf_dispose(&res->err);
}

/* The wire request of req (argv and env shared with it). */
static void exec_spec(const brig_exec_req *req, brig_exec_spec *s)
{
    s->argv = req->argv;
    s->cmd = req->argv ? NULL : req->cmd;
    s->cwd = req->cwd;
    s->env = req->env;
    s->timeout_ms = req->timeout_ms;
    s->user = req->user;
    s->pty = req->pty_cols > 0;
    s->cols = (uint16_t)req->pty_cols;
    s->rows = (uint16_t)req->pty_rows;
    s->background = req->background;
    s->follow = req->follow;
    s->buffer_bytes = req->buffer_bytes > 0 ? (uint32_t)req->buffer_bytes : 0;
    s->want_stdin = req->has_stdin;
    s->stdin_closed = req->stdin_closed;
}

static void *stdin_writer(void *arg)
{
    brig_exec_call *call = arg;
    const brig_exec_req *req = call->req;
    /* A failure means the agent closed: the reader sees why. */
    for (size_t off = 0; off < req->stdin_len;) {
        size_t k = req->stdin_len - off < BRIG_DATA_CHUNK ? req->stdin_len - off : BRIG_DATA_CHUNK;
        if (brig_frame_write(call->fd, BRIG_FRAME_DATA, BRIG_CHAN_IN, req->stdin_data + off, k,
                             NULL) < 0)
            return NULL;
        off += k;
    }
    brig_frame_write(call->fd, BRIG_FRAME_DATA, BRIG_CHAN_IN, NULL, 0, NULL);
    return NULL;
}

int brig_agentc_exec_start(brig_exec_call *call, int fd, const brig_exec_req *req, brig_error **err)
{
    memset(call, 0, sizeof(*call));
    call->fd = fd;
    call->req = req;
    brig_agent_req q = {.op = BRIG_OP_EXEC};
    exec_spec(req, &q.u.exec);
    if (brig_agentc_send(fd, &q, err) < 0)
        return -1;
    if (req->has_stdin) {
        int e = pthread_create(&call->stdin_thread, NULL, stdin_writer, call);
        if (e != 0)
            return brig_error_set(err, BRIG_E_INTERNAL, e, "start stdin writer");
        call->has_thread = true;
    }
    /* The agent enforces the timeout; ours is a safety net against a wedged agent. */
    brig_agentc_set_timeout(fd,
                            req->timeout_ms && !req->background ? req->timeout_ms + 30000 : 30000);
    return 0;
}

void brig_agentc_exec_finish(brig_exec_call *call)
{
    if (call->has_thread) {
        /* Unblock a writer stuck on a full socket: nobody reads its stdin now. */
        shutdown(call->fd, SHUT_WR);
        pthread_join(call->stdin_thread, NULL);
        call->has_thread = false;
    }
}

int brig_agentc_exec(int fd, const brig_exec_req *req, size_t limit, const brig_exec_budget *budget,
                     brig_exec_result *res, brig_error **err)
{
    return brig_agentc_exec_tap(fd, req, limit, budget, NULL, NULL, res, err);
}

int brig_agentc_exec_tap(int fd, const brig_exec_req *req, size_t limit,
                         const brig_exec_budget *budget, brig_exec_tap tap, void *tap_cls,
                         brig_exec_result *res, brig_error **err)
{
    memset(res, 0, sizeof(*res));
    brig_exec_call call;
    if (brig_agentc_exec_start(&call, fd, req, err) < 0) {
        brig_agentc_exec_finish(&call);
        return -1;
    }
    brig_frame f = {0};
    bool started = false;
    int r = -1;
    for (;;) {
        brig_agent_event ev;
        json_t *msg = NULL;
        if (brig_agentc_next(fd, &f, &ev, &msg, err) < 0) {
            if (!started && err && *err && (*err)->kind == BRIG_E_NOT_FOUND)
                (*err)->kind = BRIG_E_INVALID; /* a bad cwd is a bad request */
            break;
        }
        if (ev != BRIG_EV_MESSAGE) {
            if (!started) {
                brig_error_set(err, BRIG_E_PROTOCOL, 0, "agent sent output before 'started'");
                break;
            }
            if (ev == BRIG_EV_DATA && tap)
                tap(tap_cls, f.hdr.chan, f.payload, f.hdr.len);
            if (ev == BRIG_EV_DATA && f.hdr.chan == BRIG_CHAN_STDOUT)
                keep(&res->out, res, &res->out_truncated, f.payload, f.hdr.len, limit, budget);
            else if (ev == BRIG_EV_DATA && f.hdr.chan == BRIG_CHAN_STDERR)
                keep(&res->err, res, &res->err_truncated, f.payload, f.hdr.len, limit, budget);
            continue;
        }
        brig_agent_reply t = brig_agentproto_reply_type(msg);
        if (t == BRIG_REPLY_STARTED && !started) {
            started = true;
            res->pid = (int)json_integer_value(json_object_get(msg, "pid"));
            res->following = req->follow && json_is_true(json_object_get(msg, "follow"));
            json_decref(msg);
            if (req->background) {
                r = 0;
                break;
            }
            continue;
        }
        if (t == BRIG_REPLY_EXIT && started) {
            res->exit_code = (int)json_integer_value(json_object_get(msg, "exit_code"));
            res->signal = (int)json_integer_value(json_object_get(msg, "signal"));
            res->timed_out = json_is_true(json_object_get(msg, "timed_out"));
            res->duration_ms = json_integer_value(json_object_get(msg, "duration_ms"));
            json_decref(msg);
            r = 0;
            break;
        }
        brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent message '%s'",
                       brig_agentproto_reply_name(t));
        json_decref(msg);
        break;
    }
    brig_agentc_exec_finish(&call);
    brig_frame_dispose(&f);
    if (r < 0)
        brig_exec_result_dispose(res);
    return r;
}
