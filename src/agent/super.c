/*
 * super.c - the supervisor of one process: the handler that ran `exec`, for the rest of the
 * process's life and as long as its record is kept (docs/agent.md, "Processes").
 *
 * It owns the command's output pipes (or its pty master) and stdin, the output buffer
 * (ring.c), the timeout, the exit status, and every client connection about this process:
 *
 *   primary   the exec connection of a foreground process: its output, read only as fast as
 *             this client takes it (backpressure); its stdin, when asked for; its result
 *   bgin      the exec connection of a background process that streams initial stdin
 *   output    proc_output: the buffer from its oldest byte, then (follow) what comes
 *   stdin     proc_stdin: DATA frames to the command's stdin
 *   wait      proc_wait: answered at the exit or at its deadline
 *   oneshot   proc_get, proc_signal, proc_stdin_close, proc_resize, errors: one answer
 *
 * Connections other than the primary come from PID 1 (handlers.c) on the control channel,
 * with their request already parsed by the handler that accepted them.  The supervisor is a
 * child subreaper, so the command's descendants (setsid'd ones included) come back to it,
 * and a timeout or a SIGKILL through proc_signal kills all of them (proc.c).
 *
 * Invariants:
 * - Nothing blocks: one poll loop; sockets and our pipe ends are non-blocking.
 * - Memory is bounded: the ring (buffer_bytes), the primary's queue (OUTQ_HIGH plus one
 *   read), each follower's queue (FILL_LOW plus one frame), the stdin queue (INQ_HIGH plus
 *   one frame).  A follower that falls behind the ring gets a `dropped` message instead.
 * - A background process's output is always read (the ring drops its oldest bytes); a
 *   foreground process's output is read only while the primary's queue is short.
 * - Output of one process goes to its own clients only: nothing is shared between
 *   supervisors.
 * - Stdin has one writer at a time: a client's frames are taken only while the stdin queue
 *   is empty or holds its own bytes, so the `bytes` a proc_stdin answers are exactly those
 *   written to the command.
 * - A misbehaving client costs its own connection (and, for the primary, the command:
 *   nobody would read the result), never the supervisor.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>

#include "framedec.h"
#include "log.h"
#include "util.h"

#define OUTQ_HIGH     (256u << 10)       /* primary: stop reading the output above this backlog */
#define INQ_HIGH      (1u << 20)         /* stop taking stdin from clients above this backlog */
#define FILL_LOW      (64u << 10)        /* followers: refill from the ring below this backlog */
#define RETIRE_GRACE  30000              /* ms a forgotten record still serves attached clients */
#define TIMEOUT_LIMIT (INT64_C(1) << 40) /* ~35 years: "never" without overflowing */

typedef enum { K_PRIMARY, K_BGIN, K_OUTPUT, K_STDIN, K_WAIT, K_ONESHOT } sconn_kind;

/* One client connection of this process. */
typedef struct sconn {
    int fd;
    sconn_kind kind;
    brig_buf outq; /* encoded frames not yet sent */
    size_t outq_off;
    brig_framedec rx;    /* frames from the client */
    bool reads_stdin;    /* DATA on channel 0 may come, until the empty frame */
    bool in_ended;       /* ... and it came */
    bool discard;        /* its stdin frames are dropped (error answered, or stdin closed) */
    bool replied;        /* a final answer is queued (or, primary: `started` went out) */
    bool closing;        /* close once outq is sent (and the stdin stream has ended) */
    bool dead;           /* closed: freed at the end of the round */
    uint64_t in_written; /* stdin: bytes of this client written to the command */
    uint64_t rpos;       /* output: the next ring position to send */
    uint64_t end_pos;    /* output without follow: stop at this position */
    bool follow;         /* output: stay for new output and the exit */
    int64_t deadline;    /* wait: monotonic ms, 0 = none */
} sconn;

typedef struct super {
    brig_agent_conn *c;
    json_t *req; /* the exec request (process objects show argv/cmd/user) */
    const brig_exec_spec *s;
    brig_child *ch;
    int sfd;              /* signalfd: SIGCHLD, SIGTERM, SIGINT */
    int tfd;              /* the timeout's timerfd, -1 without one */
    int ctl;              /* control channel to PID 1; -1 once PID 1 forgot us */
    brig_agent_watch cmd; /* the command: pid, its status once reaped */
    bool exited;          /* reaped, output drained, pipes closed */
    bool timed_out;
    int64_t t1;       /* monotonic ms at the exit */
    int64_t ended_at; /* ms since the epoch at the exit */
    brig_ring ring;
    brig_buf inq; /* stdin bytes not yet written to the command */
    size_t inq_off;
    sconn *in_owner;          /* whose bytes are in inq */
    bool stdin_closed;        /* no stdin is taken any more */
    bool stdin_close_pending; /* close it (or send VEOF) once inq is written */
    bool chan_ended[3];       /* primary: the empty DATA frame of channel 1/2 is queued */
    int pty_held;             /* the pty master after its EIO, until the command is reaped */
    sconn **conns;
    size_t nconns, cap;
    sconn *primary; /* the foreground client, NULL when there is none (any more) */
    bool retired;   /* PID 1 forgot the record */
    bool stopping;  /* the agent is shutting down */
    int64_t retired_at;
} super;

/* ---- connections ---- */

static size_t outq_pending(const sconn *k)
{
    return k->outq.len - k->outq_off;
}

static void queue_frame(sconn *k, uint8_t type, uint16_t chan, const void *p, size_t n)
{
    uint8_t hdr[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(hdr, type, chan, (uint32_t)n);
    brig_buf_append(&k->outq, hdr, sizeof(hdr));
    brig_buf_append(&k->outq, p, n);
}

/* Takes ownership of msg. */
static void queue_json(sconn *k, json_t *msg)
{
    char *str = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (str == NULL)
        abort(); /* jansson fails here only on OOM */
    queue_frame(k, BRIG_FRAME_CONTROL, 0, str, strlen(str));
    free(str);
}

/* Queues a final answer; the connection closes once it is sent. */
static void reply(sconn *k, json_t *msg)
{
    queue_json(k, msg);
    k->replied = true;
    k->closing = true;
}

static void reply_code(sconn *k, const char *code, const char *msg)
{
    reply(k, brig_proto_error_msg(code, msg));
}

static sconn *conn_add(super *S, int fd, sconn_kind kind)
{
    if (S->nconns == S->cap) {
        S->cap = S->cap ? S->cap * 2 : 8;
        S->conns = brig_xrealloc(S->conns, S->cap * sizeof(*S->conns));
    }
    sconn *k = brig_xcalloc(1, sizeof(*k));
    k->fd = fd;
    k->kind = kind;
    /* Our writes never block the loop; a large backlog is ours to bound. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    S->conns[S->nconns++] = k;
    return k;
}

/* Closes k (politely when it ended normally); it is freed at the end of the round. */
static void conn_drop(super *S, sconn *k, bool polite)
{
    if (k->dead)
        return;
    if (polite)
        brig_agent_close_polite(k->fd);
    else
        close(k->fd);
    k->fd = -1;
    k->dead = true;
    if (S->in_owner == k)
        S->in_owner = NULL; /* its bytes stay queued for the command */
    if (S->primary == k)
        S->primary = NULL;
}

static void conns_sweep(super *S)
{
    size_t j = 0;
    for (size_t i = 0; i < S->nconns; i++) {
        sconn *k = S->conns[i];
        if (!k->dead) {
            S->conns[j++] = k;
            continue;
        }
        brig_buf_dispose(&k->outq);
        brig_framedec_dispose(&k->rx);
        free(k);
    }
    S->nconns = j;
}

/* ---- process objects and results ---- */

static void exit_status(const super *S, int *code, int *sig)
{
    *code = 0;
    *sig = 0;
    if (S->timed_out) {
        *code = 128 + SIGKILL;
        *sig = SIGKILL;
    } else if (WIFSIGNALED(S->cmd.status)) {
        *sig = WTERMSIG(S->cmd.status);
        *code = 128 + *sig;
    } else {
        *code = WEXITSTATUS(S->cmd.status);
    }
}

static json_t *exit_msg(const super *S)
{
    int code, sig;
    exit_status(S, &code, &sig);
    return json_pack("{s:s, s:i, s:o, s:b, s:I}", "type",
                     brig_agentproto_reply_name(BRIG_REPLY_EXIT), "exit_code", code, "signal",
                     sig ? json_integer(sig) : json_null(), "timed_out", S->timed_out,
                     "duration_ms", (json_int_t)(S->t1 - S->ch->t0));
}

/* The process object of docs/protocol.md, with "type" set to `type` (or none when NULL). */
static json_t *proc_obj(const super *S, const char *type)
{
    const brig_exec_spec *s = S->s;
    int code = 0, sig = 0;
    if (S->exited)
        exit_status(S, &code, &sig);
    json_t *o = json_pack(
        "{s:I, s:O, s:o, s:b, s:b, s:s, s:I, s:b, s:o, s:o, s:b, s:o, s:I}", "pid",
        (json_int_t)S->ch->pid, "argv", s->argv ? s->argv : json_null(), "cmd",
        s->cmd ? json_string(s->cmd) : json_null(), "pty", s->pty, "background", s->background,
        "user", s->user ? s->user : "root", "started_at", (json_int_t)S->ch->started_at, "running",
        !S->exited, "exit_code", S->exited ? json_integer(code) : json_null(), "signal",
        S->exited && sig ? json_integer(sig) : json_null(), "timed_out", S->timed_out, "ended_at",
        S->exited ? json_integer(S->ended_at) : json_null(), "dropped_bytes",
        (json_int_t)S->ring.tail);
    if (o != NULL && type != NULL)
        json_object_set_new(o, "type", json_string(type));
    return o;
}

/* ---- stdin ---- */

static size_t inq_pending(const super *S)
{
    return S->inq.len - S->inq_off;
}

/* A stdin client whose stream has ended gets its answer once none of its bytes wait. */
static void stdin_answer(super *S, sconn *k)
{
    if (k->kind != K_STDIN || k->replied || !k->in_ended || S->in_owner == k)
        return;
    reply(k, json_pack("{s:s, s:I}", "type", brig_agentproto_reply_name(BRIG_REPLY_OK), "bytes",
                       (json_int_t)k->in_written));
}

/* No more stdin: closes our end (on a pty, sends the terminal's EOF character instead: the
 * master is also the output).  Queued bytes are dropped. */
static void stdin_close(super *S)
{
    if (S->ch->in >= 0) {
        if (S->ch->pty) {
            struct termios t;
            if (tcgetattr(S->ch->in, &t) == 0)
                (void)!write(S->ch->in, &t.c_cc[VEOF], 1);
        }
        close(S->ch->in);
        S->ch->in = -1;
    }
    S->stdin_closed = true;
    S->stdin_close_pending = false;
    S->inq.len = S->inq_off = 0;
    sconn *owner = S->in_owner;
    S->in_owner = NULL;
    if (owner != NULL)
        stdin_answer(S, owner);
}

/* Writes queued stdin to the command. */
static void stdin_pump(super *S)
{
    while (S->ch->in >= 0 && inq_pending(S) > 0) {
        ssize_t w = write(S->ch->in, S->inq.data + S->inq_off, inq_pending(S));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            stdin_close(S); /* EPIPE: the command does not want more */
            return;
        }
        S->inq_off += (size_t)w;
        if (S->in_owner != NULL)
            S->in_owner->in_written += (uint64_t)w;
    }
    if (inq_pending(S) > 0) {
        /* A command that always lags a little must not make the buffer grow by the whole
         * stream: drop what was written once it outweighs the backlog limit. */
        if (S->inq_off > INQ_HIGH) {
            memmove(S->inq.data, S->inq.data + S->inq_off, inq_pending(S));
            S->inq.len -= S->inq_off;
            S->inq_off = 0;
        }
        return;
    }
    S->inq.len = S->inq_off = 0;
    sconn *owner = S->in_owner;
    S->in_owner = NULL;
    if (owner != NULL)
        stdin_answer(S, owner);
    if (S->stdin_close_pending)
        stdin_close(S);
}

/* Whether k may hand us stdin bytes now (one writer at a time, bounded backlog). */
static bool stdin_turn(const super *S, const sconn *k)
{
    if (k->discard || S->stdin_closed)
        return true; /* dropped anyway */
    return (S->in_owner == NULL || S->in_owner == k) && inq_pending(S) < INQ_HIGH;
}

/* ---- killing and the end of the process ---- */

static void on_signals(super *S, uint64_t seen);

static void kill_all(super *S)
{
    uint64_t seen = brig_agent_proc_kill_all(S->sfd, &S->cmd);
    if (seen)
        on_signals(S, seen);
}

/* Reads at most one chunk of output from channel chan into the ring (and the primary's
 * queue).  Returns the bytes read; 0 when there was nothing (the channel is closed at EOF or
 * on an error). */
static size_t out_pump(super *S, int chan, size_t limit)
{
    static uint8_t buf[BRIG_DATA_CHUNK];
    int *fd = &S->ch->out[chan];
    for (;;) {
        ssize_t n = read(*fd, buf, limit < sizeof(buf) ? limit : sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0) { /* EOF; EIO from a pty master whose terminal is closed */
            /* Closing the master hangs the terminal up, and the kernel sends SIGHUP to the
             * session: a command that closed its terminal on its way out (cat's close of
             * stderr at exit) would die of it.  Keep it until the command is reaped. */
            if (S->ch->pty && S->pty_held < 0 && !S->exited)
                S->pty_held = *fd;
            else
                close(*fd);
            *fd = -1;
            if (S->primary != NULL && !S->chan_ended[chan]) {
                queue_frame(S->primary, BRIG_FRAME_DATA, (uint16_t)chan, NULL, 0);
                S->chan_ended[chan] = true;
            }
            return 0;
        }
        brig_ring_append(&S->ring, chan, buf, (size_t)n);
        if (S->primary != NULL)
            queue_frame(S->primary, BRIG_FRAME_DATA, (uint16_t)chan, buf, (size_t)n);
        return (size_t)n;
    }
}

/* After the command exited: take what its output holds now, so that a background job that
 * keeps the pipes (or the terminal) open and keeps writing cannot hold up the result. */
static void out_drain(super *S, int chan)
{
    int fd = S->ch->out[chan];
    if (fd < 0)
        return;
    if (S->ch->pty) {
        /* Output on its way from the terminal to the master may still sit in the tty
         * layer's buffers.  When nobody has the terminal open any more (POLLHUP), a read
         * flushes them and ends in EIO, so read to the end; otherwise take what is there. */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1 && (p.revents & POLLHUP)) {
            while (S->ch->out[chan] >= 0 && out_pump(S, chan, BRIG_DATA_CHUNK) > 0)
                ;
            return;
        }
    }
    int avail = 0;
    if (ioctl(fd, FIONREAD, &avail) == 0)
        while (avail > 0 && S->ch->out[chan] >= 0) {
            size_t n = out_pump(S, chan, (size_t)avail);
            if (n == 0)
                break;
            avail -= (int)n;
        }
}

/* The command has been reaped: drain and close its output, end its stdin, tell everyone. */
static void finish_process(super *S)
{
    S->t1 = brig_now_mono_ms();
    S->ended_at = brig_now_real_ms();
    for (int chan = 1; chan <= 2; chan++) {
        out_drain(S, chan);
        if (S->ch->out[chan] >= 0)
            close(S->ch->out[chan]);
        S->ch->out[chan] = -1;
    }
    S->stdin_close_pending = false;
    if (S->ch->in >= 0) {
        close(S->ch->in); /* no VEOF: nobody reads the terminal any more */
        S->ch->in = -1;
    }
    if (S->pty_held >= 0)
        close(S->pty_held);
    S->pty_held = -1;
    stdin_close(S);
    if (S->tfd >= 0)
        close(S->tfd);
    S->tfd = -1;
    S->exited = true;
    brig_ring_seal(&S->ring);
    if (S->ctl >= 0) {
        brig_ctl_msg m = {.type = BRIG_CTL_EXITED, .pid = S->ch->pid};
        brig_ctl_send(S->ctl, &m, sizeof(m), -1, false);
    }
    if (S->primary != NULL) {
        for (int chan = 1; chan <= 2; chan++)
            if (!S->chan_ended[chan])
                queue_frame(S->primary, BRIG_FRAME_DATA, (uint16_t)chan, NULL, 0);
        reply(S->primary, exit_msg(S));
    }
}

/* SIGTERM/SIGINT come from the agent's shutdown (or from the parent-death signal when the
 * agent died); they are passed on to our process tree, except when the agent is PID 1: its
 * kill(-1, SIGTERM) already reached every process. */
static void on_signals(super *S, uint64_t seen)
{
    if (seen & ((UINT64_C(1) << SIGTERM) | (UINT64_C(1) << SIGINT))) {
        S->stopping = true;
        if (getppid() != S->c->agent_pid) {
            brig_agent_proc_kill_all(S->sfd, &S->cmd); /* the agent died: nobody else will */
        } else if (S->c->agent_pid != 1) {
            size_t n = 0;
            _cleanup_free_ pid_t *kids = brig_agent_proc_children(&n);
            for (size_t i = 0; i < n; i++)
                brig_agent_proc_signal(kids[i], SIGTERM);
        }
    }
    brig_agent_proc_reap(&S->cmd);
}

/* ---- requests that PID 1 routes to us ---- */

static void attach(super *S, int fd, const brig_proc_req *q)
{
    if (q->pid != S->ch->pid) { /* cannot happen: PID 1 routes by pid */
        close(fd);
        return;
    }
    sconn *k = conn_add(S, fd, K_ONESHOT);
    switch (q->op) {
    case BRIG_OP_PROC_GET:
        reply(k, proc_obj(S, brig_agentproto_reply_name(BRIG_REPLY_PROCESS)));
        break;
    case BRIG_OP_PROC_OUTPUT:
        k->kind = K_OUTPUT;
        k->follow = q->follow;
        k->rpos = S->ring.tail;
        k->end_pos = S->ring.head;
        queue_json(k, json_pack("{s:s, s:I}", "type", brig_agentproto_reply_name(BRIG_REPLY_OUTPUT),
                                "dropped_bytes", (json_int_t)S->ring.tail));
        break;
    case BRIG_OP_PROC_STDIN:
        k->kind = K_STDIN;
        k->reads_stdin = true;
        if (S->exited || S->stdin_closed) {
            /* Answer at once; the rest of the stream is read and dropped. */
            k->discard = true;
            reply_code(k, "bad_request",
                       S->exited ? "the process has exited" : "the process's stdin is closed");
        }
        break;
    case BRIG_OP_PROC_STDIN_CLOSE:
        if (S->exited || S->stdin_closed) {
            reply_code(k, "bad_request",
                       S->exited ? "the process has exited" : "the process's stdin is closed");
            break;
        }
        /* After what is queued: the command reads EOF after the bytes sent before. */
        S->stdin_close_pending = true;
        if (inq_pending(S) == 0)
            stdin_close(S);
        reply(k, brig_agentproto_message(BRIG_REPLY_OK));
        break;
    case BRIG_OP_PROC_SIGNAL:
        if (S->exited) {
            reply_code(k, "bad_request", "the process has exited");
            break;
        }
        if (q->signal == SIGKILL) {
            kill_all(S); /* the group and every remaining descendant, as a timeout does */
        } else {
            kill(-S->ch->pid, q->signal);
        }
        reply(k, brig_agentproto_message(BRIG_REPLY_OK));
        break;
    case BRIG_OP_PROC_WAIT:
        k->kind = K_WAIT;
        if (q->timeout_ms > 0) {
            int64_t t = q->timeout_ms < TIMEOUT_LIMIT ? q->timeout_ms : TIMEOUT_LIMIT;
            k->deadline = brig_now_mono_ms() + t;
        }
        break;
    case BRIG_OP_PROC_RESIZE: {
        if (!S->ch->pty || S->exited || S->ch->out[1] < 0) {
            reply_code(k, "bad_request",
                       !S->ch->pty ? "the process does not run on a pty"
                                   : "the process has exited");
            break;
        }
        struct winsize ws = {.ws_row = q->rows, .ws_col = q->cols};
        if (ioctl(S->ch->out[1], TIOCSWINSZ, &ws) < 0)
            reply_code(k, "io", strerror(errno));
        else
            reply(k, brig_agentproto_message(BRIG_REPLY_OK));
        break;
    }
    default:
        reply_code(k, "bad_request", "not a process operation");
        break;
    }
}

/* Messages from PID 1: connections to serve, or EOF (the record is forgotten). */
static void ctl_read(super *S)
{
    for (;;) {
        brig_ctl_msg m;
        int fd = -1;
        ssize_t r = brig_ctl_recv(S->ctl, &m, sizeof(m), &fd, true);
        if (r < 0 && errno == EAGAIN)
            return;
        if (r == (ssize_t)sizeof(m) && m.type == BRIG_CTL_ATTACH) {
            if (fd >= 0) /* else it was lost at our descriptor limit: the client sees EOF */
                attach(S, fd, &m.req);
            continue;
        }
        if (fd >= 0)
            close(fd);
        if (r < 0 && errno == EMSGSIZE) /* consumed; not ours to judge */
            continue;
        if (r < 0 && (errno == ENOMEM || errno == ENOBUFS)) /* try again next round */
            return;
        if (r <= 0 || r != (ssize_t)sizeof(m)) {
            close(S->ctl);
            S->ctl = -1;
            S->retired = true;
            S->retired_at = brig_now_mono_ms();
            return;
        }
    }
}

/* ---- client I/O ---- */

/* A protocol violation or EOF on k.  The primary's going away kills a running command. */
static void conn_lost(super *S, sconn *k, bool eof)
{
    if (k == S->primary && !S->exited && !k->replied) {
        kill_all(S);
        conn_drop(S, k, false);
        return;
    }
    if (k->kind == K_BGIN && S->s->stdin_closed && !S->stdin_closed) {
        S->stdin_close_pending = true; /* the initial stdin was all there is */
        if (inq_pending(S) == 0)
            stdin_close(S);
    }
    if (!eof && !k->replied && k->kind == K_STDIN) {
        /* Best effort: the answer may not get through. */
        queue_json(k, brig_proto_error_msg("bad_request", "unexpected frame"));
        send(k->fd, k->outq.data + k->outq_off, outq_pending(k), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    conn_drop(S, k, !eof);
}

/* One complete frame from k. */
static void rx_frame(super *S, sconn *k)
{
    const brig_frame_hdr *h = &k->rx.hdr;
    if (h->type != BRIG_FRAME_DATA || h->chan != BRIG_CHAN_IN || !k->reads_stdin || k->in_ended) {
        conn_lost(S, k, false);
        return;
    }
    if (h->len == 0) {
        k->in_ended = true;
        if (k->discard) {
            k->closing = true;
        } else if (k->kind == K_STDIN) {
            stdin_answer(S, k);
        } else if ((k->kind == K_PRIMARY || S->s->stdin_closed) && !S->stdin_closed) {
            /* The exec's own stdin stream ended: the command reads EOF once it is written. */
            S->stdin_close_pending = true;
            if (inq_pending(S) == 0)
                stdin_close(S);
        }
        if (k->kind == K_BGIN)
            k->closing = true;
        return;
    }
    if (k->discard || S->stdin_closed)
        return; /* the command closed its stdin (or exited): the bytes have nowhere to go */
    brig_buf_append(&S->inq, k->rx.payload, h->len);
    S->in_owner = k;
}

/* Reads what k's socket holds, frame by frame, while it may hand us stdin. */
static void conn_read(super *S, sconn *k)
{
    while (!k->dead && (!k->reads_stdin || k->in_ended || stdin_turn(S, k))) {
        uint8_t *p;
        size_t want;
        brig_framedec_want(&k->rx, &p, &want);
        ssize_t n = recv(k->fd, p, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            conn_lost(S, k, true);
            return;
        }
        int r = brig_framedec_commit(&k->rx, (size_t)n, NULL);
        if (r < 0) {
            conn_lost(S, k, false);
            return;
        }
        if (r == 1)
            rx_frame(S, k);
    }
}

/* Sends what k's socket takes now. */
static void conn_write(super *S, sconn *k)
{
    while (outq_pending(k) > 0) {
        ssize_t w =
            send(k->fd, k->outq.data + k->outq_off, outq_pending(k), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_lost(S, k, true);
            return;
        }
        k->outq_off += (size_t)w;
    }
    if (k->outq_off == k->outq.len) {
        k->outq.len = k->outq_off = 0;
    } else if (k->outq_off > OUTQ_HIGH) {
        memmove(k->outq.data, k->outq.data + k->outq_off, outq_pending(k));
        k->outq.len -= k->outq_off;
        k->outq_off = 0;
    }
}

/* Moves ring output to a follower's queue, with `dropped` markers, and its end. */
static void output_fill(super *S, sconn *k)
{
    static uint8_t buf[BRIG_DATA_CHUNK];
    while (!k->replied && outq_pending(k) < FILL_LOW) {
        if (k->rpos < S->ring.tail) {
            /* It fell behind: the bytes it missed are gone (a snapshot counts only those
             * it was going to send). */
            uint64_t to = S->ring.tail;
            if (!k->follow && to > k->end_pos)
                to = k->end_pos;
            if (to > k->rpos)
                queue_json(k, json_pack("{s:s, s:I}", "type",
                                        brig_agentproto_reply_name(BRIG_REPLY_DROPPED), "bytes",
                                        (json_int_t)(to - k->rpos)));
            k->rpos = S->ring.tail;
        }
        uint64_t limit = k->follow ? S->ring.head : k->end_pos;
        size_t max = k->rpos < limit ? (size_t)(limit - k->rpos) : 0;
        if (max > sizeof(buf))
            max = sizeof(buf);
        uint64_t skipped = 0;
        int chan = 1;
        size_t n = brig_ring_read(&S->ring, &k->rpos, &chan, buf, max, &skipped);
        if (n > 0) {
            queue_frame(k, BRIG_FRAME_DATA, (uint16_t)chan, buf, n);
            continue;
        }
        if (!k->follow && k->rpos >= k->end_pos) {
            reply(k, json_pack("{s:s, s:b}", "type", brig_agentproto_reply_name(BRIG_REPLY_END),
                               "running", !S->exited));
        } else if (k->follow && S->exited && k->rpos >= S->ring.head) {
            queue_frame(k, BRIG_FRAME_DATA, BRIG_CHAN_STDOUT, NULL, 0);
            queue_frame(k, BRIG_FRAME_DATA, BRIG_CHAN_STDERR, NULL, 0);
            reply(k, exit_msg(S));
        }
        return;
    }
}

/* Per-round duties of each connection: answers that became due, and closing. */
static void conns_service(super *S, int64_t now)
{
    for (size_t i = 0; i < S->nconns; i++) {
        sconn *k = S->conns[i];
        if (k->dead)
            continue;
        if (k->kind == K_WAIT && !k->replied &&
            (S->exited || (k->deadline > 0 && now >= k->deadline)))
            reply(k, proc_obj(S, brig_agentproto_reply_name(BRIG_REPLY_PROCESS)));
        if (k->kind == K_STDIN)
            stdin_answer(S, k);
        /* A follower is refilled as long as its socket takes everything. */
        for (;;) {
            bool added = false;
            if (k->kind == K_OUTPUT) {
                size_t len0 = k->outq.len;
                output_fill(S, k);
                added = k->outq.len != len0;
            }
            if (outq_pending(k) > 0)
                conn_write(S, k);
            if (k->dead || !added || outq_pending(k) > 0)
                break;
        }
        /* A stdin stream is read to its end first (the client is still sending), except
         * the foreground client's: its `exit` is the end, whatever it still sends. */
        if (!k->dead && k->closing && outq_pending(k) == 0 &&
            (!k->reads_stdin || k->in_ended || k->kind == K_PRIMARY))
            conn_drop(S, k, true);
    }
}

/* ---- the loop ---- */

static bool output_wanted(const super *S)
{
    if (S->exited)
        return false;
    if (S->s->background)
        return true; /* never blocked by readers: the ring drops instead */
    return S->primary != NULL && outq_pending(S->primary) < OUTQ_HIGH;
}

static int arm_timer(super *S, int64_t ms)
{
    if (ms <= 0)
        return 0;
    S->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (S->tfd < 0)
        return -1;
    if (ms > TIMEOUT_LIMIT)
        ms = TIMEOUT_LIMIT;
    struct itimerspec its = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}};
    return timerfd_settime(S->tfd, 0, &its, NULL);
}

/* Whether the supervisor is done: the process ended, its record is no longer kept (or the
 * agent is stopping), and no client is left (or the grace for them is over). */
static bool super_done(const super *S, int64_t now)
{
    if (!S->exited || !(S->retired || S->stopping))
        return false;
    return S->nconns == 0 || (S->retired && now - S->retired_at >= RETIRE_GRACE);
}

/* The poll timeout: the nearest proc_wait deadline or the end of the retire grace. */
static int poll_timeout(const super *S, int64_t now)
{
    int64_t next = -1;
    for (size_t i = 0; i < S->nconns; i++) {
        const sconn *k = S->conns[i];
        if (k->kind == K_WAIT && !k->replied && k->deadline > 0 && (next < 0 || k->deadline < next))
            next = k->deadline;
    }
    if (S->retired && S->exited && (next < 0 || S->retired_at + RETIRE_GRACE < next))
        next = S->retired_at + RETIRE_GRACE;
    if (next < 0)
        return -1;
    int64_t d = next - now;
    return d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;
}

enum { P_CTL, P_SIG, P_TIMER, P_OUT1, P_OUT2, P_IN, P_CONNS };

static void run(super *S)
{
    _cleanup_free_ struct pollfd *p = NULL;
    size_t pcap = 0;
    for (;;) {
        int64_t now = brig_now_mono_ms();
        if (super_done(S, now))
            return;
        size_t np = P_CONNS + S->nconns;
        if (np > pcap) {
            pcap = np * 2;
            p = brig_xrealloc(p, pcap * sizeof(*p));
        }
        bool out_ok = output_wanted(S);
        p[P_CTL] = (struct pollfd){.fd = S->ctl, .events = POLLIN};
        p[P_SIG] = (struct pollfd){.fd = S->sfd, .events = POLLIN};
        p[P_TIMER] = (struct pollfd){.fd = S->tfd, .events = POLLIN};
        p[P_OUT1] = (struct pollfd){.fd = out_ok ? S->ch->out[1] : -1, .events = POLLIN};
        p[P_OUT2] = (struct pollfd){.fd = out_ok ? S->ch->out[2] : -1, .events = POLLIN};
        p[P_IN] = (struct pollfd){.fd = inq_pending(S) ? S->ch->in : -1, .events = POLLOUT};
        for (size_t i = 0; i < S->nconns; i++) {
            const sconn *k = S->conns[i];
            bool rd = !k->reads_stdin || k->in_ended || stdin_turn(S, k);
            p[P_CONNS + i] = (struct pollfd){
                .fd = k->fd,
                .events = (short)((rd ? POLLIN : 0) | (outq_pending(k) ? POLLOUT : 0))};
        }
        if (poll(p, (nfds_t)np, poll_timeout(S, now)) < 0) {
            if (errno == EINTR)
                continue;
            brig_err("supervisor poll: %s", strerror(errno));
            kill_all(S);
            return;
        }
        size_t nconns = S->nconns; /* attach() may add some below: not in p[] */
        if (p[P_SIG].revents & POLLIN)
            on_signals(S, brig_agent_signalfd_drain(S->sfd));
        if ((p[P_TIMER].revents & POLLIN) && !S->cmd.done) {
            S->timed_out = true;
            kill_all(S);
        }
        for (size_t i = 0; i < nconns; i++) {
            sconn *k = S->conns[i];
            short ev = p[P_CONNS + i].revents;
            if (k->dead || ev == 0)
                continue;
            bool rd = !k->reads_stdin || k->in_ended || stdin_turn(S, k);
            if (rd && (ev & (POLLIN | POLLHUP | POLLERR)))
                conn_read(S, k);
            else if (!rd && (ev & (POLLHUP | POLLERR))) /* gone while we were not reading */
                conn_lost(S, k, true);
            if (!k->dead && (ev & POLLOUT))
                conn_write(S, k);
            if (!k->dead && (ev & POLLNVAL))
                conn_drop(S, k, false);
        }
        for (int chan = 1; chan <= 2; chan++)
            if (p[P_OUT1 + chan - 1].revents && S->ch->out[chan] >= 0 && !S->exited)
                out_pump(S, chan, BRIG_DATA_CHUNK);
        stdin_pump(S);
        if (p[P_CTL].revents && S->ctl >= 0)
            ctl_read(S);
        if (S->cmd.done && !S->exited)
            finish_process(S);
        conns_service(S, brig_now_mono_ms());
        conns_sweep(S);
    }
}

void brig_agent_supervise(brig_agent_conn *c, json_t *req, const brig_exec_spec *s, int sfd,
                          brig_child *ch)
{
    super S = {.c = c,
               .req = req,
               .s = s,
               .ch = ch,
               .sfd = sfd,
               .tfd = -1,
               .pty_held = -1,
               .ctl = c->ctl,
               .cmd = {.pid = ch->pid}};
    c->ctl = -1;
    brig_ring_init(&S.ring, s->buffer_bytes);
    brig_frame_dispose(&c->frame); /* the request's buffer: not needed any more */

    /* The exec connection: the foreground client, or just the `started` answer (plus the
     * initial stdin of a background process). */
    sconn *k = conn_add(&S, c->fd, K_ONESHOT);
    c->fd = -1;
    c->handed_off = true;
    queue_json(k, json_pack("{s:s, s:I}", "type", brig_agentproto_reply_name(BRIG_REPLY_STARTED),
                            "pid", (json_int_t)ch->pid));
    k->replied = s->background; /* a foreground client's answer is its `exit` */
    if (!s->background) {
        k->kind = K_PRIMARY;
        k->reads_stdin = s->want_stdin;
        S.primary = k;
    } else if (s->want_stdin) {
        k->kind = K_BGIN;
        k->reads_stdin = true;
        k->closing = true;
    } else {
        k->closing = true;
    }
    if (ch->in < 0)
        S.stdin_closed = true;
    else if (ch->pty && !(s->background ? s->want_stdin || !s->stdin_closed : s->want_stdin))
        stdin_close(&S); /* a terminal without input: it reads EOF */

    if (arm_timer(&S, s->timeout_ms) < 0) {
        brig_warn("timeout timer: %s", strerror(errno));
        kill_all(&S);
    }
    run(&S);

    for (size_t i = 0; i < S.nconns; i++)
        conn_drop(&S, S.conns[i], false);
    conns_sweep(&S);
    free(S.conns);
    if (S.tfd >= 0)
        close(S.tfd);
    if (S.pty_held >= 0)
        close(S.pty_held);
    if (S.ctl >= 0)
        close(S.ctl);
    brig_ring_dispose(&S.ring);
    brig_buf_dispose(&S.inq);
}
