/*
 * frame.h - the brig agent protocol's framing, shared by brigd and brig-agent.
 *
 * Every frame is an 8-byte header followed by `len` payload bytes:
 *
 *   offset 0  u32 len    payload length, big endian, at most BRIG_FRAME_MAX
 *   offset 4  u8  type   BRIG_FRAME_HELLO | BRIG_FRAME_CONTROL | BRIG_FRAME_DATA
 *   offset 5  u8  flags  must be 0 in version 1
 *   offset 6  u16 chan   data channel (big endian); 0 for HELLO and CONTROL
 *
 * HELLO and CONTROL payloads are one JSON object; DATA payloads are raw bytes,
 * and a zero-length DATA frame ends its channel.  docs/protocol.md is the
 * normative description.  Any violation closes the connection.
 */
#ifndef BRIG_FRAME_H
#define BRIG_FRAME_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define BRIG_PROTO_NAME    "brig-agent"
#define BRIG_PROTO_VERSION 1
#define BRIG_FRAME_HDR     8
#define BRIG_FRAME_MAX     (1u << 20)  /* payload limit: 1 MiB */
#define BRIG_DATA_CHUNK    (64u << 10) /* what senders put in one DATA frame */

enum { BRIG_FRAME_HELLO = 1, BRIG_FRAME_CONTROL = 2, BRIG_FRAME_DATA = 3 };

/* DATA channels. */
enum { BRIG_CHAN_IN = 0, BRIG_CHAN_STDOUT = 1, BRIG_CHAN_STDERR = 2 };

typedef struct brig_frame_hdr {
    uint32_t len;
    uint8_t type;
    uint8_t flags;
    uint16_t chan;
} brig_frame_hdr;

/* A received frame; `payload` is owned by the frame and reused by the next read. */
typedef struct brig_frame {
    brig_frame_hdr hdr;
    uint8_t *payload;
    size_t cap;
} brig_frame;

void brig_frame_encode_hdr(uint8_t out[BRIG_FRAME_HDR], uint8_t type, uint16_t chan, uint32_t len);

/* Validates a header: known type, flags 0, len <= BRIG_FRAME_MAX, chan 0 unless DATA. */
int brig_frame_decode_hdr(const uint8_t in[BRIG_FRAME_HDR], brig_frame_hdr *h, brig_error **err);

/* Parses a HELLO/CONTROL payload into a JSON object (caller owns the result). */
int brig_frame_parse_json(const uint8_t *p, size_t n, json_t **out, brig_error **err);

/* Blocking writes of whole frames (EINTR-safe). */
int brig_frame_write(int fd, uint8_t type, uint16_t chan, const void *p, size_t n,
                     brig_error **err);
int brig_frame_write_json(int fd, uint8_t type, json_t *obj, brig_error **err);

/* Blocking read of one frame into f (payload buffer grows as needed).  Returns 0,
 * or -1: a clean EOF before any header byte sets *eof (when eof != NULL) and no
 * error; anything else is an error. */
int brig_frame_read(int fd, brig_frame *f, int *eof, brig_error **err);
void brig_frame_dispose(brig_frame *f);

/* Reads one frame that must be HELLO/CONTROL and returns its JSON object. */
int brig_frame_read_json(int fd, brig_frame *f, uint8_t want_type, json_t **out, brig_error **err);

/* Client half of the handshake: sends our HELLO and checks the agent's answer.
 * On success *version is the negotiated version (version may be NULL).  In two halves for a
 * connection opened ahead of its use: the HELLO sent now, its answer read when it is used. */
int brig_proto_client_hello(int fd, int *version, brig_error **err);
int brig_proto_client_hello_send(int fd, brig_error **err);
int brig_proto_client_hello_recv(int fd, int *version, brig_error **err);

/* Builds {"type":"error","code":code,"message":msg}. */
json_t *brig_proto_error_msg(const char *code, const char *msg);

#endif
