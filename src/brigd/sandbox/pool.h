/*
 * pool.h - the warm pool: sandboxes started ahead of demand, per template,
 * tariff and isolation, so that a create only has to claim one (and connect its
 * network and write its store row) instead of starting a sandbox.
 *
 * A pooled sandbox belongs to nobody: it has an id, a uid range, a running
 * agent and, with networking on, its link under the egress policy "none" (it
 * reaches nothing); no account, no store row.  It is claimed as it is; what is
 * the account's (project, env, secrets, egress policy, billing from the claim
 * on) is applied at claim time.  Filler threads (one per CPU, at most 4, each with one
 * start under way) top the pool up after each claim, within the host's capacity, as
 * background work: once no sandbox request has run for a few milliseconds, or 100 ms after
 * the claim at the latest (starting at once when the pool is empty made the claimer's own
 * exec ~3.5 ms slower on 2 CPUs, and kept no more of a tight loop's creates warm).  Pooled
 * sandboxes do not survive brigd: shutdown destroys them, and a crash leaves them to the next
 * start's reconcile, which removes whatever the store does not know.
 *
 * Configured as `warm_pool = auto` (the default: adaptive pools, one per template, tariff
 * and isolation that creates ask for, a user's template's per account too, each sized from its
 * create rate within a memory budget, shrinking away when unused; pool.c), `off`, or pinned sizes
 * `TEMPLATE:TARIFF:COUNT[:ISOLATION][,…]` (the isolation is container when not given;
 * TEMPLATE may be ACCOUNT/NAME:TAG, a user's template, with its tag always given),
 * with `auto` beside them for adaptive pools of everything else.
 */
#ifndef BRIG_POOL_H
#define BRIG_POOL_H

#include <jansson.h>

#include "error.h"
#include "core/id.h"
#include "net/net.h"
#include "runtime/runtime.h"
#include "server.h"

typedef struct brig_pool brig_pool;

typedef struct brig_pooled {
    char id[BRIG_ID_MAX];
    int64_t uid_base;
    brig_rt_sandbox *rt;   /* owned by whoever claimed it */
    brig_net_sandbox *net; /* likewise; NULL with networking off */
} brig_pooled;

/* Starts the filler for cfg.warm_pool; d->pool stays NULL when it is off. */
int brig_pool_start(brigd *d, brig_error **err);
/* Stops the filler and destroys every pooled sandbox. */
void brig_pool_stop(brigd *d);

/* Takes a ready sandbox of this template build (brig_template.build: a forced
 * rebuild under the same key is another build), tariff and isolation; 0 on a hit.
 * account: "" for a built-in template; a user's template ("name:tag") is pooled per
 * account, and a sandbox pooled for one account is never handed to another. */
int brig_pool_claim(brigd *d, const char *account, const char *template, const char *template_build,
                    const char *tariff, brig_isolation iso, brig_pooled *out);

/* Destroys the pooled sandboxes of account's template (NULL: any) of build (NULL: any),
 * and a start under way for them is thrown away when it ends.  With a template, its
 * adaptive pools shrink away (they come back with its next create). */
void brig_pool_drop(brigd *d, const char *account, const char *template, const char *build);

/* {"TEMPLATE/TARIFF": {"ready": n, "target": n, "hits": n, "misses": n, "adaptive": b,
 * "creates_per_s": x}, …}; a gvisor entry's key is "TEMPLATE/TARIFF/gvisor".  The users'
 * templates are summed up as "user/TARIFF" (the figures are public: no name is). */
json_t *brig_pool_stats(brigd *d);

#endif
