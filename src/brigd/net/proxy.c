/*
 * proxy.c - the network module's one thread: an epoll loop over every
 * sandbox's DNS sockets (UDP and TCP port 53 on its gateway address), the
 * upstream queries in flight, and the NFLOG socket that reports denied
 * packets.
 *
 * DNS: a query is parsed (dnsmsg.c) and logged; the sandbox's policy decides:
 * open forwards everything, allowlist forwards listed names only, none
 * forwards nothing.  A refused name gets REFUSED (not NXDOMAIN: the name may
 * well exist, the policy refuses to look it up, and a client can tell the two
 * apart).  Under allowlist the A records of an answer are opened in the
 * firewall (allow_dns) before the answer reaches the sandbox, so a connect()
 * right after the lookup passes, and the answer's TTLs are lowered to how long
 * that lasts at most.  Each query goes upstream from its own connected UDP
 * socket (a fresh source port and id per query); once it is answered or given
 * up, its conntrack entry is deleted (ctnetlink), so a sandbox's queries hold
 * at most BRIG_NET_MAX_QUERIES entries of the host's table, not one per query
 * for the 30 s a UDP entry otherwise lingers.
 *
 * Lifetime: everything runs under n->lock.  A sandbox detached while its
 * events wait in the current epoll batch is marked dead and parked in
 * n->graveyard; its watches are skipped, and it is freed after the batch.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "log.h"
#include "net_internal.h"

typedef enum { W_WAKE, W_NFLOG, W_UDP, W_TCP_LISTEN, W_TCP_CONN, W_UPSTREAM } watch_type;

typedef struct watch {
    watch_type type;
    brig_net_sandbox *s; /* NULL for W_WAKE, W_NFLOG */
    void *obj;
} watch;

typedef struct brig_dns_conn {
    watch w;
    int fd;
    uint8_t buf[2 + 65535];
    size_t len;
    int64_t deadline;
    struct brig_dns_conn *next;
} brig_dns_conn;

typedef struct brig_dns_pending {
    watch w;
    int fd;                        /* connected to the upstream */
    struct sockaddr_storage local; /* fd's own address (its conntrack tuple's source) */
    uint16_t client_id, upstream_id;
    brig_dns_question q;
    struct sockaddr_in client; /* UDP client */
    brig_dns_conn *conn;       /* TCP client (NULL when it went away) */
    int64_t deadline;
    uint8_t *msg; /* the sandbox's query, for a SERVFAIL on timeout */
    size_t msg_len;
    struct brig_dns_pending *next;
} brig_dns_pending;

struct brig_proxy {
    int ep;
    int wake_fd;
    struct mnl_socket *nflog;
    struct mnl_socket *ct; /* ctnetlink, for deleting the upstream queries' entries */
    watch wake_w, nflog_w;
    pthread_t thread;
    bool running;
    bool stop;
    uint64_t round;                                 /* loop rounds so far */
    uint8_t buf[65536] __attribute__((aligned(8))); /* netlink messages need it */
};

#define TCP_IDLE_MS 10000

static const char *rcode_name(int rc)
{
    static const char *const names[] = {"NOERROR",  "FORMERR", "SERVFAIL",
                                        "NXDOMAIN", "NOTIMP",  "REFUSED"};
    return rc >= 0 && rc < (int)BRIG_ARRAY_LEN(names) ? names[rc] : "OTHER";
}

static void watch_add(brig_proxy *p, int fd, watch *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    if (epoll_ctl(p->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        brig_warn("net: epoll add: %s", strerror(errno));
}

static void watch_del(brig_proxy *p, int fd)
{
    epoll_ctl(p->ep, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- the network log's DNS records ------------------------------------ */

static void log_dns(brig_net_sandbox *s, const brig_dns_question *q, bool allowed, int rcode,
                    const brig_dns_answer *a, const char *proto)
{
    json_t *r = json_object();
    json_object_set_new(r, "time", brig_net_time_now());
    json_object_set_new(r, "kind", json_string("dns"));
    json_object_set_new(r, "name", json_string(q->name[0] ? q->name : "?"));
    json_object_set_new(r, "type", json_string(q->type[0] ? q->type : "?"));
    json_object_set_new(r, "proto", json_string(proto));
    json_object_set_new(r, "allowed", json_boolean(allowed));
    json_object_set_new(r, "rcode", json_string(rcode_name(rcode)));
    json_t *ans = json_array();
    for (size_t i = 0; a && i < a->n_a; i++) {
        char b[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a->a[i], b, sizeof(b));
        json_array_append_new(ans, json_string(b));
    }
    for (size_t i = 0; a && i < a->n_aaaa; i++) {
        char b[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, &a->aaaa[i], b, sizeof(b));
        json_array_append_new(ans, json_string(b));
    }
    json_object_set_new(r, "answer", ans);
    brig_net_log_add(s, r);
}

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
        watch_del(p, c->fd);
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

/* Deletes the conntrack entry of an upstream query (best effort: an entry
 * that is not there, or a host without conntrack, is no error). */
static void ct_forget(brig_net *n, brig_dns_pending *q)
{
    brig_proxy *p = n->proxy;
    if (p->ct == NULL || q->local.ss_family == AF_UNSPEC)
        return;
    uint8_t buf[256] __attribute__((aligned(8)));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = (uint8_t)q->local.ss_family;
    g->version = NFNETLINK_V0;
    struct nlattr *tuple = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
    struct nlattr *ipn = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
    uint16_t sport, dport;
    if (q->local.ss_family == AF_INET) {
        const struct sockaddr_in *l = (const struct sockaddr_in *)&q->local;
        const struct sockaddr_in *u = (const struct sockaddr_in *)&n->upstream;
        mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, l->sin_addr.s_addr);
        mnl_attr_put_u32(nlh, CTA_IP_V4_DST, u->sin_addr.s_addr);
        sport = l->sin_port;
        dport = u->sin_port;
    } else {
        const struct sockaddr_in6 *l = (const struct sockaddr_in6 *)&q->local;
        const struct sockaddr_in6 *u = (const struct sockaddr_in6 *)&n->upstream;
        mnl_attr_put(nlh, CTA_IP_V6_SRC, sizeof(l->sin6_addr), &l->sin6_addr);
        mnl_attr_put(nlh, CTA_IP_V6_DST, sizeof(u->sin6_addr), &u->sin6_addr);
        sport = l->sin6_port;
        dport = u->sin6_port;
    }
    mnl_attr_nest_end(nlh, ipn);
    struct nlattr *proto = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
    mnl_attr_put_u8(nlh, CTA_PROTO_NUM, IPPROTO_UDP);
    mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, sport);
    mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, dport);
    mnl_attr_nest_end(nlh, proto);
    mnl_attr_nest_end(nlh, tuple);
    (void)!mnl_socket_sendto(p->ct, nlh, nlh->nlmsg_len);
    /* Errors come back even unasked (ENOENT): drop them. */
    while (recv(mnl_socket_get_fd(p->ct), buf, sizeof(buf), MSG_DONTWAIT) > 0)
        ;
    q->local.ss_family = AF_UNSPEC;
}

static void pending_free(brig_net *n, brig_net_sandbox *s, brig_dns_pending *q)
{
    brig_proxy *p = n->proxy;
    ct_forget(n, q);
    brig_dns_pending **pp = &s->queries;
    while (*pp && *pp != q)
        pp = &(*pp)->next;
    if (*pp)
        *pp = q->next;
    s->n_queries--;
    if (q->fd >= 0) {
        watch_del(p, q->fd);
        close(q->fd);
    }
    free(q->msg);
    free(q);
}

static void query_in(brig_net *n, brig_net_sandbox *s, const uint8_t *msg, size_t len,
                     const struct sockaddr_in *client, brig_dns_conn *c)
{
    brig_proxy *p = n->proxy;
    const char *proto = c ? "tcp" : "udp";
    brig_dns_question q;
    int rc = brig_dns_parse_query(msg, len, &q);
    if (rc < 0)
        return; /* not even a DNS header: dropped */
    if (rc > 0) {
        log_dns(s, &q, false, rc, NULL, proto);
        reply_rcode(s, client, c, msg, len, rc);
        return;
    }
    if (!brig_dns_name_allowed(&s->policy, q.qname, q.qname_len)) {
        log_dns(s, &q, false, BRIG_DNS_REFUSED, NULL, proto);
        reply_rcode(s, client, c, msg, len, BRIG_DNS_REFUSED);
        return;
    }
    if (s->n_queries >= BRIG_NET_MAX_QUERIES) {
        log_dns(s, &q, true, BRIG_DNS_SERVFAIL, NULL, proto);
        reply_rcode(s, client, c, msg, len, BRIG_DNS_SERVFAIL);
        return;
    }
    brig_dns_pending *pq = brig_xcalloc(1, sizeof(*pq));
    pq->w = (watch){.type = W_UPSTREAM, .s = s, .obj = pq};
    pq->q = q;
    pq->client_id = q.id;
    pq->upstream_id = (uint16_t)arc4random_uniform(65536);
    if (client)
        pq->client = *client;
    pq->conn = c;
    pq->deadline = brig_now_mono_ms() + BRIG_NET_UPSTREAM_TIMEOUT_MS;
    uint8_t *up = NULL;
    size_t up_len = 0;
    pq->fd = socket(n->upstream.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    socklen_t local_len = sizeof(pq->local);
    if (pq->fd < 0 || connect(pq->fd, (struct sockaddr *)&n->upstream, n->upstream_len) < 0 ||
        getsockname(pq->fd, (struct sockaddr *)&pq->local, &local_len) < 0 ||
        brig_dns_upstream_query(msg, len, pq->upstream_id, c != NULL, &up, &up_len) < 0 ||
        send(pq->fd, up, up_len, 0) < 0) {
        ct_forget(n, pq);
        if (pq->fd >= 0)
            close(pq->fd);
        free(pq);
        free(up);
        log_dns(s, &q, true, BRIG_DNS_SERVFAIL, NULL, proto);
        reply_rcode(s, client, c, msg, len, BRIG_DNS_SERVFAIL);
        return;
    }
    free(up);
    pq->msg = brig_xmalloc(len);
    memcpy(pq->msg, msg, len);
    pq->msg_len = len;
    pq->next = s->queries;
    s->queries = pq;
    s->n_queries++;
    watch_add(p, pq->fd, &pq->w);
}

static void upstream_in(brig_net *n, brig_net_sandbox *s, brig_dns_pending *pq)
{
    brig_proxy *p = n->proxy;
    ssize_t len = recv(pq->fd, p->buf, sizeof(p->buf), 0);
    if (len < 0)
        return; /* e.g. ECONNREFUSED: the timeout answers SERVFAIL */
    brig_dns_answer a;
    if (brig_dns_parse_answer(p->buf, (size_t)len, pq->upstream_id, &pq->q, &a) < 0)
        return; /* not our answer: keep waiting */
    /* Open first, answer second: the sandbox connects as soon as it knows;
     * and it is told no TTL longer than the address stays open. */
    if (s->policy.mode == BRIG_EGRESS_ALLOWLIST) {
        if (a.n_a > 0)
            brig_net_grant_add(n, s, &pq->q, &a);
        (void)brig_dns_clamp_ttls(p->buf, (size_t)len, (uint32_t)n->ttl_max);
    }
    log_dns(s, &pq->q, true, a.rcode, &a, pq->conn ? "tcp" : "udp");
    p->buf[0] = (uint8_t)(pq->client_id >> 8);
    p->buf[1] = (uint8_t)pq->client_id;
    bool tcp_client = pq->conn != NULL;
    if (tcp_client || (pq->client.sin_family == AF_INET))
        send_reply(s, &pq->client, pq->conn, p->buf, (size_t)len);
    pending_free(n, s, pq);
}

static void udp_in(brig_net *n, brig_net_sandbox *s)
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

static void tcp_accept(brig_net *n, brig_net_sandbox *s)
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
    watch_add(n->proxy, fd, &c->w);
}

static void tcp_in(brig_net *n, brig_net_sandbox *s, brig_dns_conn *c)
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

/* ---- NFLOG: denied packets -------------------------------------------- */

static void nflog_record(brig_net *n, const char *prefix, int indev, int outdev, const uint8_t *pkt,
                         size_t len)
{
    /* Which sandbox and why, from the rule's prefix (fw.c). */
    const char *reason = "policy", *direction = "out";
    int ifindex = indev;
    if (strncmp(prefix, "in ", 3) == 0) {
        reason = "inbound";
        direction = "in";
        ifindex = outdev;
    } else if (strncmp(prefix, "host ", 5) == 0) {
        reason = "host";
    } else if (strncmp(prefix, "spoof ", 6) == 0) {
        reason = "spoofed";
    } else if (strncmp(prefix, "limit ", 6) == 0) {
        reason = "limit";
    } else if (strncmp(prefix, "out ", 4) != 0) {
        return;
    }
    brig_net_sandbox *s = brig_net_by_ifindex(n, ifindex);
    if (s == NULL || len < sizeof(struct iphdr))
        return;
    const struct iphdr *ip = (const struct iphdr *)pkt;
    if (ip->version != 4 || (size_t)ip->ihl * 4 > len)
        return;
    json_t *r = json_object();
    json_object_set_new(r, "time", brig_net_time_now());
    json_object_set_new(r, "kind", json_string("denied"));
    json_object_set_new(r, "direction", json_string(direction));
    json_object_set_new(r, "reason", json_string(reason));
    char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &ip->saddr, src, sizeof(src));
    inet_ntop(AF_INET, &ip->daddr, dst, sizeof(dst));
    const uint8_t *l4 = pkt + ip->ihl * 4;
    size_t l4len = len - ip->ihl * 4;
    const char *proto = NULL;
    int dport = -1;
    if (ip->protocol == IPPROTO_TCP) {
        proto = "tcp";
        if (l4len >= 4)
            dport = l4[2] << 8 | l4[3];
    } else if (ip->protocol == IPPROTO_UDP) {
        proto = "udp";
        if (l4len >= 4)
            dport = l4[2] << 8 | l4[3];
    } else if (ip->protocol == IPPROTO_ICMP) {
        proto = "icmp";
    }
    if (proto)
        json_object_set_new(r, "proto", json_string(proto));
    else
        json_object_set_new(r, "proto", json_integer(ip->protocol));
    json_object_set_new(r, "src", json_string(src));
    json_object_set_new(r, "dst", json_string(dst));
    if (dport >= 0)
        json_object_set_new(r, "dport", json_integer(dport));
    brig_net_log_add(s, r);
}

struct nflog_attrs {
    const char *prefix;
    int indev, outdev;
    const uint8_t *payload;
    size_t payload_len;
};

static int nflog_attr_cb(const struct nlattr *a, void *arg)
{
    struct nflog_attrs *x = arg;
    switch (mnl_attr_get_type(a)) {
    case NFULA_PREFIX:
        if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
            x->prefix = mnl_attr_get_str(a);
        break;
    case NFULA_IFINDEX_INDEV:
        if (mnl_attr_get_payload_len(a) == 4)
            x->indev = (int)ntohl(mnl_attr_get_u32(a));
        break;
    case NFULA_IFINDEX_OUTDEV:
        if (mnl_attr_get_payload_len(a) == 4)
            x->outdev = (int)ntohl(mnl_attr_get_u32(a));
        break;
    case NFULA_PAYLOAD:
        x->payload = mnl_attr_get_payload(a);
        x->payload_len = mnl_attr_get_payload_len(a);
        break;
    }
    return MNL_CB_OK;
}

static int nflog_msg_cb(const struct nlmsghdr *nlh, void *arg)
{
    brig_net *n = arg;
    if ((nlh->nlmsg_type & 0xff) != NFULNL_MSG_PACKET)
        return MNL_CB_OK;
    struct nflog_attrs x = {.prefix = ""};
    mnl_attr_parse(nlh, sizeof(struct nfgenmsg), nflog_attr_cb, &x);
    if (x.payload)
        nflog_record(n, x.prefix, x.indev, x.outdev, x.payload, x.payload_len);
    return MNL_CB_OK;
}

static void nflog_in(brig_net *n)
{
    brig_proxy *p = n->proxy;
    for (int i = 0; i < 64; i++) {
        ssize_t len = recv(mnl_socket_get_fd(p->nflog), p->buf, sizeof(p->buf), MSG_DONTWAIT);
        if (len <= 0)
            return; /* ENOBUFS (records lost under a flood) included */
        mnl_cb_run(p->buf, (size_t)len, 0, 0, nflog_msg_cb, n);
    }
}

static int nflog_config(struct mnl_socket *nl, uint16_t group, void (*put)(struct nlmsghdr *))
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = 1;
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(group);
    put(nlh);
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    ssize_t len = mnl_socket_recvfrom(nl, buf, sizeof(buf));
    if (len < 0)
        return -errno;
    if (mnl_cb_run(buf, (size_t)len, 1, mnl_socket_get_portid(nl), NULL, NULL) < 0)
        return -errno;
    return 0;
}

static void put_bind(struct nlmsghdr *nlh)
{
    struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
    mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
}

static void put_mode(struct nlmsghdr *nlh)
{
    struct nfulnl_msg_config_mode mode = {.copy_range = htonl(128),
                                          .copy_mode = NFULNL_COPY_PACKET};
    mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
    mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1)); /* deliver each record at once */
}

static struct mnl_socket *nflog_open(void)
{
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (nl == NULL || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        brig_warn("net: NFLOG socket: %s; denied connections are not logged", strerror(errno));
        if (nl)
            mnl_socket_close(nl);
        return NULL;
    }
    /* The config replies are read blocking; the socket is non-blocking for
     * the loop, so wait for each reply with a short poll-free retry. */
    int fd = mnl_socket_get_fd(nl);
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int e = nflog_config(nl, BRIG_NET_LOG_GROUP, put_bind);
    if (e == 0)
        e = nflog_config(nl, BRIG_NET_LOG_GROUP, put_mode);
    fcntl(fd, F_SETFL, fl);
    if (e < 0) {
        brig_warn("net: bind NFLOG group %d: %s; denied connections are not logged",
                  BRIG_NET_LOG_GROUP, strerror(-e));
        mnl_socket_close(nl);
        return NULL;
    }
    int big = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    return nl;
}

/* ---- the loop ----------------------------------------------------------- */

static int64_t next_deadline(brig_net *n)
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

static void expire(brig_net *n)
{
    int64_t now = brig_now_mono_ms();
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next) {
        for (brig_dns_pending *q = s->queries, *nx; q; q = nx) {
            nx = q->next;
            if (q->deadline > now)
                continue;
            log_dns(s, &q->q, true, BRIG_DNS_SERVFAIL, NULL, q->conn ? "tcp" : "udp");
            if (q->conn || q->client.sin_family == AF_INET)
                reply_rcode(s, &q->client, q->conn, q->msg, q->msg_len, BRIG_DNS_SERVFAIL);
            pending_free(n, s, q);
        }
        for (brig_dns_conn *c = s->conns, *nx; c; c = nx) {
            nx = c->next;
            if (c->deadline <= now)
                conn_close(n->proxy, s, c);
        }
    }
}

static void handle(brig_net *n, watch *w)
{
    if (w->s && w->s->dead)
        return;
    switch (w->type) {
    case W_WAKE: {
        uint64_t v;
        (void)!read(n->proxy->wake_fd, &v, sizeof(v));
        break;
    }
    case W_NFLOG:
        nflog_in(n);
        break;
    case W_UDP:
        udp_in(n, w->s);
        break;
    case W_TCP_LISTEN:
        tcp_accept(n, w->s);
        break;
    case W_TCP_CONN:
        tcp_in(n, w->s, w->obj);
        break;
    case W_UPSTREAM:
        /* An answer may cost a firewall transaction (allowlist): a few per
         * sandbox per round, so that one sandbox's flood of answers cannot
         * hold up everyone else's.  The rest stay readable for the next
         * round (epoll is level-triggered and reports them after the others). */
        if (w->s->round != n->proxy->round) {
            w->s->round = n->proxy->round;
            w->s->round_answers = 0;
        }
        if (w->s->round_answers++ < BRIG_NET_ANSWERS_PER_ROUND)
            upstream_in(n, w->s, w->obj);
        break;
    }
}

static void *loop(void *arg)
{
    brig_net *n = arg;
    brig_proxy *p = n->proxy;
    struct epoll_event evs[64];
    for (;;) {
        pthread_mutex_lock(&n->lock);
        int64_t d = next_deadline(n);
        pthread_mutex_unlock(&n->lock);
        int64_t now = brig_now_mono_ms();
        int timeout = d == INT64_MAX ? -1 : d <= now ? 0 : (int)(d - now);
        int k = epoll_wait(p->ep, evs, (int)BRIG_ARRAY_LEN(evs), timeout);
        pthread_mutex_lock(&n->lock);
        if (p->stop) {
            pthread_mutex_unlock(&n->lock);
            return NULL;
        }
        p->round++;
        for (int i = 0; i < k; i++)
            handle(n, evs[i].data.ptr);
        expire(n);
        /* Detached sandboxes: none of their watches is in epoll any more,
         * and this batch is done with them. */
        while (n->graveyard) {
            brig_net_sandbox *s = n->graveyard;
            n->graveyard = s->next;
            brig_net_sandbox_free(s);
        }
        pthread_mutex_unlock(&n->lock);
    }
}

int brig_proxy_start(brig_net *n, brig_error **err)
{
    brig_proxy *p = brig_xcalloc(1, sizeof(*p));
    p->ep = epoll_create1(EPOLL_CLOEXEC);
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->ep < 0 || p->wake_fd < 0) {
        int e = errno;
        if (p->ep >= 0)
            close(p->ep);
        if (p->wake_fd >= 0)
            close(p->wake_fd);
        free(p);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "DNS proxy: epoll");
    }
    n->proxy = p;
    p->wake_w = (watch){.type = W_WAKE};
    watch_add(p, p->wake_fd, &p->wake_w);
    p->nflog = nflog_open();
    p->ct = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (p->ct && mnl_socket_bind(p->ct, 0, MNL_SOCKET_AUTOPID) < 0) {
        mnl_socket_close(p->ct);
        p->ct = NULL;
    }
    if (p->ct == NULL)
        brig_warn("net: ctnetlink socket: %s; upstream DNS queries keep their conntrack entries",
                  strerror(errno));
    if (p->nflog) {
        p->nflog_w = (watch){.type = W_NFLOG};
        watch_add(p, mnl_socket_get_fd(p->nflog), &p->nflog_w);
    }
    int e = pthread_create(&p->thread, NULL, loop, n);
    if (e != 0) {
        brig_proxy_stop(n);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "DNS proxy: start thread");
    }
    p->running = true;
    return 0;
}

void brig_proxy_stop(brig_net *n)
{
    brig_proxy *p = n->proxy;
    if (p == NULL)
        return;
    if (p->running) {
        pthread_mutex_lock(&n->lock);
        p->stop = true;
        pthread_mutex_unlock(&n->lock);
        uint64_t one = 1;
        (void)!write(p->wake_fd, &one, sizeof(one));
        pthread_join(p->thread, NULL);
    }
    if (p->nflog)
        mnl_socket_close(p->nflog);
    if (p->ct)
        mnl_socket_close(p->ct);
    close(p->wake_fd);
    close(p->ep);
    free(p);
    n->proxy = NULL;
}

void brig_proxy_wake(brig_net *n)
{
    uint64_t one = 1;
    if (n->proxy)
        (void)!write(n->proxy->wake_fd, &one, sizeof(one));
}

static int bound_socket(int type, uint32_t gw, brig_error **err)
{
    int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return brig_error_sys(err, "DNS proxy socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = gw};
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (type == SOCK_STREAM && listen(fd, 16) < 0)) {
        int e = errno;
        close(fd);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "DNS proxy: bind port 53");
    }
    return fd;
}

int brig_proxy_add(brig_net *n, brig_net_sandbox *s, brig_error **err)
{
    s->udp_fd = bound_socket(SOCK_DGRAM, s->gw, err);
    if (s->udp_fd < 0)
        return -1;
    s->tcp_fd = bound_socket(SOCK_STREAM, s->gw, err);
    if (s->tcp_fd < 0) {
        close(s->udp_fd);
        s->udp_fd = -1;
        return -1;
    }
    watch *u = brig_xcalloc(1, sizeof(*u)), *t = brig_xcalloc(1, sizeof(*t));
    *u = (watch){.type = W_UDP, .s = s};
    *t = (watch){.type = W_TCP_LISTEN, .s = s};
    s->udp_watch = u;
    s->tcp_watch = t;
    watch_add(n->proxy, s->udp_fd, u);
    watch_add(n->proxy, s->tcp_fd, t);
    return 0;
}

void brig_proxy_remove(brig_net *n, brig_net_sandbox *s)
{
    brig_proxy *p = n->proxy;
    /* fds are closed now; memory the current batch may still point at is
     * freed with the sandbox (brig_net_sandbox_free). */
    for (brig_dns_pending *q = s->queries; q; q = q->next)
        if (q->fd >= 0) {
            ct_forget(n, q);
            watch_del(p, q->fd);
            close(q->fd);
            q->fd = -1;
        }
    for (brig_dns_conn *c = s->conns; c; c = c->next)
        if (c->fd >= 0) {
            watch_del(p, c->fd);
            close(c->fd);
            c->fd = -1;
        }
    if (s->udp_fd >= 0) {
        watch_del(p, s->udp_fd);
        close(s->udp_fd);
        s->udp_fd = -1;
    }
    if (s->tcp_fd >= 0) {
        watch_del(p, s->tcp_fd);
        close(s->tcp_fd);
        s->tcp_fd = -1;
    }
}

void brig_proxy_sandbox_free(brig_net_sandbox *s)
{
    for (brig_dns_pending *q = s->queries, *nx; q; q = nx) {
        nx = q->next;
        if (q->fd >= 0)
            close(q->fd);
        free(q->msg);
        free(q);
    }
    for (brig_dns_conn *c = s->conns, *nx; c; c = nx) {
        nx = c->next;
        if (c->fd >= 0)
            close(c->fd);
        free(c);
    }
    if (s->udp_fd >= 0)
        close(s->udp_fd);
    if (s->tcp_fd >= 0)
        close(s->tcp_fd);
    free(s->udp_watch);
    free(s->tcp_watch);
    s->queries = NULL;
    s->conns = NULL;
}
