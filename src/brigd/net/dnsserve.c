/*
 * dnsserve.c - the DNS proxy's sandbox side: its UDP and TCP sockets on port
 * 53 of the sandbox's gateway address, the policy's verdict on each query,
 * and the replies.
 *
 * A query is parsed (dnsmsg.c) and logged; the sandbox's policy decides: open
 * forwards everything, allowlist forwards listed names only, none forwards
 * nothing.  A refused name gets REFUSED (not NXDOMAIN: the name may well
 * exist, the policy refuses to look it up, and a client can tell the two
 * apart).  Under allowlist the A records of an answer are opened in the
 * firewall (grants.c) before the answer reaches the sandbox, so a connect()
 * right after the lookup passes, and the answer's TTLs are lowered to how long
 * that lasts at most.
 */
#include <stdlib.h>
#include <unistd.h>

#include "dnsproxy.h"

#define TCP_IDLE_MS 10000

/* ---- replies to the sandbox ------------------------------------------- */

static void conn_close(brig_proxy *p, brig_net_sandbox *s, brig_dns_conn *c)
{
    for (brig_dns_pending *q = s->queries; q; q = q->next)
        if (q->conn == c)
            q->conn = NULL;
    brig_dns_conn **pp = &s->conns;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
    s->n_conns--;
    if (c->fd >= 0) {
        brig_proxy_watch_del(p, c->fd);
        close(c->fd);
    }
    free(c);
}

static void send_reply(brig_net_sandbox *s, const struct sockaddr_in *client, brig_dns_conn *c,
                       const uint8_t *msg, size_t len)
{
    if (c) {
        uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
        struct iovec iov[2] = {{hdr, 2}, {(void *)msg, len}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        /* A client that does not read its answers loses them. */
        (void)!sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    } else if (s->udp_fd >= 0) {
        (void)!sendto(s->udp_fd, msg, len, MSG_DONTWAIT, (const struct sockaddr *)client,
                      sizeof(*client));
    }
}

static void reply_rcode(brig_net_sandbox *s, const struct sockaddr_in *client, brig_dns_conn *c,
                        const uint8_t *query, size_t len, int rcode)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    if (brig_dns_reply(query, len, rcode, &out, &out_len) == 0)
        send_reply(s, client, c, out, out_len);
    free(out);
}

/* ---- queries ---------------------------------------------------------- */

static void query_in(brig_net_host *n, brig_net_sandbox *s, const uint8_t *msg, size_t len,
                     const struct sockaddr_in *client, brig_dns_conn *c)
{
    const char *proto = c ? "tcp" : "udp";
    brig_dns_question q;
    int rc = brig_dns_parse_query(msg, len, &q);
    if (rc < 0)
        return; /* not even a DNS header: dropped */
    if (rc > 0) {
        brig_net_log_dns(s, &q, false, rc, NULL, proto);
        reply_rcode(s, client, c, msg, len, rc);
        return;
    }
    if (!brig_dns_name_allowed(&s->policy, q.qname, q.qname_len)) {
        brig_net_log_dns(s, &q, false, BRIG_DNS_REFUSED, NULL, proto);
        reply_rcode(s, client, c, msg, len, BRIG_DNS_REFUSED);
        return;
    }
    if (s->n_queries >= BRIG_NET_MAX_QUERIES) {
        brig_net_log_dns(s, &q, true, BRIG_DNS_SERVFAIL, NULL, proto);
        reply_rcode(s, client, c, msg, len, BRIG_DNS_SERVFAIL);
        return;
    }
    if (brig_upstream_send(n, s, msg, len, &q, client, c) < 0) {
        brig_net_log_dns(s, &q, true, BRIG_DNS_SERVFAIL, NULL, proto);
        reply_rcode(s, client, c, msg, len, BRIG_DNS_SERVFAIL);
    }
}

void brig_dnsserve_answer(brig_net_host *n, brig_net_sandbox *s, brig_dns_pending *pq)
{
    brig_proxy *p = n->proxy;
    brig_dns_answer a;
    ssize_t len = brig_upstream_read(n, pq, &a);
    if (len < 0)
        return;
    /* Open first, answer second: the sandbox connects as soon as it knows;
     * and it is told no TTL longer than the address stays open. */
    if (s->policy.mode == BRIG_EGRESS_ALLOWLIST) {
        if (a.n_a > 0)
            brig_net_grant_add(n, s, &pq->q, &a);
        (void)brig_dns_clamp_ttls(p->buf, (size_t)len, (uint32_t)n->ttl_max);
    }
    brig_net_log_dns(s, &pq->q, true, a.rcode, &a, pq->conn ? "tcp" : "udp");
    p->buf[0] = (uint8_t)(pq->client_id >> 8);
    p->buf[1] = (uint8_t)pq->client_id;
    bool tcp_client = pq->conn != NULL;
    if (tcp_client || (pq->client.sin_family == AF_INET))
        send_reply(s, &pq->client, pq->conn, p->buf, (size_t)len);
    brig_upstream_free(n, s, pq);
}

void brig_dnsserve_udp(brig_net_host *n, brig_net_sandbox *s)
{
    brig_proxy *p = n->proxy;
    /* A few datagrams per wake-up, so one busy sandbox cannot starve others. */
    for (int i = 0; i < 16; i++) {
        struct sockaddr_in client;
        socklen_t cl = sizeof(client);
        ssize_t len = recvfrom(s->udp_fd, p->buf, sizeof(p->buf), MSG_DONTWAIT,
                               (struct sockaddr *)&client, &cl);
        if (len < 0)
            return;
        if (cl != sizeof(client) || client.sin_family != AF_INET)
            continue;
        query_in(n, s, p->buf, (size_t)len, &client, NULL);
    }
}

void brig_dnsserve_accept(brig_net_host *n, brig_net_sandbox *s)
{
    int fd = accept4(s->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (s->n_conns >= BRIG_NET_MAX_TCP) {
        close(fd);
        return;
    }
    brig_dns_conn *c = brig_xcalloc(1, sizeof(*c));
    c->w = (watch){.type = W_TCP_CONN, .s = s, .obj = c};
    c->fd = fd;
    c->deadline = brig_now_mono_ms() + TCP_IDLE_MS;
    c->next = s->conns;
    s->conns = c;
    s->n_conns++;
    brig_proxy_watch_add(n->proxy, fd, &c->w);
}

void brig_dnsserve_tcp(brig_net_host *n, brig_net_sandbox *s, brig_dns_conn *c)
{
    ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
    if (r <= 0) {
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            conn_close(n->proxy, s, c);
        return;
    }
    c->len += (size_t)r;
    c->deadline = brig_now_mono_ms() + TCP_IDLE_MS;
    while (c->len >= 2) {
        size_t mlen = (size_t)c->buf[0] << 8 | c->buf[1];
        if (c->len < 2 + mlen)
            break;
        query_in(n, s, c->buf + 2, mlen, NULL, c);
        memmove(c->buf, c->buf + 2 + mlen, c->len - 2 - mlen);
        c->len -= 2 + mlen;
    }
}

/* ---- deadlines --------------------------------------------------------- */

int64_t brig_dnsserve_deadline(brig_net_host *n)
{
    int64_t d = INT64_MAX;
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next) {
        for (brig_dns_pending *q = s->queries; q; q = q->next)
            d = q->deadline < d ? q->deadline : d;
        for (brig_dns_conn *c = s->conns; c; c = c->next)
            d = c->deadline < d ? c->deadline : d;
    }
    return d;
}

void brig_dnsserve_expire(brig_net_host *n)
{
    int64_t now = brig_now_mono_ms();
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next) {
        for (brig_dns_pending *q = s->queries, *nx; q; q = nx) {
            nx = q->next;
            if (q->deadline > now)
                continue;
            brig_net_log_dns(s, &q->q, true, BRIG_DNS_SERVFAIL, NULL, q->conn ? "tcp" : "udp");
            if (q->conn || q->client.sin_family == AF_INET)
                reply_rcode(s, &q->client, q->conn, q->msg, q->msg_len, BRIG_DNS_SERVFAIL);
            brig_upstream_free(n, s, q);
        }
        for (brig_dns_conn *c = s->conns, *nx; c; c = nx) {
            nx = c->next;
            if (c->deadline <= now)
                conn_close(n->proxy, s, c);
        }
    }
}
