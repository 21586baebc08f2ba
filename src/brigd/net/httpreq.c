/*
 * httpreq.c - a strict HTTP/1.x head parser and body framing (see httpreq.h;
 * RFC 9112 section 2-7, the stricter choice wherever the RFC allows a lenient one).
 */
#include "httpreq.h"

#include <string.h>
#include <strings.h>

static bool tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool vchar_or_space(unsigned char c)
{
    return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

bool brig_http_field_is(const char *buf, const brig_http_field *f, const char *name)
{
    return f->name.len == strlen(name) && strncasecmp(buf + f->name.off, name, f->name.len) == 0;
}

/* The end of the line starting at i (the index of its CR), -1 when buf has no
 * CRLF yet, -2 for a bare CR or LF. */
static long line_end(const char *buf, size_t len, size_t i)
{
    for (size_t k = i; k < len; k++) {
        if (buf[k] == '\n')
            return -2;
        if (buf[k] == '\r') {
            if (k + 1 == len)
                return -1;
            return buf[k + 1] == '\n' ? (long)k : -2;
        }
    }
    return -1;
}

static int parse_request_line(const char *buf, size_t end, brig_http_head *h, const char **why)
{
    size_t i = 0;
    while (i < end && tchar((unsigned char)buf[i]))
        i++;
    if (i == 0 || i > 16 || i >= end || buf[i] != ' ')
        return *why = "bad method", -1;
    h->method = (brig_http_span){0, i};
    size_t t = ++i;
    while (i < end && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f)
        i++;
    if (i == t || i >= end || buf[i] != ' ')
        return *why = "bad request target", -1;
    h->target = (brig_http_span){t, i - t};
    i++;
    if (end - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0 ||
        (buf[i + 7] != '0' && buf[i + 7] != '1'))
        return *why = "not HTTP/1.0 or HTTP/1.1", -1;
    h->minor = buf[i + 7] - '0';
    return 0;
}

/* "HTTP/1.x NNN reason": the reason phrase may hold any visible byte or space. */
static int parse_status_line(const char *buf, size_t end, brig_http_head *h, const char **why)
{
    if (end < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ' || buf[12] != ' ')
        return *why = "bad status line", -1;
    h->minor = buf[7] - '0';
    for (size_t i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return *why = "bad status code", -1;
        h->status = h->status * 10 + (buf[i] - '0');
    }
    if (h->status < 100)
        return *why = "bad status code", -1;
    for (size_t i = 13; i < end; i++)
        if (!vchar_or_space((unsigned char)buf[i]))
            return *why = "control character in the status line", -1;
    h->method = (brig_http_span){0, 8};
    h->target = (brig_http_span){9, 3};
    return 0;
}

static int parse_field(const char *buf, size_t i, size_t end, brig_http_field *f, const char **why)
{
    size_t k = i;
    while (k < end && tchar((unsigned char)buf[k]))
        k++;
    if (k == i || k >= end || buf[k] != ':')
        return *why = "bad header field name", -1;
    f->name = (brig_http_span){i, k - i};
    k++;
    while (k < end && (buf[k] == ' ' || buf[k] == '\t'))
        k++;
    size_t v = k, last = k;
    for (; k < end; k++) {
        if (!vchar_or_space((unsigned char)buf[k]))
            return *why = "control character in a header field", -1;
        if (buf[k] != ' ' && buf[k] != '\t')
            last = k + 1;
    }
    f->value = (brig_http_span){v, last - v};
    return 0;
}

static bool digits(const char *s, size_t n, long long *out)
{
    if (n == 0 || n > 15)
        return false;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* Host, Content-Length and Transfer-Encoding: at most one each, consistent. */
static int check_fields(const char *buf, brig_http_head *h, const char **why)
{
    int n_len = 0, n_te = 0;
    for (size_t i = 0; i < h->n_fields; i++) {
        const brig_http_field *f = &h->fields[i];
        if (brig_http_field_is(buf, f, "host")) {
            if (h->host >= 0)
                return *why = "more than one Host", -1;
            h->host = (int)i;
        } else if (brig_http_field_is(buf, f, "content-length")) {
            if (n_len++ || !digits(buf + f->value.off, f->value.len, &h->body_len))
                return *why = "bad Content-Length", -1;
        } else if (brig_http_field_is(buf, f, "transfer-encoding")) {
            if (n_te++ || f->value.len != 7 || strncasecmp(buf + f->value.off, "chunked", 7))
                return *why = "unsupported Transfer-Encoding", -1;
            h->chunked = true;
        }
    }
    if (n_len && n_te)
        return *why = "both Content-Length and Transfer-Encoding", -1;
    if (h->status == 0 && h->minor == 1 && h->host < 0)
        return *why = "no Host", -1;
    return 0;
}

static long parse_head(const char *buf, size_t len, brig_http_head *h, bool response,
                       const char **why)
{
    memset(h, 0, sizeof(*h));
    h->host = -1;
    h->body_len = -1;
    *why = NULL;
    size_t cap = len < BRIG_HTTP_HEAD_MAX ? len : BRIG_HTTP_HEAD_MAX;
    long e = line_end(buf, cap, 0);
    if (e == -2)
        return *why = "bare CR or LF", -1;
    if (e < 0)
        return len >= BRIG_HTTP_HEAD_MAX ? (*why = "request head too long", -1) : 0;
    if ((response ? parse_status_line : parse_request_line)(buf, (size_t)e, h, why) < 0)
        return -1;
    size_t i = (size_t)e + 2;
    for (;;) {
        e = line_end(buf, cap, i);
        if (e == -2)
            return *why = "bare CR or LF", -1;
        if (e < 0)
            return len >= BRIG_HTTP_HEAD_MAX ? (*why = "request head too long", -1) : 0;
        if ((size_t)e == i)
            break; /* the empty line */
        if (buf[i] == ' ' || buf[i] == '\t')
            return *why = "obsolete line folding", -1;
        if (h->n_fields == BRIG_HTTP_HEADERS_MAX)
            return *why = "too many header fields", -1;
        if (parse_field(buf, i, (size_t)e, &h->fields[h->n_fields++], why) < 0)
            return -1;
        i = (size_t)e + 2;
    }
    if (check_fields(buf, h, why) < 0)
        return -1;
    return (long)i + 2;
}

long brig_http_parse(const char *buf, size_t len, brig_http_head *h, const char **why)
{
    return parse_head(buf, len, h, false, why);
}

long brig_http_parse_response(const char *buf, size_t len, brig_http_head *h, const char **why)
{
    return parse_head(buf, len, h, true, why);
}

bool brig_http_has_token(const char *buf, const brig_http_head *h, const char *name,
                         const char *token)
{
    size_t tl = strlen(token);
    for (size_t i = 0; i < h->n_fields; i++) {
        const brig_http_field *f = &h->fields[i];
        if (!brig_http_field_is(buf, f, name))
            continue;
        const char *p = buf + f->value.off, *end = p + f->value.len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
                p++;
            const char *t = p;
            while (p < end && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if ((size_t)(p - t) == tl && strncasecmp(t, token, tl) == 0)
                return true;
        }
    }
    return false;
}

/* ---- body framing ------------------------------------------------------------------- */

enum {
    B_DONE,
    B_LEN,     /* left bytes */
    B_CLOSE,   /* to the connection's end */
    B_SIZE,    /* a chunk's size, hex digits (extra counts them) */
    B_EXT,     /* its extension, to the CR */
    B_SIZE_LF, /* the LF after the size line */
    B_DATA,    /* left bytes of the chunk */
    B_DATA_CR, /* the CRLF after the chunk's data */
    B_DATA_LF,
    B_TRAILER,  /* the start of a trailer line, or the final CRLF */
    B_TLINE,    /* inside a trailer line, to the CR */
    B_TLINE_LF, /* the LF of a trailer line */
    B_END_LF,   /* the LF of the final CRLF */
};

#define CHUNK_LINE_MAX 4096 /* bytes of a chunk extension or of the trailers */

void brig_http_body_init(brig_http_body *b, const brig_http_head *h, bool no_body)
{
    *b = (brig_http_body){B_DONE, 0, 0};
    if (no_body)
        return;
    if (h->chunked)
        b->state = B_SIZE;
    else if (h->body_len > 0)
        *b = (brig_http_body){B_LEN, h->body_len, 0};
    else if (h->body_len < 0 && h->status != 0)
        b->state = B_CLOSE;
}

bool brig_http_body_to_close(const brig_http_body *b)
{
    return b->state == B_CLOSE;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* One byte of chunked framing (not inside a chunk's data): 0, or -1 when bad. */
static int chunk_byte(brig_http_body *b, char c)
{
    switch (b->state) {
    case B_SIZE:
        if (hexval(c) >= 0 && b->extra < 15) {
            b->left = b->left * 16 + hexval(c);
            b->extra++;
            return 0;
        }
        if (b->extra == 0 || (c != ';' && c != '\r'))
            return -1;
        b->state = c == ';' ? B_EXT : B_SIZE_LF;
        b->extra = 0;
        return 0;
    case B_EXT:
        if (c == '\r')
            b->state = B_SIZE_LF;
        else if (c == '\n' || ++b->extra > CHUNK_LINE_MAX)
            return -1;
        return 0;
    case B_SIZE_LF:
        if (c != '\n')
            return -1;
        b->state = b->left ? B_DATA : B_TRAILER;
        b->extra = 0;
        return 0;
    case B_DATA_CR:
        return c == '\r' ? (b->state = B_DATA_LF, 0) : -1;
    case B_DATA_LF:
        return c == '\n' ? (b->state = B_SIZE, 0) : -1;
    case B_TRAILER:
        b->state = c == '\r' ? B_END_LF : B_TLINE;
        return c == '\n' ? -1 : 0;
    case B_TLINE:
        if (c == '\r')
            b->state = B_TLINE_LF;
        return c == '\n' || ++b->extra > CHUNK_LINE_MAX ? -1 : 0;
    case B_TLINE_LF:
        return c == '\n' ? (b->state = B_TRAILER, 0) : -1;
    case B_END_LF:
        return c == '\n' ? (b->state = B_DONE, 0) : -1;
    }
    return -1;
}

long brig_http_body_feed(brig_http_body *b, const char *data, size_t len, bool *done)
{
    size_t i = 0;
    while (i < len && b->state != B_DONE) {
        if (b->state == B_CLOSE) {
            i = len;
        } else if (b->state == B_LEN || b->state == B_DATA) {
            size_t k = (size_t)b->left < len - i ? (size_t)b->left : len - i;
            i += k;
            b->left -= (long long)k;
            if (b->left == 0)
                b->state = b->state == B_LEN ? B_DONE : B_DATA_CR;
        } else if (chunk_byte(b, data[i++]) < 0) {
            return -1;
        }
    }
    *done = b->state == B_DONE;
    return (long)i;
}

/* A ClientHello's fields in order (RFC 8446 section 4.1.2), each length checked
 * against what is there. */
int brig_tls_sni_parse(const uint8_t *b, size_t n, char out[256])
{
    size_t i = 5 + 4 + 2 + 32; /* record, handshake header, version, random */
    if (n < i + 1 || b[0] != 0x16 || b[5] != 0x01)
        return 0;
    i += 1 + b[i]; /* session id */
    if (i + 2 > n)
        return 0;
    i += 2 + ((size_t)b[i] << 8 | b[i + 1]); /* cipher suites */
    if (i + 1 > n)
        return 0;
    i += 1 + b[i]; /* compression methods */
    if (i + 2 > n)
        return 0;
    size_t end = i + 2 + ((size_t)b[i] << 8 | b[i + 1]);
    i += 2;
    if (end > n)
        end = n;
    while (i + 4 <= end) {
        size_t type = (size_t)b[i] << 8 | b[i + 1], len = (size_t)b[i + 2] << 8 | b[i + 3];
        i += 4;
        if (i + len > end)
            return 0;
        if (type == 0 && len >= 5 && b[i + 2] == 0) {
            size_t nl = (size_t)b[i + 3] << 8 | b[i + 4];
            if (nl == 0 || nl > 253 || 5 + nl > len)
                return 0;
            for (size_t k = 0; k < nl; k++) {
                char ch = (char)b[i + 5 + k];
                ch = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
                if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                      ch == '.'))
                    return 0;
                out[k] = ch;
            }
            out[nl] = 0;
            return 1;
        }
        i += len;
    }
    return 0;
}
