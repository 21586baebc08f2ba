/*
 * attach.c - the host flavour's work on one sandbox: attach, reattach after a
 * restart, a policy change, detach, and the start-up sweep of links whose
 * sandbox is gone.
 *
 * Attach, in order (each step's failure unwinds the ones before):
 *   1. claim a slot                                     (host.c, lock)
 *   2. veth brgXXXXXXXXXXXX <-> eth0, the peer created inside the sandbox's
 *      namespace; host end: IPv6 off, gw/31, up          (rtnl.c)
 *   3. inside the namespace: lo up, eth0 sb/31, IPv6 off, up, default route
 *      (short-lived thread, rtnl.c)
 *   4. firewall elements: anti-spoof, DNS to gw, mode, CIDRs, ports,
 *      generation                                        (fw.c, one transaction)
 *   5. DNS proxy sockets on gw:53 (UDP, TCP); register     (proxy.c, lock)
 * Until step 4 the sandbox has no firewall element, so all its traffic is
 * dropped: a half-attached sandbox is an offline one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "netshared.h"

static brig_fw_sandbox fw_view(const brig_net_sandbox *s, const brig_egress *p, uint32_t gen)
{
    return (brig_fw_sandbox){
        .ifname = s->ifname, .addr = s->addr, .gw = s->gw, .policy = p, .gen = gen};
}

/* Steps 4 and 5 of attach (and all of reattach's host work after the link is
 * found): firewall, DNS sockets, registration. */
static int sandbox_activate(brig_net_host *n, brig_net_sandbox *s, brig_error **err)
{
    brig_fw_sandbox v = fw_view(s, &s->policy, s->gen);
    if (brig_fw_sandbox_add(n->fw, &v, err) < 0)
        return -1;
    pthread_mutex_lock(&n->lock);
    int rc = brig_net_find_id(n, s->id)
                 ? brig_error_set(err, BRIG_E_CONFLICT, 0, "already attached")
                 : brig_proxy_add(n, s, err);
    if (rc == 0) {
        s->next = n->sandboxes;
        n->sandboxes = s;
    }
    pthread_mutex_unlock(&n->lock);
    if (rc < 0)
        brig_fw_sandbox_del(n->fw, &v, NULL);
    return rc;
}

int brig_net_host_attach(brig_net *net, const char *sandbox_id, int netns_fd,
                         const brig_egress *policy, brig_net_sandbox **out, char **resolv_conf,
                         brig_error **err)
{
    brig_net_host *n = brig_net_host_of(net);
    *out = NULL;
    if (resolv_conf)
        *resolv_conf = NULL;
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = brig_net_sandbox_new(n, sandbox_id, policy);
    s->slot = brig_net_slot_claim(n);
    pthread_mutex_unlock(&n->lock);
    if (s->slot < 0) {
        brig_net_sandbox_free(s);
        return brig_error_set(err, BRIG_E_LIMIT, 0, "the sandbox network pool is exhausted");
    }
    s->gw = brig_net_slot_gw(n, (size_t)s->slot);
    s->addr = brig_net_slot_sb(n, (size_t)s->slot);

    brig_rtnl *r = NULL;
    if (brig_rtnl_open(&r, err) < 0)
        goto fail_slot;
    if (brig_rtnl_veth_add(r, s->ifname, BRIG_NET_PEER_IF, netns_fd, err) < 0)
        goto fail_rtnl;
    s->ifindex = (int)if_nametoindex(s->ifname);
    if (s->ifindex == 0) {
        brig_error_sys(err, "find link %s", s->ifname);
        goto fail_link;
    }
    /* IPv6 off on the host end before it is up: no link-local address, no
     * router advertisement accepted from the sandbox (the firewall drops
     * IPv6 from sandbox links as well). */
    char path[96];
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", s->ifname);
    if (brig_net_sysctl_write(path, "1\n") < 0 && errno != ENOENT) {
        brig_error_sys(err, "turn IPv6 off on %s", s->ifname);
        goto fail_link;
    }
    if (brig_rtnl_addr_add(r, s->ifindex, s->gw, 31, err) < 0 ||
        brig_rtnl_link_up(r, s->ifindex, err) < 0)
        goto fail_link;
    if (brig_netns_configure(netns_fd, s->addr, s->gw, err) < 0)
        goto fail_link;
    if (sandbox_activate(n, s, err) < 0)
        goto fail_link;
    brig_rtnl_close(r);
    if (resolv_conf) {
        char g[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &s->gw, g, sizeof(g));
        *resolv_conf = brig_asprintf("nameserver %s\noptions timeout:2 attempts:2\n", g);
    }
    *out = s;
    return 0;

fail_link:
    brig_rtnl_link_del(r, s->ifname, NULL);
fail_rtnl:
    brig_rtnl_close(r);
fail_slot:
    brig_net_slot_release(n, s->slot);
    brig_error_prefix(err, "attach network of %s", sandbox_id);
    brig_net_sandbox_free(s);
    return -1;
}

int brig_net_host_reattach(brig_net *net, const char *sandbox_id, int netns_fd,
                           const brig_egress *policy, brig_net_sandbox **out, brig_error **err)
{
    brig_net_host *n = brig_net_host_of(net);
    (void)netns_fd; /* the namespace side survived with the sandbox */
    *out = NULL;
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = brig_net_sandbox_new(n, sandbox_id, policy);
    pthread_mutex_unlock(&n->lock);
    s->ifindex = (int)if_nametoindex(s->ifname);
    if (s->ifindex == 0) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "reattach network of %s: link %s is gone",
                       sandbox_id, s->ifname);
        brig_net_sandbox_free(s);
        return -1;
    }
    brig_rtnl *r = NULL;
    uint32_t gw = 0;
    int rc = brig_rtnl_open(&r, err);
    if (rc == 0)
        rc = brig_rtnl_addr_get(r, s->ifindex, &gw, err);
    brig_rtnl_close(r);
    uint32_t g = ntohl(gw);
    if (rc == 0 && (g < n->pool_base || (g - n->pool_base) / 2 >= n->n_slots || (g & 1)))
        rc = brig_error_set(err, BRIG_E_INVALID, 0, "link %s is outside the pool", s->ifname);
    if (rc == 0) {
        pthread_mutex_lock(&n->lock);
        size_t slot = (g - n->pool_base) / 2;
        if (n->slot_used[slot])
            rc = brig_error_set(err, BRIG_E_CONFLICT, 0, "address of %s in use", s->ifname);
        else
            n->slot_used[slot] = 1, s->slot = (int)slot;
        pthread_mutex_unlock(&n->lock);
    }
    if (rc == 0) {
        s->gw = gw;
        s->addr = htonl(g + 1);
        rc = sandbox_activate(n, s, err);
        if (rc < 0)
            brig_net_slot_release(n, s->slot);
    }
    if (rc < 0) {
        brig_error_prefix(err, "reattach network of %s", sandbox_id);
        brig_net_sandbox_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

int brig_net_host_set_policy(brig_net *net, brig_net_sandbox *s, const brig_egress *policy,
                             brig_error **err)
{
    brig_net_host *n = brig_net_host_of(net);
    uint32_t *revoked = NULL;
    size_t n_revoked = 0;
    pthread_mutex_lock(&n->lock);
    uint32_t gen = brig_net_gen_next(n);
    brig_fw_sandbox old = fw_view(s, &s->policy, s->gen), new_ = fw_view(s, policy, gen);
    int rc = brig_fw_sandbox_update(n->fw, &old, &new_, err);
    if (rc == 0) {
        /* Connections marked with the old generation are re-checked against
         * the new policy at their next packet (fw.c, chain egress).  From
         * here on the proxy opens only what the new policy allows. */
        brig_egress_dispose(&s->policy);
        brig_egress_copy(&s->policy, policy);
        s->gen = gen;
        revoked = brig_net_grants_take(s, policy, &n_revoked);
    } else {
        brig_error_prefix(err, "apply egress policy to %s", s->id);
    }
    pthread_mutex_unlock(&n->lock);
    brig_net_grants_close(n, s, revoked, n_revoked, true);
    free(revoked);
    return rc;
}

/* Under n->lock: takes s out of the registry and the proxy. */
static void unregister(brig_net_host *n, brig_net_sandbox *s)
{
    brig_net_sandbox **pp = &n->sandboxes;
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    s->next = NULL;
    brig_proxy_remove(n, s);
    brig_inject_remove(n, s);
    s->dead = true; /* events already fetched for it are skipped */
}

void brig_net_host_forget(brig_net *net, brig_net_sandbox *s)
{
    brig_net_host *n = brig_net_host_of(net);
    pthread_mutex_lock(&n->lock);
    unregister(n, s);
    if (s->slot >= 0)
        n->slot_used[s->slot] = 0;
    s->next = n->graveyard;
    n->graveyard = s;
    pthread_mutex_unlock(&n->lock);
    brig_proxy_wake(n);
}

/* del_link: remove the host end (and with it the pair) now; without it, the
 * sandbox's namespace is already gone and the kernel removes the pair itself,
 * in the background (a synchronous delete waits ~20 ms for the network stack).
 * The address slot is reusable at once either way: allocation moves on through
 * the pool, so a slot comes round again long after its old link went. */
static void detach(brig_net_host *n, brig_net_sandbox *s, bool del_link)
{
    size_t n_revoked = 0;
    pthread_mutex_lock(&n->lock);
    unregister(n, s);
    _cleanup_free_ uint32_t *revoked = brig_net_grants_take(s, NULL, &n_revoked);
    pthread_mutex_unlock(&n->lock);

    /* Unregistered, s is this thread's alone: no lock but the firewall's. */
    brig_error *err = NULL;
    brig_fw_sandbox v = fw_view(s, &s->policy, s->gen);
    if (brig_fw_sandbox_del(n->fw, &v, &err) < 0) {
        brig_warn("net: detach %s: %s", s->id, err->msg);
        brig_error_clear(&err);
    }
    brig_net_grants_close(n, s, revoked, n_revoked, false);

    brig_rtnl *r = NULL;
    if (del_link && brig_rtnl_open(&r, &err) == 0)
        brig_rtnl_link_del(r, s->ifname, &err); /* takes the peer with it */
    if (err) {
        brig_warn("net: detach %s: %s", s->id, err->msg);
        brig_error_clear(&err);
    }
    brig_rtnl_close(r);

    pthread_mutex_lock(&n->lock);
    if (s->slot >= 0)
        n->slot_used[s->slot] = 0;
    s->next = n->graveyard; /* freed by the proxy thread after its batch */
    n->graveyard = s;
    pthread_mutex_unlock(&n->lock);
    brig_proxy_wake(n);
}

void brig_net_host_detach(brig_net *net, brig_net_sandbox *s)
{
    detach(brig_net_host_of(net), s, true);
}

void brig_net_host_release(brig_net *net, brig_net_sandbox *s)
{
    detach(brig_net_host_of(net), s, false);
}

struct cleanup_ctx {
    brig_net_host *n;
    brig_rtnl *r;
    char (*live)[16];
    size_t n_live;
};

static void cleanup_link(const char *name, void *arg)
{
    struct cleanup_ctx *c = arg;
    if (!brig_net_is_our_ifname(name))
        return;
    for (size_t i = 0; i < c->n_live; i++)
        if (strcmp(c->live[i], name) == 0)
            return;
    pthread_mutex_lock(&c->n->lock);
    bool attached = false;
    for (brig_net_sandbox *s = c->n->sandboxes; s && !attached; s = s->next)
        attached = strcmp(s->ifname, name) == 0;
    pthread_mutex_unlock(&c->n->lock);
    if (attached)
        return;
    brig_error *err = NULL;
    if (brig_rtnl_link_del(c->r, name, &err) < 0) {
        brig_warn("net: cleanup: %s", err->msg);
        brig_error_clear(&err);
    } else {
        brig_info("net: removed link %s of a sandbox that no longer exists", name);
    }
}

void brig_net_host_cleanup(brig_net *net, char *const *live_ids, size_t n_live)
{
    brig_net_host *n = brig_net_host_of(net);
    /* Firewall elements need no sweep: brig_net_new replaced the table, so it
     * holds only what this run attached.  Links (and with them the sandbox
     * ends and their addresses) are what outlives a crash. */
    struct cleanup_ctx c = {.n = n, .n_live = n_live};
    c.live = brig_xcalloc(n_live + 1, sizeof(*c.live));
    for (size_t i = 0; i < n_live; i++)
        brig_net_ifname_of(live_ids[i], c.live[i]);
    brig_error *err = NULL;
    if (brig_rtnl_open(&c.r, &err) == 0)
        brig_rtnl_links(c.r, BRIG_NET_IFPREFIX, cleanup_link, &c, &err);
    if (err) {
        brig_warn("net: cleanup: %s", err->msg);
        brig_error_clear(&err);
    }
    brig_rtnl_close(c.r);
    free(c.live);
}
