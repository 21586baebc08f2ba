/*
 * ring.c - a process's output buffer: the last `limit` bytes of its output, both channels in
 * the order they were written, with a count of what was dropped (see agent.h, brig_ring).
 *
 * Positions are absolute: byte p of the output (counted from the start of the process) lives
 * at data[p % cap] while tail <= p < head.  `tail` is therefore also the number of bytes
 * dropped so far.  Readers (followers) keep nothing but a position: one that finds its
 * position below the tail has missed tail - pos bytes.
 *
 * Which channel a byte belongs to is kept in a second ring of *runs*: a run starts wherever
 * the channel changes, and covers the bytes up to the next run.  The run index is bounded
 * (limit / 64 runs, at least 16): output that alternates channels faster than that drops its
 * oldest run whole, so such output keeps fewer than `limit` bytes.  Each run is one uint64_t
 * (start << 2 | chan).
 *
 * Memory grows with use: data starts at 64 KiB and doubles up to `limit`; it wraps only once
 * it is that large, so growing never moves a byte (p < cap maps to p).  brig_ring_seal()
 * shrinks a finished process's buffer to exactly what it holds.
 */
#include "agent.h"

#include <string.h>

#include "util.h"

#define DATA_START (64u << 10)
#define RUNS_START 16
#define RUN_CHAN   3u

static uint64_t run_start(const brig_ring *r, size_t i)
{
    return r->runs[(r->run_first + i) % r->run_cap] >> 2;
}

static int run_chan(const brig_ring *r, size_t i)
{
    return (int)(r->runs[(r->run_first + i) % r->run_cap] & RUN_CHAN);
}

void brig_ring_init(brig_ring *r, size_t limit)
{
    memset(r, 0, sizeof(*r));
    r->limit = limit ? limit : 1;
    r->run_max = r->limit / 64 > RUNS_START ? r->limit / 64 : RUNS_START;
}

void brig_ring_dispose(brig_ring *r)
{
    free(r->data);
    free(r->runs);
    memset(r, 0, sizeof(*r));
}

static void pop_run(brig_ring *r)
{
    r->run_first = (r->run_first + 1) % r->run_cap;
    r->run_n--;
}

static void push_run(brig_ring *r, uint64_t start, int chan)
{
    if (r->run_n == r->run_cap) {
        if (r->run_cap < r->run_max) {
            /* Grow, unrolling the circle. */
            size_t cap = r->run_cap ? r->run_cap * 2 : RUNS_START;
            if (cap > r->run_max)
                cap = r->run_max;
            uint64_t *v = brig_xcalloc(cap, sizeof(*v));
            for (size_t i = 0; i < r->run_n; i++)
                v[i] = r->runs[(r->run_first + i) % r->run_cap];
            free(r->runs);
            r->runs = v;
            r->run_cap = cap;
            r->run_first = 0;
        } else {
            /* Full: the oldest run goes, with its bytes. */
            uint64_t next = run_start(r, 1);
            if (r->tail < next)
                r->tail = next;
            pop_run(r);
        }
    }
    r->runs[(r->run_first + r->run_n) % r->run_cap] = start << 2 | (uint64_t)chan;
    r->run_n++;
}

/* Copies n bytes to absolute position pos (the caller made room). */
static void put(brig_ring *r, uint64_t pos, const uint8_t *p, size_t n)
{
    size_t at = (size_t)(pos % r->cap);
    size_t first = n < r->cap - at ? n : r->cap - at;
    memcpy(r->data + at, p, first);
    memcpy(r->data, p + first, n - first);
}

void brig_ring_append(brig_ring *r, int chan, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (n == 0 || r->sealed)
        return;
    if (r->run_n == 0 || run_chan(r, r->run_n - 1) != chan)
        push_run(r, r->head, chan);
    uint64_t end = r->head + n;
    /* Grow while the data has never wrapped (every held p < cap still maps to p). */
    if (end > r->cap && r->cap < r->limit && r->head <= r->cap) {
        size_t cap = r->cap ? r->cap : DATA_START;
        while (cap < end && cap < r->limit)
            cap *= 2;
        if (cap > r->limit)
            cap = r->limit;
        r->data = brig_xrealloc(r->data, cap);
        r->cap = cap;
    }
    /* Only the last cap bytes of this chunk can be kept. */
    if (n > r->cap) {
        b += n - r->cap;
        n = r->cap;
    }
    if (end - r->tail > r->cap)
        r->tail = end - r->cap;
    put(r, end - n, b, n);
    r->head = end;
    while (r->run_n >= 2 && run_start(r, 1) <= r->tail)
        pop_run(r);
}

size_t brig_ring_read(const brig_ring *r, uint64_t *pos, int *chan, void *dst, size_t max,
                      uint64_t *skipped)
{
    *skipped = 0;
    if (*pos < r->tail) {
        *skipped = r->tail - *pos;
        *pos = r->tail;
    }
    if (*pos >= r->head || max == 0 || r->run_n == 0)
        return 0;
    /* The last run that starts at or before pos. */
    size_t lo = 0, hi = r->run_n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (run_start(r, mid) <= *pos)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t end = lo + 1 < r->run_n ? run_start(r, lo + 1) : r->head;
    size_t n = end - *pos < max ? (size_t)(end - *pos) : max;
    size_t at = r->sealed ? (size_t)(*pos - r->tail) : (size_t)(*pos % r->cap);
    size_t first = n < r->cap - at ? n : r->cap - at;
    memcpy(dst, r->data + at, first);
    memcpy((uint8_t *)dst + first, r->data, n - first);
    *chan = run_chan(r, lo);
    *pos += n;
    return n;
}

void brig_ring_seal(brig_ring *r)
{
    if (r->sealed)
        return;
    size_t held = (size_t)(r->head - r->tail);
    uint8_t *v = held ? brig_xmalloc(held) : NULL;
    if (held) {
        size_t at = (size_t)(r->tail % r->cap);
        size_t first = held < r->cap - at ? held : r->cap - at;
        memcpy(v, r->data + at, first);
        memcpy(v + first, r->data, held - first);
    }
    free(r->data);
    r->data = v;
    r->cap = held;
    r->sealed = true; /* from now on byte p lives at data[p - tail] */
}
