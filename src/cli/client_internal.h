/*
 * client_internal.h - what the CLI's HTTP client files share, and nothing else includes:
 *
 *   client.c  the blocking calls of client.h (one transfer at a time on the client's handle)
 *   async.c   brig_async: several transfers on a curl multi handle
 *   xfer.c    one transfer: an easy handle set up for a request, its body sink (2xx to the
 *             caller, an error body buffered), its upload source, the NDJSON splitter, and
 *             its outcome as a status or an error
 */
#ifndef BRIG_CLI_CLIENT_INTERNAL_H
#define BRIG_CLI_CLIENT_INTERNAL_H

#include <stdbool.h>

#include <curl/curl.h>

#include "client.h"
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
    brig_progress_fn progress;        /* NULL: no progress reports */
    void *progress_ctx;               /* progress's */
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

/* ---- xfer.c ---- */

/* Sets up handle h to send rq, its 2xx body going to fn (NULL: buffered up to
 * max).  x must stay where it is until brig_xfer_dispose(). */
void brig_xfer_setup(xfer *x, brig_client *c, CURL *h, const request *rq, brig_body_fn fn,
                     void *ctx, size_t max);
/* Makes x a stream: its 2xx body goes through the NDJSON splitter to fn. */
void brig_xfer_stream(xfer *x, brig_event_fn fn, void *ctx);
/* The outcome of a finished transfer (curl's rc): the 2xx status, or -1 with
 * *err set (transport, local I/O, a callback's error or an HTTP error). */
int brig_xfer_result(xfer *x, CURLcode rc, brig_error **err);
/* Frees what x owns (its handle only when it is not the client's). */
void brig_xfer_dispose(xfer *x);

#endif
