/*
 * super_ctl.c - the supervisor's control channel to PID 1: the connections PID 1 routes to
 * this process (proc_get, proc_output, proc_stdin, proc_stdin_close, proc_signal, proc_wait,
 * proc_resize, their requests parsed by the handler that accepted them), and its EOF: the
 * record is forgotten.
 */
#include "super_internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void attach(super *S, int fd, const brig_proc_req *q)
{
    if (q->pid != S->ch->pid) { /* cannot happen: PID 1 routes by pid */
        close(fd);
        return;
    }
    sconn *k = brig_super_conn_add(S, fd, K_ONESHOT);
    switch (q->op) {
    case BRIG_OP_PROC_GET:
        brig_super_reply(k, brig_super_proc_obj(S, brig_agentproto_reply_name(BRIG_REPLY_PROCESS)));
        break;
    case BRIG_OP_PROC_OUTPUT:
        k->kind = K_OUTPUT;
        k->follow = q->follow;
        k->rpos = S->ring.tail;
        k->end_pos = S->ring.head;
        brig_super_queue_json(k, json_pack("{s:s, s:I}", "type",
                                           brig_agentproto_reply_name(BRIG_REPLY_OUTPUT),
                                           "dropped_bytes", (json_int_t)S->ring.tail));
        break;
    case BRIG_OP_PROC_STDIN:
        k->kind = K_STDIN;
        k->reads_stdin = true;
        if (S->exited || S->stdin_closed) {
            /* Answer at once; the rest of the stream is read and dropped. */
            k->discard = true;
            brig_super_reply_code(k, "bad_request",
                                  S->exited ? "the process has exited"
                                            : "the process's stdin is closed");
        }
        break;
    case BRIG_OP_PROC_STDIN_CLOSE:
        if (S->exited || S->stdin_closed) {
            brig_super_reply_code(k, "bad_request",
                                  S->exited ? "the process has exited"
                                            : "the process's stdin is closed");
            break;
        }
        /* After what is queued: the command reads EOF after the bytes sent before. */
        S->stdin_close_pending = true;
        if (brig_super_inq_pending(S) == 0)
            brig_super_stdin_close(S);
        brig_super_reply(k, brig_agentproto_message(BRIG_REPLY_OK));
        break;
    case BRIG_OP_PROC_SIGNAL:
        if (S->exited) {
            brig_super_reply_code(k, "bad_request", "the process has exited");
            break;
        }
        if (q->signal == SIGKILL) {
            /* the group and every remaining descendant, as a timeout does */
            brig_super_kill_all(S);
        } else {
            kill(-S->ch->pid, q->signal);
        }
        brig_super_reply(k, brig_agentproto_message(BRIG_REPLY_OK));
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
            brig_super_reply_code(k, "bad_request",
                                  !S->ch->pty ? "the process does not run on a pty"
                                              : "the process has exited");
            break;
        }
        struct winsize ws = {.ws_row = q->rows, .ws_col = q->cols};
        if (ioctl(S->ch->out[1], TIOCSWINSZ, &ws) < 0)
            brig_super_reply_code(k, "io", strerror(errno));
        else
            brig_super_reply(k, brig_agentproto_message(BRIG_REPLY_OK));
        break;
    }
    default:
        brig_super_reply_code(k, "bad_request", "not a process operation");
        break;
    }
}

void brig_super_ctl_read(super *S)
{
    for (;;) {
        brig_ctl_msg m;
        int fd = -1;
        ssize_t r = brig_ctl_recv(S->ctl, &m, sizeof(m), &fd, true);
        if (r < 0 && errno == EAGAIN)
            return;
        if (r == (ssize_t)sizeof(m) && m.type == BRIG_CTL_QUIESCE) {
            /* A gVisor checkpoint (main.c): every client goes, as if it had hung up (a
             * foreground command with it); the process and its output stay. */
            if (fd >= 0)
                close(fd);
            for (size_t i = 0; i < S->nconns; i++)
                if (!S->conns[i]->dead)
                    brig_super_conn_lost(S, S->conns[i], true);
            brig_ctl_msg ack = {.type = BRIG_CTL_ACK};
            (void)brig_ctl_send(S->ctl, &ack, sizeof(ack), -1, false);
            continue;
        }
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
