/*
 * super_proc.c - the supervised process itself: its stdin queue and the one client that
 * writes to it at a time, its output read into the ring (and the primary's queue), its
 * exit and how it is reported, killing it.
 */
#include "super_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

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

json_t *brig_super_exit_msg(const super *S)
{
    int code, sig;
    exit_status(S, &code, &sig);
    return json_pack("{s:s, s:i, s:o, s:b, s:I}", "type",
                     brig_agentproto_reply_name(BRIG_REPLY_EXIT), "exit_code", code, "signal",
                     sig ? json_integer(sig) : json_null(), "timed_out", S->timed_out,
                     "duration_ms", (json_int_t)(S->t1 - S->ch->t0));
}

json_t *brig_super_proc_obj(const super *S, const char *type)
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

void brig_super_stdin_answer(super *S, sconn *k)
{
    if (k->kind != K_STDIN || k->replied || !k->in_ended || S->in_owner == k)
        return;
    brig_super_reply(k, json_pack("{s:s, s:I}", "type", brig_agentproto_reply_name(BRIG_REPLY_OK),
                                  "bytes", (json_int_t)k->in_written));
}

void brig_super_stdin_close(super *S)
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
        brig_super_stdin_answer(S, owner);
}

void brig_super_stdin_pump(super *S)
{
    while (S->ch->in >= 0 && brig_super_inq_pending(S) > 0) {
        ssize_t w = write(S->ch->in, S->inq.data + S->inq_off, brig_super_inq_pending(S));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            brig_super_stdin_close(S); /* EPIPE: the command does not want more */
            return;
        }
        S->inq_off += (size_t)w;
        if (S->in_owner != NULL)
            S->in_owner->in_written += (uint64_t)w;
    }
    if (brig_super_inq_pending(S) > 0) {
        /* A command that always lags a little must not make the buffer grow by the whole
         * stream: drop what was written once it outweighs the backlog limit. */
        if (S->inq_off > INQ_HIGH) {
            memmove(S->inq.data, S->inq.data + S->inq_off, brig_super_inq_pending(S));
            S->inq.len -= S->inq_off;
            S->inq_off = 0;
        }
        return;
    }
    S->inq.len = S->inq_off = 0;
    sconn *owner = S->in_owner;
    S->in_owner = NULL;
    if (owner != NULL)
        brig_super_stdin_answer(S, owner);
    if (S->stdin_close_pending)
        brig_super_stdin_close(S);
}

bool brig_super_stdin_turn(const super *S, const sconn *k)
{
    if (k->discard || S->stdin_closed)
        return true; /* dropped anyway */
    return (S->in_owner == NULL || S->in_owner == k) && brig_super_inq_pending(S) < INQ_HIGH;
}

void brig_super_kill_all(super *S)
{
    uint64_t seen = brig_agent_proc_kill_all(S->sfd, &S->cmd);
    if (seen)
        brig_super_on_signals(S, seen);
}

size_t brig_super_out_pump(super *S, int chan, size_t limit)
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
                brig_super_queue_frame(S->primary, BRIG_FRAME_DATA, (uint16_t)chan, NULL, 0);
                S->chan_ended[chan] = true;
            }
            return 0;
        }
        brig_ring_append(&S->ring, chan, buf, (size_t)n);
        if (S->primary != NULL)
            brig_super_queue_frame(S->primary, BRIG_FRAME_DATA, (uint16_t)chan, buf, (size_t)n);
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
            while (S->ch->out[chan] >= 0 && brig_super_out_pump(S, chan, BRIG_DATA_CHUNK) > 0)
                ;
            return;
        }
    }
    int avail = 0;
    if (ioctl(fd, FIONREAD, &avail) == 0)
        while (avail > 0 && S->ch->out[chan] >= 0) {
            size_t n = brig_super_out_pump(S, chan, (size_t)avail);
            if (n == 0)
                break;
            avail -= (int)n;
        }
}

void brig_super_finish(super *S)
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
    brig_super_stdin_close(S);
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
                brig_super_queue_frame(S->primary, BRIG_FRAME_DATA, (uint16_t)chan, NULL, 0);
        brig_super_reply(S->primary, brig_super_exit_msg(S));
    }
}

/* SIGTERM/SIGINT come from the agent's shutdown (or from the parent-death signal when the
 * agent died); they are passed on to our process tree, except when the agent is PID 1: its
 * kill(-1, SIGTERM) already reached every process. */
void brig_super_on_signals(super *S, uint64_t seen)
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
