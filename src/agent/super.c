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
#include "super_internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "log.h"

/* ---- the loop ---- */

static bool output_wanted(const super *S)
{
    if (S->exited)
        return false;
    if (S->s->background)
        return true; /* never blocked by readers: the ring drops instead */
    return S->primary != NULL && brig_super_outq_pending(S->primary) < OUTQ_HIGH;
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
        p[P_IN] =
            (struct pollfd){.fd = brig_super_inq_pending(S) ? S->ch->in : -1, .events = POLLOUT};
        for (size_t i = 0; i < S->nconns; i++) {
            const sconn *k = S->conns[i];
            bool rd = !k->reads_stdin || k->in_ended || brig_super_stdin_turn(S, k);
            p[P_CONNS + i] = (struct pollfd){
                .fd = k->fd,
                .events = (short)((rd ? POLLIN : 0) | (brig_super_outq_pending(k) ? POLLOUT : 0))};
        }
        if (poll(p, (nfds_t)np, poll_timeout(S, now)) < 0) {
            if (errno == EINTR)
                continue;
            brig_err("supervisor poll: %s", strerror(errno));
            brig_super_kill_all(S);
            return;
        }
        size_t nconns = S->nconns; /* attach() may add some below: not in p[] */
        if (p[P_SIG].revents & POLLIN)
            brig_super_on_signals(S, brig_agent_signalfd_drain(S->sfd));
        if ((p[P_TIMER].revents & POLLIN) && !S->cmd.done) {
            S->timed_out = true;
            brig_super_kill_all(S);
        }
        for (size_t i = 0; i < nconns; i++) {
            sconn *k = S->conns[i];
            short ev = p[P_CONNS + i].revents;
            if (k->dead || ev == 0)
                continue;
            bool rd = !k->reads_stdin || k->in_ended || brig_super_stdin_turn(S, k);
            if (rd && (ev & (POLLIN | POLLHUP | POLLERR)))
                brig_super_conn_read(S, k);
            else if (!rd && (ev & (POLLHUP | POLLERR))) /* gone while we were not reading */
                brig_super_conn_lost(S, k, true);
            if (!k->dead && (ev & POLLOUT))
                brig_super_conn_write(S, k);
            if (!k->dead && (ev & POLLNVAL))
                brig_super_conn_drop(S, k, false);
        }
        for (int chan = 1; chan <= 2; chan++)
            if (p[P_OUT1 + chan - 1].revents && S->ch->out[chan] >= 0 && !S->exited)
                brig_super_out_pump(S, chan, BRIG_DATA_CHUNK);
        brig_super_stdin_pump(S);
        if (p[P_CTL].revents && S->ctl >= 0)
            brig_super_ctl_read(S);
        if (S->cmd.done && !S->exited)
            brig_super_finish(S);
        brig_super_conns_service(S, brig_now_mono_ms());
        brig_super_conns_sweep(S);
    }
}

/* The exec connection (c's, handed to us): the foreground client, or just the `started`
 * answer (plus the initial stdin of a background process), or, for a background exec that
 * asks to follow and streams no stdin, a follower of the output from its first byte: one
 * connection for what would be an exec and a proc_output. */
static void exec_conn(super *S, brig_agent_conn *c)
{
    const brig_exec_spec *s = S->s;
    sconn *k = brig_super_conn_add(S, c->fd, K_ONESHOT);
    c->fd = -1;
    c->handed_off = true;
    bool follows = s->background && s->follow && !s->want_stdin;
    json_t *started =
        json_pack("{s:s, s:I}", "type", brig_agentproto_reply_name(BRIG_REPLY_STARTED), "pid",
                  (json_int_t)S->ch->pid);
    if (follows) /* tells the client it need not ask for the output elsewhere */
        json_object_set_new(started, "follow", json_true());
    brig_super_queue_json(k, started);
    k->replied = s->background && !follows; /* a foreground client's answer is its `exit` */
    if (!s->background) {
        k->kind = K_PRIMARY;
        k->reads_stdin = s->want_stdin;
        S->primary = k;
    } else if (follows) {
        k->kind = K_OUTPUT;
        k->follow = true;
        k->rpos = S->ring.tail;
    } else if (s->want_stdin) {
        k->kind = K_BGIN;
        k->reads_stdin = true;
        k->closing = true;
    } else {
        k->closing = true;
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

    exec_conn(&S, c);
    if (ch->in < 0)
        S.stdin_closed = true;
    else if (ch->pty && !(s->background ? s->want_stdin || !s->stdin_closed : s->want_stdin))
        brig_super_stdin_close(&S); /* a terminal without input: it reads EOF */

    if (arm_timer(&S, s->timeout_ms) < 0) {
        brig_warn("timeout timer: %s", strerror(errno));
        brig_super_kill_all(&S);
    }
    run(&S);

    for (size_t i = 0; i < S.nconns; i++)
        brig_super_conn_drop(&S, S.conns[i], false);
    brig_super_conns_sweep(&S);
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
