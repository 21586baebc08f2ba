/*
 * framedec.c - incremental frame decoding (see framedec.h).
 */
#include "framedec.h"

#include <string.h>

#include "util.h"

/* Payload buffers above this size are released after their frame: a 1 MiB frame must not
 * pin 1 MiB for the life of a long-lived reader. */
#define KEEP_CAP (BRIG_DATA_CHUNK + 1)

static void start_next(brig_framedec *d)
{
    d->complete = false;
    d->hdr_got = 0;
    d->got = 0;
    if (d->cap > KEEP_CAP) {
        free(d->payload);
        d->payload = NULL;
        d->cap = 0;
    }
}

void brig_framedec_want(brig_framedec *d, uint8_t **p, size_t *n)
{
    if (d->complete)
        start_next(d);
    if (d->hdr_got < BRIG_FRAME_HDR) {
        *p = d->hdr_buf + d->hdr_got;
        *n = BRIG_FRAME_HDR - d->hdr_got;
    } else {
        *p = d->payload + d->got;
        *n = d->hdr.len - d->got;
    }
}

int brig_framedec_commit(brig_framedec *d, size_t n, brig_error **err)
{
    if (d->hdr_got < BRIG_FRAME_HDR) {
        d->hdr_got += n;
        if (d->hdr_got < BRIG_FRAME_HDR)
            return 0;
        if (brig_frame_decode_hdr(d->hdr_buf, &d->hdr, err) < 0)
            return -1;
        if ((size_t)d->hdr.len + 1 > d->cap) {
            d->cap = (size_t)d->hdr.len + 1;
            d->payload = brig_xrealloc(d->payload, d->cap);
        }
        d->got = 0;
    } else {
        d->got += n;
    }
    if (d->got < d->hdr.len)
        return 0;
    d->payload[d->hdr.len] = '\0';
    d->complete = true;
    return 1;
}

int brig_framedec_feed(brig_framedec *d, const uint8_t *p, size_t n, size_t *used, brig_error **err)
{
    *used = 0;
    for (;;) {
        uint8_t *dst;
        size_t want;
        brig_framedec_want(d, &dst, &want);
        size_t k = want < n - *used ? want : n - *used;
        if (k == 0) /* _want always asks for at least one byte */
            return 0;
        memcpy(dst, p + *used, k);
        *used += k;
        int r = brig_framedec_commit(d, k, err);
        if (r != 0)
            return r;
    }
}

void brig_framedec_dispose(brig_framedec *d)
{
    free(d->payload);
    memset(d, 0, sizeof(*d));
}
