/*
 * injflow.c - one exchange on a proxied connection (injconn.c sends the request
 * head): the request's body relayed upstream, scanned for placeholders that must
 * not go there; the response relayed back with every injected value masked (same
 * length, so its framing stays right).  Both are framed (httpreq.c's
 * brig_http_body), so the exchange ends where the response ends and the sandbox's
 * connection can carry the next request; an interim response (100 Continue) is
 * relayed as it comes.  Also the scans themselves, and the proxy's own answers.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "injproxy.h"

/* ---- streams scanned for values ------------------------------------------------------ */

void brig_inj_scan_add(brig_inj_scan *s, const char *pat, const char *name)
{
    if (s->n == BRIG_ARRAY_LEN(s->pat) || pat[0] == 0)
        return;
    s->pat[s->n] = pat;
    s->len[s->n] = strlen(pat);
    s->name[s->n++] = name;
    if (s->len[s->n - 1] > s->maxlen)
        s->maxlen = s->len[s->n - 1];
}

size_t brig_inj_scan_feed(brig_inj_scan *s, const char *data, size_t len, bool mask,
                          const char **hit)
{
    if (s->used + len > s->cap) {
        s->cap = s->used + len + 4096;
        s->buf = brig_xrealloc(s->buf, s->cap);
    }
    if (len == 0 && s->used == 0)
        return 0;
    if (len)
        memcpy(s->buf + s->used, data, len);
    s->used += len;
    for (size_t i = 0; i < s->n; i++) {
        char *p = s->buf, *end = s->buf + s->used;
        while ((p = memmem(p, (size_t)(end - p), s->pat[i], s->len[i])) != NULL) {
            if (!mask) {
                *hit = s->name[i];
                return 0;
            }
            char m[128];
            int k = snprintf(m, sizeof(m), "[REDACTED:%s]", s->name[i]);
            for (size_t j = 0; j < s->len[i]; j++)
                p[j] = j < (size_t)k ? m[j] : '*';
            p += s->len[i];
        }
    }
    return s->used > s->maxlen ? s->used - (s->maxlen ? s->maxlen - 1 : 0) : 0;
}

void brig_inj_scan_drop(brig_inj_scan *s, size_t k)
{
    if (k == 0)
        return;
    memmove(s->buf, s->buf + k, s->used - k);
    s->used -= k;
}

void brig_inj_scan_dispose(brig_inj_scan *s)
{
    free(s->buf);
    *s = (brig_inj_scan){0};
}

/* ---- the proxy's own answers ------------------------------------------------------- */

void brig_injflow_answer(brig_inj_conn *c, int status, const char *msg)
{
    json_t *b = json_pack("{ss}", "error", msg);
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    const char *reason = status == 403   ? "Forbidden"
                         : status == 400 ? "Bad Request"
                         : status == 421 ? "Misdirected Request"
                                         : "Bad Gateway";
    char *head = brig_asprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                               "Connection: close\r\nX-Brig-Proxy: refused\r\n"
                               "Content-Length: %zu\r\n\r\n",
                               status, reason, strlen(body));
    (void)brig_injio_write(c, 0, head, strlen(head));
    (void)brig_injio_write(c, 0, body, strlen(body));
    free(head);
    free(body);
}

/* ---- one exchange --------------------------------------------------------------------- */

typedef struct flow {
    brig_inj_conn *c;
    brig_inj_exchange *x;
    brig_http_body req, resp;
    bool req_done, head_done, resp_done;
    bool any_out;  /* some of the response reached the sandbox */
    bool close;    /* the response (or its framing) ends the connection */
    bool close_up; /* the upstream sent bytes past its response: out of step */
    char *rhead;   /* the response head so far */
    size_t rgot;
    char *next; /* where the bytes past the request go (the connection's buffer) */
    size_t *next_len;
} flow;

/* The request's body bytes through the guard to the upstream (all held back too
 * when done); -1 on a placeholder met or a failure. */
static int req_out(flow *f, const char *d, size_t n, bool done)
{
    const char *hit = NULL;
    size_t k = brig_inj_scan_feed(f->x->guard, d, n, false, &hit);
    if (hit)
        return -1;
    if (done)
        k = f->x->guard->used;
    if (k && brig_injio_write(f->c, 1, f->x->guard->buf, k) < 0)
        return -1;
    brig_inj_scan_drop(f->x->guard, k);
    return 0;
}

/* Bytes from the sandbox: the request's body up to its end, the rest (the next
 * request's start) kept in the connection's buffer. */
static int req_in(flow *f, const char *d, size_t n)
{
    bool done = false;
    long k = brig_http_body_feed(&f->req, d, n, &done);
    if (k < 0 || req_out(f, d, (size_t)k, done) < 0)
        return -1;
    if (done) {
        f->req_done = true;
        memmove(f->next, d + k, n - (size_t)k);
        *f->next_len = n - (size_t)k;
    }
    return 0;
}

/* Response bytes to the sandbox, masked. */
static int resp_out(flow *f, const char *d, size_t n)
{
    const char *hit = NULL;
    size_t k = brig_inj_scan_feed(f->x->mask, d, n, true, &hit);
    f->any_out = true;
    if (k && brig_injio_write(f->c, 0, f->x->mask->buf, k) < 0)
        return -1;
    brig_inj_scan_drop(f->x->mask, k);
    return 0;
}

static int resp_body(flow *f, const char *d, size_t n)
{
    bool done = false;
    long k = brig_http_body_feed(&f->resp, d, n, &done);
    if (k < 0 || resp_out(f, d, (size_t)k) < 0)
        return -1;
    if (done) {
        f->resp_done = true;
        f->close_up |= (size_t)k < n;
    }
    return 0;
}

/* A failure before any of the response went out: the sandbox gets a 502. */
static int bad_gateway(flow *f, const char *why)
{
    if (!f->any_out)
        brig_injflow_answer(f->c, 502, why);
    return -1;
}

/* The response's head decides its framing: the rest of what came goes to its body. */
/* A final response head to the sandbox without the upstream's Connection and
 * Keep-Alive (hop by hop: they spoke of the proxy's connection), saying
 * Connection: close when the sandbox's connection ends after it. */
static int final_head_out(flow *f, const brig_http_head *h, size_t head_len)
{
    const char *r = f->rhead;
    const char *eol = memmem(r, head_len, "\r\n", 2);
    brig_buf b = {0};
    brig_buf_append(&b, r, (size_t)(eol - r) + 2);
    for (size_t i = 0; i < h->n_fields; i++) {
        const brig_http_field *x = &h->fields[i];
        if (brig_http_field_is(r, x, "connection") || brig_http_field_is(r, x, "keep-alive"))
            continue;
        brig_buf_printf(&b, "%.*s: %.*s\r\n", (int)x->name.len, r + x->name.off, (int)x->value.len,
                        r + x->value.off);
    }
    brig_buf_printf(&b, "%s\r\n", f->close ? "Connection: close\r\n" : "");
    int rc = resp_out(f, b.data, b.len);
    brig_buf_dispose(&b);
    return rc;
}

/* The response's head decides its framing: the rest of what came goes to its body. */
static int resp_head(flow *f, const brig_http_head *h, size_t head_len)
{
    int st = h->status;
    bool final = st >= 200 || st == 101;
    if (final) {
        brig_http_body_init(&f->resp, h, f->x->no_body || st == 204 || st == 304);
        f->close |= f->x->closing || !f->req_done || h->minor == 0 || st == 101 ||
                    brig_http_has_token(f->rhead, h, "connection", "close") ||
                    brig_http_body_to_close(&f->resp);
    }
    if ((final ? final_head_out(f, h, head_len) : resp_out(f, f->rhead, head_len)) < 0)
        return -1;
    size_t rest = f->rgot - head_len;
    memmove(f->rhead, f->rhead + head_len, rest);
    f->rgot = rest;
    if (!final)
        return 0; /* interim: the final head follows */
    f->head_done = true;
    f->rgot = 0;
    return resp_body(f, f->rhead, rest);
}

/* Bytes from the upstream. */
static int resp_in(flow *f, const char *d, size_t n)
{
    for (;;) {
        if (f->head_done)
            return resp_body(f, d, n);
        size_t take = n < BRIG_HTTP_HEAD_MAX - f->rgot ? n : BRIG_HTTP_HEAD_MAX - f->rgot;
        memcpy(f->rhead + f->rgot, d, take);
        f->rgot += take;
        d += take;
        n -= take;
        brig_http_head h;
        const char *why = NULL;
        long k = brig_http_parse_response(f->rhead, f->rgot, &h, &why);
        if (k == 0)
            return 0; /* (all of d taken: a full buffer without a head is an error) */
        if (k < 0)
            return bad_gateway(f, "the upstream's response is not HTTP/1.1 the proxy can read");
        if (resp_head(f, &h, (size_t)k) < 0)
            return -1;
        if (f->resp_done)
            return n ? (f->close_up = true, 0) : 0;
    }
}

/* One side's turn: 0 to go on, 1 when the exchange ended, -1 when it failed. */
static int turn(flow *f, int side, char *b, size_t size)
{
    ssize_t r = brig_injio_read(f->c, side, b, size);
    if (r == -2)
        return 0;
    if (side == 0)
        return r <= 0 || req_in(f, b, (size_t)r) < 0 ? -1 : 0;
    if (r == 0 && f->head_done && brig_http_body_to_close(&f->resp)) {
        f->close = true;
        return 1;
    }
    if (r <= 0 && f->x->retry_ok && !f->any_out && f->rgot == 0 && !f->head_done) {
        f->x->retry = true; /* a kept connection that closed: the caller tries a new one */
        return -1;
    }
    if (r <= 0)
        return bad_gateway(f, "the upstream closed the connection without an answer");
    if (resp_in(f, b, (size_t)r) < 0)
        return -1;
    return f->resp_done;
}

int brig_injflow_run(brig_inj_conn *c, brig_inj_exchange *x, const brig_http_head *req, char *buf,
                     size_t head_len, size_t *got)
{
    flow f = {.c = c, .x = x, .next = buf, .next_len = got};
    x->retry = false;
    brig_http_body_init(&f.req, req, false);
    size_t have = *got - head_len;
    *got = 0;
    if (req_in(&f, buf + head_len, have) < 0)
        return -1;
    f.rhead = brig_xmalloc(BRIG_HTTP_HEAD_MAX);
    char *b = brig_xmalloc(BRIG_HTTP_HEAD_MAX); /* what is past a request fits buf */
    int rc = 0;
    while (rc == 0) {
        bool pend0 = !f.req_done && brig_injio_pending(c, 0), pend1 = brig_injio_pending(c, 1);
        struct pollfd p[2] = {{.fd = f.req_done ? -1 : c->fd, .events = POLLIN},
                              {.fd = c->up, .events = POLLIN}};
        int k = poll(p, 2, pend0 || pend1 ? 0 : BRIG_INJ_IO_TIMEOUT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 || (k == 0 && !pend0 && !pend1)) {
            rc = bad_gateway(&f, "the upstream did not answer in time");
            break;
        }
        if (!f.req_done && (p[0].revents || pend0))
            rc = turn(&f, 0, b, BRIG_HTTP_HEAD_MAX);
        if (rc == 0 && (p[1].revents || pend1))
            rc = turn(&f, 1, b, BRIG_HTTP_HEAD_MAX);
    }
    /* What is held back is no longer the start of a value: it goes out. */
    if (rc > 0 && x->mask->used && brig_injio_write(c, 0, x->mask->buf, x->mask->used) < 0)
        rc = -1;
    x->keep = rc > 0 && f.req_done && !f.close;
    x->keep_up = x->keep && !f.close_up;
    free(b);
    free(f.rhead);
    return rc > 0 ? 0 : -1;
}
