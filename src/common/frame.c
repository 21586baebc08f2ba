/*
 * frame.c - encoding, decoding and blocking I/O of agent protocol frames.
 */
#include "frame.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "util.h"

void brig_frame_encode_hdr(uint8_t out[BRIG_FRAME_HDR], uint8_t type, uint16_t chan, uint32_t len)
{
    out[0] = (uint8_t)(len >> 24);
    out[1] = (uint8_t)(len >> 16);
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
    out[4] = type;
    out[5] = 0;
    out[6] = (uint8_t)(chan >> 8);
    out[7] = (uint8_t)chan;
}

int brig_frame_decode_hdr(const uint8_t in[BRIG_FRAME_HDR], brig_frame_hdr *h, brig_error **err)
{
    h->len = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
    h->type = in[4];
    h->flags = in[5];
    h->chan = (uint16_t)(in[6] << 8 | in[7]);
    if (h->type < BRIG_FRAME_HELLO || h->type > BRIG_FRAME_DATA)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "unknown frame type %u", h->type);
    if (h->flags != 0)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "frame flags must be 0");
    if (h->len > BRIG_FRAME_MAX)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "frame of %u bytes exceeds the limit",
                              h->len);
    if (h->type != BRIG_FRAME_DATA && h->chan != 0)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "control frame on channel %u", h->chan);
    if (h->type != BRIG_FRAME_DATA && h->len == 0)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "empty control frame");
    return 0;
}

int brig_frame_parse_json(const uint8_t *p, size_t n, json_t **out, brig_error **err)
{
    json_error_t jerr;
    json_t *j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "bad JSON in frame: %s", jerr.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "frame JSON is not an object");
    }
    *out = j;
    return 0;
}

int brig_frame_write(int fd, uint8_t type, uint16_t chan, const void *p, size_t n, brig_error **err)
{
    if (n > BRIG_FRAME_MAX)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "frame too large (%zu bytes)", n);
    uint8_t hdr[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(hdr, type, chan, (uint32_t)n);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)p, n}};
    int cnt = n ? 2 : 1;
    size_t total = sizeof(hdr) + n;
    while (total > 0) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return brig_error_set(err, BRIG_E_PROTOCOL, errno, "write frame");
        }
        total -= (size_t)w;
        /* Advance the iovecs past what was written. */
        for (int i = 0; i < cnt && w > 0; i++) {
            size_t take = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + take;
            iov[i].iov_len -= take;
            w -= (ssize_t)take;
        }
    }
    return 0;
}

int brig_frame_write_json(int fd, uint8_t type, json_t *obj, brig_error **err)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    if (s == NULL)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot encode JSON message");
    int r = brig_frame_write(fd, type, 0, s, strlen(s), err);
    free(s);
    return r;
}

int brig_frame_read(int fd, brig_frame *f, int *eof, brig_error **err)
{
    uint8_t hdr[BRIG_FRAME_HDR];
    if (eof)
        *eof = 0;
    ssize_t r = brig_read_full(fd, hdr, sizeof(hdr));
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT))
        /* the socket's receive timeout: a peer that is slow or stuck, not a bad one */
        return brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "no answer in time (read frame)");
    if (r < 0)
        return brig_error_set(err, BRIG_E_PROTOCOL, errno, "read frame");
    if (r == 0) {
        if (eof) {
            *eof = 1;
            return -1;
        }
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "connection closed");
    }
    if ((size_t)r < sizeof(hdr))
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "connection closed inside a frame header");
    if (brig_frame_decode_hdr(hdr, &f->hdr, err) < 0)
        return -1;
    if (f->hdr.len + 1 > f->cap) {
        f->cap = f->hdr.len + 1;
        f->payload = brig_xrealloc(f->payload, f->cap);
    }
    r = brig_read_full(fd, f->payload, f->hdr.len);
    if (r < 0)
        return brig_error_set(err, BRIG_E_PROTOCOL, errno, "read frame payload");
    if ((size_t)r < f->hdr.len)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "connection closed inside a frame");
    f->payload[f->hdr.len] = 0;
    return 0;
}

void brig_frame_dispose(brig_frame *f)
{
    free(f->payload);
    f->payload = NULL;
    f->cap = 0;
}

int brig_frame_read_json(int fd, brig_frame *f, uint8_t want_type, json_t **out, brig_error **err)
{
    if (brig_frame_read(fd, f, NULL, err) < 0)
        return -1;
    if (f->hdr.type != want_type)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "expected frame type %u, got %u", want_type,
                              f->hdr.type);
    return brig_frame_parse_json(f->payload, f->hdr.len, out, err);
}

int brig_proto_client_hello(int fd, int *version, brig_error **err)
{
    if (brig_proto_client_hello_send(fd, err) < 0)
        return -1;
    return brig_proto_client_hello_recv(fd, version, err);
}

int brig_proto_client_hello_send(int fd, brig_error **err)
{
    json_t *hello = json_pack("{s:s, s:i, s:i}", "proto", BRIG_PROTO_NAME, "version",
                              BRIG_PROTO_VERSION, "min_version", 1);
    int r = brig_frame_write_json(fd, BRIG_FRAME_HELLO, hello, err);
    json_decref(hello);
    return r;
}

int brig_proto_client_hello_recv(int fd, int *version, brig_error **err)
{
    int r = 0;
    brig_frame f = {0};
    json_t *ans = NULL;
    r = brig_frame_read(fd, &f, NULL, err);
    if (r == 0 && f.hdr.type == BRIG_FRAME_CONTROL) {
        /* The agent refused us: relay its message. */
        if (brig_frame_parse_json(f.payload, f.hdr.len, &ans, err) == 0) {
            const char *m = json_string_value(json_object_get(ans, "message"));
            brig_error_set(err, BRIG_E_PROTOCOL, 0, "agent refused handshake: %s",
                           m ? m : "no reason given");
            json_decref(ans);
        }
        brig_frame_dispose(&f);
        return -1;
    }
    if (r == 0 && f.hdr.type != BRIG_FRAME_HELLO)
        r = brig_error_set(err, BRIG_E_PROTOCOL, 0, "expected HELLO, got frame type %u",
                           f.hdr.type);
    if (r == 0)
        r = brig_frame_parse_json(f.payload, f.hdr.len, &ans, err);
    brig_frame_dispose(&f);
    if (r < 0)
        return -1;
    const char *proto = json_string_value(json_object_get(ans, "proto"));
    json_int_t v = json_integer_value(json_object_get(ans, "version"));
    if (proto == NULL || strcmp(proto, BRIG_PROTO_NAME) != 0 || v < 1) {
        json_decref(ans);
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "agent sent a malformed HELLO");
    }
    if (version)
        *version = (int)(v < BRIG_PROTO_VERSION ? v : BRIG_PROTO_VERSION);
    json_decref(ans);
    return 0;
}

json_t *brig_proto_error_msg(const char *code, const char *msg)
{
    /* Messages name paths, which need not be UTF-8: shown with U+FFFD then. */
    _cleanup_free_ char *shown = brig_utf8_display(msg, strlen(msg));
    return json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "message", shown);
}
