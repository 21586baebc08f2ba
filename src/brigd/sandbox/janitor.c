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

#include "agentc/agentc.h"
#include "account/billing.h"
#include "runtime/cgroup.h"
#include "log.h"
#include "sandbox.h"

#define TICK_MS            500
#define CPU_ABUSE_SHARE    0.95
#define PROBE_TIMEOUT_MS   5000 /* a process list that takes longer proves nothing */
#define MAX_PROBES         32   /* probes in flight, in all */
#define MAX_PROBES_ACCOUNT 4    /* ... and per account */

typedef struct verdict {
    char id[BRIG_ID_MAX];
    const char *reason;
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
    int fd = brig_sandbox_connect(p->d, p->sb, &err);
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
    pthread_mutex_lock(&d->lock);
    p->sb->probe = busy ? BRIG_PROBE_BUSY : BRIG_PROBE_IDLE;
    pthread_mutex_unlock(&d->lock);
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
    int mine = 0;
    for (int i = 0; i < MAX_PROBES; i++) {
        if (!ps->slot[i].used)
            free_slot = free_slot ? free_slot : &ps->slot[i];
        else
            mine += strcmp(ps->slot[i].account_id, sb->account_id) == 0;
    }
    if (ps->stop || free_slot == NULL || mine >= MAX_PROBES_ACCOUNT) {
        pthread_mutex_unlock(&ps->lock);
        return false;
    }
    *free_slot = (probe){.d = d, .sb = sb, .fd = -1, .used = true};
    snprintf(free_slot->account_id, sizeof(free_slot->account_id), "%s", sb->account_id);
    ps->n++;
    pthread_mutex_unlock(&ps->lock);

    brig_sandbox_ref(d, sb); /* the probe's */
    pthread_mutex_lock(&d->lock);
    sb->probe = BRIG_PROBE_ASKING;
    sb->probe_at = now;
    pthread_mutex_unlock(&d->lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &attr, probe_thread, free_slot);
    pthread_attr_destroy(&attr);
    if (e == 0)
        return true;
    brig_warn("sandbox %s: cannot start an idle probe: %s", sb->id, strerror(e));
    pthread_mutex_lock(&d->lock);
    sb->probe = BRIG_PROBE_NONE;
    pthread_mutex_unlock(&d->lock);
    brig_sandbox_unref(d, sb);
    pthread_mutex_lock(&ps->lock);
    free_slot->used = false;
    if (--ps->n == 0)
        pthread_cond_broadcast(&ps->idle);
    pthread_mutex_unlock(&ps->lock);
    return false;
}

/* Idle: no API use for its idle timeout, no request in flight, and its agent said
 * no command runs (a probe asked after it became idle, with no API use since). */
static bool idle_now(brigd *d, brig_sandbox *sb, int64_t now)
{
    pthread_mutex_lock(&d->lock);
    bool quiet = sb->idle_timeout_ms && sb->active_ops == 0 &&
                 now - sb->last_activity >= sb->idle_timeout_ms;
    int answer = sb->probe;
    if (answer == BRIG_PROBE_BUSY || answer == BRIG_PROBE_IDLE)
        sb->probe = BRIG_PROBE_NONE; /* taken */
    if (answer == BRIG_PROBE_BUSY && sb->last_activity < sb->probe_at)
        sb->last_activity = sb->probe_at; /* busy is not idle */
    bool idle = quiet && answer == BRIG_PROBE_IDLE && sb->last_activity <= sb->probe_at;
    bool ask = quiet && answer == BRIG_PROBE_NONE;
    pthread_mutex_unlock(&d->lock);
    if (ask)
        probe_start(d, sb, now);
    return idle;
}

/* CPU abuse: at >= 95 % of the quota since cpu_busy_since for the whole window. */
static bool cpu_abusive(brigd *d, brig_sandbox *sb, int64_t now)
{
    int64_t ns = d->cgroup->cpu_ns(sb->id);
    if (ns < 0)
        return false;
    bool abusive = false;
    if (sb->cpu_last_at > 0 && now > sb->cpu_last_at) {
        double share = (double)(ns - sb->cpu_last_ns) / ((double)(now - sb->cpu_last_at) * 1e6) /
                       (sb->vcpus > 0 ? sb->vcpus : 1);
        if (share >= CPU_ABUSE_SHARE) {
            if (sb->cpu_busy_since == 0)
                sb->cpu_busy_since = sb->cpu_last_at;
            abusive = now - sb->cpu_busy_since >= d->cfg.cpu_abuse_window_ms;
        } else {
            sb->cpu_busy_since = 0;
        }
    }
    sb->cpu_last_ns = ns;
    sb->cpu_last_at = now;
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
    int64_t bytes = d->cgroup->tcp_bytes(sb->id);
    return bytes >= 0 && bytes > 2 * (d->cfg.tcp_memory_mib << 20);
}

void brig_lifecycle_tick(brigd *d, int64_t now)
{
    /* Borrow every running sandbox, decide outside the lock. */
    brig_sandbox **list = NULL;
    size_t n = 0;
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->state, "running") != 0)
            continue;
        sb->refs++;
        list = brig_xrealloc(list, (n + 1) * sizeof(*list));
        list[n++] = sb;
    }
    pthread_mutex_unlock(&d->lock);

    verdict *ends = brig_xcalloc(n + 1, sizeof(*ends));
    size_t n_ends = 0;
    for (size_t i = 0; i < n; i++) {
        brig_sandbox *sb = list[i];
        const char *reason = NULL;
        pthread_mutex_lock(&d->lock);
        bool expired = sb->expires_at && now >= sb->expires_at;
        pthread_mutex_unlock(&d->lock);
        if (expired)
            reason = "max_lifetime";
        else if (cpu_abusive(d, sb, now))
            reason = "cpu_abuse";
        else if (tcp_overrun(d, sb))
            reason = "tcp_memory";
        else if (idle_now(d, sb, now))
            reason = "idle_timeout";
        if (reason == NULL && now - sb->billed_at >= d->cfg.billing_interval_ms) {
            int64_t balance = 1;
            brig_error *err = NULL;
            if (brig_billing_charge(d, sb->id, now, false, &balance, &err) < 0) {
                brig_err("sandbox %s: charge: %s", sb->id, err->msg);
                brig_error_clear(&err);
            } else if (balance <= 0) {
                reason = "balance_exhausted";
            }
            sb->billed_at = now;
        }
        if (reason) {
            snprintf(ends[n_ends].id, sizeof(ends[n_ends].id), "%s", sb->id);
            ends[n_ends++].reason = reason;
        }
        brig_sandbox_unref(d, sb);
    }
    free(list);
    for (size_t i = 0; i < n_ends; i++)
        brig_sandbox_stop(d, ends[i].id, ends[i].reason);
    free(ends);
}

static void *janitor(void *arg)
{
    brigd *d = arg;
    pthread_mutex_lock(&d->janitor_lock);
    while (!d->janitor_stop) {
        struct timespec ts = brig_mono_after(TICK_MS);
        pthread_cond_timedwait(&d->janitor_cond, &d->janitor_lock, &ts);
        if (d->janitor_stop)
            break;
        pthread_mutex_unlock(&d->janitor_lock);
        brig_lifecycle_tick(d, brig_now_real_ms());
        pthread_mutex_lock(&d->janitor_lock);
    }
    pthread_mutex_unlock(&d->janitor_lock);
    return NULL;
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

int brig_lifecycle_start(brigd *d, brig_error **err)
{
    probes_init(d);
    pthread_mutex_init(&d->janitor_lock, NULL);
    brig_cond_init_mono(&d->janitor_cond);
    d->janitor_stop = false;
    int e = pthread_create(&d->janitor, NULL, janitor, d);
    if (e != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, e, "start the janitor thread");
    d->janitor_running = true;
    return 0;
}

void brig_lifecycle_stop(brigd *d)
{
    if (d->janitor_running) {
        pthread_mutex_lock(&d->janitor_lock);
        d->janitor_stop = true;
        pthread_cond_signal(&d->janitor_cond);
        pthread_mutex_unlock(&d->janitor_lock);
        pthread_join(d->janitor, NULL);
        d->janitor_running = false;
        pthread_cond_destroy(&d->janitor_cond);
        pthread_mutex_destroy(&d->janitor_lock);
    }
    probes_stop(d);
}
