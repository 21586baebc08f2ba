/*
 * agentc.c - the agent protocol, client half (see agentc.h, docs/protocol.md).
 */
#include "agentc.h"

#include <errno.h>
#include <sodium.h>
#include <string.h>
#include <sys/socket.h>

int brig_agentc_error(json_t *msg, brig_error **err)
{
    static const struct {
        const char *code;
        brig_err_kind kind;
    } map[] = {
        {"bad_request", BRIG_E_INVALID},   {"not_found", BRIG_E_NOT_FOUND},
        {"exists", BRIG_E_CONFLICT},       {"is_directory", BRIG_E_INVALID},
        {"not_directory", BRIG_E_INVALID}, {"permission", BRIG_E_FORBIDDEN},
        {"no_space", BRIG_E_NO_SPACE},     {"too_large", BRIG_E_TOO_LARGE},
    };
    const char *code = json_string_value(json_object_get(msg, "code"));
    const char *m = json_string_value(json_object_get(msg, "message"));
    brig_err_kind kind = BRIG_E_INTERNAL;
    for (size_t i = 0; code && i < BRIG_ARRAY_LEN(map); i++)
        if (strcmp(map[i].code, code) == 0)
            kind = map[i].kind;
    return brig_error_set(err, kind, 0, "%s", m ? m : (code ? code : "agent error"));
}

static int read_reply(int fd, json_t **out, brig_error **err);

static const char *msg_type(json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    return t ? t : "";
}

void brig_agentc_set_timeout(int fd, int64_t ms)
{
    struct timeval tv = {0, 0}; /* 0: wait forever */
    if (ms > 0) {
        tv.tv_sec = ms / 1000;
        tv.tv_usec = (ms % 1000) * 1000;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

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

static json_t *exec_json(const brig_exec_req *req)
{
    json_t *m = json_pack("{s:s, s:I}", "op", "exec", "timeout_ms", (json_int_t)req->timeout_ms);
    if (req->argv)
        json_object_set(m, "argv", req->argv);
    else
        json_object_set_new(m, "cmd", json_string(req->cmd));
    if (req->cwd)
        json_object_set_new(m, "cwd", json_string(req->cwd));
    if (req->env)
        json_object_set(m, "env", req->env);
    if (req->user)
        json_object_set_new(m, "user", json_string(req->user));
    if (req->pty_cols > 0)
        json_object_set_new(m, "pty",
                            json_pack("{s:i, s:i}", "cols", req->pty_cols, "rows", req->pty_rows));
    if (req->background)
        json_object_set_new(m, "background", json_true());
    if (req->buffer_bytes > 0)
        json_object_set_new(m, "buffer_bytes", json_integer(req->buffer_bytes));
    if (req->has_stdin)
        json_object_set_new(m, "stdin", json_true());
    return m;
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
    json_t *m = exec_json(req);
    int r = brig_frame_write_json(fd, BRIG_FRAME_CONTROL, m, err);
    json_decref(m);
    if (r < 0)
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

int brig_agentc_next(int fd, brig_frame *f, brig_agent_event *ev, json_t **msg, brig_error **err)
{
    *msg = NULL;
    if (brig_frame_read(fd, f, NULL, err) < 0)
        return -1;
    if (f->hdr.type == BRIG_FRAME_DATA) {
        *ev = f->hdr.len ? BRIG_EV_DATA : BRIG_EV_EOF;
        return 0;
    }
    if (f->hdr.type != BRIG_FRAME_CONTROL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected HELLO from the agent");
    json_t *m = NULL;
    if (brig_frame_parse_json(f->payload, f->hdr.len, &m, err) < 0)
        return -1;
    if (strcmp(msg_type(m), "error") == 0) {
        brig_agentc_error(m, err);
        json_decref(m);
        return -1;
    }
    *ev = BRIG_EV_MESSAGE;
    *msg = m;
    return 0;
}

int brig_agentc_exec(int fd, const brig_exec_req *req, size_t limit, const brig_exec_budget *budget,
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
            if (ev == BRIG_EV_DATA && f.hdr.chan == BRIG_CHAN_STDOUT)
                keep(&res->out, res, &res->out_truncated, f.payload, f.hdr.len, limit, budget);
            else if (ev == BRIG_EV_DATA && f.hdr.chan == BRIG_CHAN_STDERR)
                keep(&res->err, res, &res->err_truncated, f.payload, f.hdr.len, limit, budget);
            continue;
        }
        const char *t = msg_type(msg);
        if (strcmp(t, "started") == 0 && !started) {
            started = true;
            res->pid = (int)json_integer_value(json_object_get(msg, "pid"));
            json_decref(msg);
            if (req->background) {
                r = 0;
                break;
            }
            continue;
        }
        if (strcmp(t, "exit") == 0 && started) {
            res->exit_code = (int)json_integer_value(json_object_get(msg, "exit_code"));
            res->signal = (int)json_integer_value(json_object_get(msg, "signal"));
            res->timed_out = json_is_true(json_object_get(msg, "timed_out"));
            res->duration_ms = json_integer_value(json_object_get(msg, "duration_ms"));
            json_decref(msg);
            r = 0;
            break;
        }
        brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent message '%s'", t);
        json_decref(msg);
        break;
    }
    brig_agentc_exec_finish(&call);
    brig_frame_dispose(&f);
    if (r < 0)
        brig_exec_result_dispose(res);
    return r;
}

int brig_agentc_call(int fd, json_t *req, json_t **reply, brig_error **err)
{
    if (brig_frame_write_json(fd, BRIG_FRAME_CONTROL, req, err) < 0)
        return -1;
    return read_reply(fd, reply, err);
}

void brig_exec_result_dispose(brig_exec_result *res)
{
    brig_buf_dispose(&res->out);
    brig_buf_dispose(&res->err);
}

/* Reads the next CONTROL message; an agent error becomes *err. */
static int read_reply(int fd, json_t **out, brig_error **err)
{
    brig_frame f = {0};
    int r = brig_frame_read_json(fd, &f, BRIG_FRAME_CONTROL, out, err);
    brig_frame_dispose(&f);
    if (r < 0)
        return -1;
    if (strcmp(msg_type(*out), "error") == 0) {
        brig_agentc_error(*out, err);
        json_decref(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int brig_agentc_stream_begin(int fd, json_t *req, brig_error **err)
{
    int r = brig_frame_write_json(fd, BRIG_FRAME_CONTROL, req, err);
    brig_agentc_set_timeout(fd, 300000);
    return r;
}

void brig_agentc_set_path(json_t *req, const char *key, const char *path)
{
    size_t n = strlen(path);
    if (brig_utf8_valid(path, n)) {
        json_object_set_new(req, key, json_stringn(path, n));
        return;
    }
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *enc = brig_xmalloc(len);
    sodium_bin2base64(enc, len, (const unsigned char *)path, n, sodium_base64_VARIANT_ORIGINAL);
    char *k64 = brig_asprintf("%s_b64", key);
    json_object_set_new(req, k64, json_string(enc));
    free(k64);
    free(enc);
}

int brig_agentc_write_begin(int fd, const char *path, int mode, brig_error **err)
{
    json_t *m = json_pack("{s:s}", "op", "write_file");
    brig_agentc_set_path(m, "path", path);
    if (mode >= 0)
        json_object_set_new(m, "mode", json_integer(mode));
    int r = brig_frame_write_json(fd, BRIG_FRAME_CONTROL, m, err);
    json_decref(m);
    brig_agentc_set_timeout(fd, 300000);
    return r;
}

/* A write failed: the agent probably answered with an error and closed; prefer
 * its message over EPIPE. */
static int write_failed(int fd, brig_error **err)
{
    brig_error *werr = NULL;
    json_t *msg = NULL;
    brig_agentc_set_timeout(fd, 1000);
    if (read_reply(fd, &msg, &werr) < 0 && werr && werr->kind != BRIG_E_PROTOCOL) {
        brig_error_clear(err);
        if (err)
            *err = werr;
        else
            brig_error_clear(&werr);
        return -1;
    }
    json_decref(msg);
    brig_error_clear(&werr);
    return -1;
}

int brig_agentc_write_chunk(int fd, const void *p, size_t n, brig_error **err)
{
    const uint8_t *b = p;
    while (n > 0) {
        size_t k = n < BRIG_DATA_CHUNK ? n : BRIG_DATA_CHUNK;
        if (brig_frame_write(fd, BRIG_FRAME_DATA, BRIG_CHAN_IN, b, k, err) < 0)
            return write_failed(fd, err);
        b += k;
        n -= k;
    }
    return 0;
}

int brig_agentc_write_end(int fd, int64_t *size, brig_error **err)
{
    if (brig_frame_write(fd, BRIG_FRAME_DATA, BRIG_CHAN_IN, NULL, 0, err) < 0)
        return write_failed(fd, err);
    json_t *msg = NULL;
    if (read_reply(fd, &msg, err) < 0)
        return -1;
    int r = 0;
    if (strcmp(msg_type(msg), "ok") != 0)
        r = brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent reply '%s'", msg_type(msg));
    else if (size)
        *size = json_integer_value(
            json_object_get(msg, json_object_get(msg, "size") ? "size" : "bytes"));
    json_decref(msg);
    return r;
}

int brig_agentc_read_begin(int fd, const char *path, int64_t *size, int *mode, brig_error **err)
{
    json_t *m = json_pack("{s:s}", "op", "read_file");
    brig_agentc_set_path(m, "path", path);
    int r = brig_frame_write_json(fd, BRIG_FRAME_CONTROL, m, err);
    json_decref(m);
    if (r < 0)
        return -1;
    brig_agentc_set_timeout(fd, 300000);
    json_t *msg = NULL;
    if (read_reply(fd, &msg, err) < 0)
        return -1;
    if (strcmp(msg_type(msg), "file") != 0) {
        r = brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent reply '%s'", msg_type(msg));
    } else {
        *size = json_integer_value(json_object_get(msg, "size"));
        *mode = (int)json_integer_value(json_object_get(msg, "mode"));
        if (*size < 0)
            r = brig_error_set(err, BRIG_E_PROTOCOL, 0, "agent sent a negative size");
    }
    json_decref(msg);
    return r;
}

int brig_agentc_read_chunk(int fd, brig_frame *f, brig_error **err)
{
    if (brig_frame_read(fd, f, NULL, err) < 0)
        return -1;
    if (f->hdr.type == BRIG_FRAME_DATA && f->hdr.chan == BRIG_CHAN_IN)
        return f->hdr.len > 0 ? 1 : 0;
    if (f->hdr.type == BRIG_FRAME_CONTROL) {
        json_t *msg = NULL;
        if (brig_frame_parse_json(f->payload, f->hdr.len, &msg, err) == 0) {
            if (strcmp(msg_type(msg), "error") == 0)
                brig_agentc_error(msg, err);
            else
                brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent message");
            json_decref(msg);
        }
        return -1;
    }
    return brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected frame while reading a file");
}
