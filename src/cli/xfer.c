/*
 * xfer.c - one HTTP transfer against brigd over libcurl (client_internal.h).
 *
 * A transfer is an easy handle set up by brig_xfer_setup() (auth header, timeouts,
 * NOSIGNAL, the interrupt hook) whose response body goes into a sink, and whose outcome
 * brig_xfer_result() turns into a status or an error.
 *
 * The sink looks at the status code before it takes the first byte: a 2xx body
 * goes where the caller asked (a buffer, a body callback: a file descriptor, an
 * NDJSON splitter), anything else is buffered (up to ERROR_BODY_MAX) to become
 * the error message.  Uploads and downloads stream through curl's own buffer,
 * so memory stays flat whatever the size.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static bool interrupted(const brig_client *c)
{
    return c->interrupt != NULL && *c->interrupt != 0;
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

/* curl's progress callback: reports to the client's progress hook (not the bytes of an error
 * answer), aborts when interrupted. */
static int interrupt_check(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                           curl_off_t ulnow)
{
    xfer *x = userdata;
    if (x->c->progress != NULL && (!x->out.decided || x->out.ok))
        x->c->progress(dlnow, dltotal, ulnow, ultotal, x->c->progress_ctx);
    return interrupted(x->c);
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

void brig_xfer_setup(xfer *x, brig_client *c, CURL *h, const request *rq, brig_body_fn fn,
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
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
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

void brig_xfer_stream(xfer *x, brig_event_fn fn, void *ctx)
{
    x->stream = true;
    x->nd = (ndjson){.curl = x->h, .fn = fn, .ctx = ctx};
    x->out.fn = ndjson_feed;
    x->out.ctx = &x->nd;
}

int brig_xfer_result(xfer *x, CURLcode rc, brig_error **err)
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

void brig_xfer_dispose(xfer *x)
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
