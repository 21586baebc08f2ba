/*
 * attach.h - a sandbox's network: connecting a started sandbox (its link, its egress
 * policy, its /etc/resolv.conf), giving it its project's policy, finding it again
 * after a restart, and applying a project's new policy to its running sandboxes.  A
 * sandbox made with no egress of its own (spec egress_none) gets "none" instead of its
 * project's policy, at create, after a restart and at every change of the project's.
 *
 * Without networking d->net is the none flavour (net/net.h): every call succeeds and a
 * sandbox keeps an isolated namespace with loopback only, its network handle NULL; no
 * code here asks which flavour it has.  The create (orchestrator.c), the warm pool and reconcile
 * call these; none of them calls back up.
 */
#ifndef BRIG_ATTACH_H
#define BRIG_ATTACH_H

#include "error.h"
#include "net/net.h"
#include "registry.h"
#include "runtime/runtime.h"
#include "server.h"

/* Connects a started sandbox (id, rt) to the network under policy and writes its
 * /etc/resolv.conf; its network in *out (NULL without networking).  On failure nothing
 * of it stays on the host side. */
int brig_attach_network(brigd *d, const char *id, brig_rt_sandbox *rt, const brig_egress *policy,
                        brig_net_sandbox **out, brig_error **err);

/* Connects the network namespace netns_fd of sandbox id before the sandbox starts,
 * reaching nothing (under "none", as a warm sandbox): for a runtime's net_first
 * (runtime.h), whose sandbox takes the interfaces it finds when it starts (gvisor).
 * *resolv: its /etc/resolv.conf (caller frees), for brig_attach_resolv once it runs;
 * brig_attach_project then gives it its project's policy. */
int brig_attach_early(brigd *d, const char *id, int netns_fd, brig_net_sandbox **out, char **resolv,
                      brig_error **err);
/* Writes resolv (NULL: nothing to write) to the started sandbox's /etc/resolv.conf. */
int brig_attach_resolv(brigd *d, brig_rt_sandbox *rt, const char *resolv, brig_error **err);
/* Connects a sandbox being created under its project's policy (a claimed warm sandbox
 * is connected already, under "none": it only gets the policy). */
int brig_attach_project(brigd *d, brig_sandbox *sb, brig_error **err);

/* A running sandbox found again after a restart: its network taken back under its
 * project's policy.  A failure is logged; the sandbox then has none. */
void brig_attach_again(brigd *d, brig_sandbox *sb);

/* After a restart: removes every sandbox network except those of kept (ids). */
void brig_attach_cleanup(brigd *d, char *const *kept, size_t n_kept);

/* Applies a project's new egress policy to its running sandboxes (not to those with no
 * egress of their own). */
void brig_sandbox_apply_policy(brigd *d, const char *project_id, const brig_egress *policy);

#endif
