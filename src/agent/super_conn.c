/*
 * super_conn.c - a supervisor's client connection: its queue of encoded frames, its
 * answers, adding it and dropping it (freed at the end of the loop's round).
 */
#include "super_conn.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

void brig_super_queue_frame(sconn *k, uint8_t type, uint16_t chan, const void *p, size_t n)
{
    uint8_t hdr[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(hdr, type, chan, (uint32_t)n);
    brig_buf_append(&k->outq, hdr, sizeof(hdr));
    brig_buf_append(&k->outq, p, n);
}

void brig_super_queue_json(sconn *k, json_t *msg)
{
    char *str = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (str == NULL)
        abort(); /* jansson fails here only on OOM */
    brig_super_queue_frame(k, BRIG_FRAME_CONTROL, 0, str, strlen(str));
    free(str);
}

void brig_super_reply(sconn *k, json_t *msg)
{
    brig_super_queue_json(k, msg);
    k->replied = true;
    k->closing = true;
}

void brig_super_reply_code(sconn *k, const char *code, const char *msg)
{
    brig_super_reply(k, brig_proto_error_msg(code, msg));
}

sconn *brig_super_conn_add(super *S, int fd, sconn_kind kind)
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

void brig_super_conn_drop(super *S, sconn *k, bool polite)
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

void brig_super_conns_sweep(super *S)
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
