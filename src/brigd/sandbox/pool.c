/*
 * pool.c - the warm pool (see pool.h).
 *
 * Below the create (orchestrator.c claims from it), it takes uid ranges from the
 * registry and connects its sandboxes through attach.c; it calls nothing above.
 */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "attach.h"
#include "core/worker.h"
#include "log.h"
#include "registry.h"
#include "template.h"
#include "util.h"

#define MAX_SPECS 16
#define RETRY_MS  5000 /* after a failed start, before the next try */
/* A refill yields to requests: it starts once no sandbox request has run for
 * QUIET_MS, or DEFER_MS after it was needed, whichever comes first. */
#define QUIET_MS 5
#define DEFER_MS 100
#define IDLE_MS  1000 /* a look at the pool at least this often */

typedef struct entry {
    brig_pooled p;
    char build[64]; /* the template build it was started from (brig_template.build) */
    struct entry *next;
} entry;

typedef struct spec {
    char template[64];
    char tariff[32];
    brig_isolation isolation;
    int target;
    int ready;
    int64_t hits, misses; /* creates of this template, tariff and isolation served, or not */
    entry *entries;
    int64_t retry_at; /* mono ms: no start before this after a failure */
} spec;

struct brig_pool {
    pthread_mutex_t lock; /* guards the specs and their entries */
    brig_worker *filler;  /* fill(): kicked by a claim */
    int64_t needed_at;    /* mono ms: since when the pool is short; 0: it is not (filler's) */
    spec specs[MAX_SPECS];
    int n_specs;
};

/* The pool's specs come from the parsed config (settings.c checks them). */
static void load_specs(brigd *d, brig_pool *p)
{
    for (int i = 0; i < d->cfg.n_pool && p->n_specs < MAX_SPECS; i++) {
        spec *sp = &p->specs[p->n_specs++];
        snprintf(sp->template, sizeof(sp->template), "%s", d->cfg.pool[i].template);
        snprintf(sp->tariff, sizeof(sp->tariff), "%s", d->cfg.pool[i].tariff);
        int iso = brig_isolation_parse(d->cfg.pool[i].isolation);
        sp->isolation = iso < 0 ? BRIG_ISO_CONTAINER : (brig_isolation)iso; /* settings.c checked */
        sp->target = d->cfg.pool[i].count;
    }
}

/* A warm sandbox's network before its driver starts it (runtime.h's net_first, gVisor):
 * connected under "none", as every warm sandbox is; its resolv.conf is written once
 * it runs. */
typedef struct early {
    brigd *d;
    entry *e;
    char *resolv;
} early;

static int net_first(void *arg, int netns_fd, brig_error **err)
{
    early *ea = arg;
    return brig_attach_early(ea->d, ea->e->p.id, netns_fd, &ea->e->p.net, &ea->resolv, err);
}

static void destroy_entry(brigd *d, entry *e)
{
    brig_error *err = NULL;
    int r = d->rt->ops->destroy(d->rt, e->p.id, e->p.rt, &err);
    if (e->p.net) { /* after the runtime: see attempt() in teardown.c */
        if (r == 0)
            brig_net_release(d->net, e->p.net);
        else
            brig_net_detach(d->net, e->p.net);
    }
    if (r < 0) {
        brig_err("pool: destroy %s: %s", e->p.id, err->msg);
        brig_error_clear(&err);
    } else {
        brig_registry_uid_release(d, e->p.uid_base);
    }
    d->rt->ops->release(d->rt, e->p.rt);
    free(e);
}

/* Starts one sandbox for sp (called without the pool lock). */
static entry *start_one(brigd *d, const spec *sp, brig_error **err)
{
    brig_template t;
    if (brig_template_lookup(&d->cfg, sp->template, &t, err) < 0)
        return NULL;
    if (!t.built) {
        brig_template_dispose(&t);
        brig_error_set(err, BRIG_E_CONFLICT, 0, "template %s is not built", sp->template);
        return NULL;
    }
    const brig_tariff *tariff = brig_config_tariff(&d->cfg, sp->tariff);
    entry *e = brig_xcalloc(1, sizeof(*e));
    brig_id_new("sbx", e->p.id);
    memcpy(e->build, t.build, sizeof(e->build));
    e->p.uid_base = brig_registry_uid_take(d);
    if (e->p.uid_base == 0) {
        brig_template_dispose(&t);
        free(e);
        brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "no free user-id range");
        return NULL;
    }
    early ea = {d, e, NULL};
    brig_rt_spec rs = {
        .id = e->p.id,
        .rootfs = t.rootfs,
        .memory_mib = tariff->memory_mib,
        .pids_limit = d->cfg.pids_limit,
        .cpus = tariff->vcpus,
        .disk_mib = tariff->disk_mib,
        .uid_base = (unsigned)e->p.uid_base,
        .uid_size = BRIG_UID_RANGE,
        .isolation = sp->isolation,
        .net_first = net_first,
        .net_arg = &ea,
    };
    int r = d->rt->ops->create(d->rt, &rs, &e->p.rt, err);
    brig_template_dispose(&t);
    /* Connected now, reaching nothing: a claim only changes the policy.  A driver that
     * called net_first (gVisor) has it connected already and only needs resolv.conf. */
    static const brig_egress none = {.mode = BRIG_EGRESS_NONE};
    if (r == 0)
        r = e->p.net ? brig_attach_resolv(d, e->p.rt, ea.resolv, err)
                     : brig_attach_network(d, e->p.id, e->p.rt, &none, &e->p.net, err);
    free(ea.resolv);
    if (r < 0 && e->p.rt == NULL) { /* the driver left nothing: only ours to give back */
        brig_net_detach(d->net, e->p.net);
        brig_registry_uid_release(d, e->p.uid_base);
        free(e);
        return NULL;
    }
    if (r < 0) {
        destroy_entry(d, e);
        return NULL;
    }
    return e;
}

static int64_t pooled_total(brig_pool *p)
{
    int64_t n = 0;
    for (int i = 0; i < p->n_specs; i++)
        n += p->specs[i].ready;
    return n;
}

/* The filler's run: starts one sandbox for the spec that is short the most (and not
 * backing off), if the host has room for one more, once brigd has been quiet for
 * QUIET_MS or DEFER_MS after it was needed: a claim is mostly followed at once by its
 * caller's upload and exec, and a sandbox start (runc, mounts) on the same cores would
 * slow them down. */
static int64_t fill(void *arg)
{
    brigd *d = arg;
    brig_pool *p = d->pool;
    pthread_mutex_lock(&p->lock);
    spec *need = NULL;
    int64_t now = brig_now_mono_ms();
    bool room = brig_registry_size(d) + pooled_total(p) < d->cfg.max_sandboxes;
    for (int i = 0; room && i < p->n_specs; i++) {
        spec *sp = &p->specs[i];
        if (sp->ready < sp->target && now >= sp->retry_at &&
            (need == NULL || sp->target - sp->ready > need->target - need->ready))
            need = sp;
    }
    if (need == NULL) {
        p->needed_at = 0;
        pthread_mutex_unlock(&p->lock);
        return BRIG_WORKER_IDLE;
    }
    if (p->needed_at == 0)
        p->needed_at = now;
    int64_t quiet = brig_registry_quiet_in(d, QUIET_MS, now);
    if (quiet > 0 && now - p->needed_at < DEFER_MS) {
        int64_t deadline = p->needed_at + DEFER_MS - now;
        pthread_mutex_unlock(&p->lock);
        return now + (quiet < deadline ? quiet : deadline);
    }
    p->needed_at = 0;
    spec copy = *need;
    pthread_mutex_unlock(&p->lock);
    brig_error *err = NULL;
    entry *e = start_one(d, &copy, &err);
    if (e && brig_worker_stopping(p->filler)) {
        destroy_entry(d, e);
        return BRIG_WORKER_IDLE;
    }
    pthread_mutex_lock(&p->lock);
    if (e == NULL) {
        brig_warn("pool %s/%s/%s: %s", copy.template, copy.tariff,
                  brig_isolation_name(copy.isolation), err->msg);
        brig_error_clear(&err);
        need->retry_at = brig_now_mono_ms() + RETRY_MS;
    } else {
        e->next = need->entries;
        need->entries = e;
        need->ready++;
    }
    pthread_mutex_unlock(&p->lock);
    return BRIG_WORKER_AGAIN;
}

int brig_pool_start(brigd *d, brig_error **err)
{
    d->pool = NULL;
    if (d->cfg.n_pool == 0)
        return 0;
    brig_pool *p = brig_xcalloc(1, sizeof(*p));
    load_specs(d, p);
    pthread_mutex_init(&p->lock, NULL);
    d->pool = p; /* before the filler runs: it finds it there */
    brig_worker_spec spec = {
        .name = "the warm-pool thread", .threads = 1, .period_ms = IDLE_MS, .run = fill, .arg = d};
    if (brig_worker_start(&spec, &p->filler, err) < 0) {
        d->pool = NULL;
        pthread_mutex_destroy(&p->lock);
        free(p);
        return -1;
    }
    brig_worker_kick(p->filler); /* fill it now */
    brig_info("warm pool: %s", d->cfg.warm_pool);
    return 0;
}

void brig_pool_stop(brigd *d)
{
    brig_pool *p = d->pool;
    if (p == NULL)
        return;
    brig_worker_stop(p->filler);
    for (int i = 0; i < p->n_specs; i++) {
        while (p->specs[i].entries) {
            entry *e = p->specs[i].entries;
            p->specs[i].entries = e->next;
            destroy_entry(d, e);
        }
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
    d->pool = NULL;
}

int brig_pool_claim(brigd *d, const char *template, const char *template_build, const char *tariff,
                    brig_isolation iso, brig_pooled *out)
{
    brig_pool *p = d->pool;
    if (p == NULL)
        return -1;
    entry *stale = NULL, *hit = NULL;
    brig_registry_touch(d); /* the claimer's next requests come at once */
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_specs && hit == NULL; i++) {
        spec *sp = &p->specs[i];
        if (strcmp(sp->template, template) != 0 || strcmp(sp->tariff, tariff) != 0 ||
            sp->isolation != iso)
            continue;

        /* Entries of an older build of the template are of no use any more. */
        for (entry **pp = &sp->entries; *pp;) {
            entry *e = *pp;
            if (strcmp(e->build, template_build) != 0) {
                *pp = e->next;
                e->next = stale;
                stale = e;
                sp->ready--;
            } else if (hit == NULL) {
                *pp = e->next;
                hit = e;
                sp->ready--;
            } else {
                pp = &e->next;
            }
        }
        if (hit)
            sp->hits++;
        else
            sp->misses++;
    }
    pthread_mutex_unlock(&p->lock);
    brig_worker_kick(p->filler); /* top it up */
    while (stale) {
        entry *e = stale;
        stale = e->next;
        destroy_entry(d, e);
    }
    if (hit == NULL)
        return -1;
    *out = hit->p;
    free(hit);
    return 0;
}

json_t *brig_pool_stats(brigd *d)
{
    json_t *o = json_object();
    brig_pool *p = d->pool;
    if (p == NULL)
        return o;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_specs; i++) {
        char k[120];
        const spec *sp = &p->specs[i];
        if (sp->isolation == BRIG_ISO_CONTAINER) /* the key it always had */
            snprintf(k, sizeof(k), "%s/%s", sp->template, sp->tariff);
        else
            snprintf(k, sizeof(k), "%s/%s/%s", sp->template, sp->tariff,
                     brig_isolation_name(sp->isolation));
        json_object_set_new(o, k,
                            json_pack("{s:i, s:i, s:I, s:I}", "ready", p->specs[i].ready, "target",
                                      p->specs[i].target, "hits", (json_int_t)p->specs[i].hits,
                                      "misses", (json_int_t)p->specs[i].misses));
    }
    pthread_mutex_unlock(&p->lock);
    return o;
}
