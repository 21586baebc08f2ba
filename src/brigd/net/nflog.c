/*
 * nflog.c - denied packets: the firewall (fw.c) logs what it drops for a
 * sandbox to NFLOG group BRIG_NET_LOG_GROUP with a prefix saying why ("out",
 * "in", "host", "spoof", "limit"), at most 10 a second per link; the proxy
 * thread reads them here and adds a "denied" record to the sandbox's network
 * log (netlog.c).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/ip.h>
#include <unistd.h>

#include "dnsproxy.h"

static void nflog_record(brig_net_host *n, const char *prefix, int indev, int outdev,
                         const uint8_t *pkt, size_t len)
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
    brig_net_host *n = arg;
    if ((nlh->nlmsg_type & 0xff) != NFULNL_MSG_PACKET)
        return MNL_CB_OK;
    struct nflog_attrs x = {.prefix = ""};
    mnl_attr_parse(nlh, sizeof(struct nfgenmsg), nflog_attr_cb, &x);
    if (x.payload)
        nflog_record(n, x.prefix, x.indev, x.outdev, x.payload, x.payload_len);
    return MNL_CB_OK;
}

void brig_nflog_read(brig_net_host *n, struct mnl_socket *nl, uint8_t *buf, size_t cap)
{
    for (int i = 0; i < 64; i++) {
        ssize_t len = recv(mnl_socket_get_fd(nl), buf, cap, MSG_DONTWAIT);
        if (len <= 0)
            return; /* ENOBUFS (records lost under a flood) included */
        mnl_cb_run(buf, (size_t)len, 0, 0, nflog_msg_cb, n);
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

struct mnl_socket *brig_nflog_open(void)
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
