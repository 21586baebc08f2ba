/*
 * net.h - sandbox networking: each sandbox's network namespace joined to the
 * host (veth + NAT), the project's egress policy enforced on the host with
 * nftables, a DNS proxy per sandbox, and a per-sandbox network log.
 * docs/network.md is the model; this is the interface brigd's lifecycle uses.
 *
 * Two flavours behind one interface (net.c): "host" does all of that
 * (brig_net_new); "none" (brig_net_none: networking off, or the host cannot
 * do it) does nothing and succeeds, so callers need no "if networking".
 *
 * Threading: every function may be called from any API thread; the module
 * serialises what it must.  Ownership: brig_net_attach returns a handle that
 * brig_net_detach frees.  A NULL handle (a sandbox without a network: every
 * sandbox under the none flavour) is nothing to do for any function.
 *
 * The types this interface takes (brig_egress, brig_net_config, the injection
 * rules) are in nettypes.h, which net/'s own files share without net.c.
 */
#ifndef BRIG_NET_H
#define BRIG_NET_H

#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "nettypes.h" /* the types below, the egress policy's JSON, the proxy's CA */

/* The host flavour: host-wide set-up (nftables table, forwarding, NAT).
 * Fails with a clear error when the host cannot do it (no nftables, no netlink
 * permission, another brigd managing this network namespace). */
int brig_net_new(const brig_net_config *cfg, brig_net **out, brig_error **err);
/* The none flavour (one static object; NULL is taken for it too): attach and
 * reattach give no handle (*out NULL, no resolv.conf: the sandbox keeps an
 * isolated namespace with loopback only), a policy is accepted, the log is an
 * empty array, cleanup and brig_net_free do nothing. */
brig_net *brig_net_none(void);
/* Whether n connects sandboxes (false for the none flavour). */
bool brig_net_enabled(const brig_net *n);
/* Host-wide tear-down at shutdown: sandboxes stay connected (they are
 * re-attached at the next start). */
void brig_net_free(brig_net *n);

/* Connects the network namespace netns_fd (the sandbox's) to the host under
 * policy: link, addresses, routes, firewall, DNS proxy.  *resolv_conf receives
 * the content for the sandbox's /etc/resolv.conf (caller frees; NULL when
 * there is none to write). */
int brig_net_attach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                    brig_net_sandbox **out, char **resolv_conf, brig_error **err);

/* After a brigd restart: rebuilds the handle of a sandbox attached by a
 * previous run (its link still exists), applying policy again. */
int brig_net_reattach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                      brig_net_sandbox **out, brig_error **err);

/* Applies a new policy to a running sandbox (effective within 1 s).  Not
 * concurrent with brig_net_detach / brig_net_release of the same handle. */
int brig_net_set_policy(brig_net *n, brig_net_sandbox *s, const brig_egress *policy,
                        brig_error **err);

/* Frees s without touching the host (brigd's shutdown: the sandbox stays
 * connected and is re-attached at the next start). */
void brig_net_forget(brig_net *n, brig_net_sandbox *s);

/* Removes everything of the sandbox on the host side and frees s. */
void brig_net_detach(brig_net *n, brig_net_sandbox *s);
/* Same, once the sandbox's network namespace is gone (its runtime destroyed):
 * the kernel removes the link pair itself, so this does not wait for it. */
void brig_net_release(brig_net *n, brig_net_sandbox *s);

/* Removes leftovers of sandboxes that no longer exist (start-up reconcile):
 * every link, firewall element and address of a sandbox id not in live_ids. */
void brig_net_cleanup(brig_net *n, char *const *live_ids, size_t n_live);

/* The sandbox's network log: DNS queries and denied connections, oldest first
 * (a new JSON array). */
json_t *brig_net_log(brig_net *n, brig_net_sandbox *s);

/* A sandbox's traffic as the sandbox sees it: in = what its link's host end sent it. */
typedef struct brig_net_counters {
    int64_t bytes_in, bytes_out, packets_in, packets_out;
} brig_net_counters;
/* The counters of sandbox_id's link (by its id: no handle, so a sampler need not hold
 * one); -1 when it has none (the none flavour; not attached; gone).  Asks the kernel. */
int brig_net_counters_of(brig_net *n, const char *sandbox_id, brig_net_counters *out);

/* Sets the hook (brig_net_log_hook, nettypes.h: each record as it enters a sandbox's
 * network log), before any sandbox is attached (NULL: none); the none flavour has no
 * log and ignores it. */
void brig_net_set_log_hook(brig_net *n, brig_net_log_hook fn, void *ctx);

/* ---- credential injection (docs/secrets.md) ---------------------------------------
 * A sandbox with rules has its TCP 80 (and 443) redirected to brigd's egress proxy on
 * its gateway (inject.c): requests toward a rule's host get the rule's headers, whose
 * values name secrets the sandbox never holds; a request that carries a placeholder
 * toward another host is refused (403) and logged.  The rules' types, and
 * brig_net_ca_make (the proxy's CA), are in nettypes.h. */

/* Sets (copies) the sandbox's rules and the secrets they may use; no rules (inj NULL
 * or n_rules 0) turns the proxy off for it.  The none flavour accepts and ignores it. */
int brig_net_set_inject(brig_net *n, brig_net_sandbox *s, const brig_inject *inj, brig_error **err);

/* Grants s the credential g (copied; its expires_ms set) for its rules until it expires:
 * a rules change keeps it, a later grant of its name replaces it; recorded in the
 * network log (name and expiry only), and so is its expiry, once, by the proxy's
 * timer when it comes (verdict "expired").  BRIG_E_INVALID when s has no rules; the none
 * flavour accepts and ignores it. */
int brig_net_inject_grant(brig_net *n, brig_net_sandbox *s, const brig_inject_secret *g,
                          brig_error **err);

/* Ends s's grant of name now, if it is still the one that expires at expires_ms (a later
 * grant of the name replaced it otherwise, and stays): the credential of an exec that
 * was granted for that exec only, at the exec's end.  Its expiry is recorded at once,
 * with why (reason).  The none flavour ignores it. */
void brig_net_inject_end(brig_net *n, brig_net_sandbox *s, const char *name, int64_t expires_ms,
                         const char *reason);

#endif
