/*
 * pool.c - the warm pool (see pool.h).
 *
 * Below the create (orchestrator.c claims from it), it takes uid ranges from the
 * registry and connects its sandboxes through attach.c; it calls nothing above.
 *
 * An adaptive pool's target follows its demand: creates per second (each claim counts,
 * hit or miss; an average that forgets with a time constant of RATE_TAU_MS) times how
 * long a start takes (a moving average of its own starts), times HEADROOM for bursts;
 * at least 1 while the pool was used within warm_pool_idle, 0 once it was not; at most
 * what the memory budget leaves and AUTO_MAX.  The filler re-reads the targets each run and
 * destroys what is over them before it starts anything.
 */
#include "pool.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "core/worker.h"
#include "runtime/cgroup.h"
#include "log.h"
#include "registry.h"
#include "spares.h"
#include "template.h"
#include "usertpl.h"
#include "usertpl_start.h"
#include "util.h"

#define MAX_SPECS 16
#define RETRY_MS  5000 /* after a failed start, before the next try */
/* A refill yields to requests: it starts once no sandbox request has run for
 * QUIET_MS, or DEFER_MS after it was needed, whichever comes first. */
#define QUIET_MS     5
#define DEFER_MS     100
#define IDLE_MS      1000   /* a look at the pool at least this often */
#define RATE_TAU_MS  5000.0 /* the create rate forgets with this time constant */
#define HEADROOM     2.0    /* sandboxes kept per sandbox a refill period consumes */
#define AUTO_MAX     32     /* one adaptive pool's size at most */
#define REFILL_GUESS 500    /* ms a start takes, until one was measured */
#define FILLERS      4      /* starts under way at once at most */
#define FILL_NICE    10     /* a start's nice value (a request's is 0) */

typedef struct entry {
    brig_pooled p;
    char build[64]; /* the template build it was started from (brig_template.build) */
    struct entry *next;
} entry;

typedef struct spec {
    char account[BRIG_ID_MAX]; /* a user's template: its account's ("" for a built-in one) */
    char template[80];         /* a built-in template's name, or a user's "name:tag" */
    char tariff[32];
    brig_isolation isolation;
    int target;
    int ready;
    int64_t hits, misses; /* creates of this template, tariff and isolation served, or not */
    entry *entries;
    int64_t retry_at;         /* mono ms: no start before this after a failure */
    bool pinned;              /* warm_pool names it: its target is fixed */
    int starting;             /* starts under way for it (its slot is not reused meanwhile) */
    int64_t mem_mib;          /* its tariff's memory limit */
    double rate;              /* creates per second as of rate_at (adaptive) */
    int64_t rate_at, used_at; /* mono ms: the rate's last update, the last claim */
    int64_t refill_ms;        /* a start's duration, averaged; 0: none measured yet */
    char last_error[128];     /* the last start's failure, said once */
    int64_t gen;              /* bumped by a drop: a start begun before it is of no use */
} spec;

struct brig_pool {
    pthread_mutex_t lock; /* guards the specs and their entries */
    brig_worker *filler;  /* fill(): kicked by a claim */
    int64_t needed_at;    /* mono ms: since when the pool is short; 0: it is not (filler's) */
    spec specs[MAX_SPECS];
    int n_specs;
    bool adaptive;      /* pools come and go with demand (warm_pool has "auto") */
    int64_t budget_mib; /* memory limits the adaptive pools may hold */
};

/* A free slot for a new spec: a new one, else an adaptive one that shrank away (nothing
 * ready, nothing wanted); NULL when all are in use. */
static spec *spec_slot(brig_pool *p)
{
    if (p->n_specs < MAX_SPECS)
        return &p->specs[p->n_specs++];
    for (int i = 0; i < p->n_specs; i++) {
        spec *sp = &p->specs[i];
        if (!sp->pinned && sp->starting == 0 && sp->target == 0 && sp->ready == 0)
            return sp;
    }
    return NULL;
}

static spec *spec_add(brigd *d, brig_pool *p, const char *account, const char *template,
                      const char *tariff, brig_isolation iso)
{
    const brig_tariff *tf = brig_config_tariff(&d->cfg, tariff);
    spec *sp = tf ? spec_slot(p) : NULL;
    if (sp == NULL)
        return NULL;
    memset(sp, 0, sizeof(*sp));
    snprintf(sp->account, sizeof(sp->account), "%s", account);
    snprintf(sp->template, sizeof(sp->template), "%s", template);
    snprintf(sp->tariff, sizeof(sp->tariff), "%s", tariff);
    sp->isolation = iso;
    sp->mem_mib = tf->memory_mib;
    sp->used_at = sp->rate_at = brig_now_mono_ms();
    return sp;
}

/* The pinned specs come from the parsed config (settings.c checks them); an adaptive
 * pool starts with base at the default tariff and isolation. */
static void load_specs(brigd *d, brig_pool *p)
{
    for (int i = 0; i < d->cfg.n_pool; i++) {
        int iso = brig_isolation_parse(d->cfg.pool[i].isolation);
        /* ACCOUNT/NAME:TAG: a user's template, pooled for its account only */
        char account[BRIG_ID_MAX] = "";
        const char *tmpl = d->cfg.pool[i].template, *slash = strchr(tmpl, '/');
        if (slash && (size_t)(slash - tmpl) < sizeof(account)) {
            snprintf(account, sizeof(account), "%.*s", (int)(slash - tmpl), tmpl);
            tmpl = slash + 1;
        }
        spec *sp = spec_add(d, p, account, tmpl, d->cfg.pool[i].tariff,
                            iso < 0 ? BRIG_ISO_CONTAINER : (brig_isolation)iso);
        if (sp) {
            sp->pinned = true;
            sp->target = d->cfg.pool[i].count;
        }
    }
    brig_template t;
    int iso = brig_isolation_parse(d->cfg.isolation_default);
    if (p->adaptive && brig_template_lookup(&d->cfg, "base", &t, NULL) == 0) {
        if (t.built)
            spec_add(d, p, "", "base", d->cfg.default_tariff,
                     iso < 0 ? BRIG_ISO_CONTAINER : (brig_isolation)iso);
        brig_template_dispose(&t);
    }
}

/* The adaptive pools' memory: warm_pool_memory_mib, else an eighth of the memory budget
 * (of the host's RAM where that is unbounded). */
static int64_t budget_mib(brigd *d)
{
    if (d->cfg.warm_pool_memory_mib > 0)
        return d->cfg.warm_pool_memory_mib;
    int64_t mem = d->admission.mem_capacity;
    if (mem <= 0)
        mem = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) >> 20;
    return mem / 8;
}

static double rate_now(const spec *sp, int64_t now)
{
    return sp->rate * exp(-(double)(now - sp->rate_at) / RATE_TAU_MS);
}

/* A claim of sp: one more arrival in the rate, and the pool is in use. */
static void arrive(spec *sp, int64_t now)
{
    sp->rate = rate_now(sp, now) + 1000.0 / RATE_TAU_MS;
    sp->rate_at = sp->used_at = now;
}

/* What an adaptive spec should hold now; pinned ones keep theirs.  room_mib: what the
 * budget leaves beside the other adaptive pools. */
static int auto_target(const spec *sp, int64_t now, int64_t room_mib, int64_t idle_ms)
{
    if (sp->pinned)
        return sp->target;
    if (now - sp->used_at >= idle_ms) /* unused for warm_pool_idle: nothing */
        return 0;
    double refill_s = (double)(sp->refill_ms > 0 ? sp->refill_ms : REFILL_GUESS) / 1000.0;
    /* Rounded up: a sandbox a refill period consumes at all is one to keep ready (a
     * little slack, so that a rate decaying towards nothing does not hold one more). */
    int want = (int)ceil(HEADROOM * rate_now(sp, now) * refill_s - 0.1);
    if (want < 1)
        want = 1;
    int cap = sp->mem_mib > 0 ? (int)(room_mib / sp->mem_mib) : AUTO_MAX;
    if (want > cap)
        want = cap;
    return want > AUTO_MAX ? AUTO_MAX : want < 0 ? 0 : want;
}

/* Sets each adaptive spec's target, the budget shared in the order of their demand (here:
 * spec order, each taking what it wants while memory is left). */
static void retarget(brigd *d, brig_pool *p, int64_t now)
{
    int64_t room = p->budget_mib;
    for (int i = 0; i < p->n_specs; i++) {
        spec *sp = &p->specs[i];
        if (sp->pinned)
            continue;
        sp->target = auto_target(sp, now, room, d->cfg.warm_pool_idle_ms);
        room -= sp->target * sp->mem_mib;
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

/* sp's template, built: a built-in one, or the account's with what its sandboxes start
 * with (run). */
static int pool_template(brigd *d, const spec *sp, brig_template *t, brig_utpl_run *run,
                         brig_error **err)
{
    memset(run, 0, sizeof(*run));
    int r = sp->account[0] ? brig_utpl_lookup(d, sp->account, sp->template, t, run, err)
                           : brig_template_lookup(&d->cfg, sp->template, t, err);
    if (r == 0 && !t->built) {
        brig_template_dispose(t);
        brig_utpl_run_dispose(run);
        return brig_error_set(err, BRIG_E_CONFLICT, 0, "template %s is not built", sp->template);
    }
    return r;
}

/* Starts one sandbox of template t for sp (called without the pool lock). */
static entry *launch(brigd *d, const spec *sp, const brig_template *t, brig_error **err)
{
    const brig_tariff *tariff = brig_config_tariff(&d->cfg, sp->tariff);
    entry *e = brig_xcalloc(1, sizeof(*e));
    brig_id_new("sbx", e->p.id);
    memcpy(e->build, t->build, sizeof(e->build));
    e->p.uid_base = brig_registry_uid_take(d);
    if (e->p.uid_base == 0) {
        free(e);
        brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "no free user-id range");
        return NULL;
    }
    early ea = {d, e, NULL};
    brig_rt_spec rs = {
        .id = e->p.id,
        .rootfs = t->rootfs,
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

/* One sandbox for sp; a user template's start command started in it and its ready check
 * passed (with the template's env: a create with an env of its own is not served from
 * the pool when the template has a start command, see orchestrator.c). */
static entry *start_one(brigd *d, const spec *sp, brig_error **err)
{
    brig_template t;
    brig_utpl_run run;
    if (pool_template(d, sp, &t, &run, err) < 0)
        return NULL;
    entry *e = launch(d, sp, &t, err);
    if (e && run.start && brig_utpl_start_rt(d, e->p.rt, &run, run.env, err) < 0) {
        destroy_entry(d, e);
        e = NULL;
    }
    /* Its first request after a claim takes a connection its agent has answered already. */
    if (e && d->rt->ops->spares)
        d->rt->ops->spares(d->rt, e->p.rt, BRIG_SPARES_KEEP, NULL);
    brig_template_dispose(&t);
    brig_utpl_run_dispose(&run);
    return e;
}

/* Pooled sandboxes, ready or starting. */
static int64_t pooled_total(brig_pool *p)
{
    int64_t n = 0;
    for (int i = 0; i < p->n_specs; i++)
        n += p->specs[i].ready + p->specs[i].starting;
    return n;
}

/* An entry over its spec's target, taken out of the pool (the caller destroys it). */
static entry *take_surplus(brig_pool *p)
{
    for (int i = 0; i < p->n_specs; i++) {
        spec *sp = &p->specs[i];
        if (sp->ready > sp->target && sp->entries) {
            entry *e = sp->entries;
            sp->entries = e->next;
            sp->ready--;
            return e;
        }
    }
    return NULL;
}

/* The spec short the most (and not backing off) whose start the host and the budget
 * have room for; NULL when none. */
static spec *most_short(brigd *d, brig_pool *p, int64_t now)
{
    if (brig_registry_size(d) + pooled_total(p) >= d->cfg.max_sandboxes)
        return NULL;
    int64_t held = 0; /* memory of the adaptive pools' sandboxes, ready or starting */
    for (int i = 0; i < p->n_specs; i++) {
        const spec *sp = &p->specs[i];
        held += sp->pinned ? 0 : (sp->ready + sp->starting) * sp->mem_mib;
    }
    spec *need = NULL;
    for (int i = 0; i < p->n_specs; i++) {
        spec *sp = &p->specs[i];
        int have = sp->ready + sp->starting;
        if (have >= sp->target || now < sp->retry_at ||
            (!sp->pinned && held + sp->mem_mib > p->budget_mib))
            continue;
        if (need == NULL || sp->target - have > need->target - need->ready - need->starting)
            need = sp;
    }
    return need;
}

/* After a start of need (e: NULL when it failed), under the lock. */
static void started(spec *need, entry *e, brig_error *err, int64_t took_ms)
{
    need->starting--;
    if (e == NULL) {
        /* Said once per cause: an adaptive pool of a template that cannot start tries
         * again every RETRY_MS. */
        if (strncmp(need->last_error, err->msg, sizeof(need->last_error) - 1) != 0)
            brig_warn("pool %s/%s/%s: %s", need->template, need->tariff,
                      brig_isolation_name(need->isolation), err->msg);
        snprintf(need->last_error, sizeof(need->last_error), "%s", err->msg);
        need->retry_at = brig_now_mono_ms() + RETRY_MS;
        return;
    }
    need->last_error[0] = '\0';
    need->refill_ms = need->refill_ms > 0 ? (3 * need->refill_ms + took_ms) / 4 : took_ms;
    e->next = need->entries;
    need->entries = e;
    need->ready++;
}

/* The filler's run: retargets the adaptive pools, destroys one sandbox over a target, or
 * starts one for the spec that is short the most, once brigd has been quiet for
 * QUIET_MS or DEFER_MS after it was needed: a claim is mostly followed at once by its
 * caller's upload and exec, and a sandbox start (runc, mounts) on the same cores would
 * slow them down. */
static int64_t fill(void *arg)
{
    brigd *d = arg;
    brig_pool *p = d->pool;
    /* Starts below the requests' priority: runc, the sandbox's init and whatever the
     * sandbox starts inherit this thread's nice value, so on a busy host a refill takes
     * the CPU time that requests leave (a claim gives the sandbox the normal priority). */
    setpriority(PRIO_PROCESS, (id_t)gettid(), FILL_NICE);
    pthread_mutex_lock(&p->lock);
    int64_t now = brig_now_mono_ms();
    retarget(d, p, now);
    entry *surplus = take_surplus(p);
    if (surplus) {
        pthread_mutex_unlock(&p->lock);
        destroy_entry(d, surplus);
        return BRIG_WORKER_AGAIN;
    }
    spec *need = most_short(d, p, now);
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
    spec copy = *need; /* need stays this spec while starting (spec_slot) */
    need->starting++;
    pthread_mutex_unlock(&p->lock);
    brig_error *err = NULL;
    int64_t t0 = brig_now_mono_ms();
    entry *e = start_one(d, &copy, &err);
    if (e && brig_worker_stopping(p->filler)) {
        destroy_entry(d, e); /* the pool goes: its specs with it */
        return BRIG_WORKER_IDLE;
    }
    pthread_mutex_lock(&p->lock);
    if (e && need->gen != copy.gen) { /* dropped meanwhile (its template deleted...) */
        need->starting--;
        pthread_mutex_unlock(&p->lock);
        destroy_entry(d, e);
        return BRIG_WORKER_AGAIN;
    }
    started(need, e, err, brig_now_mono_ms() - t0);
    pthread_mutex_unlock(&p->lock);
    brig_error_clear(&err);
    return BRIG_WORKER_AGAIN;
}

int brig_pool_start(brigd *d, brig_error **err)
{
    d->pool = NULL;
    if (d->cfg.n_pool == 0 && !d->cfg.pool_auto)
        return 0;
    brig_pool *p = brig_xcalloc(1, sizeof(*p));
    p->adaptive = d->cfg.pool_auto;
    p->budget_mib = budget_mib(d);
    load_specs(d, p);
    pthread_mutex_init(&p->lock, NULL);
    d->pool = p; /* before the filler runs: it finds it there */
    /* A start is mostly runc's and the kernel's work: one start under way per CPU (at
     * most FILLERS) keeps a pool ahead of a create rate that one at a time could not. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    brig_worker_spec spec = {.name = "the warm-pool threads",
                             .threads = cpus < 1         ? 1
                                        : cpus > FILLERS ? FILLERS
                                                         : (int)cpus,
                             .period_ms = IDLE_MS,
                             .run = fill,
                             .arg = d};
    if (brig_worker_start(&spec, &p->filler, err) < 0) {
        d->pool = NULL;
        pthread_mutex_destroy(&p->lock);
        free(p);
        return -1;
    }
    brig_worker_kick(p->filler); /* fill it now */
    brig_info("warm pool: %s (adaptive pools' memory: %lld MiB)", d->cfg.warm_pool,
              (long long)p->budget_mib);
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

int brig_pool_claim(brigd *d, const char *account, const char *template, const char *template_build,
                    const char *tariff, brig_isolation iso, brig_pooled *out)
{
    brig_pool *p = d->pool;
    if (p == NULL)
        return -1;
    entry *stale = NULL, *hit = NULL;
    brig_registry_touch(d); /* the claimer's next requests come at once */
    pthread_mutex_lock(&p->lock);
    int64_t now = brig_now_mono_ms();
    spec *sp = NULL;
    for (int i = 0; i < p->n_specs && sp == NULL; i++)
        if (strcmp(p->specs[i].account, account) == 0 &&
            strcmp(p->specs[i].template, template) == 0 &&
            strcmp(p->specs[i].tariff, tariff) == 0 && p->specs[i].isolation == iso)
            sp = &p->specs[i];
    if (sp == NULL && p->adaptive) /* a pool comes with its first create */
        sp = spec_add(d, p, account, template, tariff, iso);
    if (sp) {
        arrive(sp, now);

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
    d->cgroup->renice(hit->p.id, 0); /* a request's priority from now on (fill) */
    *out = hit->p;
    free(hit);
    return 0;
}

void brig_pool_drop(brigd *d, const char *account, const char *template, const char *build)
{
    brig_pool *p = d->pool;
    if (p == NULL)
        return;
    entry *gone = NULL;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_specs; i++) {
        spec *sp = &p->specs[i];
        if (strcmp(sp->account, account) != 0 || (template && strcmp(sp->template, template) != 0))
            continue;
        for (entry **pp = &sp->entries; *pp;) {
            entry *e = *pp;
            if (build == NULL || strcmp(e->build, build) == 0) {
                *pp = e->next;
                e->next = gone;
                gone = e;
                sp->ready--;
            } else {
                pp = &e->next;
            }
        }
        sp->gen++;
        if (template && !sp->pinned) { /* its template is gone: the pool shrinks away */
            sp->rate = 0;
            sp->used_at = INT64_MIN / 2;
            sp->target = 0;
        }
    }
    pthread_mutex_unlock(&p->lock);
    while (gone) {
        entry *e = gone;
        gone = e->next;
        destroy_entry(d, e);
    }
}

/* Adds sp's figures to o[k] (the users' templates share one entry per tariff). */
static void stats_add(json_t *o, const char *k, const spec *sp, int64_t now)
{
    json_t *j = json_object_get(o, k);
    double rate = round(rate_now(sp, now) * 1000.0) / 1000.0;
    if (j == NULL) {
        json_object_set_new(o, k,
                            json_pack("{s:i, s:i, s:I, s:I, s:b, s:f}", "ready", sp->ready,
                                      "target", sp->target, "hits", (json_int_t)sp->hits, "misses",
                                      (json_int_t)sp->misses, "adaptive", !sp->pinned,
                                      "creates_per_s", rate));
        return;
    }
    static const char *const counts[] = {"ready", "target", "hits", "misses"};
    json_int_t add[] = {sp->ready, sp->target, sp->hits, sp->misses};
    for (size_t i = 0; i < 4; i++)
        json_object_set_new(
            j, counts[i], json_integer(json_integer_value(json_object_get(j, counts[i])) + add[i]));
    json_object_set_new(j, "adaptive",
                        json_boolean(json_is_true(json_object_get(j, "adaptive")) || !sp->pinned));
    json_object_set_new(
        j, "creates_per_s",
        json_real(round((json_number_value(json_object_get(j, "creates_per_s")) + rate) * 1000.0) /
                  1000.0));
}

json_t *brig_pool_stats(brigd *d)
{
    json_t *o = json_object();
    brig_pool *p = d->pool;
    if (p == NULL)
        return o;
    pthread_mutex_lock(&p->lock);
    int64_t now = brig_now_mono_ms();
    for (int i = 0; i < p->n_specs; i++) {
        char k[120];
        const spec *sp = &p->specs[i];
        /* a user's template is named by no one here (this is public): "user" */
        const char *t = sp->account[0] ? "user" : sp->template;
        if (sp->isolation == BRIG_ISO_CONTAINER) /* the key it always had */
            snprintf(k, sizeof(k), "%s/%s", t, sp->tariff);
        else
            snprintf(k, sizeof(k), "%s/%s/%s", t, sp->tariff, brig_isolation_name(sp->isolation));
        stats_add(o, k, sp, now);
    }
    pthread_mutex_unlock(&p->lock);
    return o;
}
