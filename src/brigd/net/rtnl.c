/*
 * rtnl.c - the links, addresses and routes of sandbox networking, over
 * rtnetlink with libmnl (no `ip` on the hot path).
 *
 * Every request asks for an ACK and waits for it, so a failure is reported
 * where it happens with the kernel's errno.  A brig_rtnl socket belongs to the
 * network namespace of the thread that opened it: brig_netns_configure opens
 * one on a short-lived thread that joined the sandbox's namespace, so the
 * calling thread never changes namespace (a setns that failed to restore
 * would leave an API thread in a sandbox's network).
 */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "netshared.h"

struct brig_rtnl {
    struct mnl_socket *nl;
    unsigned int seq;
    unsigned int portid;
    char buf[8192];
};

int brig_rtnl_open(brig_rtnl **out, brig_error **err)
{
    brig_rtnl *r = brig_xcalloc(1, sizeof(*r));
    r->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (r->nl == NULL || mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int e = errno;
        brig_rtnl_close(r);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "netlink socket");
    }
    r->portid = mnl_socket_get_portid(r->nl);
    r->seq = (unsigned int)time(NULL);
    *out = r;
    return 0;
}

void brig_rtnl_close(brig_rtnl *r)
{
    if (r == NULL)
        return;
    if (r->nl)
        mnl_socket_close(r->nl);
    free(r);
}

static struct nlmsghdr *msg_start(brig_rtnl *r, uint16_t type, uint16_t flags)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(r->buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = NLM_F_REQUEST | flags;
    nlh->nlmsg_seq = ++r->seq;
    return nlh;
}

/* Sends nlh and reads replies until the ACK (or DONE for dumps), calling cb
 * for data messages.  Returns 0 or -errno. */
static int transact(brig_rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg)
{
    unsigned int seq = nlh->nlmsg_seq;
    if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(r->nl, r->buf, sizeof(r->buf));
        if (n < 0)
            return -errno;
        int ret = mnl_cb_run(r->buf, (size_t)n, seq, r->portid, cb, arg);
        if (ret < 0)
            return -errno;
        if (ret == MNL_CB_STOP)
            return 0;
    }
}

int brig_rtnl_veth_add(brig_rtnl *r, const char *host_if, const char *peer_if, int netns_fd,
                       brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
    struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifm));
    pifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_if);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
    mnl_attr_nest_end(nlh, peer);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, linkinfo);
    int e = transact(r, nlh, NULL, NULL);
    if (e < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "create veth %s", host_if);
    return 0;
}

int brig_rtnl_link_up(brig_rtnl *r, int ifindex, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_NEWLINK, NLM_F_ACK);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = ifindex;
    ifm->ifi_flags = IFF_UP;
    ifm->ifi_change = IFF_UP;
    int e = transact(r, nlh, NULL, NULL);
    if (e < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "set link %d up", ifindex);
    return 0;
}

int brig_rtnl_link_no_ipv6(brig_rtnl *r, int ifindex, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_NEWLINK, NLM_F_ACK);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = ifindex;
    struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
    struct nlattr *in6 = mnl_attr_nest_start(nlh, AF_INET6);
    mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
    mnl_attr_nest_end(nlh, in6);
    mnl_attr_nest_end(nlh, spec);
    int e = transact(r, nlh, NULL, NULL);
    /* EAFNOSUPPORT: a kernel without IPv6 - nothing to turn off. */
    if (e < 0 && e != -EAFNOSUPPORT)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "turn IPv6 off on link %d", ifindex);
    return 0;
}

int brig_rtnl_addr_add(brig_rtnl *r, int ifindex, uint32_t addr, int prefix, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)prefix;
    ifa->ifa_index = (unsigned int)ifindex;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    mnl_attr_put_u32(nlh, IFA_LOCAL, addr);
    mnl_attr_put_u32(nlh, IFA_ADDRESS, addr);
    int e = transact(r, nlh, NULL, NULL);
    if (e < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "add address to link %d", ifindex);
    return 0;
}

int brig_rtnl_route_default(brig_rtnl *r, int ifindex, uint32_t gw, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = 0;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_STATIC;
    rtm->rtm_scope = RT_SCOPE_UNIVERSE;
    rtm->rtm_type = RTN_UNICAST;
    mnl_attr_put_u32(nlh, RTA_GATEWAY, gw);
    mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
    int e = transact(r, nlh, NULL, NULL);
    if (e < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "add default route");
    return 0;
}

int brig_rtnl_link_del(brig_rtnl *r, const char *ifname, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_DELLINK, NLM_F_ACK);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
    int e = transact(r, nlh, NULL, NULL);
    if (e < 0 && e != -ENODEV)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "delete link %s", ifname);
    return 0;
}

struct addr_get {
    int ifindex;
    uint32_t addr;
    bool found;
};

static int addr_cb(const struct nlmsghdr *nlh, void *arg)
{
    struct addr_get *g = arg;
    const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
    if (ifa->ifa_family != AF_INET || (int)ifa->ifa_index != g->ifindex || g->found)
        return MNL_CB_OK;
    const struct nlattr *a;
    mnl_attr_for_each(a, nlh, sizeof(*ifa))
    {
        if (mnl_attr_get_type(a) == IFA_LOCAL && mnl_attr_get_payload_len(a) == 4) {
            g->addr = mnl_attr_get_u32(a);
            g->found = true;
        }
    }
    return MNL_CB_OK;
}

int brig_rtnl_addr_get(brig_rtnl *r, int ifindex, uint32_t *addr, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_GETADDR, NLM_F_DUMP);
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    struct addr_get g = {.ifindex = ifindex};
    int e = transact(r, nlh, addr_cb, &g);
    if (e < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "list addresses");
    if (!g.found)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "link %d has no IPv4 address", ifindex);
    *addr = g.addr;
    return 0;
}

struct links {
    const char *prefix;
    char (*names)[IFNAMSIZ];
    size_t n, cap;
};

static int link_cb(const struct nlmsghdr *nlh, void *arg)
{
    struct links *l = arg;
    const struct nlattr *a;
    mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
    {
        if (mnl_attr_get_type(a) != IFLA_IFNAME)
            continue;
        const char *name = mnl_attr_get_str(a);
        if (strncmp(name, l->prefix, strlen(l->prefix)) != 0 || strlen(name) >= IFNAMSIZ)
            continue;
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 16;
            l->names = brig_xrealloc(l->names, l->cap * IFNAMSIZ);
        }
        strcpy(l->names[l->n++], name);
    }
    return MNL_CB_OK;
}

int brig_rtnl_links(brig_rtnl *r, const char *prefix, void (*fn)(const char *name, void *arg),
                    void *arg, brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_GETLINK, NLM_F_DUMP);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    struct links l = {.prefix = prefix};
    int e = transact(r, nlh, link_cb, &l);
    if (e < 0) {
        free(l.names);
        return brig_error_set(err, BRIG_E_INTERNAL, -e, "list links");
    }
    /* The callback runs after the dump: fn may issue requests of its own. */
    for (size_t i = 0; i < l.n; i++)
        fn(l.names[i], arg);
    free(l.names);
    return 0;
}

static int stats_cb(const struct nlmsghdr *nlh, void *arg)
{
    const struct nlattr *a;
    mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
    {
        if (mnl_attr_get_type(a) == IFLA_STATS64 &&
            mnl_attr_get_payload_len(a) >= sizeof(struct rtnl_link_stats64))
            memcpy(arg, mnl_attr_get_payload(a), sizeof(struct rtnl_link_stats64));
    }
    return MNL_CB_OK;
}

int brig_rtnl_link_stats(brig_rtnl *r, const char *ifname, struct rtnl_link_stats64 *out,
                         brig_error **err)
{
    struct nlmsghdr *nlh = msg_start(r, RTM_GETLINK, NLM_F_ACK);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
    memset(out, 0, sizeof(*out));
    int e = transact(r, nlh, stats_cb, out);
    if (e < 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, -e, "link %s", ifname);
    return 0;
}

/* ---- the in-namespace half --------------------------------------------- */

struct ns_job {
    int netns_fd;
    uint32_t sb, gw;
    brig_error *err;
};

static int ns_configure(struct ns_job *j)
{
    /* Only this thread moves: CLONE_NEWNET is per thread, and the thread
     * ends right after, so nothing else ever runs in the sandbox's namespace. */
    if (setns(j->netns_fd, CLONE_NEWNET) < 0)
        return brig_error_sys(&j->err, "join the sandbox's network namespace");
    brig_rtnl *r = NULL;
    if (brig_rtnl_open(&r, &j->err) < 0)
        return -1;
    int rc = -1;
    int lo = (int)if_nametoindex("lo");
    int eth = (int)if_nametoindex(BRIG_NET_PEER_IF);
    if (lo == 0 || eth == 0) {
        brig_error_sys(&j->err, "find the sandbox's links");
        goto out;
    }
    if (brig_rtnl_link_up(r, lo, &j->err) < 0 || brig_rtnl_link_no_ipv6(r, eth, &j->err) < 0 ||
        brig_rtnl_addr_add(r, eth, j->sb, 31, &j->err) < 0 ||
        brig_rtnl_link_up(r, eth, &j->err) < 0 ||
        brig_rtnl_route_default(r, eth, j->gw, &j->err) < 0)
        goto out;
    rc = 0;
out:
    brig_rtnl_close(r);
    return rc;
}

static void *ns_thread(void *arg)
{
    struct ns_job *j = arg;
    ns_configure(j);
    return NULL;
}

int brig_netns_configure(int netns_fd, uint32_t sb, uint32_t gw, brig_error **err)
{
    struct ns_job j = {.netns_fd = netns_fd, .sb = sb, .gw = gw};
    pthread_t t;
    int e = pthread_create(&t, NULL, ns_thread, &j);
    if (e != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, e, "start the namespace helper thread");
    pthread_join(t, NULL);
    if (j.err) {
        brig_error_set(err, j.err->kind, 0, "in the sandbox's namespace: %s", j.err->msg);
        if (err && *err)
            (*err)->errnum = j.err->errnum;
        brig_error_clear(&j.err);
        return -1;
    }
    return 0;
}
