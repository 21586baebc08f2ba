/*
 * conn.c - one connection's handler process: the server half of the handshake, the one
 * request of protocol version 1, dispatch to the operation, and the reply helpers.
 *
 * The handler runs in its own process (forked by main.c), so a hostile frame or a crash
 * costs only this connection.  It holds one control channel to PID 1 (ctl.c), through which
 * it hands proc_* connections to their process's supervisor (procops.c); a handler that runs
 * `exec` becomes that process's supervisor (super.c) and lives as long as its record.  It is
 * a child subreaper: whatever its command leaves behind is reparented to it, so a timeout
 * can kill every descendant (proc.c).  Its parent-death signal is SIGTERM, so a handler does
 * not outlive a dead agent unnoticed.
 *
 * Signals in the handler: SIGPIPE and SIGXFSZ are ignored (a vanished peer or a file size
 * limit then surface as EPIPE / EFBIG instead of killing us); everything else has its
 * default disposition and is unblocked.  exec.c and files.c install what they need for
 * their duration; exec.c resets all of it in the command's child.
 */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "log.h"
#include "util.h"

#ifndef BRIG_VERSION
#define BRIG_VERSION "unknown"
#endif

const char *brig_agent_errno_code(int errnum)
{
    switch (errnum) {
    case ENOENT:
        return "not_found";
    case EEXIST:
    case ENOTEMPTY:
        return "exists";
    case EISDIR:
        return "is_directory";
    case ENOTDIR:
        return "not_directory";
    case EACCES:
    case EPERM:
    case EROFS:
        return "permission";
    case ENOSPC:
    case EDQUOT:
        return "no_space";
    case EFBIG:
        return "too_large";
    default:
        return "io";
    }
}

brig_err_kind brig_agent_errno_kind(int errnum)
{
    switch (errnum) {
    case ENOENT:
        return BRIG_E_NOT_FOUND;
    case EEXIST:
    case ENOTEMPTY:
    case EISDIR:
    case ENOTDIR:
        return BRIG_E_CONFLICT;
    case EACCES:
    case EPERM:
    case EROFS:
        return BRIG_E_FORBIDDEN;
    case ENOSPC:
    case EDQUOT:
        return BRIG_E_NO_SPACE;
    case EFBIG:
        return BRIG_E_TOO_LARGE;
    default:
        return BRIG_E_INTERNAL;
    }
}

const char *brig_agent_error_code(const brig_error *e)
{
    if (e == NULL)
        return "internal";
    if (e->kind == BRIG_E_PROTOCOL || e->kind == BRIG_E_INVALID)
        return "bad_request";
    if (e->errnum != 0)
        return brig_agent_errno_code(e->errnum);
    switch (e->kind) {
    case BRIG_E_NOT_FOUND:
        return "not_found";
    case BRIG_E_CONFLICT:
        return "exists";
    case BRIG_E_FORBIDDEN:
        return "permission";
    case BRIG_E_NO_SPACE:
        return "no_space";
    case BRIG_E_TOO_LARGE:
        return "too_large";
    default:
        return "internal";
    }
}

int brig_agent_send(brig_agent_conn *c, uint8_t type, uint16_t chan, const void *p, size_t n,
                    brig_error **err)
{
    if (c->gone)
        return brig_error_set(err, BRIG_E_PROTOCOL, EPIPE, "peer is gone");
    if (brig_frame_write(c->fd, type, chan, p, n, err) < 0) {
        c->gone = true;
        return -1;
    }
    return 0;
}

int brig_agent_send_json(brig_agent_conn *c, json_t *msg, brig_error **err)
{
    int r = -1;
    if (c->gone)
        r = brig_error_set(err, BRIG_E_PROTOCOL, EPIPE, "peer is gone");
    else if ((r = brig_frame_write_json(c->fd, BRIG_FRAME_CONTROL, msg, err)) < 0)
        c->gone = true;
    json_decref(msg);
    return r;
}

void brig_agent_reply_code(brig_agent_conn *c, const char *code, const char *msg)
{
    c->replied = true;
    brig_agent_send_json(c, brig_proto_error_msg(code, msg), NULL);
}

void brig_agent_reply_error(brig_agent_conn *c, const brig_error *e)
{
    brig_agent_reply_code(c, brig_agent_error_code(e), e ? e->msg : "unknown error");
}

/* Server half of the handshake (docs/protocol.md, "Connection life").  A client that
 * closes before sending anything sets *quiet: a readiness probe, not an error. */
static int handshake(brig_agent_conn *c, bool *quiet, brig_error **err)
{
    int eof = 0;
    if (brig_frame_read(c->fd, &c->frame, &eof, err) < 0) {
        *quiet = eof != 0;
        return -1;
    }
    if (c->frame.hdr.type != BRIG_FRAME_HELLO)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "expected HELLO, got frame type %u",
                              c->frame.hdr.type);
    json_t *hello = NULL;
    if (brig_frame_parse_json(c->frame.payload, c->frame.hdr.len, &hello, err) < 0)
        return -1;
    int64_t v, vmin;
    int r = brig_agentproto_decode_hello(hello, &v, &vmin, err);
    json_decref(hello);
    if (r < 0)
        return -1;
    /* We speak [1, BRIG_PROTO_VERSION]; the client speaks [vmin, v]. */
    if (vmin > v || vmin > BRIG_PROTO_VERSION || v < 1) {
        _cleanup_free_ char *m =
            brig_asprintf("agent speaks protocol versions 1 to %d, client asked for %lld to %lld",
                          BRIG_PROTO_VERSION, (long long)vmin, (long long)v);
        brig_agent_reply_code(c, "version", m);
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "%s", m);
    }
    c->version = v < BRIG_PROTO_VERSION ? (int)v : BRIG_PROTO_VERSION;
    json_t *ans =
        json_pack("{s:s, s:i, s:s, s:I}", "proto", BRIG_PROTO_NAME, "version", BRIG_PROTO_VERSION,
                  "agent", BRIG_VERSION, "pid", (json_int_t)c->agent_pid);
    if (ans == NULL)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot build HELLO");
    r = brig_frame_write_json(c->fd, BRIG_FRAME_HELLO, ans, err);
    json_decref(ans);
    if (r < 0)
        c->gone = true;
    return r;
}

static int op_ping(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    (void)q;
    c->replied = true;
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_PONG), err);
}

/* What runs each operation; agentproto.c decoded and validated it already. */
static brig_agent_op_fn *const ops[BRIG_OP__COUNT] = {
    [BRIG_OP_PING] = op_ping,
    [BRIG_OP_EXEC] = brig_agent_exec,
    [BRIG_OP_WRITE_FILE] = brig_agent_write_file,
    [BRIG_OP_READ_FILE] = brig_agent_read_file,
    [BRIG_OP_PROC_LIST] = brig_agent_proc_list,
    [BRIG_OP_PROC_GET] = brig_agent_proc_route,
    [BRIG_OP_PROC_OUTPUT] = brig_agent_proc_route,
    [BRIG_OP_PROC_STDIN] = brig_agent_proc_route,
    [BRIG_OP_PROC_STDIN_CLOSE] = brig_agent_proc_route,
    [BRIG_OP_PROC_SIGNAL] = brig_agent_proc_route,
    [BRIG_OP_PROC_WAIT] = brig_agent_proc_route,
    [BRIG_OP_PROC_RESIZE] = brig_agent_proc_route,
    [BRIG_OP_STAT] = brig_agent_stat,
    [BRIG_OP_LIST_DIR] = brig_agent_list_dir,
    [BRIG_OP_REMOVE] = brig_agent_remove,
    [BRIG_OP_MOVE] = brig_agent_move,
    [BRIG_OP_MKDIR] = brig_agent_mkdir,
    [BRIG_OP_TAR_EXTRACT] = brig_agent_tar_extract,
    [BRIG_OP_TAR_CREATE] = brig_agent_tar_create,
    [BRIG_OP_GUEST_SYNC] = brig_agent_guest_sync,
    [BRIG_OP_FS_FREEZE] = brig_agent_fs_freeze,
};

/* Reads the request and runs its operation.  A close right after the handshake sets
 * *quiet. */
static int serve_request(brig_agent_conn *c, bool *quiet, brig_error **err)
{
    int eof = 0;
    if (brig_frame_read(c->fd, &c->frame, &eof, err) < 0) {
        *quiet = eof != 0;
        return -1;
    }
    if (c->frame.hdr.type != BRIG_FRAME_CONTROL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "expected a request, got frame type %u",
                              c->frame.hdr.type);
    json_t *req = NULL;
    if (brig_frame_parse_json(c->frame.payload, c->frame.hdr.len, &req, err) < 0)
        return -1;
    brig_agent_req q;
    int r = brig_agentproto_decode(req, &q, err);
    if (r == 0)
        r = ops[q.op](c, req, &q, err);
    json_decref(req);
    /* A client that streams DATA after its request learns of an early error at once, and
     * the rest of its stream is read and dropped (so it sees the answer, not EPIPE). */
    if (r < 0 && !c->replied && !c->gone &&
        (q.op == BRIG_OP_WRITE_FILE || q.op == BRIG_OP_TAR_EXTRACT || q.op == BRIG_OP_PROC_STDIN) &&
        (err == NULL || *err == NULL || (*err)->kind != BRIG_E_PROTOCOL)) {
        brig_agent_reply_error(c, err ? *err : NULL);
        brig_agent_discard_input(c);
    }
    return r;
}

void brig_agent_discard_input(brig_agent_conn *c)
{
    while (brig_frame_read(c->fd, &c->frame, NULL, NULL) == 0)
        if (c->frame.hdr.type != BRIG_FRAME_DATA || c->frame.hdr.len == 0)
            return;
}

void brig_agent_close_polite(int fd)
{
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 256; i++) {
        ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (r > 0 || (r < 0 && errno == EINTR))
            continue;
        break;
    }
    close(fd);
}

void brig_agent_conn_serve(int fd, int ctl, pid_t agent_pid)
{
    static const int defaults[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(defaults); i++)
        signal(defaults[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    /* SIGTERM when the agent dies; checked against the race of it dying before the prctl. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != agent_pid)
        _exit(1);
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    brig_agent_conn c = {.fd = fd, .ctl = ctl, .agent_pid = agent_pid};
    brig_error *err = NULL;
    bool quiet = false;
    int r = handshake(&c, &quiet, &err);
    if (r == 0)
        r = serve_request(&c, &quiet, &err);
    if (r < 0 && !quiet) {
        if (err != NULL && (err->kind == BRIG_E_PROTOCOL || err->kind == BRIG_E_INTERNAL))
            brig_warn("connection: %s", err->msg);
        if (!c.replied)
            brig_agent_reply_error(&c, err);
    }
    brig_error_clear(&err);
    brig_frame_dispose(&c.frame);
    /* A connection handed to a supervisor is shared with it: shutdown() would end it for
     * both, so only our descriptor goes. */
    if (c.handed_off) {
        if (c.fd >= 0)
            close(c.fd);
    } else if (c.fd >= 0)
        brig_agent_close_polite(c.fd);
    _exit(r < 0 && !quiet ? 1 : 0);
}
