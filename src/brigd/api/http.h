/*
 * http.h - the REST API's HTTP layer on libmicrohttpd (thread per connection, so
 * a handler may block on a sandbox for as long as its command runs).
 *
 * A request passes: route match (404/405) -> authentication (401) -> the
 * account's requests in flight (429) -> body (JSON routes: buffered up to
 * BRIG_HTTP_BODY_MAX, 413 beyond, within body_timeout; streaming routes: handed
 * over chunk by chunk) -> handler -> response.  Handlers reply with
 * brig_http_json / brig_http_error / brig_http_empty or set their own MHD
 * response.  Errors are always {"error":{"code","message"}}.
 *
 * Connections are a shared pool (max_connections, one thread each).  One that has
 * not authenticated a request (it waits for a request's head, or is answered
 * without a key) is "waiting": it has header_timeout from its start, or from the
 * end of its previous request, to its request's end; at most
 * max_waiting_per_address of them come from one address (an IPv6 /64), at most
 * max_waiting_connections from all, and when those are taken a new connection
 * pushes out the oldest.  So no one without a key holds more than
 * max_waiting_connections of the pool, and no one holds it for long; the rest is
 * for authenticated requests, of which one account has at most
 * max_requests_per_account in flight.
 */
#ifndef BRIG_HTTP_H
#define BRIG_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "error.h"
#include "server.h"
#include "account/auth.h"
#include "store/store.h"
#include "util.h"

#define BRIG_HTTP_BODY_MAX     (1u << 20)
#define BRIG_HTTP_IDLE_TIMEOUT 120u /* seconds a connection may stay silent otherwise */

typedef struct brig_req brig_req;

enum {
    ROUTE_PUBLIC = 1 << 0,       /* no API key needed */
    ROUTE_STREAM_BODY = 1 << 1,  /* body handed to on_body in chunks, not buffered */
    ROUTE_ADMIN = 1 << 2,        /* admin-scoped keys only (an account's administrator) */
    ROUTE_OPERATOR = 1 << 3,     /* the operator key only (accounts, credits) */
    ROUTE_AGENT = 1 << 4,        /* talks to the agent of sandbox params[0]: a failure may be its
                                    end (its errors pass brig_http_start's explain) */
    ROUTE_OPERATOR_TOO = 1 << 5, /* the operator key may call it as well (the audit timeline) */
    ROUTE_E2B = 1 << 6,          /* E2B's API (docs/e2b.md): the key in X-API-KEY, errors as
                                    {"code":<status>,"message"} */
    ROUTE_CONNECT = 1 << 7,      /* E2B's envd RPCs: errors as {"code":"<Connect code>",...} */
};

typedef struct brig_route {
    const char *method;
    const char *pattern; /* "/v1/sandboxes/{id}/exec": {name} matches one segment */
    void (*handle)(brig_req *r);
    int flags;
    /* Streaming routes: called before the body (may reply, ending the request)
     * and for every chunk of it; handle() runs after the last chunk. */
    void (*on_begin)(brig_req *r);
    void (*on_body)(brig_req *r, const char *data, size_t n);
} brig_route;

struct brig_req {
    brigd *d;
    struct MHD_Connection *conn;
    const brig_route *route;
    const char *method;
    char params[2][96]; /* values of the pattern's {…} segments, in order */
    brig_caller caller; /* the authenticated caller */
    brig_buf body;      /* buffered body (JSON routes) */
    bool too_large;     /* body exceeded BRIG_HTTP_BODY_MAX */
    struct MHD_Response *resp;
    unsigned status;
    bool replied;                 /* the response was queued */
    int64_t begun;                /* mono ms: its head came */
    struct http_conn *conn_state; /* brigd's record of the connection (http.c) */
    bool holds_slot;              /* counts against its account's requests in flight */
    int64_t body_deadline;        /* mono ms: a buffered body must be in by then; 0: none */
    /* streaming routes' own state */
    void *stream;
    void (*stream_free)(brig_req *r);
};

/* Called with the error of a ROUTE_AGENT route before it is answered: it may replace
 * *err with a better one (the handlers': the sandbox ended while the request ran). */
typedef void (*brig_http_explain_fn)(brig_req *r, brig_error **err);

/* Starts the API server on cfg.listen; sets d->http and d->base_url. */
int brig_http_start(brigd *d, const brig_route *routes, brig_http_explain_fn explain,
                    brig_error **err);
void brig_http_stop(brigd *d);

/* Replies (each takes ownership of what it is given). */
void brig_http_json(brig_req *r, unsigned status, json_t *body);
void brig_http_error(brig_req *r, brig_error *err);
/* err's answer when err is set (body dropped), else status with body (taken). */
void brig_http_answer(brig_req *r, brig_error *err, unsigned status, json_t *body);
void brig_http_fail(brig_req *r, brig_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void brig_http_empty(brig_req *r, unsigned status);
void brig_http_response(brig_req *r, unsigned status, struct MHD_Response *resp);

/* A route that authenticates by itself (ROUTE_PUBLIC, in its on_begin: E2B's envd, by a
 * sandbox's token) has set r->caller: the request now counts as authenticated (its connection
 * stops waiting, it takes one of its account's requests in flight).  Replies 429 and returns
 * false when the account has none left. */
bool brig_http_admit(brig_req *r);

/* Parses "HOST:PORT" / "[V6]:PORT" into a socket address. */
int brig_http_parse_listen(const char *listen, struct sockaddr_storage *ss, brig_error **err);

/* The request's query argument, or NULL. */
const char *brig_http_query(brig_req *r, const char *name);

/* Parses the buffered body as a JSON object ({} when empty). */
int brig_http_body_json(brig_req *r, json_t **out, brig_error **err);

#endif
