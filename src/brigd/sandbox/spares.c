/*
 * spares.c - spare agent connections for the sandboxes in use (see spares.h).
 *
 * Beginning a spare costs the request that asks for it a socket, a connect and a write
 * (runtime's `spares` op, connect_begin): nothing waits for the agent, which forks the
 * handler and answers while the request goes on.  A thread of its own only trims: every
 * TRIM_EVERY_MS it closes the spares of sandboxes without API use for BRIG_SPARES_IDLE_MS,
 * holding a plain reference to each (no use: trimming is not activity for the idle
 * timeout).  A begin that fails (the sandbox is ending or pausing meanwhile) only means no
 * spare: the next request opens its own connection, as it always could.
 */
#include "spares.h"

#include "core/worker.h"
#include "log.h"
#include "registry.h"
#include "util.h"

#define TRIM_EVERY_MS 10000 /* how often idle sandboxes' spares are looked for */

void brig_spares_fill(brigd *d, brig_sandbox *sb)
{
    brig_rt_sandbox *rt = brig_sandbox_runtime(sb);
    if (rt == NULL || d->rt->ops->spares == NULL)
        return;
    brig_error *err = NULL;
    if (d->rt->ops->spares(d->rt, rt, BRIG_SPARES_KEEP, &err) < 0)
        brig_debug("sandbox %s: no spare agent connection: %s", brig_sandbox_id(sb), err->msg);
    brig_error_clear(&err);
}

int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err)
{
    int fd = d->rt->ops->connect(d->rt, brig_sandbox_runtime(sb), err);
    if (fd >= 0)
        brig_spares_fill(d, sb);
    return fd;
}

static void trim_one(brigd *d, brig_sandbox *sb, void *arg)
{
    const int64_t *now = arg;
    brig_rt_sandbox *rt = brig_sandbox_runtime(sb);
    brig_sandbox_view v;
    brig_registry_view_of(d, sb, &v);
    bool idle = *now - v.last_activity >= BRIG_SPARES_IDLE_MS;
    brig_sandbox_view_dispose(&v);
    if (rt != NULL && idle)
        d->rt->ops->spares(d->rt, rt, 0, NULL);
}

static int64_t trim(void *arg)
{
    brigd *d = arg;
    int64_t now = brig_now_real_ms();
    brig_registry_each_running(d, NULL, 0, trim_one, &now);
    return BRIG_WORKER_IDLE;
}

int brig_spares_start(brigd *d, brig_error **err)
{
    if (d->rt->ops->spares == NULL)
        return 0;
    brig_worker_spec spec = {.name = "the spare connections' trimmer",
                             .threads = 1,
                             .period_ms = TRIM_EVERY_MS,
                             .run = trim,
                             .arg = d};
    return brig_worker_start(&spec, &d->spares, err);
}

void brig_spares_stop(brigd *d)
{
    brig_worker_stop(d->spares);
    d->spares = NULL;
}
