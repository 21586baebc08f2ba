/*
 * injconn.c - one connection through the egress proxy (inject.c): the request
 * head, parsed strictly (httpreq.c); the sandbox's policy for where it goes; a
 * placeholder toward any host but its rule's refused (403, logged: an attempt to
 * send a secret's stand-in elsewhere); the rule's headers in place of the
 * sandbox's; then the bytes relayed both ways until either side closes, the
 * upstream's with every injected value masked (same length, so framing stays
 * right).  One request per connection: the proxy says Connection: close.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "httpreq.h"
#include "injproxy.h"
#include "log.h"

/* ---- I/O ------------------------------------------------------------------------------ */

/* Timeouts, and no Nagle: the proxy relays in pieces (a head, a body, what a scan
 * held back), and a piece held for the peer's delayed ACK costs 40 ms on a kept
 * connection. */
static void sock_setup(int fd)
{
    struct timeval tv = {BRIG_INJ_IO_TIMEOUT / 1000, 0};
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- the request --------------------------------------------------------------------- */

const brig_inject_rule *brig_inject_rule_for(const brig_inj_cfg *cfg, const char *host)
{
    size_t hl = strlen(host);
    for (size_t i = 0; i < cfg->n_rules; i++) {
        const char *r = cfg->rules[i].host;
        if (strcmp(r, host) == 0)
            return &cfg->rules[i];
        size_t rl = strlen(r);
        /* "*.example.com": any name with more labels ending in ".example.com" */
        if (r[0] == '*' && r[1] == '.' && hl > rl - 1 && strcmp(host + hl - (rl - 1), r + 1) == 0)
            return &cfg->rules[i];
    }
    return NULL;
}

/* The request's host: the Host field, lower case, without a port; "" when it has none
 * or it is not a plain name or address. */
static void host_of(const char *buf, const brig_http_head *h, char out[256])
{
    out[0] = 0;
    if (h->host < 0)
        return;
    const brig_http_span *v = &h->fields[h->host].value;
    size_t n = v->len;
    const char *colon = memchr(buf + v->off, ':', n);
    if (colon)
        n = (size_t)(colon - (buf + v->off));
    if (n == 0 || n > 253)
        return;
    for (size_t i = 0; i < n; i++) {
        char ch = (char)tolower((unsigned char)buf[v->off + i]);
        if (!isalnum((unsigned char)ch) && ch != '.' && ch != '-')
            return (void)(out[0] = 0);
        out[i] = ch;
    }
    out[n] = 0;
}

static const brig_inject_secret *secret_named(const brig_inj_cfg *cfg, const char *name, size_t n)
{
    for (size_t i = 0; i < cfg->n_secrets; i++)
        if (strlen(cfg->secrets[i].name) == n && memcmp(cfg->secrets[i].name, name, n) == 0)
            return &cfg->secrets[i];
    return NULL;
}

#define MERGED_MAX 64 /* headers of all the rules for one host, at most */

/* Every rule for host as one (into *m, its headers into h): the first rule to set a
 * header name wins.  NULL when none is for host. */
static const brig_inject_rule *rules_for(const brig_inj_cfg *cfg, const char *host,
                                         brig_inject_rule *m, brig_inject_header *h)
{
    size_t n = 0;
    bool any = false;
    for (size_t i = 0; i < cfg->n_rules; i++) {
        brig_inj_cfg one = *cfg;
        one.rules = &cfg->rules[i];
        one.n_rules = 1;
        if (brig_inject_rule_for(&one, host) == NULL)
            continue;
        any = true;
        for (size_t k = 0; k < cfg->rules[i].n_headers && n < MERGED_MAX; k++) {
            bool dup = false;
            for (size_t j = 0; j < n && !dup; j++)
                dup = strcasecmp(h[j].name, cfg->rules[i].headers[k].name) == 0;
            if (!dup)
                h[n++] = cfg->rules[i].headers[k];
        }
    }
    *m = (brig_inject_rule){host, h, n};
    return any ? m : NULL;
}

/* Whether the rule's headers name secret s. */
static bool rule_uses(const brig_inject_rule *r, const brig_inject_secret *s)
{
    _cleanup_free_ char *ref = brig_asprintf("{{secret:%s}}", s->name);
    for (size_t i = 0; r && i < r->n_headers; i++)
        if (strstr(r->headers[i].value, ref))
            return true;
    return false;
}

/* A rule header's value with its secrets in (wipe and free it), or NULL with *why
 * (malloc'd) when one is missing or expired. */
static char *expand(const brig_inj_cfg *cfg, const char *tmpl, char **why)
{
    brig_buf b = {0};
    brig_buf_printf(&b, "%s", "");
    for (const char *p = tmpl; *p;) {
        const char *open = strstr(p, "{{secret:");
        const char *close = open ? strstr(open, "}}") : NULL;
        if (open == NULL || close == NULL) {
            brig_buf_printf(&b, "%s", p);
            break;
        }
        brig_buf_printf(&b, "%.*s", (int)(open - p), p);
        const char *name = open + 9;
        size_t nl = (size_t)(close - name);
        const brig_inject_secret *s = secret_named(cfg, name, nl);
        if (s == NULL || (s->expires_ms && brig_now_real_ms() >= s->expires_ms)) {
            *why = brig_asprintf(s ? "the credential %.*s expired; it is no longer injected"
                                   : "the secret %.*s is not given to this sandbox",
                                 (int)nl, name);
            explicit_bzero(b.data, b.len);
            brig_buf_dispose(&b);
            return NULL;
        }
        brig_buf_printf(&b, "%s", s->value);
        p = close + 2;
    }
    return b.data;
}

static bool hop_by_hop(const char *buf, const brig_http_field *f)
{
    static const char *const names[] = {"connection",          "keep-alive", "proxy-connection",
                                        "proxy-authorization", "te",         "upgrade"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(names); i++)
        if (brig_http_field_is(buf, f, names[i]))
            return true;
    return false;
}

static bool set_by_rule(const char *buf, const brig_http_field *f, const brig_inject_rule *r)
{
    for (size_t i = 0; r && i < r->n_headers; i++)
        if (brig_http_field_is(buf, f, r->headers[i].name))
            return true;
    return r && brig_http_field_is(buf, f, "accept-encoding"); /* echoes must be readable */
}

/* The head to send upstream (wipe it), or NULL with *why (malloc'd); close: the
 * connection ends after this request. */
static char *rewrite(const brig_inj_conn *c, const char *buf, const brig_http_head *h,
                     const brig_inject_rule *r, bool close, char **why)
{
    brig_buf b = {0};
    brig_buf_printf(&b, "%.*s %.*s HTTP/1.%d\r\n", (int)h->method.len, buf + h->method.off,
                    (int)h->target.len, buf + h->target.off, h->minor);
    for (size_t i = 0; i < h->n_fields; i++) {
        const brig_http_field *f = &h->fields[i];
        if (hop_by_hop(buf, f) || set_by_rule(buf, f, r))
            continue;
        brig_buf_printf(&b, "%.*s: %.*s\r\n", (int)f->name.len, buf + f->name.off,
                        (int)f->value.len, buf + f->value.off);
    }
    for (size_t i = 0; r && i < r->n_headers; i++) {
        char *v = expand(c->cfg, r->headers[i].value, why);
        if (v == NULL) {
            explicit_bzero(b.data, b.len);
            brig_buf_dispose(&b);
            return NULL;
        }
        brig_buf_printf(&b, "%s: %s\r\n", r->headers[i].name, v);
        explicit_bzero(v, strlen(v));
        free(v);
    }
    if (r)
        brig_buf_printf(&b, "Accept-Encoding: identity\r\n");
    brig_buf_printf(&b, "%s\r\n", close ? "Connection: close\r\n" : "");
    return b.data;
}

/* A record for the network log (and the audit timeline): never a value. */
static json_t *record(const brig_inj_conn *c, const char *buf, const brig_http_head *h,
                      const char *host, const char *verdict)
{
    size_t path_len = strcspn(buf + h->target.off, "? ");
    if (path_len > h->target.len)
        path_len = h->target.len;
    char dst[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &c->dst.sin_addr, dst, sizeof(dst));
    return json_pack("{ss ss ss s:s% s:s% ss si ss}", "kind", "proxy", "verdict", verdict, "host",
                     host, "method", buf + h->method.off, h->method.len, "path",
                     buf + h->target.off, path_len, "dst", dst, "port", ntohs(c->dst.sin_port),
                     "scheme", c->tls ? "https" : "http");
}

/* Checks the request; the rule that applies (NULL: none) in *rule; -1 when it was
 * answered with a refusal (logged). */
static int check(brig_inj_conn *c, const char *buf, long head_len, const brig_http_head *h,
                 const char *host, const brig_inject_rule **rule, brig_inject_rule *merged,
                 brig_inject_header *hdrs)
{
    brig_net_host *n = c->n;
    *rule = rules_for(c->cfg, host, merged, hdrs);
    _cleanup_free_ char *why = NULL;
    for (size_t i = 0; i < c->cfg->n_secrets && !why; i++) {
        const brig_inject_secret *s = &c->cfg->secrets[i];
        if (memmem(buf, (size_t)head_len, s->placeholder, strlen(s->placeholder)) &&
            !rule_uses(*rule, s))
            why = brig_asprintf("the placeholder of %s may only go to the host of its rule, "
                                "not to %s",
                                s->name, host[0] ? host : "this host");
    }
    if (why == NULL &&
        !brig_inject_allows(n, c->cfg->sandbox_id, &c->dst, c->resolved ? host : NULL))
        why = brig_asprintf("the project's egress policy does not allow this destination");
    if (why == NULL && *rule && !c->tls &&
        !brig_inject_resolves_to(n, host, c->dst.sin_addr.s_addr))
        why = brig_asprintf("%s does not resolve to the address connected to", host);
    if (why == NULL)
        return 0;
    json_t *rec = record(c, buf, h, host, "refused");
    json_object_set_new(rec, "reason", json_string(why));
    brig_inject_log(n, c->cfg->sandbox_id, rec);
    brig_injflow_answer(c, 403, why);
    return -1;
}

/* The upstream's socket, and its TLS, gone (under n->lock: stop may shut it). */
static void up_close(brig_inj_conn *c)
{
    brig_injtls_close_side(c, 1);
    pthread_mutex_lock(&c->n->lock);
    int fd = c->up;
    c->up = -1;
    pthread_mutex_unlock(&c->n->lock);
    if (fd >= 0)
        close(fd);
}

static int connect_upstream(brig_inj_conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sock_setup(fd);
    pthread_mutex_lock(&c->n->lock);
    c->up = fd;
    pthread_mutex_unlock(&c->n->lock);
    return connect(fd, (struct sockaddr *)&c->dst, sizeof(c->dst));
}

/* Whether a kept upstream connection is still there: nothing may be readable on it
 * between responses (its end, or bytes out of step). */
static bool up_alive(brig_inj_conn *c)
{
    struct pollfd p = {.fd = c->up, .events = POLLIN};
    return c->up >= 0 && !brig_injio_pending(c, 1) && poll(&p, 1, 0) == 0;
}

/* Plain relay both ways until either side is done (HTTPS toward a host without a
 * rule: never looked into). */
static void relay_raw(brig_inj_conn *c)
{
    struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->up, .events = POLLIN}};
    char b[16384];
    while (poll(p, 2, BRIG_INJ_IO_TIMEOUT) > 0) {
        for (int side = 0; side < 2; side++) {
            if (p[side].revents == 0)
                continue;
            ssize_t r = recv(p[side].fd, b, sizeof(b), 0);
            if (r == 0 && side == 0) {
                shutdown(c->up, SHUT_WR); /* the request is whole: the answer may follow */
                p[0].fd = -1;
                continue;
            }
            if (r <= 0 || brig_injio_write(c, !side, b, (size_t)r) < 0)
                return;
        }
    }
}

/* Reads the request head into buf; its length, or -1 (answered when it was bad). */
static long read_head(brig_inj_conn *c, char *buf, size_t *got, brig_http_head *h)
{
    const char *why = NULL;
    for (;;) {
        long k = brig_http_parse(buf, *got, h, &why);
        if (k != 0) {
            if (k < 0)
                brig_injflow_answer(c, 400, why);
            return k;
        }
        ssize_t r = brig_injio_read(c, 0, buf + *got, BRIG_HTTP_HEAD_MAX - *got);
        if (r == -2)
            continue;
        if (r <= 0)
            return -1;
        *got += (size_t)r;
    }
}

/* Plain relay (HTTPS toward a host without a rule): the policy's check only. */
static void passthrough(brig_inj_conn *c)
{
    if (brig_inject_allows(c->n, c->cfg->sandbox_id, &c->dst, NULL) && connect_upstream(c) == 0)
        relay_raw(c);
}

/* A refusal after the checks: logged and answered. */
static void refuse(brig_inj_conn *c, const char *buf, const brig_http_head *h, const char *host,
                   int status, const char *why)
{
    json_t *rec = record(c, buf, h, host, "refused");
    json_object_set_new(rec, "reason", json_string(why));
    brig_inject_log(c->n, c->cfg->sandbox_id, rec);
    brig_injflow_answer(c, status, why);
}

/* The scans of a request under rule: values to mask coming back, placeholders that
 * must not go out. */
static void scans_of(const brig_inj_cfg *cfg, const brig_inject_rule *rule, brig_inj_scan *mask,
                     brig_inj_scan *guard)
{
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        const brig_inject_secret *s = &cfg->secrets[i];
        if (rule_uses(rule, s))
            brig_inj_scan_add(mask, s->value, s->name);
        else
            brig_inj_scan_add(guard, s->placeholder, s->name);
    }
}

/* Sends head upstream: on the kept connection when it is to host and still there
 * (*reused), else on a new one (TLS when the sandbox's side is); a kept one that
 * fails the write is replaced once.  -1 when it was answered with a refusal. */
static int send_upstream(brig_inj_conn *c, const char *buf, const brig_http_head *h,
                         const char *host, char up_host[256], const char *head, bool *reused)
{
    if (c->up >= 0 && (strcmp(up_host, host) != 0 || !up_alive(c)))
        up_close(c);
    _cleanup_free_ char *why = NULL;
    for (int tries = 0; tries < 2 && why == NULL; tries++) {
        *reused = c->up >= 0;
        if (c->up < 0) {
            snprintf(up_host, 256, "%s", host);
            if (connect_upstream(c) < 0)
                why = brig_asprintf("%s cannot be reached", host);
            else if (c->ssl[0])
                (void)brig_injtls_connect(c, host, &why); /* *why on failure */
        }
        if (why == NULL && brig_injio_write(c, 1, head, strlen(head)) == 0)
            return 0;
        if (why == NULL && !*reused)
            why = brig_asprintf("%s closed the connection", host);
        up_close(c);
    }
    refuse(c, buf, h, host, 502, why);
    return -1;
}

/* Sends head upstream and relays the exchange; when a kept upstream connection
 * closed before it answered (its own idle timeout may meet the request), a
 * request without a body goes once more on a new one.  buf's head may be gone
 * after (the next request's start is there); orig is a copy for the record. */
static int exchange(brig_inj_conn *c, brig_inj_exchange *x, const char *host, char up_host[256],
                    const char *head, char *buf, size_t *got, long head_len,
                    const brig_http_head *h)
{
    bool reused = false;
    int rc = send_upstream(c, buf, h, host, up_host, head, &reused);
    if (rc < 0)
        return -1;
    x->retry_ok = reused && !h->chunked && h->body_len <= 0;
    _cleanup_free_ char *orig = x->retry_ok ? brig_xmalloc((size_t)head_len) : NULL;
    if (orig)
        memcpy(orig, buf, (size_t)head_len);
    rc = brig_injflow_run(c, x, h, buf, (size_t)head_len, got);
    if (rc == 0 || !x->retry)
        return rc;
    up_close(c);
    x->retry_ok = false;
    if (send_upstream(c, orig, h, host, up_host, head, &reused) < 0)
        return -1;
    return brig_injflow_run(c, x, h, buf, 0, got); /* the request is whole in head */
}

/* The sandbox's rules as they are now (a connection outlives a change of them);
 * -1 when it has none any more. */
static int cfg_refresh(brig_inj_conn *c)
{
    brig_inj_cfg *now = brig_inject_cfg_now(c->n, c->cfg->sandbox_id);
    if (now == NULL)
        return -1;
    brig_inj_cfg *old = c->cfg;
    atomic_fetch_add(&now->active, 1);
    atomic_fetch_sub(&old->active, 1);
    c->cfg = now;
    brig_inject_cfg_unref(old);
    return 0;
}

/* Logs an injection: the host, method, path and the secrets' names. */
static void log_injected(brig_inj_conn *c, const char *buf, const brig_http_head *h,
                         const char *host, const brig_inj_scan *mask)
{
    json_t *rec = record(c, buf, h, host, "injected"), *names = json_array();
    for (size_t i = 0; i < mask->n; i++)
        json_array_append_new(names, json_string(mask->name[i]));
    json_object_set_new(rec, "secrets", names);
    brig_inject_log(c->n, c->cfg->sandbox_id, rec);
}

/* One request whose head is in buf (plain, or inside the sandbox's TLS to sni),
 * relayed with its answer; 0 when the connection may carry another.  last: the
 * connection's last (asked upstream with Connection: close, which its answer then
 * tells the client). */
static int serve_one(brig_inj_conn *c, const char *sni, char *buf, size_t *got, long head_len,
                     const brig_http_head *h, char up_host[256], bool last)
{
    char host[256];
    _cleanup_free_ char *why = NULL;
    const brig_inject_rule *rule = NULL;
    brig_inject_rule merged;
    brig_inject_header hdrs[MERGED_MAX];
    host_of(buf, h, host);
    if (sni && strcmp(sni, host) != 0) {
        refuse(c, buf, h, host, 421, "the Host header differs from the TLS server name");
        return -1;
    }
    if (cfg_refresh(c) < 0 || check(c, buf, head_len, h, host, &rule, &merged, hdrs) < 0)
        return -1;
    bool close = last || h->minor == 0 || brig_http_has_token(buf, h, "connection", "close");
    char *head = rewrite(c, buf, h, rule, close, &why);
    if (head == NULL) {
        refuse(c, buf, h, host, 403, why);
        return -1;
    }
    brig_inj_scan mask = {0}, guard = {0};
    scans_of(c->cfg, rule, &mask, &guard);
    if (rule)
        log_injected(c, buf, h, host, &mask);
    brig_inj_exchange x = {.no_body = h->method.len == 4 && memcmp(buf, "HEAD", 4) == 0,
                           .closing = close,
                           .mask = &mask,
                           .guard = &guard};
    int rc = exchange(c, &x, host, up_host, head, buf, got, head_len, h);
    explicit_bzero(head, strlen(head));
    free(head);
    brig_inj_scan_dispose(&mask);
    brig_inj_scan_dispose(&guard);
    if (rc == 0 && !x.keep_up)
        up_close(c);
    return rc == 0 && x.keep && !close ? 0 : -1;
}

/* Whether the next request starts within the idle time (bytes of it already here,
 * or the sandbox's side readable). */
static bool next_request(brig_inj_conn *c, size_t got)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    return got > 0 || brig_injio_pending(c, 0) || poll(&p, 1, BRIG_INJ_IDLE_TIMEOUT) > 0;
}

/* Requests (plain, or inside the sandbox's TLS to sni) one after another. */
/* CONNECT's target "host:443" into host (lower case); false when it is not that. */
static bool tunnel_target(const char *buf, const brig_http_head *h, char host[256])
{
    const char *t = buf + h->target.off;
    size_t n = h->target.len;
    host[0] = 0;
    if (n < 5 || n > 253 + 4 || memcmp(t + n - 4, ":443", 4) != 0)
        return false;
    for (size_t i = 0; i < n - 4; i++) {
        char ch = (char)tolower((unsigned char)t[i]);
        if (!isalnum((unsigned char)ch) && ch != '.' && ch != '-')
            return (void)(host[0] = 0), false;
        host[i] = ch;
    }
    host[n - 4] = 0;
    return true;
}

/* CONNECT (a client told to use a proxy): toward port 443 of a host with a rule,
 * where the policy lets the sandbox go, it is answered 200 and the tunnel is then
 * served as an intercepted HTTPS connection to host (-> 0); anything else is
 * refused with a status and a reason, and logged. */
static int tunnel_open(brig_inj_conn *c, const char *buf, const brig_http_head *h, size_t extra,
                       char host[256])
{
    _cleanup_free_ char *why = NULL;
    int status = 403;
    uint32_t addr = 0;
    bool named = tunnel_target(buf, h, host);
    if (extra)
        status = 400, why = brig_asprintf("bytes sent after CONNECT before its answer");
    else if (!named || c->tls_state == NULL || brig_inject_rule_for(c->cfg, host) == NULL)
        why = brig_asprintf("CONNECT goes only to port 443 of a host with an injection rule; "
                            "reach other hosts directly (the egress policy decides)");
    else if (!brig_inject_resolve(c->n, host, &addr))
        status = 502, why = brig_asprintf("%s does not resolve", host);
    if (why == NULL) {
        c->dst.sin_addr.s_addr = addr;
        c->dst.sin_port = htons(443);
        c->tls = c->resolved = true;
        if (!brig_inject_allows(c->n, c->cfg->sandbox_id, &c->dst, host))
            why = brig_asprintf("the project's egress policy does not allow this destination");
    }
    if (why) {
        refuse(c, buf, h, host, status, why);
        return -1;
    }
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    return brig_injio_write(c, 0, ok, sizeof(ok) - 1);
}

/* Requests (plain, or inside the sandbox's TLS to sni) one after another; a CONNECT
 * as the first request of a plain connection opens a tunnel, served after. */
static void serve_http(brig_inj_conn *c, const char *sni)
{
    char *buf = brig_xmalloc(BRIG_HTTP_HEAD_MAX), up_host[256] = "", tunnel[256] = "";
    size_t got = 0;
    brig_http_head h;
    for (int i = 0; i < BRIG_INJ_REQUESTS_MAX && next_request(c, got); i++) {
        long head_len = read_head(c, buf, &got, &h);
        if (head_len < 0)
            break;
        if (sni == NULL && h.method.len == 7 && memcmp(buf, "CONNECT", 7) == 0) {
            if (i > 0)
                brig_injflow_answer(c, 400, "CONNECT must be a connection's first request");
            if (i > 0 || tunnel_open(c, buf, &h, got - (size_t)head_len, tunnel) < 0)
                tunnel[0] = 0;
            break;
        }
        if (serve_one(c, sni, buf, &got, head_len, &h, up_host, i == BRIG_INJ_REQUESTS_MAX - 1) < 0)
            break;
    }
    free(buf);
    up_close(c);
    char name[256];
    if (tunnel[0] && brig_injtls_sni(c->fd, name) == 1 && strcmp(name, tunnel) == 0 &&
        brig_injtls_accept(c, tunnel) == 0)
        serve_http(c, tunnel);
}

/* HTTPS: intercepted when its server name has a rule and the proxy has a CA. */
static void serve_tls(brig_inj_conn *c)
{
    char sni[256];
    int k = brig_injtls_sni(c->fd, sni);
    if (k < 0)
        return;
    if (k == 0 || c->tls_state == NULL || brig_inject_rule_for(c->cfg, sni) == NULL) {
        passthrough(c);
        return;
    }
    if (brig_injtls_accept(c, sni) == 0)
        serve_http(c, sni);
}

void brig_injconn_serve(brig_inj_conn *c)
{
    sock_setup(c->fd);
    if (c->tls)
        serve_tls(c);
    else
        serve_http(c, NULL);
    brig_injtls_close(c);
    pthread_mutex_lock(&c->n->lock);
    int fd = c->fd;
    c->fd = -1; /* stop shuts only what is still open */
    pthread_mutex_unlock(&c->n->lock);
    close(fd);
    up_close(c);
}
