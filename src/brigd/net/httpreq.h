/*
 * httpreq.h - the egress proxy's parsers (pure, no allocation, fuzzed by
 * fuzz/fuzz_http.c): a strict HTTP/1.x request and response head parser
 * (injconn.c), the framing of a message body (where it ends: injflow.c, so one
 * connection carries request after request), and the server name of a TLS
 * ClientHello (injtls.c).  What it refuses
 * the proxy answers with 400 rather than guess: bare LF, obsolete line folding,
 * control characters, more than one Host or Content-Length, Transfer-Encoding
 * other than "chunked" or together with Content-Length.
 * Why not a library: Debian 12's one HTTP/1.1 parser package (libhttp-parser, Node.js's
 * http-parser 2.9) is archived upstream, and llhttp is not packaged there.
 */
#ifndef BRIG_HTTPREQ_H
#define BRIG_HTTPREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRIG_HTTP_HEAD_MAX    16384 /* bytes of a request head, at most */
#define BRIG_HTTP_HEADERS_MAX 64    /* header fields, at most */

/* A piece of the parsed buffer (offset and length into it). */
typedef struct brig_http_span {
    size_t off, len;
} brig_http_span;

typedef struct brig_http_field {
    brig_http_span name, value; /* value without surrounding spaces */
} brig_http_field;

typedef struct brig_http_head {
    brig_http_span method, target;
    int minor; /* HTTP/1.<minor>: 0 or 1 */
    brig_http_field fields[BRIG_HTTP_HEADERS_MAX];
    size_t n_fields;
    int host;           /* index of the Host field, -1: none */
    bool chunked;       /* Transfer-Encoding: chunked */
    long long body_len; /* Content-Length, -1: none */
    int status;         /* a response's status code; 0 for a request */
} brig_http_head;

/* Parses the request head at the start of buf (len bytes).  Returns the head's
 * length (through the empty line) with *h filled, 0 when buf holds no whole
 * head yet (and is not yet malformed or over BRIG_HTTP_HEAD_MAX), -1 when it
 * is malformed or too long: *why then names the problem (a static string). */
long brig_http_parse(const char *buf, size_t len, brig_http_head *h, const char **why);

/* A response head, the same way (the status line instead of the request line, no
 * Host required); status in h->status. */
long brig_http_parse_response(const char *buf, size_t len, brig_http_head *h, const char **why);

/* Whether some field named name has token among its comma-separated values
 * (case-insensitive): Connection: close, say. */
bool brig_http_has_token(const char *buf, const brig_http_head *h, const char *name,
                         const char *token);

/* Where a message body ends (RFC 9112 section 6.3): a length, chunked framing
 * (chunk sizes, extensions and trailers read, never changed), or the
 * connection's end.  The bytes pass through unchanged; this only counts them. */
typedef struct brig_http_body {
    int state;
    long long left; /* bytes left of the body or of the current chunk */
    size_t extra;   /* bytes of the current chunk extension or trailer section */
} brig_http_body;

/* The body after head h: none when no_body (a response to HEAD, 1xx, 204, 304),
 * else chunked, Content-Length, or (a response without either) to the end; a
 * request without either has none. */
void brig_http_body_init(brig_http_body *b, const brig_http_head *h, bool no_body);
/* How many leading bytes of data belong to the body (all of them until it ends),
 * *done set when it ends there; -1 when the chunked framing is malformed. */
long brig_http_body_feed(brig_http_body *b, const char *data, size_t len, bool *done);
/* Whether the body ends only with the connection. */
bool brig_http_body_to_close(const brig_http_body *b);

/* Whether the field's name is name (case-insensitive). */
bool brig_http_field_is(const char *buf, const brig_http_field *f, const char *name);

/* The server name (SNI) of the TLS ClientHello record at the start of b (n bytes),
 * lower case, into out: 1, or 0 when b holds none (not a ClientHello, no SNI, a
 * name that is not a plain host name, or cut short). */
int brig_tls_sni_parse(const uint8_t *b, size_t n, char out[256]);

#endif
