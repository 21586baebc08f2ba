/*
 * super_client.c - the supervisor's client I/O: frames read from a client (stdin DATA only),
 * queues sent as fast as each socket takes them, followers refilled from the ring, and the
 * answers that fall due each round.
 */
#include "super_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

void brig_super_conn_lost(super *S, sconn *k, bool eof)
{
    if (k == S->primary && !S->exited && !k->replied) {
        brig_super_kill_all(S);
        brig_super_conn_drop(S, k, false);
        return;
    }
    if (k->kind == K_BGIN && S->s->stdin_closed && !S->stdin_closed) {
        S->stdin_close_pending = true; /* the initial stdin was all there is */
        if (brig_super_inq_pending(S) == 0)
            brig_super_stdin_close(S);
    }
    if (!eof && !k->replied && k->kind == K_STDIN) {
        /* Best effort: the answer may not get through. */
        brig_super_queue_json(k, brig_proto_error_msg("bad_request", "unexpected frame"));
        send(k->fd, k->outq.data + k->outq_off, brig_super_outq_pending(k),
             MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    brig_super_conn_drop(S, k, !eof);
}

/* One complete frame from k. */
static void rx_frame(super *S, sconn *k)
{
    const brig_frame_hdr *h = &k->rx.hdr;
    if (h->type != BRIG_FRAME_DATA || h->chan != BRIG_CHAN_IN || !k->reads_stdin || k->in_ended) {
        brig_super_conn_lost(S, k, false);
        return;
    }
    if (h->len == 0) {
        k->in_ended = true;
        if (k->discard) {
            k->closing = true;
        } else if (k->kind == K_STDIN) {
            brig_super_stdin_answer(S, k);
        } else if ((k->kind == K_PRIMARY || S->s->stdin_closed) && !S->stdin_closed) {
            /* The exec's own stdin stream ended: the command reads EOF once it is written. */
            S->stdin_close_pending = true;
            if (brig_super_inq_pending(S) == 0)
                brig_super_stdin_close(S);
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

void brig_super_conn_read(super *S, sconn *k)
{
    while (!k->dead && (!k->reads_stdin || k->in_ended || brig_super_stdin_turn(S, k))) {
        uint8_t *p;
        size_t want;
        brig_framedec_want(&k->rx, &p, &want);
        ssize_t n = recv(k->fd, p, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            brig_super_conn_lost(S, k, true);
            return;
        }
        int r = brig_framedec_commit(&k->rx, (size_t)n, NULL);
        if (r < 0) {
            brig_super_conn_lost(S, k, false);
            return;
        }
        if (r == 1)
            rx_frame(S, k);
    }
}

void brig_super_conn_write(super *S, sconn *k)
{
    while (brig_super_outq_pending(k) > 0) {
        ssize_t w = send(k->fd, k->outq.data + k->outq_off, brig_super_outq_pending(k),
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            brig_super_conn_lost(S, k, true);
            return;
        }
        k->outq_off += (size_t)w;
    }
    if (k->outq_off == k->outq.len) {
        k->outq.len = k->outq_off = 0;
    } else if (k->outq_off > OUTQ_HIGH) {
        memmove(k->outq.data, k->outq.data + k->outq_off, brig_super_outq_pending(k));
        k->outq.len -= k->outq_off;
        k->outq_off = 0;
    }
}

/* Moves ring output to a follower's queue, with `dropped` markers, and its end. */
static void output_fill(super *S, sconn *k)
{
    static uint8_t buf[BRIG_DATA_CHUNK];
    while (!k->replied && brig_super_outq_pending(k) < FILL_LOW) {
        if (k->rpos < S->ring.tail) {
            /* It fell behind: the bytes it missed are gone (a snapshot counts only those
             * it was going to send). */
            uint64_t to = S->ring.tail;
            if (!k->follow && to > k->end_pos)
                to = k->end_pos;
            if (to > k->rpos)
                brig_super_queue_json(k, json_pack("{s:s, s:I}", "type",
                                                   brig_agentproto_reply_name(BRIG_REPLY_DROPPED),
                                                   "bytes", (json_int_t)(to - k->rpos)));
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
            brig_super_queue_frame(k, BRIG_FRAME_DATA, (uint16_t)chan, buf, n);
            continue;
        }
        if (!k->follow && k->rpos >= k->end_pos) {
            brig_super_reply(k, json_pack("{s:s, s:b}", "type",
                                          brig_agentproto_reply_name(BRIG_REPLY_END), "running",
                                          !S->exited));
        } else if (k->follow && S->exited && k->rpos >= S->ring.head) {
            brig_super_queue_frame(k, BRIG_FRAME_DATA, BRIG_CHAN_STDOUT, NULL, 0);
            brig_super_queue_frame(k, BRIG_FRAME_DATA, BRIG_CHAN_STDERR, NULL, 0);
            brig_super_reply(k, brig_super_exit_msg(S));
        }
        return;
    }
}

void brig_super_conns_service(super *S, int64_t now)
{
    for (size_t i = 0; i < S->nconns; i++) {
        sconn *k = S->conns[i];
        if (k->dead)
            continue;
        if (k->kind == K_WAIT && !k->replied &&
            (S->exited || (k->deadline > 0 && now >= k->deadline)))
            brig_super_reply(
                k, brig_super_proc_obj(S, brig_agentproto_reply_name(BRIG_REPLY_PROCESS)));
        if (k->kind == K_STDIN)
            brig_super_stdin_answer(S, k);
        /* A follower is refilled as long as its socket takes everything. */
        for (;;) {
            bool added = false;
            if (k->kind == K_OUTPUT) {
                size_t len0 = k->outq.len;
                output_fill(S, k);
                added = k->outq.len != len0;
            }
            if (brig_super_outq_pending(k) > 0)
                brig_super_conn_write(S, k);
            if (k->dead || !added || brig_super_outq_pending(k) > 0)
                break;
        }
        /* A stdin stream is read to its end first (the client is still sending), except
         * the foreground client's: its `exit` is the end, whatever it still sends. */
        if (!k->dead && k->closing && brig_super_outq_pending(k) == 0 &&
            (!k->reads_stdin || k->in_ended || k->kind == K_PRIMARY))
            brig_super_conn_drop(S, k, true);
    }
}
