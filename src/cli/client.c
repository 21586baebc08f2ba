/*
 * client.c - HTTP + JSON against brigd (see client.h).
 *
 * Every request is an `xfer`: an easy handle set up by xfer_setup() (auth
 * header, timeouts, NOSIGNAL, the interrupt hook) whose response body goes into
 * a sink, and whose outcome xfer_result() turns into a status or an error.
 * Blocking calls run one xfer on the client's own handle with
 * curl_easy_perform(); brig_async runs several on a multi handle.
 *
 * The sink looks at the status code before it takes the first byte: a 2xx body
 * goes where the caller asked (a buffer, a body callback: a file descriptor, an
 * NDJSON splitter), anything else is buffered (up to ERROR_BODY_MAX) to become
 * the error message.  Uploads and downloads stream through curl's own buffer,
 * so memory stays flat whatever the size.
 */
#include "client.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util.h"

#define CONNECT_TIMEOUT_MS 10000
/* A non-2xx body is a short JSON error; keep only this much of it. */
#define ERROR_BODY_MAX (64 * 1024)
/* A 2xx JSON body (exec output included, which brigd bounds) above this is refused. */
#define JSON_BODY_MAX ((size_t)1 << 30)
/* One NDJSON line (an event: one chunk of output, base64 at worst) above this is refused. */
#define NDJSON_LINE_MAX ((size_t)64 << 20)
/* brig_async_post's requests are small (keystrokes, a size): they fail after this. */
#define ASYNC_POST_TIMEOUT_MS 60000L

struct brig_client {
    CURL *curl;                       /* the handle of blocking calls; owned */
    char *base_url;                   /* owned; no trailing '/' */
    char *auth_header;                /* owned "Authorization: Bearer ..."; NULL without key */
    volatile sig_atomic_t *interrupt; /* not owned; NULL: transfers are not interruptible */
};

/* Where a response body goes. */
typedef struct sink {
    CURL *curl;         /* to read the status code once headers are in */
    bool decided;       /* status looked at (first body byte seen) */
    bool ok;            /* decided: the status is 2xx */
    brig_body_fn fn;    /* 2xx body goes here when set, else into buf */
    void *ctx;          /* fn's */
    brig_error *fn_err; /* fn's failure, which aborted the transfer */
    brig_buf buf;       /* 2xx body without fn, or the error body */
    size_t max;         /* a buffered 2xx body above this fails the transfer */
    bool overflow;      /* a buffered 2xx body exceeded max */
} sink;

/* Upload source: the next `left` bytes of fd, or all of it when left < 0. */
typedef struct source {
    brig_client *c; /* for its interrupt flag */
    int fd;
    int64_t left;        /* < 0: until EOF (chunked) */
    brig_eof_fn eof;     /* left < 0: asked at EOF; NULL: complete the body */
    void *eof_ctx;       /* eof's */
    brig_error *eof_err; /* eof's refusal */
    int read_errno;      /* errno of a failed read, 0 if none */
    bool short_read;     /* EOF before `left` reached 0: the file shrank */
} source;

/* An NDJSON splitter: a body callback that hands each complete line, parsed,
 * to fn.  An application/json answer is collected whole instead. */
typedef struct ndjson {
    CURL *curl; /* to read the content type */
    brig_event_fn fn;
    void *ctx;
    bool decided; /* content type looked at */
    bool whole;   /* application/json: one value, parsed at the end */
    brig_buf line;
} ndjson;

/* What a request sends. */
typedef struct request {
    const char *method;
    const char *path;         /* escaped, starts with '/' */
    const char *accept;       /* NULL: application/json */
    const char *content_type; /* of body or upload */
    const void *body;         /* in memory (JSON or raw), or NULL */
    size_t body_len;
    source *upload;  /* streamed raw body, or NULL */
    long timeout_ms; /* 0: none */
    bool long_lived; /* a stream that may idle: TCP keepalive */
} request;

/* One request in flight. */
typedef struct xfer {
    brig_client *c;
    CURL *h;                    /* c->curl for blocking calls, else owned */
    struct curl_slist *headers; /* owned */
    char *url;                  /* owned */
    sink out;
    ndjson nd; /* streams: out.fn is ndjson_feed */
    bool stream;
    source *upload;               /* not owned */
    char errbuf[CURL_ERROR_SIZE]; /* curl's detailed message */
    /* brig_async only */
    void *body_copy; /* owned */
    brig_async_done_fn done;
    void *done_ctx;
    struct xfer *next;
} xfer;

brig_client *brig_client_new(const char *base_url, const char *api_key)
{
    brig_client *c = brig_xcalloc(1, sizeof(*c));
    c->curl = curl_easy_init();
    if (c->curl == NULL) {
        fputs("brig: cannot initialise libcurl\n", stderr);
        abort();
    }
    size_t n = strlen(base_url);
    while (n > 0 && base_url[n - 1] == '/')
        n--;
    c->base_url = brig_xstrndup(base_url, n);
    if (api_key != NULL)
        c->auth_header = brig_asprintf("Authorization: Bearer %s", api_key);
    return c;
}

void brig_client_free(brig_client *c)
{
    if (c == NULL)
        return;
    curl_easy_cleanup(c->curl);
    free(c->base_url);
    if (c->auth_header != NULL) {
        /* it held the secret: do not leave it in freed memory */
        memset(c->auth_header, 0, strlen(c->auth_header));
        free(c->auth_header);
    }
    free(c);
}

const char *brig_client_url(const brig_client *c)
{
    return c->base_url;
}

void brig_client_set_interrupt(brig_client *c, volatile sig_atomic_t *flag)
{
    c->interrupt = flag;
}

static bool interrupted(const brig_client *c)
{
    return c->interrupt != NULL && *c->interrupt != 0;
}

char *brig_client_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = brig_xmalloc(3 * n + 1);
    char *p = out;
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
            *q == '-' || *q == '.' || *q == '_' || *q == '~') {
            *p++ = (char)*q;
        } else {
            *p++ = '%';
            *p++ = hex[*q >> 4];
            *p++ = hex[*q & 15];
        }
    }
    *p = '\0';
    return out;
}

/* curl callbacks */

static size_t sink_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    sink *s = userdata;
    size_t n = size * nmemb;
    if (!s->decided) {
        long status = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
        s->decided = true;
        s->ok = status >= 200 && status < 300;
    }
    if (!s->ok) {
        /* an error body: keep its start, which is all the message needs */
        size_t room = ERROR_BODY_MAX - s->buf.len;
        brig_buf_append(&s->buf, data, n < room ? n : room);
        return n;
    }
    if (s->fn != NULL)
        return s->fn(data, n, s->ctx, &s->fn_err) < 0 ? 0 : n; /* 0: CURLE_WRITE_ERROR */
    if (s->buf.len + n > s->max) {
        s->overflow = true;
        return 0; /* CURLE_WRITE_ERROR */
    }
    brig_buf_append(&s->buf, data, n);
    return n;
}

static size_t source_read(char *buffer, size_t size, size_t nitems, void *userdata)
{
    source *src = userdata;
    size_t want = size * nitems;
    if (src->left >= 0 && (int64_t)want > src->left)
        want = (size_t)src->left;
    if (want == 0)
        return 0;
    for (;;) {
        ssize_t r = read(src->fd, buffer, want);
        if (r < 0 && errno == EINTR) {
            if (interrupted(src->c))
                return CURL_READFUNC_ABORT;
            continue;
        }
        if (r < 0) {
            src->read_errno = errno;
            return CURL_READFUNC_ABORT;
        }
        if (r == 0 && src->left < 0) {
            /* the end of a stream: complete the body, unless eof says no */
            if (src->eof != NULL && src->eof(src->eof_ctx, &src->eof_err) < 0)
                return CURL_READFUNC_ABORT;
            return 0;
        }
        if (r == 0) {
            src->short_read = true;
            return CURL_READFUNC_ABORT;
        }
        if (src->left >= 0)
            src->left -= r;
        return (size_t)r;
    }
}

static int interrupt_check(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                           curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return interrupted(userdata);
}

/* NDJSON */

static int ndjson_line(ndjson *nd, const char *p, size_t n, brig_error **err)
{
    while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 0; /* blank lines are allowed between values */
    json_error_t jerr;
    json_t *v = json_loadb(p, n, JSON_ALLOW_NUL, &jerr);
    if (v == NULL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed event from brigd: %s", jerr.text);
    int rc = nd->fn(v, nd->ctx, err);
    json_decref(v);
    return rc;
}

static int ndjson_feed(const char *data, size_t n, void *ctx, brig_error **err)
{
    ndjson *nd = ctx;
    if (!nd->decided) {
        const char *type = NULL;
        curl_easy_getinfo(nd->curl, CURLINFO_CONTENT_TYPE, &type);
        nd->decided = true;
        nd->whole = type != NULL && strncasecmp(type, "application/json", 16) == 0;
    }
    if (nd->whole) {
        if (nd->line.len + n > JSON_BODY_MAX)
            return brig_error_set(err, BRIG_E_PROTOCOL, 0, "response from brigd is too large");
        brig_buf_append(&nd->line, data, n);
        return 0;
    }
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl != NULL ? (size_t)(nl - data) : n;
        if (nd->line.len + take > NDJSON_LINE_MAX)
            return brig_error_set(err, BRIG_E_PROTOCOL, 0, "event from brigd is too large");
        if (nl != NULL && nd->line.len == 0) {
            /* the common case: a whole line in curl's buffer, no copy */
            if (ndjson_line(nd, data, take, err) < 0)
                return -1;
        } else {
            brig_buf_append(&nd->line, data, take);
            if (nl != NULL) {
                int rc = ndjson_line(nd, nd->line.data, nd->line.len, err);
                nd->line.len = 0;
                if (rc < 0)
                    return -1;
            }
        }
        if (nl == NULL)
            break;
        data += take + 1;
        n -= take + 1;
    }
    return 0;
}

/* The end of a 2xx stream: a last line without '\n', or the whole JSON answer. */
static int ndjson_finish(ndjson *nd, brig_error **err)
{
    int rc = 0;
    if (nd->line.len > 0)
        rc = ndjson_line(nd, nd->line.data, nd->line.len, err);
    nd->line.len = 0;
    return rc;
}

/* transfers */

/* Turns a non-2xx answer into *err: the JSON error's message and code when there
 * is one, else the start of the body. */
static int http_error(long status, const brig_buf *body, brig_error **err)
{
    const char *message = NULL, *code = NULL;
    json_t *root = NULL;
    if (body->len > 0) {
        root = json_loadb(body->data, body->len, 0, NULL);
        json_t *e = json_object_get(root, "error");
        message = json_string_value(json_object_get(e, "message"));
        code = json_string_value(json_object_get(e, "code"));
    }
    _cleanup_free_ char *text = NULL;
    if (message == NULL || *message == '\0') {
        if (root == NULL && body->len > 0) {
            /* not JSON (a proxy page?): its first line, printable bytes only */
            size_t n = 0;
            while (n < body->len && n < 200 && body->data[n] != '\n' && body->data[n] != '\r')
                n++;
            text = brig_xstrndup(body->data, n);
            for (char *p = text; *p; p++)
                if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
                    *p = '?';
        }
        message = text != NULL && *text ? text : "request failed";
    }
    brig_err_kind kind = code != NULL ? brig_error_kind_from_code(code) : BRIG_E_INTERNAL;
    if (code != NULL && *code)
        brig_error_set(err, kind, 0, "%s (HTTP %ld %s)", message, status, code);
    else
        brig_error_set(err, kind, 0, "%s (HTTP %ld)", message, status);
    json_decref(root);
    return -1;
}

/* Sets up handle h to send rq, its 2xx body going to fn (NULL: buffered up to
 * max).  x must stay where it is until xfer_dispose(). */
static void xfer_setup(xfer *x, brig_client *c, CURL *h, const request *rq, brig_body_fn fn,
                       void *ctx, size_t max)
{
    x->c = c;
    x->h = h;
    x->errbuf[0] = '\0';
    x->url = brig_asprintf("%s%s", c->base_url, rq->path);
    x->out = (sink){.curl = h, .fn = fn, .ctx = ctx, .max = max};
    x->upload = rq->upload;

    char accept[96];
    snprintf(accept, sizeof(accept), "Accept: %s", rq->accept ? rq->accept : "application/json");
    struct curl_slist *headers = curl_slist_append(NULL, accept);
    if (c->auth_header != NULL)
        headers = curl_slist_append(headers, c->auth_header);

    curl_easy_setopt(h, CURLOPT_URL, x->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "brig/" BRIG_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->out);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, interrupt_check);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    if (rq->long_lived) {
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 15L);
    }

    if (rq->upload != NULL) {
        char type[96];
        snprintf(type, sizeof(type), "Content-Type: %s",
                 rq->content_type ? rq->content_type : "application/octet-stream");
        headers = curl_slist_append(headers, type);
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, source_read);
        curl_easy_setopt(h, CURLOPT_READDATA, rq->upload);
        /* -1: unknown, sent chunked */
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                         (curl_off_t)(rq->upload->left >= 0 ? rq->upload->left : -1));
    } else if (rq->body != NULL) {
        char type[96];
        snprintf(type, sizeof(type), "Content-Type: %s",
                 rq->content_type ? rq->content_type : "application/json");
        headers = curl_slist_append(headers, type);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
    } else if (strcmp(rq->method, "POST") == 0) {
        /* an empty body with "Content-Length: 0" */
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (headers == NULL) {
        fputs("brig: out of memory\n", stderr);
        abort();
    }
    x->headers = headers;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
}

/* Makes x a stream: its 2xx body goes through the NDJSON splitter to fn. */
static void xfer_stream(xfer *x, brig_event_fn fn, void *ctx)
{
    x->stream = true;
    x->nd = (ndjson){.curl = x->h, .fn = fn, .ctx = ctx};
    x->out.fn = ndjson_feed;
    x->out.ctx = &x->nd;
}

/* The outcome of a finished transfer (curl's rc): the 2xx status, or -1 with
 * *err set (transport, local I/O, a callback's error or an HTTP error). */
static int xfer_result(xfer *x, CURLcode rc, brig_error **err)
{
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    sink *out = &x->out;
    source *up = x->upload;

    if (rc == CURLE_WRITE_ERROR && out->fn_err != NULL) {
        *err = out->fn_err; /* handed on */
        out->fn_err = NULL;
        return -1;
    }
    if (rc == CURLE_WRITE_ERROR && out->overflow)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "response from brigd is too large");
    if (up != NULL && up->read_errno != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, up->read_errno, "cannot read input");
    if (up != NULL && up->short_read)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "input file shrank during the upload");
    if (up != NULL && up->eof_err != NULL) {
        *err = up->eof_err;
        up->eof_err = NULL;
        return -1;
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK || (rc != CURLE_OK && interrupted(x->c)))
        return brig_error_set(err, BRIG_E_INTERNAL, EINTR, "interrupted");
    if (rc != CURLE_OK) {
        /* brigd may answer an upload early (401, 413) and close; curl then fails
         * to send the rest but has the answer: report the answer. */
        if (status >= 300 && (rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR))
            return http_error(status, &out->buf, err);
        const char *why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc);
        const char *url = x->c->base_url;
        if (rc == CURLE_OPERATION_TIMEDOUT && status == 0)
            return brig_error_set(err, BRIG_E_TIMEOUT, 0, "no answer from brigd at %s: %s", url,
                                  why);
        if (status != 0)
            return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                                  "transfer with brigd at %s failed: %s", url, why);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "cannot reach brigd at %s: %s", url, why);
    }
    if (status < 200 || status >= 300)
        return http_error(status, &out->buf, err);
    if (x->stream) {
        /* a whole application/json answer is one value */
        if (ndjson_finish(&x->nd, err) < 0)
            return -1;
    }
    return (int)status;
}

/* Frees what x owns (its handle only when it is not the client's). */
static void xfer_dispose(xfer *x)
{
    curl_slist_free_all(x->headers);
    x->headers = NULL;
    free(x->url);
    x->url = NULL;
    brig_buf_dispose(&x->out.buf);
    brig_error_clear(&x->out.fn_err);
    brig_buf_dispose(&x->nd.line);
    if (x->upload != NULL)
        brig_error_clear(&x->upload->eof_err);
    if (x->h != NULL && x->h != x->c->curl)
        curl_easy_cleanup(x->h);
    x->h = NULL;
    free(x->body_copy);
    x->body_copy = NULL;
}

/* Runs rq on the client's handle; the 2xx body goes to fn (NULL: x.out.buf).
 * With events set, the body is an NDJSON stream for events.  Returns the 2xx
 * status or -1 with *err set; *body_out (if given) takes the buffered body. */
static int client_perform(brig_client *c, const request *rq, brig_body_fn fn, void *ctx,
                          brig_event_fn events, void *events_ctx, size_t max, brig_buf *body_out,
                          brig_error **err)
{
    curl_easy_reset(c->curl);
    xfer x = {0};
    xfer_setup(&x, c, c->curl, rq, fn, ctx, max);
    if (events != NULL)
        xfer_stream(&x, events, events_ctx);
    CURLcode rc = curl_easy_perform(c->curl);
    int status = xfer_result(&x, rc, err);
    if (status >= 0 && body_out != NULL) {
        *body_out = x.out.buf; /* handed over */
        x.out.buf = (brig_buf){0};
    }
    xfer_dispose(&x);
    return status;
}

/* Parses a buffered 2xx body into *out (NULL when empty). */
static int parse_answer(int status, brig_buf *body, json_t **out, brig_error **err)
{
    if (out != NULL && body->len > 0) {
        json_error_t jerr;
        /* JSON_ALLOW_NUL: command output may hold "\u0000" */
        *out = json_loadb(body->data, body->len, JSON_ALLOW_NUL, &jerr);
        if (*out == NULL) {
            brig_buf_dispose(body);
            return brig_error_set(err, BRIG_E_PROTOCOL, 0,
                                  "malformed answer from brigd (HTTP %d): %s", status, jerr.text);
        }
    }
    brig_buf_dispose(body);
    return status;
}

int brig_client_call(brig_client *c, const char *method, const char *path, json_t *body,
                     long timeout_ms, json_t **out, brig_error **err)
{
    if (out != NULL)
        *out = NULL;
    _cleanup_free_ char *json = NULL;
    if (body != NULL) {
        json = json_dumps(body, JSON_COMPACT);
        if (json == NULL)
            return brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot encode the request");
    }
    request rq = {.method = method,
                  .path = path,
                  .body = json,
                  .body_len = json ? strlen(json) : 0,
                  .timeout_ms = timeout_ms};
    brig_buf answer = {0};
    int status = client_perform(c, &rq, NULL, NULL, NULL, NULL, JSON_BODY_MAX, &answer, err);
    if (status < 0)
        return -1;
    return parse_answer(status, &answer, out, err);
}

int brig_client_post_bytes(brig_client *c, const char *path, const void *data, size_t n,
                           long timeout_ms, json_t **out, brig_error **err)
{
    if (out != NULL)
        *out = NULL;
    request rq = {.method = "POST",
                  .path = path,
                  .content_type = "application/octet-stream",
                  .body = n > 0 ? data : "",
                  .body_len = n,
                  .timeout_ms = timeout_ms};
    brig_buf answer = {0};
    int status = client_perform(c, &rq, NULL, NULL, NULL, NULL, JSON_BODY_MAX, &answer, err);
    if (status < 0)
        return -1;
    return parse_answer(status, &answer, out, err);
}

int brig_client_put_file(brig_client *c, const char *path, int fd, int64_t size, brig_error **err)
{
    source src = {.c = c, .fd = fd, .left = size < 0 ? 0 : size};
    request rq = {.method = "PUT", .path = path, .upload = &src};
    /* brigd answers with 204 */
    return client_perform(c, &rq, NULL, NULL, NULL, NULL, ERROR_BODY_MAX, NULL, err);
}

int brig_client_put_stream(brig_client *c, const char *path, const char *content_type, int fd,
                           brig_eof_fn eof, void *eof_ctx, brig_error **err)
{
    source src = {.c = c, .fd = fd, .left = -1, .eof = eof, .eof_ctx = eof_ctx};
    request rq = {.method = "PUT", .path = path, .content_type = content_type, .upload = &src};
    return client_perform(c, &rq, NULL, NULL, NULL, NULL, ERROR_BODY_MAX, NULL, err);
}

static int fd_write(const char *data, size_t n, void *ctx, brig_error **err)
{
    if (brig_write_full(*(int *)ctx, data, n) < 0)
        return brig_error_sys(err, "cannot write output");
    return 0;
}

int brig_client_get_file(brig_client *c, const char *path, int fd, brig_error **err)
{
    return brig_client_get_body(c, path, fd_write, &fd, err);
}

int brig_client_get_body(brig_client *c, const char *path, brig_body_fn fn, void *ctx,
                         brig_error **err)
{
    request rq = {.method = "GET", .path = path, .long_lived = true};
    return client_perform(c, &rq, fn, ctx, NULL, NULL, 0, NULL, err);
}

int brig_client_stream(brig_client *c, const char *method, const char *path, json_t *body,
                       long timeout_ms, brig_event_fn fn, void *ctx, brig_error **err)
{
    _cleanup_free_ char *json = NULL;
    if (body != NULL) {
        json = json_dumps(body, JSON_COMPACT);
        if (json == NULL)
            return brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot encode the request");
    }
    request rq = {.method = method,
                  .path = path,
                  .accept = "application/x-ndjson",
                  .body = json,
                  .body_len = json ? strlen(json) : 0,
                  .timeout_ms = timeout_ms,
                  .long_lived = true};
    return client_perform(c, &rq, NULL, NULL, fn, ctx, 0, NULL, err);
}

/* brig_async */

struct brig_async {
    brig_client *c; /* not owned */
    CURLM *multi;   /* owned */
    xfer *running;  /* owned list */
};

brig_async *brig_async_new(brig_client *c)
{
    brig_async *a = brig_xcalloc(1, sizeof(*a));
    a->c = c;
    a->multi = curl_multi_init();
    if (a->multi == NULL) {
        fputs("brig: cannot initialise libcurl\n", stderr);
        abort();
    }
    return a;
}

void brig_async_free(brig_async *a)
{
    if (a == NULL)
        return;
    while (a->running != NULL) {
        xfer *x = a->running;
        a->running = x->next;
        curl_multi_remove_handle(a->multi, x->h);
        xfer_dispose(x);
        free(x);
    }
    curl_multi_cleanup(a->multi);
    free(a);
}

/* Starts x (set up on its own handle) on the multi handle. */
static void async_start(brig_async *a, xfer *x)
{
    if (curl_multi_add_handle(a->multi, x->h) != CURLM_OK) {
        fputs("brig: cannot start a transfer\n", stderr);
        abort();
    }
    x->next = a->running;
    a->running = x;
}

static xfer *async_xfer(brig_async *a, const request *rq, brig_async_done_fn done, void *ctx)
{
    xfer *x = brig_xcalloc(1, sizeof(*x));
    CURL *h = curl_easy_init();
    if (h == NULL) {
        fputs("brig: cannot initialise libcurl\n", stderr);
        abort();
    }
    xfer_setup(x, a->c, h, rq, NULL, NULL, ERROR_BODY_MAX);
    x->done = done;
    x->done_ctx = ctx;
    return x;
}

void brig_async_post(brig_async *a, const char *path, const char *content_type, const void *data,
                     size_t n, brig_async_done_fn done, void *ctx)
{
    void *copy = brig_xmalloc(n > 0 ? n : 1);
    if (n > 0)
        memcpy(copy, data, n);
    request rq = {.method = "POST",
                  .path = path,
                  .content_type = content_type,
                  .body = copy,
                  .body_len = n,
                  .timeout_ms = ASYNC_POST_TIMEOUT_MS};
    xfer *x = async_xfer(a, &rq, done, ctx);
    x->body_copy = copy;
    async_start(a, x);
}

void brig_async_stream(brig_async *a, const char *path, brig_event_fn fn, void *fn_ctx,
                       brig_async_done_fn done, void *ctx)
{
    request rq = {
        .method = "GET", .path = path, .accept = "application/x-ndjson", .long_lived = true};
    xfer *x = async_xfer(a, &rq, done, ctx);
    xfer_stream(x, fn, fn_ctx);
    async_start(a, x);
}

/* Lets curl work, then finishes the transfers that are done. */
static int async_progress(brig_async *a, brig_error **err)
{
    int still = 0;
    CURLMcode mc = curl_multi_perform(a->multi, &still);
    if (mc != CURLM_OK)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "curl: %s", curl_multi_strerror(mc));
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(a->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        xfer **pp = &a->running;
        while (*pp != NULL && (*pp)->h != msg->easy_handle)
            pp = &(*pp)->next;
        if (*pp == NULL)
            continue;
        xfer *x = *pp;
        *pp = x->next;
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(a->multi, x->h);
        brig_error *xerr = NULL;
        int status = xfer_result(x, rc, &xerr);
        brig_async_done_fn done = x->done;
        void *ctx = x->done_ctx;
        xfer_dispose(x);
        free(x);
        if (done != NULL)
            done(status, xerr, ctx);
        brig_error_clear(&xerr);
    }
    int n = 0;
    for (xfer *x = a->running; x != NULL; x = x->next)
        n++;
    return n;
}

int brig_async_poll(brig_async *a, struct pollfd *fds, unsigned nfds, int timeout_ms,
                    brig_error **err)
{
    if (async_progress(a, err) < 0)
        return -1;
    struct curl_waitfd waits[8];
    if (nfds > BRIG_ARRAY_LEN(waits))
        nfds = BRIG_ARRAY_LEN(waits);
    for (unsigned i = 0; i < nfds; i++) {
        waits[i] = (struct curl_waitfd){.fd = fds[i].fd, .events = 0, .revents = 0};
        if (fds[i].events & POLLIN)
            waits[i].events |= CURL_WAIT_POLLIN;
        if (fds[i].events & POLLOUT)
            waits[i].events |= CURL_WAIT_POLLOUT;
        fds[i].revents = 0;
    }
    /* -1 ("forever") is a long wait: curl's own timers still wake it */
    CURLMcode mc =
        curl_multi_poll(a->multi, waits, nfds, timeout_ms < 0 ? 60000 : timeout_ms, NULL);
    if (mc != CURLM_OK)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "curl: %s", curl_multi_strerror(mc));
    /* curl reports POLLIN/POLLOUT/POLLPRI only (not POLLHUP, a pipe's EOF): ask
     * the kernel for the whole truth */
    if (nfds > 0 && poll(fds, nfds, 0) < 0 && errno != EINTR)
        return brig_error_sys(err, "poll");
    return async_progress(a, err);
}
