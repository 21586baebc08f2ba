/*
 * net.c - the network backend behind net.h: a table of operations chosen once
 * at start-up (runtime/cgroup.c's flavours are the model).
 *
 *   host  veth links, nftables, the DNS proxy (attach.c, host.c, proxy.c ...);
 *         brig_net_new makes it
 *   none  networking off or unavailable (brig_net_none): every operation does
 *         nothing and succeeds.  A sandbox gets no link and no handle, so its
 *         namespace has loopback only (never an unfiltered network); its log
 *         is empty; a policy is accepted (there is no egress to police).
 *
 * Callers never test which flavour they hold (healthz asks brig_net_enabled);
 * a NULL brig_net (a brigd that stopped before its network started) is the
 * none flavour too.  A NULL sandbox handle (a sandbox without a network) is
 * nothing to do for either flavour.
 */
#include "net.h"
#include "netshared.h"

#include <linux/if_link.h>

/* ---- the none flavour ---------------------------------------------------- */

static int none_attach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                       brig_net_sandbox **out, char **resolv_conf, brig_error **err)
{
    (void)n, (void)sandbox_id, (void)netns_fd, (void)policy, (void)err;
    *out = NULL;
    if (resolv_conf)
        *resolv_conf = NULL; /* the image's own stays: nothing answers it */
    return 0;
}

static int none_reattach(brig_net *n, const char *sandbox_id, int netns_fd,
                         const brig_egress *policy, brig_net_sandbox **out, brig_error **err)
{
    return none_attach(n, sandbox_id, netns_fd, policy, out, NULL, err);
}

static int none_set_policy(brig_net *n, brig_net_sandbox *s, const brig_egress *policy,
                           brig_error **err)
{
    (void)n, (void)s, (void)policy, (void)err;
    return 0;
}

static void none_drop(brig_net *n, brig_net_sandbox *s)
{
    (void)n, (void)s;
}

static void none_cleanup(brig_net *n, char *const *live_ids, size_t n_live)
{
    (void)n, (void)live_ids, (void)n_live;
}

static json_t *none_log(brig_net *n, brig_net_sandbox *s)
{
    (void)n, (void)s;
    return json_array();
}

static void none_free(brig_net *n)
{
    (void)n; /* the one static object */
}

static const brig_net_ops none_ops = {
    .name = "none",
    .attach = none_attach,
    .reattach = none_reattach,
    .set_policy = none_set_policy,
    .forget = none_drop,
    .detach = none_drop,
    .release = none_drop,
    .cleanup = none_cleanup,
    .log = none_log,
    .free = none_free,
};

static brig_net none_net = {.ops = &none_ops};

brig_net *brig_net_none(void)
{
    return &none_net;
}

/* ---- the host flavour ------------------------------------------------------ */

static const brig_net_ops host_ops = {
    .name = "host",
    .attach = brig_net_host_attach,
    .reattach = brig_net_host_reattach,
    .set_policy = brig_net_host_set_policy,
    .forget = brig_net_host_forget,
    .detach = brig_net_host_detach,
    .release = brig_net_host_release,
    .cleanup = brig_net_host_cleanup,
    .log = brig_net_host_log,
    .free = brig_net_host_free,
};

int brig_net_new(const brig_net_config *cfg, brig_net **out, brig_error **err)
{
    *out = NULL;
    brig_net_host *h = NULL;
    if (brig_net_host_new(cfg, &h, err) < 0)
        return -1;
    h->base.ops = &host_ops;
    *out = &h->base;
    return 0;
}

/* ---- net.h's functions --------------------------------------------------------- */

static const brig_net_ops *ops_of(const brig_net *n)
{
    return n ? n->ops : &none_ops;
}

bool brig_net_enabled(const brig_net *n)
{
    return ops_of(n) != &none_ops;
}

void brig_net_free(brig_net *n)
{
    ops_of(n)->free(n);
}

int brig_net_attach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                    brig_net_sandbox **out, char **resolv_conf, brig_error **err)
{
    return ops_of(n)->attach(n, sandbox_id, netns_fd, policy, out, resolv_conf, err);
}

int brig_net_reattach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                      brig_net_sandbox **out, brig_error **err)
{
    return ops_of(n)->reattach(n, sandbox_id, netns_fd, policy, out, err);
}

int brig_net_set_policy(brig_net *n, brig_net_sandbox *s, const brig_egress *policy,
                        brig_error **err)
{
    return s ? ops_of(n)->set_policy(n, s, policy, err) : 0;
}

void brig_net_forget(brig_net *n, brig_net_sandbox *s)
{
    if (s)
        ops_of(n)->forget(n, s);
}

void brig_net_detach(brig_net *n, brig_net_sandbox *s)
{
    if (s)
        ops_of(n)->detach(n, s);
}

void brig_net_release(brig_net *n, brig_net_sandbox *s)
{
    if (s)
        ops_of(n)->release(n, s);
}

void brig_net_cleanup(brig_net *n, char *const *live_ids, size_t n_live)
{
    ops_of(n)->cleanup(n, live_ids, n_live);
}

void brig_net_set_log_hook(brig_net *n, brig_net_log_hook fn, void *ctx)
{
    if (!brig_net_enabled(n))
        return;
    brig_net_host *h = brig_net_host_of(n);
    pthread_mutex_lock(&h->lock);
    h->log_hook = fn;
    h->log_hook_ctx = ctx;
    pthread_mutex_unlock(&h->lock);
}

json_t *brig_net_log(brig_net *n, brig_net_sandbox *s)
{
    return s ? ops_of(n)->log(n, s) : json_array();
}

int brig_net_counters_of(brig_net *n, const char *sandbox_id, brig_net_counters *out)
{
    *out = (brig_net_counters){-1, -1, -1, -1};
    if (!brig_net_enabled(n))
        return -1;
    char ifname[16];
    brig_net_ifname_of(sandbox_id, ifname);
    brig_rtnl *r = NULL;
    struct rtnl_link_stats64 st;
    int rc = brig_rtnl_open(&r, NULL);
    if (rc == 0)
        rc = brig_rtnl_link_stats(r, ifname, &st, NULL);
    brig_rtnl_close(r);
    if (rc < 0)
        return -1;
    /* The host's end receives what the sandbox sends. */
    *out = (brig_net_counters){.bytes_in = (int64_t)st.tx_bytes,
                               .bytes_out = (int64_t)st.rx_bytes,
                               .packets_in = (int64_t)st.tx_packets,
                               .packets_out = (int64_t)st.rx_packets};
    return 0;
}

int brig_net_set_inject(brig_net *n, brig_net_sandbox *s, const brig_inject *inj, brig_error **err)
{
    if (!brig_net_enabled(n) || s == NULL)
        return 0;
    return brig_inject_set(brig_net_host_of(n), s, inj, err);
}

int brig_net_inject_grant(brig_net *n, brig_net_sandbox *s, const brig_inject_secret *g,
                          brig_error **err)
{
    if (!brig_net_enabled(n) || s == NULL)
        return 0;
    return brig_inject_grant(brig_net_host_of(n), s, g, err);
}

void brig_net_inject_end(brig_net *n, brig_net_sandbox *s, const char *name, int64_t expires_ms,
                         const char *reason)
{
    if (brig_net_enabled(n) && s)
        brig_inject_end(brig_net_host_of(n), s, name, expires_ms, reason);
}
