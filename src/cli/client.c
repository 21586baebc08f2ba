/*
 * client.c - the blocking calls of client.h: each runs one transfer (xfer.c) on the
 * client's own handle with curl_easy_perform(), so connections are reused from call to
 * call; brig_async (async.c) runs several at once.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

void brig_client_set_progress(brig_client *c, brig_progress_fn fn, void *ctx)
{
    c->progress = fn;
    c->progress_ctx = ctx;
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

/* Runs rq on the client's handle; the 2xx body goes to fn (NULL: x.out.buf).
 * With events set, the body is an NDJSON stream for events.  Returns the 2xx
 * status or -1 with *err set; *body_out (if given) takes the buffered body. */
static int client_perform(brig_client *c, const request *rq, brig_body_fn fn, void *ctx,
                          brig_event_fn events, void *events_ctx, size_t max, brig_buf *body_out,
                          brig_error **err)
{
    curl_easy_reset(c->curl);
    xfer x = {0};
    brig_xfer_setup(&x, c, c->curl, rq, fn, ctx, max);
    if (events != NULL)
        brig_xfer_stream(&x, events, events_ctx);
    CURLcode rc = curl_easy_perform(c->curl);
    int status = brig_xfer_result(&x, rc, err);
    if (status >= 0 && body_out != NULL) {
        *body_out = x.out.buf; /* handed over */
        x.out.buf = (brig_buf){0};
    }
    brig_xfer_dispose(&x);
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
