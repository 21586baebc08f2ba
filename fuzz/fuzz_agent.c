/*
 * fuzz_agent.c - libFuzzer target for what brig-agent does with a peer's bytes before it
 * acts on them: the incremental frame decoder (framedec.c), the JSON of HELLO and CONTROL
 * frames, every request decoder (src/common/agentproto.c), and the output ring (ring.c) fed
 * with the DATA frames.  Nothing is executed: the decoders have no side effects.  A request
 * that decodes is encoded again as brigd would send it, and must decode to the same request.
 *
 * Input: byte 0 picks how the rest is cut into reads (1, 2, 3, 7 or 64 bytes, or all at
 * once) and the ring's size; the rest is the byte stream a client would send.
 */
#include <assert.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agentproto.h"
#include "framedec.h"
#include "frame.h"

static void check_ring(brig_ring *r, uint64_t *cursor, uint64_t appended)
{
    assert(r->head == appended);
    assert(r->head - r->tail <= r->limit);
    uint8_t buf[4096];
    for (;;) {
        uint64_t skipped = 0;
        int chan = 0;
        uint64_t before = *cursor;
        size_t n = brig_ring_read(r, cursor, &chan, buf, sizeof(buf), &skipped);
        assert(*cursor <= r->head && *cursor >= r->tail);
        assert(before + skipped + n == *cursor);
        if (n == 0)
            break;
        assert(chan == 1 || chan == 2);
    }
}

static bool same_str(const char *a, const char *b)
{
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

static bool same_json(json_t *a, json_t *b)
{
    return a == NULL ? b == NULL : b != NULL && json_equal(a, b);
}

/* decode(encode(q)) == q for a decoded q, through the bytes brigd would send. */
static void check_roundtrip(const brig_agent_req *q)
{
    json_t *enc = brig_agentproto_encode(q);
    char *text = json_dumps(enc, JSON_COMPACT);
    assert(text != NULL);
    json_t *back = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    assert(back != NULL);
    brig_agent_req r;
    brig_error *err = NULL;
    assert(brig_agentproto_decode(back, &r, &err) == 0);
    assert(r.op == q->op);
    if (q->op == BRIG_OP_EXEC) {
        const brig_exec_spec *a = &q->u.exec, *b = &r.u.exec;
        assert(same_json(a->argv, b->argv) && same_str(a->cmd, b->cmd) &&
               same_str(a->cwd, b->cwd) && same_json(a->env, b->env) && same_str(a->user, b->user));
        assert(a->timeout_ms == b->timeout_ms && a->want_stdin == b->want_stdin &&
               a->stdin_closed == b->stdin_closed && a->background == b->background &&
               a->pty == b->pty && a->cols == b->cols && a->rows == b->rows &&
               a->buffer_bytes == b->buffer_bytes);
    } else if (q->op >= BRIG_OP_PROC_LIST && q->op <= BRIG_OP_PROC_RESIZE) {
        assert(memcmp(&q->u.proc, &r.u.proc, sizeof(r.u.proc)) == 0);
    } else if (q->op == BRIG_OP_GUEST_SYNC) {
        const brig_guest_req *a = &q->u.guest, *b = &r.u.guest;
        assert(a->realtime_ns == b->realtime_ns && same_str(a->seed, b->seed) && a->net == b->net &&
               same_str(a->nic, b->nic) && same_str(a->mac, b->mac) && same_str(a->ip, b->ip) &&
               same_str(a->gw, b->gw));
    } else if (q->op == BRIG_OP_FS_FREEZE) {
        assert(q->u.freeze == r.u.freeze);
    } else if (q->op != BRIG_OP_PING) {
        const brig_fs_req *a = &q->u.fs, *b = &r.u.fs;
        assert(same_str(a->path, b->path) && same_str(a->from, b->from) && same_str(a->to, b->to));
        assert(a->mode == b->mode && a->mode_set == b->mode_set && a->recursive == b->recursive &&
               a->parents == b->parents);
    }
    json_decref(back);
    free(text);
    json_decref(enc);
}

static void on_frame(const brig_framedec *d, brig_ring *ring, uint64_t *cursor, uint64_t *appended)
{
    json_t *j = NULL;
    if (d->hdr.type == BRIG_FRAME_DATA) {
        int chan = (d->hdr.chan & 1) ? 1 : 2;
        brig_ring_append(ring, chan, d->payload, d->hdr.len);
        *appended += d->hdr.len;
        check_ring(ring, cursor, *appended);
        return;
    }
    if (brig_frame_parse_json(d->payload, d->hdr.len, &j, NULL) < 0)
        return;
    if (d->hdr.type == BRIG_FRAME_HELLO) {
        int64_t v, vmin;
        brig_agentproto_decode_hello(j, &v, &vmin, NULL);
    } else {
        brig_agent_req q;
        brig_error *err = NULL;
        if (brig_agentproto_decode(j, &q, &err) == 0) {
            assert(q.op < BRIG_OP__COUNT);
            if (q.op == BRIG_OP_EXEC) {
                const brig_exec_spec *s = &q.u.exec;
                assert((s->argv == NULL) != (s->cmd == NULL));
                assert(s->buffer_bytes >= 1 && s->buffer_bytes <= BRIG_BUFFER_MAX);
                assert(!s->pty || (s->cols >= 1 && s->rows >= 1));
                assert(s->cwd == NULL || s->cwd[0] == '/');
            }
            check_roundtrip(&q);
        } else {
            assert(err != NULL && err->msg != NULL);
        }
        brig_error_clear(&err);
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t cuts[] = {1, 2, 3, 7, 64, SIZE_MAX};
    if (size < 1)
        return 0;
    size_t cut = cuts[data[0] % (sizeof(cuts) / sizeof(cuts[0]))];
    brig_ring ring;
    brig_ring_init(&ring, 1 + (size_t)(data[0] >> 3) * 97);
    uint64_t cursor = 0, appended = 0;
    brig_framedec d = {0};
    const uint8_t *p = data + 1;
    size_t left = size - 1;
    while (left > 0) {
        size_t n = left < cut ? left : cut;
        size_t used = 0;
        int r = brig_framedec_feed(&d, p, n, &used, NULL);
        assert(used <= n);
        p += used;
        left -= used;
        if (r < 0)
            break;
        if (r == 1)
            on_frame(&d, &ring, &cursor, &appended);
        else
            assert(used == n);
    }
    brig_ring_seal(&ring);
    check_ring(&ring, &cursor, appended);
    brig_framedec_dispose(&d);
    brig_ring_dispose(&ring);
    return 0;
}
