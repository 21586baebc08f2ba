/*
 * upstream.c - the DNS proxy's upstream side.  Each query goes upstream from
 * its own connected UDP socket (a fresh source port and id per query); once
 * it is answered or given up, its conntrack entry is deleted (ctnetlink), so
 * a sandbox's queries hold at most BRIG_NET_MAX_QUERIES entries of the host's
 * table, not one per query for the 30 s a UDP entry otherwise lingers.
 */
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <stdlib.h>
#include <unistd.h>

#include "dnsproxy.h"

/* Deletes the conntrack entry of an upstream query (best effort: an entry
 * that is not there, or a host without conntrack, is no error). */
static void ct_forget(brig_net_host *n, brig_dns_pending *q)
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

void brig_upstream_close(brig_net_host *n, brig_dns_pending *q)
{
    ct_forget(n, q);
    if (q->fd >= 0) {
        brig_proxy_watch_del(n->proxy, q->fd);
        close(q->fd);
        q->fd = -1;
    }
}

void brig_upstream_free(brig_net_host *n, brig_net_sandbox *s, brig_dns_pending *q)
{
    brig_upstream_close(n, q);
    brig_dns_pending **pp = &s->queries;
    while (*pp && *pp != q)
        pp = &(*pp)->next;
    if (*pp)
        *pp = q->next;
    s->n_queries--;
    free(q->msg);
    free(q);
}

int brig_upstream_send(brig_net_host *n, brig_net_sandbox *s, const uint8_t *msg, size_t len,
                       const brig_dns_question *q, const struct sockaddr_in *client,
                       brig_dns_conn *c)
{
    brig_dns_pending *pq = brig_xcalloc(1, sizeof(*pq));
    pq->w = (watch){.type = W_UPSTREAM, .s = s, .obj = pq};
    pq->q = *q;
    pq->client_id = q->id;
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
        return -1;
    }
    free(up);
    pq->msg = brig_xmalloc(len);
    memcpy(pq->msg, msg, len);
    pq->msg_len = len;
    pq->next = s->queries;
    s->queries = pq;
    s->n_queries++;
    brig_proxy_watch_add(n->proxy, pq->fd, &pq->w);
    return 0;
}

ssize_t brig_upstream_read(brig_net_host *n, brig_dns_pending *pq, brig_dns_answer *a)
{
    brig_proxy *p = n->proxy;
    ssize_t len = recv(pq->fd, p->buf, sizeof(p->buf), 0);
    if (len < 0)
        return -1; /* e.g. ECONNREFUSED: the timeout answers SERVFAIL */
    if (brig_dns_parse_answer(p->buf, (size_t)len, pq->upstream_id, &pq->q, a) < 0)
        return -1; /* not our answer: keep waiting */
    return len;
}
