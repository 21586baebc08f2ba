/*
 * fw.c - the host's firewall for sandboxes: one nftables table ("inet brig")
 * whose rules never change after start-up; each sandbox is only set and map
 * elements keyed by its host-side link name, so attaching, changing a policy
 * and detaching are one small transaction each.  The table is written once
 * through libnftables; the elements go through netlink directly (nfset.c):
 * libnftables would parse text and dump the table's sets and chains into its
 * cache before each command (about 0.9 ms of a warm-pool claim's 1.7 ms).
 *
 * Keys are link names ("brg" + hash of the sandbox id), never addresses: an
 * address is reused by a later sandbox, a name is not, so an element a
 * detached sandbox left behind (a DNS grant still in its timeout) can never
 * open anything for another one.
 *
 * The order of checks for a packet from a sandbox (chain egress) is the
 * security contract of docs/network.md:
 *   1. a connection already accepted under the sandbox's current policy
 *      generation (conntrack mark in @live) goes on;
 *   2. always denied: link-local and metadata, loopback, multicast, the
 *      sandbox pool (other sandboxes), "this network";
 *   3. allow-listed CIDRs (they may open private ranges);
 *   4. private ranges are denied;
 *   5. by mode: open accepts, allowlist accepts addresses the DNS proxy
 *      returned, none (no element) falls through;
 *   6. ports (allowlist), then a new connection counts against the sandbox's
 *      connection limit (ct count), then accept with the conntrack mark, else
 *      deny.
 * Anything addressed to the host itself (any of its addresses) is input, not
 * forward: only DNS to the sandbox's own gateway passes.  That DNS is not
 * tracked (notrack both ways, before conntrack sees it): the proxy answers
 * it, no state is needed, and a sandbox cycling through source ports or
 * half-open TCP connections must not fill the host's conntrack table.
 * IPv6 from a sandbox link is dropped before routing.  Forwarded or host
 * traffic towards a sandbox passes only as a reply (conntrack
 * established/related) or as its DNS answers.
 * Denied packets are logged to NFLOG group BRIG_NET_LOG_GROUP, at most 10 a
 * second per link (burst 20); nflog.c turns them into network-log records.
 *
 * DNS grants (allow_dns) are added and removed only here.  A removal never
 * fails for an element that timed out meanwhile: each one is added (a no-op
 * when present) and deleted in the same transaction, so a revocation is one
 * transaction whose size is bounded by the caller (grants.c caps grants per
 * sandbox and revokes in chunks).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "netshared.h"
#include "nfset.h"

/* The lock is first come, first served (a ticket lock): a revocation's series
 * of transactions lets every waiter in between two of them.  It is taken for
 * one transaction and its answers, nothing else: its holder
 * never waits for another lock (netshared.h's order). */
struct brig_fw {
    struct nft_ctx *ctx; /* the table's creation and removal */
    brig_nfset *nfs;     /* every element change (nfset.h) */
    pthread_mutex_t m;
    pthread_cond_t turn;
    uint64_t next, serving;
};

#define T "inet " BRIG_NET_TABLE

/* The whole table; %1$s = the pool, %2$s = the forward isolation rule, %3$d
 * = the log group, %4$d = the tracked connections a sandbox may hold, %5$d and %6$d = the egress
 * proxy's ports (inject.c).  Chains end in an explicit verdict: a chain that merely returns would
 * hand the packet back to a base chain whose policy is accept. */
static const char table_fmt[] =
    "table inet brig {\n"
    "  set sb_src { type ifname . ipv4_addr; }\n" /* link . its sandbox's address */
    "  set sb_gw { type ifname . ipv4_addr; }\n"  /* link . its gateway (DNS) */
    "  map sb_mode { type ifname : verdict; }\n"  /* link : open / allowlist */
    "  map sb_gen { type ifname : mark; }\n"      /* link : policy generation */
    "  set live { type mark; }\n"                 /* current generations */
    "  set allow_cidr { type ifname . ipv4_addr; flags interval; }\n"
    "  set allow_dns { type ifname . ipv4_addr; flags timeout; }\n"
    "  set sb_ports { type ifname . inet_service; }\n"
    "  set sb_anyport { type ifname; }\n"
    "  set sb_inject { type ifname; }\n" /* links whose TCP 80/443 go to the proxy */
    "  set logrl { type ifname; flags dynamic,timeout; timeout 1m; }\n"
    "  set conns { type ifname; flags dynamic; }\n" /* link : its connections (ct count) */
    "  set deny_always { type ipv4_addr; flags interval; elements = { 0.0.0.0/8, 127.0.0.0/8,"
    " 169.254.0.0/16, 100.100.100.200, 192.0.0.0/24, 224.0.0.0/3, %1$s } }\n"
    "  set deny_private { type ipv4_addr; flags interval; elements = { 10.0.0.0/8,"
    " 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16, 198.18.0.0/15 } }\n"
    "  chain prerouting { type filter hook prerouting priority raw; policy accept;\n"
    "    iifname \"brg*\" meta nfproto ipv6 drop\n"
    "    iifname \"brg*\" iifname . ip saddr != @sb_src jump deny_spoof\n"
    "    meta l4proto { udp, tcp } th dport 53 iifname . ip daddr @sb_gw notrack\n"
    "  }\n"
    "  chain prerouting_nat { type nat hook prerouting priority dstnat; policy accept;\n"
    "    iifname @sb_inject tcp dport 80 redirect to :%5$d\n"
    "    iifname @sb_inject tcp dport 443 redirect to :%6$d\n"
    "  }\n"
    "  chain output_raw { type filter hook output priority raw; policy accept;\n"
    "    meta l4proto { udp, tcp } th sport 53 oifname . ip saddr @sb_gw notrack\n"
    "  }\n"
    "  chain input { type filter hook input priority filter; policy accept;\n"
    "    iifname \"brg*\" jump sb_input\n"
    "  }\n"
    "  chain sb_input {\n"
    "    tcp dport { %5$d, %6$d } iifname @sb_inject iifname . ip daddr @sb_gw accept\n"
    "    meta l4proto { udp, tcp } th dport 53 iifname . ip daddr @sb_gw accept\n"
    "    jump deny_host\n"
    "  }\n"
    "  chain output { type filter hook output priority filter; policy accept;\n"
    "    meta l4proto { udp, tcp } th sport 53 oifname . ip saddr @sb_gw accept\n"
    "    oifname \"brg*\" ct state established,related accept\n"
    "    oifname \"brg*\" jump deny_in\n"
    "  }\n"
    "  chain forward { type filter hook forward priority filter; policy accept;\n"
    "    oifname \"brg*\" ct state established,related accept\n"
    "    oifname \"brg*\" iifname != \"brg*\" jump deny_in\n"
    "    iifname \"brg*\" jump egress\n"
    "    iifname \"brg*\" drop\n"
    "%2$s"
    "  }\n"
    "  chain egress {\n"
    "    ct state established,related ct mark @live accept\n"
    "    ip daddr @deny_always jump deny_out\n"
    "    iifname . ip daddr @allow_cidr jump allowed\n"
    "    ip daddr @deny_private jump deny_out\n"
    "    iifname vmap @sb_mode\n"
    "    jump deny_out\n"
    "  }\n"
    "  chain egress_open {\n"
    "    jump accept_conn\n"
    "  }\n"
    "  chain egress_allow {\n"
    "    iifname . ip daddr @allow_dns jump allowed\n"
    "    jump deny_out\n"
    "  }\n"
    "  chain allowed {\n"
    "    iifname @sb_anyport jump accept_conn\n"
    "    meta l4proto { tcp, udp } iifname . th dport @sb_ports jump accept_conn\n"
    "    jump deny_out\n"
    "  }\n"
    "  chain accept_conn {\n"
    "    ct state new add @conns { iifname ct count over %4$d } jump deny_limit\n"
    "    ct mark set iifname map @sb_gen\n"
    "    accept\n"
    "  }\n"
    "  chain deny_out {\n"
    "    update @logrl { iifname limit rate 10/second burst 20 packets } log prefix \"out \""
    " group %3$d\n"
    "    drop\n"
    "  }\n"
    "  chain deny_limit {\n"
    "    update @logrl { iifname limit rate 10/second burst 20 packets } log prefix \"limit \""
    " group %3$d\n"
    "    drop\n"
    "  }\n"
    "  chain deny_host {\n"
    "    update @logrl { iifname limit rate 10/second burst 20 packets } log prefix \"host \""
    " group %3$d\n"
    "    drop\n"
    "  }\n"
    "  chain deny_spoof {\n"
    "    update @logrl { iifname limit rate 10/second burst 20 packets } log prefix \"spoof \""
    " group %3$d\n"
    "    drop\n"
    "  }\n"
    "  chain deny_in {\n"
    "    update @logrl { oifname limit rate 10/second burst 20 packets } log prefix \"in \""
    " group %3$d\n"
    "    drop\n"
    "  }\n"
    "  chain postrouting { type nat hook postrouting priority srcnat; policy accept;\n"
    "    ip saddr %1$s oifname != \"brg*\" masquerade\n"
    "  }\n"
    "}\n";

static void fw_acquire(brig_fw *fw)
{
    pthread_mutex_lock(&fw->m);
    uint64_t ticket = fw->next++;
    while (ticket != fw->serving)
        pthread_cond_wait(&fw->turn, &fw->m);
    pthread_mutex_unlock(&fw->m);
}

static void fw_release(brig_fw *fw)
{
    pthread_mutex_lock(&fw->m);
    fw->serving++;
    pthread_cond_broadcast(&fw->turn);
    pthread_mutex_unlock(&fw->m);
}

int brig_fw_run(brig_fw *fw, const char *cmds, brig_error **err)
{
    int rc = 0;
    fw_acquire(fw);
    if (nft_run_cmd_from_buffer(fw->ctx, cmds) != 0) {
        const char *e = nft_ctx_get_error_buffer(fw->ctx);
        /* The first line is the kernel's or the parser's message. */
        size_t n = e ? strcspn(e, "\n") : 0;
        rc = brig_error_set(err, BRIG_E_INTERNAL, 0, "nftables: %.*s", (int)n, e ? e : "");
    } else {
        nft_ctx_get_error_buffer(fw->ctx); /* drains warnings */
    }
    fw_release(fw);
    return rc;
}

int brig_fw_new(const char *pool, bool isolate_forward, int connections_max, brig_fw **out,
                brig_error **err)
{
    brig_fw *fw = brig_xcalloc(1, sizeof(*fw));
    fw->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    if (fw->ctx == NULL) {
        free(fw);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "nftables: cannot create a context");
    }
    pthread_mutex_init(&fw->m, NULL);
    pthread_cond_init(&fw->turn, NULL);
    nft_ctx_buffer_output(fw->ctx);
    nft_ctx_buffer_error(fw->ctx);
    const char *iso = isolate_forward ? "    iifname != \"brg*\" oifname != \"brg*\" drop\n" : "";
    /* One transaction: whatever a previous run left is replaced atomically
     * (its sandboxes are re-attached by brig_net_reattach). */
    _cleanup_free_ char *body =
        brig_asprintf(table_fmt, pool, iso, BRIG_NET_LOG_GROUP, connections_max,
                      BRIG_NET_INJECT_HTTP_PORT, BRIG_NET_INJECT_TLS_PORT);
    _cleanup_free_ char *cmds = brig_asprintf("table " T "\ndelete table " T "\n%s", body);
    if (brig_fw_run(fw, cmds, err) < 0) {
        brig_error_prefix(err, "install the firewall table");
        brig_fw_free(fw);
        return -1;
    }
    if (brig_nfset_open(BRIG_NET_TABLE, &fw->nfs, err) < 0) {
        brig_fw_free(fw);
        return -1;
    }
    *out = fw;
    return 0;
}

void brig_fw_free(brig_fw *fw)
{
    if (fw == NULL)
        return;
    nft_ctx_free(fw->ctx);
    brig_nfset_close(fw->nfs);
    pthread_mutex_destroy(&fw->m);
    pthread_cond_destroy(&fw->turn);
    free(fw);
}

void brig_fw_drop_table(brig_fw *fw)
{
    brig_error *err = NULL;
    if (brig_fw_run(fw, "delete table " T "\n", &err) < 0) {
        brig_warn("%s", err->msg);
        brig_error_clear(&err);
    }
}

/* A transaction's elements, in order (nfset.h). */
typedef struct elist {
    brig_nfelem *v;
    size_t n, cap;
} elist;

/* A new element of set, keyed by the link name first (every set but live is). */
static brig_nfelem *push(elist *l, const char *set, bool del, const char *ifname)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = brig_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    brig_nfelem *e = &l->v[l->n++];
    memset(e, 0, sizeof(*e));
    e->set = set;
    e->del = del;
    if (ifname)
        brig_nfkey_ifname(&e->key, ifname);
    return e;
}

static int apply(brig_fw *fw, elist *l, brig_error **err)
{
    fw_acquire(fw);
    int rc = brig_nfset_apply(fw->nfs, l->v, l->n, err);
    fw_release(fw);
    free(l->v);
    return rc;
}

static uint32_t mask_be(int len)
{
    return htonl(len == 0 ? 0 : 0xffffffffu << (32 - len));
}

/* The elements that depend on the policy. */
static void policy_elements(elist *l, bool del, const brig_fw_sandbox *s)
{
    const char *ifn = s->ifname;
    brig_nfelem *e = push(l, "sb_gen", del, ifn);
    e->data = BRIG_NFDATA_MARK;
    e->mark = s->gen;
    brig_nfkey_mark(&push(l, "live", del, NULL)->key, s->gen);
    const brig_egress *p = s->policy;
    if (p->mode == BRIG_EGRESS_OPEN || p->mode == BRIG_EGRESS_ALLOWLIST) {
        e = push(l, "sb_mode", del, ifn);
        e->data = BRIG_NFDATA_JUMP;
        e->chain = p->mode == BRIG_EGRESS_OPEN ? "egress_open" : "egress_allow";
    }
    if (p->mode != BRIG_EGRESS_ALLOWLIST)
        return;
    uint32_t *addrs = NULL;
    int *lens = NULL;
    size_t n = brig_egress_cidrs4(p, &addrs, &lens);
    for (size_t i = 0; i < n; i++) { /* an interval: first . last address */
        e = push(l, "allow_cidr", del, ifn);
        brig_nfkey_ip4(&e->key, addrs[i]);
        brig_nfkey_ifname(&e->key_end, ifn);
        brig_nfkey_ip4(&e->key_end, addrs[i] | ~mask_be(lens[i]));
    }
    free(addrs);
    free(lens);
    if (p->n_ports == 0)
        push(l, "sb_anyport", del, ifn);
    for (size_t i = 0; i < p->n_ports; i++) {
        /* Duplicates would make "delete" fail: skip repeats. */
        bool dup = false;
        for (size_t k = 0; k < i && !dup; k++)
            dup = p->ports[k] == p->ports[i];
        if (!dup)
            brig_nfkey_port(&push(l, "sb_ports", del, ifn)->key, (uint16_t)p->ports[i]);
    }
}

static void link_elements(elist *l, bool del, const brig_fw_sandbox *s)
{
    brig_nfkey_ip4(&push(l, "sb_src", del, s->ifname)->key, s->addr);
    brig_nfkey_ip4(&push(l, "sb_gw", del, s->ifname)->key, s->gw);
}

int brig_fw_sandbox_add(brig_fw *fw, const brig_fw_sandbox *s, brig_error **err)
{
    elist l = {0};
    link_elements(&l, false, s);
    policy_elements(&l, false, s);
    return apply(fw, &l, err);
}

/* Elements the packet path adds for a link (log rate limit, connection
 * count), removed whether or not they exist: added (a no-op when present) and
 * deleted in one transaction. */
static void dynamic_elements_del(elist *l, const char *ifname)
{
    static const char *const sets[] = {"logrl", "conns", "sb_inject"};
    for (int del = 0; del < 2; del++)
        for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
            push(l, sets[i], del, ifname);
}

int brig_fw_sandbox_del(brig_fw *fw, const brig_fw_sandbox *s, brig_error **err)
{
    elist l = {0};
    policy_elements(&l, true, s);
    link_elements(&l, true, s);
    dynamic_elements_del(&l, s->ifname);
    return apply(fw, &l, err);
}

int brig_fw_sandbox_update(brig_fw *fw, const brig_fw_sandbox *old, const brig_fw_sandbox *new_,
                           brig_error **err)
{
    elist l = {0};
    policy_elements(&l, true, old);
    policy_elements(&l, false, new_);
    return apply(fw, &l, err);
}

/* allow_dns { "ifname" . a, ... } with each element's timeout when ttls is set. */
static void dns_elements(elist *l, bool del, const char *ifname, const uint32_t *addrs,
                         const int *ttls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        brig_nfelem *e = push(l, "allow_dns", del, ifname);
        brig_nfkey_ip4(&e->key, addrs[i]);
        e->timeout_s = ttls ? (uint32_t)ttls[i] : 0;
    }
}

int brig_fw_grant(brig_fw *fw, const char *ifname, const uint32_t *addrs, const int *ttls, size_t n,
                  const uint32_t *evict, size_t n_evict, brig_error **err)
{
    if (n == 0 && n_evict == 0)
        return 0;
    elist l = {0};
    if (n_evict > 0) {
        dns_elements(&l, false, ifname, evict, NULL, n_evict);
        dns_elements(&l, true, ifname, evict, NULL, n_evict);
    }
    /* An element that is there already gets the new timeout. */
    if (n > 0)
        dns_elements(&l, false, ifname, addrs, ttls, n);
    return apply(fw, &l, err);
}

int brig_fw_revoke(brig_fw *fw, const char *ifname, const uint32_t *addrs, size_t n,
                   brig_error **err)
{
    return brig_fw_grant(fw, ifname, NULL, NULL, 0, addrs, n, err);
}

int brig_fw_inject(brig_fw *fw, const char *ifname, bool on, brig_error **err)
{
    /* Added (a no-op when present) before a delete, so either is idempotent. */
    elist l = {0};
    push(&l, "sb_inject", false, ifname);
    if (!on)
        push(&l, "sb_inject", true, ifname);
    return apply(fw, &l, err);
}
