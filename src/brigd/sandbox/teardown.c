/*
 * teardown.c - the host side of ended sandboxes (see teardown.h).
 */
#include "teardown.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "core/worker.h"
#include "log.h"
#include "util.h"
#include "volmounts.h"

#define WORKERS             4
#define LAST_KILL_WAIT_MS   1000  /* per sandbox, for the last attempt (shutdown) */
#define RETRY_ALIVE_MS      50    /* first re-check of processes that have not died yet */
#define RETRY_ALIVE_MAX_MS  1000  /* ... doubling up to this */
#define RETRY_FAILED_MS     500   /* first retry of a cleanup that left something behind */
#define RETRY_FAILED_MAX_MS 15000 /* ... doubling up to this */

/* One sandbox's teardown (the queue's while queued; then the worker's that took it). */
typedef struct job {
    brig_sandbox *sb; /* its reference */
    bool on_host;     /* the runtime may hold something of it */
    bool procs_gone;  /* its processes are dead; its capacity was returned */
    int64_t due;      /* mono ms: its next attempt */
    int checks;       /* attempts that found its processes alive */
    int fails;        /* attempts whose cleanup left something behind */
    struct job *next;
} job;

struct brig_teardown {
    pthread_mutex_t lock;
    pthread_cond_t idle;  /* (monotonic) nothing is pending any more */
    job *queue;           /* waiting for their next attempt (not the ones a worker has) */
    int pending;          /* queued or being torn down */
    brig_worker *workers; /* run(): one attempt at whatever is due */
};

/* One attempt at the host side of an ended sandbox, bounded (it never waits for the
 * sandbox's processes unless wait_ms says so):
 * 1. its processes must be gone; then its capacity slot and memory go back to the
 *    admission at once (nothing of the sandbox runs any more);
 * 2. the runtime destroy, then its network (after the runtime: with the namespace gone
 *    the kernel removes the link pair; not under a request that still uses it: that
 *    request's brig_sandbox_put removes it);
 * 3. its volumes and its uid range are let go of only once that succeeded: until then
 *    processes, files, mounts or cgroups of the range may be left, and no new sandbox
 *    may get them.
 * Returns 1 when done (the teardown's reference is dropped), 0 when it must be
 * attempted again. */
static int attempt(brigd *d, job *j, int wait_ms)
{
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(j->sb);
    brig_rt_sandbox *rt = brig_sandbox_runtime(j->sb);
    if (!j->procs_gone) {
        if (j->on_host && d->rt->ops->kill(d->rt, rt, wait_ms) < 0) {
            if (j->checks++ == 0)
                brig_warn("sandbox %s: processes still alive after SIGKILL (uninterruptible "
                          "sleep?): its cleanup waits for them in the background",
                          sp->id);
            return 0;
        }
        j->procs_gone = true;
        brig_admission_release(&d->admission, (brig_capacity){sp->memory_mib, sp->disk_mib});
    }
    if (j->on_host) {
        int64_t t0 = brig_now_mono_ms();
        brig_error *derr = NULL;
        /* The runtime handle stays valid for requests that borrowed the sandbox
         * before it ended (their agent connections fail cleanly). */
        int r = d->rt->ops->destroy(d->rt, sp->id, rt, &derr);
        brig_registry_drop_net(d, j->sb, r == 0);
        if (r < 0) {
            /* 1st, 2nd, 4th, 8th... failure: a cleanup that keeps failing logs little. */
            int n = ++j->fails;
            if ((n & (n - 1)) == 0)
                brig_err("sandbox %s: teardown (attempt %d; retried in the background): %s", sp->id,
                         n, derr ? derr->msg : "?");
            brig_error_clear(&derr);
            return 0;
        }
        if (j->fails || j->checks)
            brig_info("sandbox %s: deleted, at attempt %d", sp->id, j->fails + j->checks + 1);
        else
            brig_info("sandbox %s: deleted (%lld ms)", sp->id,
                      (long long)(brig_now_mono_ms() - t0));
    }
    brig_volmounts_release(d, sp->id); /* its volumes are unmounted: free for others */
    brig_registry_uid_release(d, sp->uid_base);
    brig_sandbox_unref(d, j->sb);
    return 1;
}

/* Gives up on a teardown (shutdown, or no workers): its uid range stays taken for the
 * rest of this run, and the next start's reconcile removes what is left (its row says
 * deleted; the runtime still lists it). */
static void abandon(brigd *d, job *j)
{
    brig_warn("sandbox %s: cleanup not finished; the next start completes it",
              brig_sandbox_id(j->sb));
    brig_sandbox_unref(d, j->sb);
}

/* The next attempt's delay: short while the processes are dying, longer for a cleanup
 * that failed; both double with every attempt. */
static int64_t retry_delay(const job *j)
{
    int64_t base = j->procs_gone ? RETRY_FAILED_MS : RETRY_ALIVE_MS;
    int64_t max = j->procs_gone ? RETRY_FAILED_MAX_MS : RETRY_ALIVE_MAX_MS;
    int n = j->procs_gone ? j->fails : j->checks;
    int64_t ms = base;
    while (--n > 0 && ms < max)
        ms *= 2;
    return ms < max ? ms : max;
}

/* Queues j for an attempt at due (mono ms).  Needs t->lock. */
static void queue_locked(brig_teardown *t, job *j, int64_t due)
{
    j->due = due;
    j->next = t->queue;
    t->queue = j;
    brig_worker_kick(t->workers);
}

/* Unlinks and returns the queued job due first, when it is due (or, at shutdown, at
 * once); else NULL, with *next its due time (0: queue empty).  Needs t->lock. */
static job *take_due_locked(brig_teardown *t, int64_t now, bool last, int64_t *next)
{
    job **first = NULL;
    for (job **pp = &t->queue; *pp; pp = &(*pp)->next)
        if (first == NULL || (*pp)->due < (*first)->due)
            first = pp;
    *next = first ? (*first)->due : 0;
    if (first == NULL || ((*first)->due > now && !last))
        return NULL;
    job *j = *first;
    *first = j->next;
    j->next = NULL;
    return j;
}

/* A worker's run: one attempt at whatever is due. */
static int64_t run(void *arg)
{
    brigd *d = arg;
    brig_teardown *t = d->teardown;
    bool last = brig_worker_stopping(t->workers);
    int64_t next = 0;
    pthread_mutex_lock(&t->lock);
    job *j = take_due_locked(t, brig_now_mono_ms(), last, &next);
    pthread_mutex_unlock(&t->lock);
    if (j == NULL)
        return next > 0 ? next : BRIG_WORKER_IDLE;
    int done = attempt(d, j, last ? LAST_KILL_WAIT_MS : 0);
    if (!done && last) {
        abandon(d, j);
        done = 1;
    }
    pthread_mutex_lock(&t->lock);
    if (!done)
        queue_locked(t, j, brig_now_mono_ms() + retry_delay(j));
    else if (--t->pending == 0)
        pthread_cond_broadcast(&t->idle);
    pthread_mutex_unlock(&t->lock);
    if (done)
        free(j);
    return BRIG_WORKER_AGAIN;
}

static void enqueue(brigd *d, job *j)
{
    brig_teardown *t = d->teardown;
    if (t == NULL) { /* no workers (a failed start-up): one attempt here */
        if (!attempt(d, j, LAST_KILL_WAIT_MS))
            abandon(d, j);
        free(j);
        return;
    }
    pthread_mutex_lock(&t->lock);
    t->pending++;
    queue_locked(t, j, brig_now_mono_ms());
    pthread_mutex_unlock(&t->lock);
}

void brig_teardown_begin(brigd *d, brig_sandbox *sb)
{
    job *j = brig_xcalloc(1, sizeof(*j));
    j->sb = sb;
    j->on_host = brig_sandbox_runtime(sb) != NULL;
    if (!j->on_host) { /* never started: nothing to wait for, nothing to destroy */
        attempt(d, j, 0);
        free(j);
        return;
    }
    enqueue(d, j);
}

void brig_teardown_leftover(brigd *d, brig_sandbox *sb)
{
    job *j = brig_xcalloc(1, sizeof(*j));
    j->sb = sb;
    j->on_host = true;
    j->procs_gone = true;
    enqueue(d, j);
}

int brig_teardown_start(brigd *d, brig_error **err)
{
    brig_teardown *t = brig_xcalloc(1, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    brig_cond_init_mono(&t->idle);
    d->teardown = t; /* before the workers run: they find it there */
    brig_worker_spec spec = {
        .name = "the teardown workers", .threads = WORKERS, .run = run, .arg = d};
    if (brig_worker_start(&spec, &t->workers, err) < 0) {
        d->teardown = NULL;
        pthread_cond_destroy(&t->idle);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return -1;
    }
    return 0;
}

int brig_teardown_drain(brigd *d, int64_t timeout_ms)
{
    brig_teardown *t = d->teardown;
    if (t == NULL)
        return 0;
    struct timespec ts = brig_mono_after(timeout_ms);
    pthread_mutex_lock(&t->lock);
    while (t->pending > 0 && pthread_cond_timedwait(&t->idle, &t->lock, &ts) != ETIMEDOUT)
        ;
    int left = t->pending;
    pthread_mutex_unlock(&t->lock);
    return left;
}

void brig_teardown_stop(brigd *d)
{
    brig_teardown *t = d->teardown;
    if (t == NULL)
        return;
    brig_worker_drain(t->workers); /* they empty the queue first */
    d->teardown = NULL;
    pthread_cond_destroy(&t->idle);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
