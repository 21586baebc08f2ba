/*
 * stub.c - placeholder until the real network module lands: sandboxes keep the
 * isolated network namespace runc gives them (loopback only), whatever the
 * policy.  brig_net_new fails, so brigd runs with networking off.
 */
#include "net.h"

int brig_net_new(const brig_net_config *cfg, brig_net **out, brig_error **err)
{
    (void)cfg;
    *out = NULL;
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "sandbox networking is not built yet");
}

void brig_net_free(brig_net *n)
{
    (void)n;
}

int brig_net_attach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                    brig_net_sandbox **out, char **resolv_conf, brig_error **err)
{
    (void)n, (void)sandbox_id, (void)netns_fd, (void)policy, (void)out, (void)resolv_conf;
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "sandbox networking is not built yet");
}

int brig_net_reattach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                      brig_net_sandbox **out, brig_error **err)
{
    (void)n, (void)sandbox_id, (void)netns_fd, (void)policy, (void)out;
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "sandbox networking is not built yet");
}

int brig_net_set_policy(brig_net *n, brig_net_sandbox *s, const brig_egress *policy,
                        brig_error **err)
{
    (void)n, (void)s, (void)policy;
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "sandbox networking is not built yet");
}

void brig_net_forget(brig_net *n, brig_net_sandbox *s)
{
    (void)n, (void)s;
}

void brig_net_detach(brig_net *n, brig_net_sandbox *s)
{
    (void)n, (void)s;
}

void brig_net_cleanup(brig_net *n, char *const *live_ids, size_t n_live)
{
    (void)n, (void)live_ids, (void)n_live;
}

json_t *brig_net_log(brig_net *n, brig_net_sandbox *s)
{
    (void)n, (void)s;
    return json_array();
}
