/*
 * http.c - libmicrohttpd glue: listening, routing, auth, bodies, replies, and the
 * guard of the connection pool (see http.h).
 *
 * The guard's record of a connection (http_conn) lives from MHD's "started" to its
 * "closed" notification, both of which MHD makes on its listening thread, the
 * second before it closes the socket: so while a record is in our list under
 * hc->lock its fd is that connection's, and shutdown(2) on it from another thread
 * ends that connection only (its thread reads EOF and MHD closes it).
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "account/auth.h"
#include "log.h"
#include "account/quota.h"
#include "core/metrics.h"

#define ADDR_MAX 56 /* an address as text, with "/64" */

/* brigd's record of one connection (MHD's socket context). */
typedef struct http_conn {
    struct http_conn *prev, *next; /* in the waiting list, oldest first, while listed */
    int fd;
    char addr[ADDR_MAX]; /* the client's address; IPv6: its /64 */
    int64_t since;       /* mono ms: when it began waiting for a request */
    bool listed;         /* waiting: in the list, counted against the bounds */
    bool pushed_out;     /* shut down by the guard */
} http_conn;

typedef struct http_ctx {
    brigd *d;
    const brig_route *routes;
    brig_http_explain_fn explain; /* a ROUTE_AGENT route's errors pass it (may be NULL) */
    pthread_mutex_t lock;         /* guards the list and every record's list fields */
    http_conn *head, *tail;
    int64_t n_waiting;
    brig_quota *requests; /* authenticated requests in flight, per account */
    pthread_t sweeper;    /* ends waiting connections at their deadline */
    pthread_cond_t wake;  /* the list got a first member; stop */
    bool stop, sweeper_running;
} http_ctx;

static http_ctx the_ctx;

/* Matches path against pattern; fills params.  1 on match. */
static int match(const char *pattern, const char *path, char params[2][96])
{
    int np = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p == '{') {
            const char *pe = strchr(p, '}');
            size_t len = strcspn(s, "/");
            if (pe == NULL || len == 0 || len >= sizeof(params[0]) || np >= 2)
                return 0;
            memcpy(params[np], s, len);
            params[np++][len] = '\0';
            p = pe + 1;
            s += len;
            continue;
        }
        if (*p != *s)
            return 0;
        p++;
        s++;
    }
    return *p == '\0' && *s == '\0';
}

static void add_common_headers(struct MHD_Response *resp)
{
    /* API answers are never cached; the dashboard's files (ui.c) say how they may be. */
    if (MHD_get_response_header(resp, "Cache-Control") == NULL)
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

void brig_http_response(brig_req *r, unsigned status, struct MHD_Response *resp)
{
    if (r->resp)
        MHD_destroy_response(r->resp);
    add_common_headers(resp);
    r->resp = resp;
    r->status = status;
}

void brig_http_answer(brig_req *r, brig_error *err, unsigned status, json_t *body)
{
    if (err) {
        json_decref(body);
        brig_http_error(r, err);
    } else {
        brig_http_json(r, status, body);
    }
}

void brig_http_json(brig_req *r, unsigned status, json_t *body)
{
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (s == NULL)
        s = brig_xstrdup("{\"error\":{\"code\":\"internal\",\"message\":\"cannot encode JSON\"}}");
    size_t n = strlen(s);
    s = brig_xrealloc(s, n + 2);
    s[n++] = '\n';
    s[n] = '\0';
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    brig_http_response(r, status, resp);
}

void brig_http_error(brig_req *r, brig_error *err)
{
    if (r->route && (r->route->flags & ROUTE_AGENT) && the_ctx.explain)
        the_ctx.explain(r, &err);
    unsigned status = (unsigned)brig_error_http_status(err->kind);
    if (status >= 500)
        brig_warn("%s %s: %u %s", r->method, r->route ? r->route->pattern : "?", status, err->msg);
    /* Messages may name paths that are not UTF-8: shown with U+FFFD. */
    char *msg = brig_utf8_display(err->msg, strlen(err->msg));
    int flags = r->route ? r->route->flags : 0;
    json_t *body;
    if (flags & ROUTE_E2B) /* E2B's SDK reads the status as a number in the body */
        body = json_pack("{s:i, s:s}", "code", (int)status, "message", msg);
    else if (flags & ROUTE_CONNECT)
        body = json_pack("{s:s, s:s}", "code", brig_connect_code(status), "message", msg);
    else
        body = json_pack("{s:{s:s, s:s}}", "error", "code", brig_error_code(err->kind), "message",
                         msg);
    free(msg);
    brig_http_json(r, status, body);
    if (status == 401)
        MHD_add_response_header(r->resp, "WWW-Authenticate", "Bearer");
    brig_error_clear(&err);
}

void brig_http_fail(brig_req *r, brig_err_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = brig_vasprintf(fmt, ap);
    va_end(ap);
    brig_error *err = NULL;
    brig_error_set(&err, kind, 0, "%s", msg);
    free(msg);
    brig_http_error(r, err);
}

void brig_http_empty(brig_req *r, unsigned status)
{
    brig_http_response(r, status, MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
}

const char *brig_http_query(brig_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

int brig_http_body_json(brig_req *r, json_t **out, brig_error **err)
{
    if (r->body.len == 0) {
        *out = json_object();
        return 0;
    }
    json_error_t jerr;
    json_t *j = json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0, "request body is not valid JSON: %s",
                              jerr.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return brig_error_set(err, BRIG_E_INVALID, 0, "request body must be a JSON object");
    }
    *out = j;
    return 0;
}

/* Counts the answer by route pattern (never the raw path: ids would make a series each)
 * and status; a method no route has is "other". */
static void count(brig_req *r)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};
    const char *method = "other", *route = r->route ? r->route->pattern : "unmatched";
    for (size_t i = 0; i < BRIG_ARRAY_LEN(methods); i++)
        if (strcmp(r->method, methods[i]) == 0)
            method = methods[i];
    char status[8], labels[256];
    snprintf(status, sizeof(status), "%u", r->status);
    brig_metric_add(BRIG_M_HTTP_REQUESTS,
                    brig_metrics_labels(labels, sizeof(labels), "method", method, "route", route,
                                        "status", status, NULL),
                    1);
    brig_metric_observe(
        BRIG_M_HTTP_SECONDS,
        brig_metrics_labels(labels, sizeof(labels), "method", method, "route", route, NULL),
        (double)(brig_now_mono_ms() - r->begun) / 1000);
}

static enum MHD_Result queue(brig_req *r)
{
    r->replied = true;
    count(r);
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ret;
}

/* ---- the connection guard ------------------------------------------------------ */

static void addr_text(const struct sockaddr *sa, char out[ADDR_MAX])
{
    snprintf(out, ADDR_MAX, "?");
    if (sa == NULL)
        return;
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, ADDR_MAX);
    } else if (sa->sa_family == AF_INET6) {
        struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a)) {
            inet_ntop(AF_INET, &a.s6_addr[12], out, ADDR_MAX);
            return;
        }
        /* One IPv6 host has a /64 to itself: counting its addresses one by one
         * would not bound it. */
        memset(&a.s6_addr[8], 0, 8);
        char t[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, &a, t, sizeof(t));
        snprintf(out, ADDR_MAX, "%s/64", t);
    }
}

static void unlist(http_ctx *hc, http_conn *c)
{
    if (!c->listed)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        hc->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        hc->tail = c->prev;
    c->prev = c->next = NULL;
    c->listed = false;
    hc->n_waiting--;
}

static void list_append(http_ctx *hc, http_conn *c)
{
    c->since = brig_now_mono_ms();
    c->prev = hc->tail;
    c->next = NULL;
    if (hc->tail)
        hc->tail->next = c;
    else
        hc->head = c;
    hc->tail = c;
    c->listed = true;
    hc->n_waiting++;
    if (hc->head == c)
        pthread_cond_signal(&hc->wake); /* the sweeper's next deadline */
}

/* Ends a waiting connection (caller holds hc->lock). */
static void push_out(http_ctx *hc, http_conn *c)
{
    unlist(hc, c);
    c->pushed_out = true;
    shutdown(c->fd, SHUT_RDWR);
}

static int64_t waiting_from(http_ctx *hc, const char *addr)
{
    int64_t n = 0;
    for (http_conn *c = hc->head; c; c = c->next)
        n += strcmp(c->addr, addr) == 0;
    return n;
}

/* MHD's accept policy (listening thread): the per-address bound refuses; the bound
 * for all pushes out the oldest waiting connection to make room. */
static enum MHD_Result accept_cb(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    http_ctx *hc = cls;
    char a[ADDR_MAX];
    addr_text(addr, a);
    char oldest[ADDR_MAX] = "";
    pthread_mutex_lock(&hc->lock);
    int64_t mine = waiting_from(hc, a), all = hc->n_waiting;
    bool ok = mine < hc->d->cfg.max_waiting_per_address;
    if (ok && all >= hc->d->cfg.max_waiting_connections && hc->head) {
        memcpy(oldest, hc->head->addr, sizeof(oldest));
        push_out(hc, hc->head);
    }
    pthread_mutex_unlock(&hc->lock);
    /* Under the rate of the library's complaints: an attack makes many of these. */
    if (!ok)
        brig_log_keyed("http", BRIG_LOG_WARN,
                       "http: refused a connection from %s: %lld of its connections wait for a "
                       "request (max_waiting_per_address)",
                       a, (long long)mine);
    else if (*oldest)
        brig_log_keyed("http", BRIG_LOG_WARN,
                       "http: %lld connections wait for a request (max_waiting_connections): "
                       "closed the oldest, from %s, for one from %s",
                       (long long)all, oldest, a);
    return ok ? MHD_YES : MHD_NO;
}

static void notify_cb(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                      enum MHD_ConnectionNotificationCode code)
{
    http_ctx *hc = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        http_conn *c = brig_xcalloc(1, sizeof(*c));
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ca =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        c->fd = fd ? fd->connect_fd : -1;
        addr_text(ca ? ca->client_addr : NULL, c->addr);
        pthread_mutex_lock(&hc->lock);
        list_append(hc, c);
        pthread_mutex_unlock(&hc->lock);
        *socket_ctx = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_ctx) {
        http_conn *c = *socket_ctx;
        pthread_mutex_lock(&hc->lock);
        unlist(hc, c);
        pthread_mutex_unlock(&hc->lock);
        free(c);
        *socket_ctx = NULL;
    }
}

/* Ends waiting connections at their deadline: the oldest is always first. */
static void *sweeper_main(void *arg)
{
    http_ctx *hc = arg;
    int64_t timeout = hc->d->cfg.header_timeout_ms;
    pthread_mutex_lock(&hc->lock);
    while (!hc->stop) {
        int64_t now = brig_now_mono_ms(), closed = 0;
        while (hc->head && hc->head->since + timeout <= now) {
            push_out(hc, hc->head);
            closed++;
        }
        if (closed)
            brig_log_keyed("http", BRIG_LOG_INFO,
                           "http: closed %lld connections that sent no request with a key "
                           "within %lld s (header_timeout)",
                           (long long)closed, (long long)(timeout / 1000));
        if (hc->head) {
            struct timespec ts = brig_mono_after(hc->head->since + timeout - now);
            pthread_cond_timedwait(&hc->wake, &hc->lock, &ts);
        } else {
            pthread_cond_wait(&hc->wake, &hc->lock);
        }
    }
    pthread_mutex_unlock(&hc->lock);
    return NULL;
}

/* A request authenticated: its connection stops waiting, and it takes one of its
 * account's requests in flight (replies 429 and returns false when none is left). */
bool brig_http_admit(brig_req *r)
{
    http_ctx *hc = &the_ctx;
    if (r->conn_state) {
        pthread_mutex_lock(&hc->lock);
        unlist(hc, r->conn_state);
        pthread_mutex_unlock(&hc->lock);
    }
    const char *acct = r->caller.account_id;
    if (brig_quota_take(hc->requests, acct, 1) != BRIG_QUOTA_OK) {
        brig_http_fail(r, BRIG_E_LIMIT,
                       "this account has %lld requests in flight, its most "
                       "(max_requests_per_account): retry when some have ended",
                       (long long)r->d->cfg.max_requests_per_account);
        return false;
    }
    r->holds_slot = true;
    /* Records made for this request count against its sandbox's (or account's) log rate. */
    char key[128];
    if (strncmp(r->route->pattern, "/v1/sandboxes/{id}", 18) == 0)
        snprintf(key, sizeof(key), "sandbox %s", r->params[0]);
    else
        snprintf(key, sizeof(key), "account %s", *acct ? acct : "operator");
    brig_log_set_key(key);
    return true;
}

/* First call for a request: route, authenticate. Replies on failure. */
static void begin(brig_req *r, const brig_route *routes, const char *url)
{
    const brig_route *path_match = NULL;
    for (const brig_route *rt = routes; rt->method; rt++) {
        char params[2][96];
        if (!match(rt->pattern, url, params))
            continue;
        path_match = rt;
        if (strcmp(rt->method, r->method) == 0) {
            r->route = rt;
            memcpy(r->params, params, sizeof(params));
            break;
        }
    }
    if (r->route == NULL) {
        if (path_match)
            brig_http_fail(r, BRIG_E_METHOD, "method %s is not allowed on %s", r->method, url);
        else
            brig_http_fail(r, BRIG_E_NOT_FOUND, "no such endpoint: %s %s", r->method, url);
        return;
    }
    if (!(r->route->flags & ROUTE_PUBLIC)) {
        brig_error *err = NULL;
        const char *auth =
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        char bearer[300];
        if (r->route->flags & ROUTE_E2B) { /* E2B's SDK sends its key as X-API-KEY */
            const char *k = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-API-KEY");
            snprintf(bearer, sizeof(bearer), "Bearer %s", k ? k : "");
            auth = k ? bearer : NULL;
        }
        if (brig_auth_check(r->d, auth, &r->caller, &err) < 0) {
            brig_http_error(r, err);
            return;
        }
        bool op = brig_caller_is(&r->caller, "operator");
        if ((r->route->flags & ROUTE_OPERATOR) && !op) {
            brig_http_fail(r, BRIG_E_FORBIDDEN, "this operation needs the operator key");
            return;
        }
        if (!(r->route->flags & (ROUTE_OPERATOR | ROUTE_OPERATOR_TOO)) && op) {
            brig_http_fail(r, BRIG_E_FORBIDDEN,
                           "the operator key manages accounts; use an account's key for this");
            return;
        }
        if ((r->route->flags & ROUTE_ADMIN) && !op && !brig_caller_is(&r->caller, "admin")) {
            brig_http_fail(r, BRIG_E_FORBIDDEN, "this operation needs an admin-scoped API key");
            return;
        }
        if (!brig_http_admit(r))
            return;
    }
    if (!(r->route->flags & ROUTE_STREAM_BODY))
        r->body_deadline = brig_now_mono_ms() + r->d->cfg.body_timeout_ms;
    if (r->route->on_begin)
        r->route->on_begin(r);
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **req_cls)
{
    (void)version;
    http_ctx *hc = cls;
    brig_req *r = *req_cls;
    if (r == NULL) {
        r = brig_xcalloc(1, sizeof(*r));
        r->d = hc->d;
        r->conn = conn;
        r->method = method;
        r->begun = brig_now_mono_ms();
        *req_cls = r;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        r->conn_state = ci ? ci->socket_context : NULL;
        if (r->conn_state) {
            pthread_mutex_lock(&hc->lock);
            bool gone = r->conn_state->pushed_out;
            pthread_mutex_unlock(&hc->lock);
            if (gone)
                return MHD_NO; /* its deadline passed as the head came in */
            char key[ADDR_MAX + 8];
            snprintf(key, sizeof(key), "client %s", r->conn_state->addr);
            brig_log_set_key(key);
        }
        begin(r, hc->routes, url);
        if (r->resp)
            return queue(r); /* refused before the body */
        if (r->body_deadline)
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                      (unsigned)((r->d->cfg.body_timeout_ms + 999) / 1000));
        return MHD_YES;
    }
    if (r->replied) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->body_deadline && *upload_data_size > 0) {
        /* MHD's timeout is idle time, which a byte a second resets: the deadline is
         * ours, checked at every chunk, and MHD's timeout is what is left of it. */
        int64_t left = r->body_deadline - brig_now_mono_ms();
        if (left <= 0)
            return MHD_NO; /* closes the connection */
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                  (unsigned)((left + 999) / 1000));
    }
    if (*upload_data_size > 0) {
        if (r->route->flags & ROUTE_STREAM_BODY) {
            r->route->on_body(r, upload_data, *upload_data_size);
        } else if (!r->too_large) {
            if (r->body.len + *upload_data_size > BRIG_HTTP_BODY_MAX) {
                r->too_large = true;
                brig_buf_dispose(&r->body);
            } else {
                brig_buf_append(&r->body, upload_data, *upload_data_size);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* The whole body is in; a long command may follow. */
    if (r->body_deadline)
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, BRIG_HTTP_IDLE_TIMEOUT);
    if (r->too_large)
        brig_http_fail(r, BRIG_E_TOO_LARGE, "request body exceeds %u bytes", BRIG_HTTP_BODY_MAX);
    else
        r->route->handle(r);
    if (r->resp == NULL)
        brig_http_fail(r, BRIG_E_INTERNAL, "handler produced no response");
    return queue(r);
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    http_ctx *hc = cls;
    brig_req *r = *req_cls;
    if (r == NULL)
        return;
    if (r->stream_free)
        r->stream_free(r);
    if (r->resp)
        MHD_destroy_response(r->resp);
    if (r->holds_slot)
        brig_quota_give(hc->requests, r->caller.account_id, 1);
    /* A connection kept alive waits for its next request from now on. */
    http_conn *c = r->conn_state;
    if (c && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        pthread_mutex_lock(&hc->lock);
        if (!c->pushed_out) {
            unlist(hc, c);
            if (waiting_from(hc, c->addr) >= hc->d->cfg.max_waiting_per_address) {
                c->pushed_out = true;
                shutdown(c->fd, SHUT_RDWR);
            } else {
                if (hc->n_waiting >= hc->d->cfg.max_waiting_connections && hc->head)
                    push_out(hc, hc->head);
                list_append(hc, c);
            }
        }
        pthread_mutex_unlock(&hc->lock);
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, BRIG_HTTP_IDLE_TIMEOUT);
    }
    brig_log_set_key(NULL);
    brig_buf_dispose(&r->body);
    free(r);
    *req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    /* A client can make the library complain at will: one rate for all of it. */
    brig_log_keyed("http", BRIG_LOG_WARN, "http: %s", buf);
}

int brig_http_parse_listen(const char *listen, struct sockaddr_storage *ss, brig_error **err)
{
    _cleanup_free_ char *s = brig_xstrdup(listen);
    char *host = s, *port = NULL;
    if (*s == '[') {
        char *e = strchr(s, ']');
        if (e == NULL || e[1] != ':')
            return brig_error_set(err, BRIG_E_INVALID, 0, "bad listen address '%s'", listen);
        *e = '\0';
        host = s + 1;
        port = e + 2;
    } else {
        char *c = strrchr(s, ':');
        if (c == NULL)
            return brig_error_set(err, BRIG_E_INVALID, 0, "listen address '%s' needs HOST:PORT",
                                  listen);
        *c = '\0';
        port = c + 1;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV | AI_PASSIVE, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int e = getaddrinfo(*host ? host : NULL, port, &hints, &ai);
    if (e != 0)
        return brig_error_set(err, BRIG_E_INVALID, 0, "listen address '%s': %s", listen,
                              gai_strerror(e));
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

int brig_http_start(brigd *d, const brig_route *routes, brig_http_explain_fn explain,
                    brig_error **err)
{
    struct sockaddr_storage ss = {0};
    if (brig_http_parse_listen(d->cfg.listen, &ss, err) < 0)
        return -1;
    http_ctx *hc = &the_ctx;
    hc->d = d;
    hc->routes = routes;
    hc->explain = explain;
    pthread_mutex_init(&hc->lock, NULL);
    brig_cond_init_mono(&hc->wake);
    hc->requests = brig_quota_new(0, d->cfg.max_requests_per_account);
    hc->stop = false;
    if (pthread_create(&hc->sweeper, NULL, sweeper_main, hc) != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "cannot start the connection sweeper");
    hc->sweeper_running = true;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_POLL;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    d->http = MHD_start_daemon(flags, 0, accept_cb, hc, access_cb, hc, MHD_OPTION_EXTERNAL_LOGGER,
                               mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                               MHD_OPTION_NOTIFY_COMPLETED, completed_cb, hc,
                               MHD_OPTION_NOTIFY_CONNECTION, notify_cb, hc,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)BRIG_HTTP_IDLE_TIMEOUT,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)d->cfg.max_connections,
                               MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (d->http == NULL)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "cannot listen on %s", d->cfg.listen);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d->http, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = info ? info->port : 0;
    char host[INET6_ADDRSTRLEN] = "127.0.0.1";
    if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
    else
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
    d->base_url = ss.ss_family == AF_INET6 ? brig_asprintf("http://[%s]:%u", host, port)
                                           : brig_asprintf("http://%s:%u", host, port);
    return 0;
}

void brig_http_stop(brigd *d)
{
    http_ctx *hc = &the_ctx;
    if (hc->sweeper_running) {
        pthread_mutex_lock(&hc->lock);
        hc->stop = true;
        pthread_cond_signal(&hc->wake);
        pthread_mutex_unlock(&hc->lock);
        pthread_join(hc->sweeper, NULL);
        hc->sweeper_running = false;
    }
    if (d->http) {
        MHD_stop_daemon(d->http); /* closes every connection: the list empties */
        d->http = NULL;
    }
    if (hc->requests) {
        brig_quota_free(hc->requests);
        hc->requests = NULL;
        pthread_cond_destroy(&hc->wake);
        pthread_mutex_destroy(&hc->lock);
    }
}
