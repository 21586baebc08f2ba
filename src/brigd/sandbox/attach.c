/*
 * attach.c - a sandbox's network (see attach.h).
 */
#include "attach.h"

#include <string.h>
#include <unistd.h>

#include "account/tenants.h"
#include "agentc/agentc.h"
#include "injection.h"
#include "log.h"

int brig_attach_resolv(brigd *d, brig_rt_sandbox *rt, const char *resolv, brig_error **err)
{
    if (resolv == NULL)
        return 0;
    int afd = d->rt->ops->connect(d->rt, rt, err);
    int r = afd < 0 ? -1 : brig_agentc_write_begin(afd, "/etc/resolv.conf", 0644, err);
    if (r == 0)
        r = brig_agentc_write_chunk(afd, resolv, strlen(resolv), err);
    if (r == 0)
        r = brig_agentc_write_end(afd, NULL, err);
    if (afd >= 0)
        close(afd);
    return r;
}

int brig_attach_network(brigd *d, const char *id, brig_rt_sandbox *rt, const brig_egress *policy,
                        brig_net_sandbox **out, brig_error **err)
{
    *out = NULL;
    int fd = d->rt->ops->netns(d->rt, rt, err);
    char *resolv = NULL;
    int r = fd < 0 ? -1 : brig_net_attach(d->net, id, fd, policy, out, &resolv, err);
    if (fd >= 0)
        close(fd);
    if (r == 0)
        r = brig_attach_resolv(d, rt, resolv, err);
    free(resolv);
    if (r < 0 && *out) {
        brig_net_detach(d->net, *out);
        *out = NULL;
    }
    return r;
}

int brig_attach_early(brigd *d, const char *id, int netns_fd, brig_net_sandbox **out, char **resolv,
                      brig_error **err)
{
    static const brig_egress none = {.mode = BRIG_EGRESS_NONE};
    return brig_net_attach(d->net, id, netns_fd, &none, out, resolv, err);
}

/* sb's egress policy, into *pol (brig_egress_dispose it): its project's, or none for a
 * sandbox made with no egress of its own (nothing the project says opens it). */
static int sandbox_policy(brigd *d, const brig_sandbox *sb, brig_egress *pol, brig_error **err)
{
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    if (sp->egress_none) {
        *pol = (brig_egress){.mode = BRIG_EGRESS_NONE};
        return 0;
    }
    const char *project_id = sp->project_id;
    json_t *ej = brig_project_egress(d, project_id);
    if (ej == NULL || brig_egress_from_json(ej, pol, err) < 0) {
        json_decref(ej);
        if (err && *err == NULL)
            brig_error_set(err, BRIG_E_INTERNAL, 0, "project %s has no egress policy", project_id);
        return -1;
    }
    json_decref(ej);
    return 0;
}

int brig_attach_project(brigd *d, brig_sandbox *sb, brig_error **err)
{
    brig_egress pol;
    if (sandbox_policy(d, sb, &pol, err) < 0)
        return -1;
    brig_net_sandbox *net = brig_sandbox_net(sb);
    int r;
    if (net) {
        r = brig_net_set_policy(d->net, net, &pol, err);
    } else {
        r = brig_attach_network(d, brig_sandbox_id(sb), brig_sandbox_runtime(sb), &pol, &net, err);
        brig_sandbox_set_net(sb, net);
    }
    brig_egress_dispose(&pol);
    if (r == 0)
        r = brig_injection_apply(d, sb, err);
    return r;
}

void brig_attach_again(brigd *d, brig_sandbox *sb)
{
    brig_egress pol;
    brig_error *err = NULL;
    int fd = -1;
    if (sandbox_policy(d, sb, &pol, &err) == 0) {
        brig_net_sandbox *net = NULL;
        fd = d->rt->ops->netns(d->rt, brig_sandbox_runtime(sb), &err);
        if (fd >= 0 && brig_net_reattach(d->net, brig_sandbox_id(sb), fd, &pol, &net, &err) < 0)
            net = NULL;
        brig_sandbox_set_net(sb, net);
        brig_egress_dispose(&pol);
        if (net && brig_injection_apply(d, sb, &err) < 0)
            brig_err("sandbox %s: injection rules after restart", brig_sandbox_id(sb));
    }
    if (fd >= 0)
        close(fd);
    if (err) {
        brig_err("sandbox %s: network after restart: %s", brig_sandbox_id(sb), err->msg);
        brig_error_clear(&err);
    }
}

void brig_attach_cleanup(brigd *d, char *const *kept, size_t n_kept)
{
    brig_net_cleanup(d->net, kept, n_kept);
}

static void apply_one(brigd *d, brig_sandbox *sb, void *arg)
{
    brig_error *err = NULL;
    if (brig_sandbox_spec_of(sb)->egress_none) /* its own: none, whatever the project's */
        return;
    if (brig_net_set_policy(d->net, brig_sandbox_net(sb), arg, &err) < 0) {
        brig_err("sandbox %s: apply egress policy: %s", brig_sandbox_id(sb), err->msg);
        brig_error_clear(&err);
    }
}

void brig_sandbox_apply_policy(brigd *d, const char *project_id, const brig_egress *policy)
{
    /* Each borrowed as use: its network stays while the policy is applied.  Paused ones
     * too: the policy is the host's firewall, and a resume must not find an old one. */
    brig_registry_each_running(d, project_id,
                               BRIG_EACH_USE | BRIG_EACH_NETWORKED | BRIG_EACH_TOO_PAUSED,
                               apply_one, (void *)policy);
}
