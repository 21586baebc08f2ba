/*
 * http.c - libmicrohttpd glue: listening, routing, auth, bodies, replies.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "log.h"
#include "sandbox.h"

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
    if (r->route && (r->route->flags & ROUTE_AGENT))
        brig_sandbox_explain_end(r->d, &r->caller, r->params[0], &err);
    unsigned status = (unsigned)brig_error_http_status(err->kind);
    if (status >= 500)
        brig_warn("%s %s: %u %s", r->method, r->route ? r->route->pattern : "?", status, err->msg);
    /* Messages may name paths that are not UTF-8: shown with U+FFFD. */
    char *msg = brig_utf8_display(err->msg, strlen(err->msg));
    json_t *body =
        json_pack("{s:{s:s, s:s}}", "error", "code", brig_error_code(err->kind), "message", msg);
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

static enum MHD_Result queue(brig_req *r)
{
    r->replied = true;
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ret;
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
        if (brig_auth_check(r->d, auth, &r->caller, &err) < 0) {
            brig_http_error(r, err);
            return;
        }
        bool op = brig_caller_is(&r->caller, "operator");
        if ((r->route->flags & ROUTE_OPERATOR) && !op) {
            brig_http_fail(r, BRIG_E_FORBIDDEN, "this operation needs the operator key");
            return;
        }
        if (!(r->route->flags & ROUTE_OPERATOR) && op) {
            brig_http_fail(r, BRIG_E_FORBIDDEN,
                           "the operator key manages accounts; use an account's key for this");
            return;
        }
        if ((r->route->flags & ROUTE_ADMIN) && !brig_caller_is(&r->caller, "admin")) {
            brig_http_fail(r, BRIG_E_FORBIDDEN, "this operation needs an admin-scoped API key");
            return;
        }
    }
    if (r->route->on_begin)
        r->route->on_begin(r);
}

typedef struct http_ctx {
    brigd *d;
    const brig_route *routes;
} http_ctx;

static http_ctx the_ctx;

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
        *req_cls = r;
        begin(r, hc->routes, url);
        if (r->resp)
            return queue(r); /* refused before the body */
        return MHD_YES;
    }
    if (r->replied) {
        *upload_data_size = 0;
        return MHD_YES;
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
    /* The whole body is in. */
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
    (void)cls;
    (void)conn;
    (void)toe;
    brig_req *r = *req_cls;
    if (r == NULL)
        return;
    if (r->stream_free)
        r->stream_free(r);
    if (r->resp)
        MHD_destroy_response(r->resp);
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
    brig_warn("http: %s", buf);
}

/* Parses "HOST:PORT" / "[V6]:PORT" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, brig_error **err)
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

int brig_http_start(brigd *d, const brig_route *routes, brig_error **err)
{
    struct sockaddr_storage ss = {0};
    if (parse_listen(d->cfg.listen, &ss, err) < 0)
        return -1;
    the_ctx.d = d;
    the_ctx.routes = routes;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_POLL;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    d->http = MHD_start_daemon(
        flags, 0, NULL, NULL, access_cb, &the_ctx, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed_cb,
        NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)4096, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
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
    if (d->http == NULL)
        return;
    MHD_stop_daemon(d->http);
    d->http = NULL;
}
