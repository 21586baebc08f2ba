/*
 * janitor.c - the janitor (see janitor.h).
 *
 * The janitor never waits on a sandbox: one that stalls (its agent or the agent's
 * helpers stopped, a process list that never completes) must not delay the
 * lifetimes, CPU-abuse checks and billing of everyone else.  Everything it decides
 * comes from brigd's own state and the cgroup files, except "does a command still
 * run?", which only the agent knows: that question (a probe) is asked by a thread
 * of its own, at most one per sandbox, a few per account and MAX_PROBES in all, and
 * its answer is taken at a later tick.
 */
#include "janitor.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "account/billing.h"
#include "volumes.h"
#include "agentc/agentc.h"
#include "audit/audit.h"
#include "core/worker.h"
#include "ends.h"
#include "log.h"
#include "orchestrator.h"
#include "pause.h"
#include "registry.h"
#include "runtime/cgroup.h"
#include "snapshots.h"
#include "usage.h"

#define TICK_MS            500
#define CPU_ABUSE_SHARE    0.95
#define PROBE_TIMEOUT_MS   5000  /* a process list that takes longer proves nothing */
#define MAX_PROBES         32    /* probes in flight, in all */
#define MAX_PROBES_ACCOUNT 4     /* ... and per account */
#define AUDIT_PRUNE_MS     60000 /* between two prunes of the audit timeline, at most */

typedef struct verdict {
    char id[BRIG_ID_MAX];
    const char *reason; /* why it is stopped; NULL: paused (its idle timeout, on_idle) */
} verdict;

/* One probe in flight. */
typedef struct probe {
    brigd *d;
    brig_sandbox *sb;             /* referenced until the probe ends */
    char account_id[BRIG_ID_MAX]; /* whose */
    int fd;                       /* its agent connection once open; -1 (probes.lock) */
    bool used;
} probe;

struct brig_probes {
    pthread_mutex_t lock;
    pthread_cond_t idle; /* the last probe ended */
    int n;               /* in flight */
    bool stop;           /* shutdown: no new probes; connections are cut */
    probe slot[MAX_PROBES];
};

/* Does the sandbox run a command right now?  Asks its agent (a background
 * process counts; so does a command started by a request still in flight).
 * No answer within the timeout counts as no. */
static bool has_running_process(probe *p)
{
    brig_error *err = NULL;
    /* The driver's own connect: a probe is no use of the sandbox, to keep spares for. */
    int fd = p->d->rt->ops->connect(p->d->rt, brig_sandbox_runtime(p->sb), &err);
    if (fd < 0) {
        brig_error_clear(&err);
        return false;
    }
    struct brig_probes *ps = p->d->probes;
    pthread_mutex_lock(&ps->lock);
    bool stopping = ps->stop;
    if (!stopping)
        p->fd = fd; /* shutdown may cut it */
    pthread_mutex_unlock(&ps->lock);
    json_t *procs = NULL;
    brig_agentc_set_timeout(fd, PROBE_TIMEOUT_MS);
    bool running = false;
    if (!stopping && brig_agentc_proc_list(fd, &procs, &err) == 0) {
        size_t i;
        json_t *pr;
        json_array_foreach(procs, i, pr) running |= json_is_true(json_object_get(pr, "running"));
    }
    brig_error_clear(&err);
    json_decref(procs);
    pthread_mutex_lock(&ps->lock);
    p->fd = -1;
    pthread_mutex_unlock(&ps->lock);
    close(fd);
    return running;
}

static void *probe_thread(void *arg)
{
    probe *p = arg;
    brigd *d = p->d;
    bool busy = has_running_process(p);
    brig_sandbox_probe_set(d, p->sb, busy ? BRIG_PROBE_BUSY : BRIG_PROBE_IDLE, 0);
    brig_sandbox_unref(d, p->sb);
    struct brig_probes *ps = d->probes;
    pthread_mutex_lock(&ps->lock);
    p->used = false;
    if (--ps->n == 0)
        pthread_cond_broadcast(&ps->idle);
    pthread_mutex_unlock(&ps->lock);
    return NULL;
}

/* Starts a probe of sb (which the caller has borrowed) unless the limits say
 * not now; true when one runs. */
static bool probe_start(brigd *d, brig_sandbox *sb, int64_t now)
{
    struct brig_probes *ps = d->probes;
    if (ps == NULL) /* a tick without the janitor (tests): nothing is asked */
        return false;
    pthread_mutex_lock(&ps->lock);
    probe *free_slot = NULL;
    const char *account_id = brig_sandbox_spec_of(sb)->account_id;
    int mine = 0;
    for (int i = 0; i < MAX_PROBES; i++) {
        if (!ps->slot[i].used)
            free_slot = free_slot ? free_slot : &ps->slot[i];
        else
            mine += strcmp(ps->slot[i].account_id, account_id) == 0;
    }
    if (ps->stop || free_slot == NULL || mine >= MAX_PROBES_ACCOUNT) {
        pthread_mutex_unlock(&ps->lock);
        return false;
    }
    *free_slot = (probe){.d = d, .sb = sb, .fd = -1, .used = true};
    snprintf(free_slot->account_id, sizeof(free_slot->account_id), "%s", account_id);
    ps->n++;
    pthread_mutex_unlock(&ps->lock);

    brig_sandbox_ref(d, sb); /* the probe's */
    brig_sandbox_probe_set(d, sb, BRIG_PROBE_ASKING, now);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &attr, probe_thread, free_slot);
    pthread_attr_destroy(&attr);
    if (e == 0)
        return true;
    brig_warn("sandbox %s: cannot start an idle probe: %s", brig_sandbox_id(sb), strerror(e));
    brig_sandbox_probe_set(d, sb, BRIG_PROBE_NONE, 0);
    brig_sandbox_unref(d, sb);
    pthread_mutex_lock(&ps->lock);
    free_slot->used = false;
    if (--ps->n == 0)
        pthread_cond_broadcast(&ps->idle);
    pthread_mutex_unlock(&ps->lock);
    return false;
}

/* Idle (registry.h: brig_sandbox_idle_check); a probe is started when the agent must
 * be asked. */
static bool idle_now(brigd *d, brig_sandbox *sb, int64_t now)
{
    int verdict = brig_sandbox_idle_check(d, sb, now);
    if (verdict == BRIG_IDLE_ASK)
        probe_start(d, sb, now);
    return verdict == BRIG_IDLE_YES;
}

/* CPU abuse: at >= 95 % of the quota since cpu_busy_since for the whole window. */
static bool cpu_abusive(brigd *d, brig_sandbox *sb, int64_t now)
{
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    brig_sandbox_marks *m = brig_sandbox_marks_of(sb);
    int64_t ns = d->cgroup->cpu_ns(sp->id);
    if (ns < 0)
        return false;
    bool abusive = false;
    if (m->cpu_last_at > 0 && now > m->cpu_last_at) {
        double share = (double)(ns - m->cpu_last_ns) / ((double)(now - m->cpu_last_at) * 1e6) /
                       (sp->vcpus > 0 ? sp->vcpus : 1);
        if (share >= CPU_ABUSE_SHARE) {
            if (m->cpu_busy_since == 0)
                m->cpu_busy_since = m->cpu_last_at;
            abusive = now - m->cpu_busy_since >= d->cfg.cpu_abuse_window_ms;
        } else {
            m->cpu_busy_since = 0;
        }
    }
    m->cpu_last_ns = ns;
    m->cpu_last_at = now;
    return abusive;
}

/* TCP buffers past what the kernel lets a bound stop: over its limit (cgroup.c) a socket
 * still gets a minimum the kernel charges regardless (about one segment, 64 KiB on a
 * loopback), so thousands of stuck sockets add up past any limit, and past the host's
 * net.ipv4.tcp_mem, where every TCP socket of the host stalls.  cgroup v2 counts them
 * as memory, whose limit then OOM-kills; on v1 the janitor stops the sandbox once its
 * TCP memory is twice its bound (legitimate use stays under the bound itself). */
static bool tcp_overrun(brigd *d, brig_sandbox *sb)
{
    int64_t bytes = d->cgroup->tcp_bytes(brig_sandbox_id(sb));
    return bytes >= 0 && bytes > 2 * (d->cfg.tcp_memory_mib << 20);
}

/* Its account's daily or monthly spend limit is reached (what refuses a create stops
 * the sandboxes that run, at their next charge). */
static bool over_spend_limit(brigd *d, brig_sandbox *sb, int64_t now)
{
    brig_error *err = NULL;
    if (brig_billing_admit(d, brig_sandbox_spec_of(sb)->account_id, now, NULL, &err) == 0)
        return false;
    bool over = err && err->kind == BRIG_E_LIMIT;
    brig_error_clear(&err);
    return over;
}

/* The tick's verdicts: sandboxes to stop once every sandbox was looked at. */
typedef struct verdicts {
    int64_t now;
    verdict *v;
    size_t n;
} verdicts;

/* A verdict that pauses rather than stops (on_idle "pause"). */
static const char PAUSE[] = "pause";

/* One sandbox's turn in a tick (borrowed). */
static void judge(brigd *d, brig_sandbox *sb, void *arg)
{
    verdicts *vs = arg;
    int64_t now = vs->now;
    const char *id = brig_sandbox_id(sb);
    brig_sandbox_marks *m = brig_sandbox_marks_of(sb);
    const char *reason = NULL;
    brig_ends_tick(d, sb, now); /* its OOM count, for an agent that dies */
    if (brig_sandbox_expired(d, sb, now))
        reason = "max_lifetime";
    else if (cpu_abusive(d, sb, now))
        reason = "cpu_abuse";
    else if (tcp_overrun(d, sb))
        reason = "tcp_memory";
    else if (idle_now(d, sb, now))
        reason = brig_sandbox_spec_of(sb)->pause_on_idle ? PAUSE : "idle_timeout";
    if (reason == NULL && now - m->billed_at >= d->cfg.billing_interval_ms) {
        int64_t balance = 1;
        brig_error *err = NULL;
        if (brig_billing_charge(d, id, now, false, &balance, &err) < 0) {
            brig_err("sandbox %s: charge: %s", id, err->msg);
            brig_error_clear(&err);
        } else if (balance <= 0) {
            reason = "balance_exhausted";
        } else if (over_spend_limit(d, sb, now)) {
            reason = "spend_limit";
        }
        m->billed_at = now;
    }
    if (reason) {
        vs->v = brig_xrealloc(vs->v, (vs->n + 1) * sizeof(*vs->v));
        snprintf(vs->v[vs->n].id, sizeof(vs->v[vs->n].id), "%s", id);
        vs->v[vs->n++].reason = reason;
    }
}

/* A paused sandbox's turn: no idleness, no CPU (none runs), but its lifetime runs on and
 * its paused time is charged at the paused price (pause.h). */
static void judge_paused(brigd *d, brig_sandbox *sb, void *arg)
{
    verdicts *vs = arg;
    const char *id = brig_sandbox_id(sb);
    brig_sandbox_marks *m = brig_sandbox_marks_of(sb);
    const char *reason = NULL;
    int64_t since = brig_sandbox_paused_at(d, sb);
    if (brig_sandbox_expired(d, sb, vs->now)) {
        reason = "max_lifetime";
    } else if (since > 0 && vs->now - since >= d->cfg.paused_max_age_ms) {
        reason = "paused_too_long";
    } else if (vs->now - m->billed_at >= d->cfg.billing_interval_ms) {
        int64_t balance = 1;
        brig_error *err = NULL;
        int64_t price = brig_billing_paused_price(d, brig_sandbox_spec_of(sb)->disk_mib);
        if (brig_billing_charge_paused(d, id, vs->now, false, price, &balance, &err) < 0) {
            brig_err("sandbox %s: paused charge: %s", id, err->msg);
            brig_error_clear(&err);
        } else if (balance <= 0) {
            reason = "balance_exhausted";
        }
        m->billed_at = vs->now;
    }
    if (reason) {
        vs->v = brig_xrealloc(vs->v, (vs->n + 1) * sizeof(*vs->v));
        snprintf(vs->v[vs->n].id, sizeof(vs->v[vs->n].id), "%s", id);
        vs->v[vs->n++].reason = reason;
    }
}

/* The audit timeline's events past audit_retention go, at most once a minute (or once
 * per retention, when that is shorter); the chains stay verifiable (checkpoints). */
static void prune_audit(brigd *d, int64_t now)
{
    int64_t keep = d->cfg.audit_retention_ms;
    if (d->audit == NULL || keep == 0 ||
        now - d->audit_pruned_at < (keep < AUDIT_PRUNE_MS ? keep : AUDIT_PRUNE_MS))
        return;
    d->audit_pruned_at = now;
    int64_t pruned = 0;
    brig_error *err = NULL;
    if (brig_audit_prune(d->audit, now - keep, &pruned, &err) < 0) {
        brig_err("audit: prune: %s", err->msg);
        brig_error_clear(&err);
    } else if (pruned > 0) {
        brig_info("audit: %lld events past audit_retention pruned", (long long)pruned);
    }
}

void brig_janitor_tick(brigd *d, int64_t now)
{
    prune_audit(d, now);
    brig_usage_tick(d, now);
    brig_volumes_bill(d, now);
    brig_snapshots_bill(d, now);
    /* Every running sandbox borrowed, decided outside the lock; stopped afterwards. */
    verdicts vs = {.now = now};
    brig_registry_each_running(d, NULL, 0, judge, &vs);
    brig_registry_each_running(d, NULL, BRIG_EACH_PAUSED, judge_paused, &vs);
    for (size_t i = 0; i < vs.n; i++) {
        brig_error *err = NULL;
        if (vs.v[i].reason != PAUSE)
            brig_sandbox_stop(d, vs.v[i].id, vs.v[i].reason);
        else if (brig_sandbox_pause_idle(d, vs.v[i].id, &err) < 0) { /* a delete meanwhile */
            brig_warn("sandbox %s: pause at its idle timeout: %s", vs.v[i].id, err->msg);
            brig_error_clear(&err);
        }
    }
    free(vs.v);
}

static int64_t tick(void *arg)
{
    brig_janitor_tick(arg, brig_now_real_ms());
    return BRIG_WORKER_IDLE; /* the next one after TICK_MS */
}

static void probes_init(brigd *d)
{
    if (d->probes)
        return;
    d->probes = brig_xcalloc(1, sizeof(*d->probes));
    pthread_mutex_init(&d->probes->lock, NULL);
    pthread_cond_init(&d->probes->idle, NULL);
}

/* Shutdown: cuts the probes' agent connections and waits until they ended (a
 * probe still in its handshake ends within the connect timeout). */
static void probes_stop(brigd *d)
{
    struct brig_probes *ps = d->probes;
    if (ps == NULL)
        return;
    pthread_mutex_lock(&ps->lock);
    ps->stop = true;
    for (int i = 0; i < MAX_PROBES; i++)
        if (ps->slot[i].used && ps->slot[i].fd >= 0)
            shutdown(ps->slot[i].fd, SHUT_RDWR);
    while (ps->n > 0)
        pthread_cond_wait(&ps->idle, &ps->lock);
    pthread_mutex_unlock(&ps->lock);
    pthread_cond_destroy(&ps->idle);
    pthread_mutex_destroy(&ps->lock);
    free(ps);
    d->probes = NULL;
}

int brig_janitor_start(brigd *d, brig_error **err)
{
    probes_init(d);
    brig_usage_start(d);
    brig_worker_spec spec = {
        .name = "the janitor thread", .threads = 1, .period_ms = TICK_MS, .run = tick, .arg = d};
    return brig_worker_start(&spec, &d->janitor, err);
}

void brig_janitor_stop(brigd *d)
{
    brig_worker_stop(d->janitor);
    d->janitor = NULL;
    probes_stop(d);
    brig_usage_stop(d);
}
