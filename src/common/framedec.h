/*
 * framedec.h - an incremental decoder of agent protocol frames (frame.h), for readers that
 * cannot block: the agent's supervisors read their clients with it, and the fuzz targets feed
 * it arbitrary bytes.
 *
 * The decoder never reads past the frame it is decoding: brig_framedec_want() says where the
 * next bytes go and how many at most, so a caller that reads exactly that much from a socket
 * leaves the following frames in the socket (a connection can then be handed on to another
 * process without losing bytes).  brig_framedec_feed() is the same for bytes already in memory.
 *
 * Memory: the payload buffer grows to the largest frame seen (at most BRIG_FRAME_MAX + 1) and
 * is released by brig_framedec_dispose().
 */
#ifndef BRIG_FRAMEDEC_H
#define BRIG_FRAMEDEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "frame.h"

typedef struct brig_framedec {
    uint8_t hdr_buf[BRIG_FRAME_HDR]; /* the header being received */
    size_t hdr_got;                  /* bytes of it received */
    brig_frame_hdr hdr;              /* the current frame's header, once complete */
    uint8_t *payload;                /* owned; hdr.len bytes plus a NUL once complete */
    size_t cap;                      /* allocated size of payload */
    size_t got;                      /* payload bytes received */
    bool complete;                   /* a whole frame is in hdr/payload */
} brig_framedec;

/* Where the next bytes go: *p and a count *n > 0 that never reaches past the current frame.
 * After a complete frame, this starts the next one (the complete frame is then gone). */
void brig_framedec_want(brig_framedec *d, uint8_t **p, size_t *n);

/* n bytes (at most what _want said) were stored where _want said.  Returns 1 when a frame is
 * complete (d->hdr, d->payload[0 .. d->hdr.len), NUL-terminated), 0 when more bytes are
 * needed, or -1 with *err (BRIG_E_PROTOCOL) when the header is invalid; the decoder is then
 * unusable. */
int brig_framedec_commit(brig_framedec *d, size_t n, brig_error **err);

/* Copies bytes from p[0 .. n) into the decoder, stopping after the first complete frame.
 * *used gets the bytes consumed.  Returns as brig_framedec_commit. */
int brig_framedec_feed(brig_framedec *d, const uint8_t *p, size_t n, size_t *used,
                       brig_error **err);

/* Frees the payload buffer; the decoder may be reused (it starts a new frame). */
void brig_framedec_dispose(brig_framedec *d);

#endif
