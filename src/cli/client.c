/*
 * client.c - HTTP + JSON against brigd (see client.h).
 *
 * Every request goes through client_perform(), which resets the one easy handle,
 * sets the common options (auth header, timeouts, NOSIGNAL, the interrupt hook)
 * and routes the response body into a sink.  The sink looks at the status code
 * before it stores the first byte: a 2xx body goes where the caller asked (a
 * buffer, or a file descriptor for downloads), anything else is buffered (up to
 * ERROR_BODY_MAX) to become the error message.  Uploads and downloads stream
 * through curl's own buffer, so memory stays flat whatever the file size.
 */
#include "client.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util.h"

#define CONNECT_TIMEOUT_MS 10000
/* A non-2xx body is a short JSON error; keep only this much of it. */
#define ERROR_BODY_MAX (64 * 1024)
/* A 2xx JSON body (exec output included, which brigd bounds) above this is refused. */
#define JSON_BODY_MAX ((size_t)1 << 30)

struct brig_client {
    CURL *curl;                       /* the one easy handle; owned */
    char *base_url;                   /* owned; no trailing '/' */
    char *auth_header;                /* owned "Authorization: Bearer ..."; NULL without key */
    volatile sig_atomic_t *interrupt; /* not owned; NULL: transfers are not interruptible */
    char errbuf[CURL_ERROR_SIZE];     /* curl's detailed message for the last failure */
};

/* Where a response body goes. */
typedef struct sink {
    CURL *curl;      /* to read the status code once headers are in */
    int fd;          /* 2xx body goes here when >= 0, else into buf */
    bool decided;    /* status looked at (first body byte seen) */
    bool ok;         /* decided: the status is 2xx */
    brig_buf buf;    /* 2xx body without fd, or the error body */
    size_t max;      /* a buffered 2xx body above this fails the transfer */
    bool overflow;   /* a buffered 2xx body exceeded max */
    int write_errno; /* errno of a failed write to fd, 0 if none */
} sink;

/* Upload source: the next `left` bytes of fd. */
typedef struct source {
    int fd;
    int64_t left;
    int read_errno;  /* errno of a failed read, 0 if none */
    bool short_read; /* EOF before `left` reached 0: the file shrank */
} source;

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
    if (s->fd >= 0) {
        if (brig_write_full(s->fd, data, n) < 0) {
            s->write_errno = errno;
            return 0; /* CURLE_WRITE_ERROR */
        }
        return n;
    }
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
    if ((int64_t)want > src->left)
        want = (size_t)src->left;
    if (want == 0)
        return 0;
    for (;;) {
        ssize_t r = read(src->fd, buffer, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            src->read_errno = errno;
            return CURL_READFUNC_ABORT;
        }
        if (r == 0) {
            src->short_read = true;
            return CURL_READFUNC_ABORT;
        }
        src->left -= r;
        return (size_t)r;
    }
}

static int interrupt_check(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                           curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    brig_client *c = userdata;
    return c->interrupt != NULL && *c->interrupt != 0;
}

/* request */

typedef struct request {
    const char *method;
    const char *path; /* escaped, starts with '/' */
    const char *json; /* JSON body, or NULL */
    source *upload;   /* raw PUT body, or NULL */
    long timeout_ms;  /* 0: none */
} request;

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

/* Performs rq, sending the body of a 2xx answer into out (see sink).  Returns
 * the 2xx status or -1 with *err set (transport, local I/O or HTTP error). */
static int client_perform(brig_client *c, const request *rq, sink *out, brig_error **err)
{
    CURL *h = c->curl;
    curl_easy_reset(h);
    c->errbuf[0] = '\0';

    _cleanup_free_ char *url = brig_asprintf("%s%s", c->base_url, rq->path);
    struct curl_slist *headers = NULL;
    headers = curl_slist_append(headers, "Accept: application/json");
    if (c->auth_header != NULL)
        headers = curl_slist_append(headers, c->auth_header);

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "brig/" BRIG_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, interrupt_check);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);

    if (rq->upload != NULL) {
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, source_read);
        curl_easy_setopt(h, CURLOPT_READDATA, rq->upload);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->upload->left);
    } else if (rq->json != NULL) {
        headers = curl_slist_append(headers, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->json);
    } else if (strcmp(rq->method, "POST") == 0) {
        /* an empty body with "Content-Length: 0" */
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (headers == NULL) {
        fputs("brig: out of memory\n", stderr);
        abort();
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

    out->curl = h;
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);

    if (rc == CURLE_WRITE_ERROR && out->write_errno != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, out->write_errno, "cannot write output");
    if (rc == CURLE_WRITE_ERROR && out->overflow)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "response from brigd is too large");
    if (rq->upload != NULL && rq->upload->read_errno != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, rq->upload->read_errno, "cannot read input");
    if (rq->upload != NULL && rq->upload->short_read)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "input file shrank during the upload");
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        return brig_error_set(err, BRIG_E_INTERNAL, EINTR, "interrupted");
    if (rc != CURLE_OK) {
        /* brigd may answer an upload early (401, 413) and close; curl then fails
         * to send the rest but has the answer: report the answer. */
        if (status >= 300 && (rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR))
            return http_error(status, &out->buf, err);
        const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
        if (rc == CURLE_OPERATION_TIMEDOUT && status == 0)
            return brig_error_set(err, BRIG_E_TIMEOUT, 0, "no answer from brigd at %s: %s",
                                  c->base_url, why);
        if (status != 0)
            return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                                  "transfer with brigd at %s failed: %s", c->base_url, why);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "cannot reach brigd at %s: %s",
                              c->base_url, why);
    }
    if (status < 200 || status >= 300)
        return http_error(status, &out->buf, err);
    return (int)status;
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
    request rq = {.method = method, .path = path, .json = json, .timeout_ms = timeout_ms};
    sink s = {.fd = -1, .max = JSON_BODY_MAX};
    int status = client_perform(c, &rq, &s, err);
    if (status < 0) {
        brig_buf_dispose(&s.buf);
        return -1;
    }
    if (out != NULL && s.buf.len > 0) {
        json_error_t jerr;
        /* JSON_ALLOW_NUL: command output may hold "\u0000" */
        *out = json_loadb(s.buf.data, s.buf.len, JSON_ALLOW_NUL, &jerr);
        if (*out == NULL) {
            brig_buf_dispose(&s.buf);
            return brig_error_set(err, BRIG_E_PROTOCOL, 0,
                                  "malformed answer from brigd (HTTP %d): %s", status, jerr.text);
        }
    }
    brig_buf_dispose(&s.buf);
    return status;
}

int brig_client_put_file(brig_client *c, const char *path, int fd, int64_t size, brig_error **err)
{
    source src = {.fd = fd, .left = size};
    request rq = {.method = "PUT", .path = path, .upload = &src};
    sink s = {.fd = -1, .max = ERROR_BODY_MAX}; /* brigd answers with 204 */
    int status = client_perform(c, &rq, &s, err);
    brig_buf_dispose(&s.buf);
    return status;
}

int brig_client_get_file(brig_client *c, const char *path, int fd, brig_error **err)
{
    request rq = {.method = "GET", .path = path};
    sink s = {.fd = fd};
    int status = client_perform(c, &rq, &s, err);
    brig_buf_dispose(&s.buf);
    return status;
}
