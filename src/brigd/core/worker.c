/*
 * worker.c - the worker-thread helper (see worker.h).
 *
 * Kicks are counted (gen): a thread remembers the count it last ran at and runs again
 * whenever it has moved on, so a kick between a run's end and the thread's wait is
 * never lost.
 */
#include "worker.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define MAX_THREADS 16

struct brig_worker {
    brig_worker_spec spec;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* (monotonic) kicked; stop or drain asked */
    uint64_t gen;        /* kicks so far (lock) */
    bool stop;           /* stop or drain asked (lock) */
    bool drain;          /* ... and it is a drain (lock) */
    pthread_t threads[MAX_THREADS];
    int n_threads;
};

/* Waits on w->cond until the mono ms `until` (0: no deadline).  Needs w->lock. */
static void wait_until(brig_worker *w, int64_t until, int64_t now)
{
    if (until == 0) {
        pthread_cond_wait(&w->cond, &w->lock);
        return;
    }
    struct timespec ts = brig_mono_after(until - now);
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

static void *worker_thread(void *arg)
{
    brig_worker *w = arg;
    uint64_t seen = 0;               /* the kick count this thread last ran at */
    int64_t next = BRIG_WORKER_IDLE; /* what its last run asked for */
    bool ran_draining = false;       /* it ran once since the drain was asked */
    pthread_mutex_lock(&w->lock);
    int64_t period_at = w->spec.period_ms ? brig_now_mono_ms() + w->spec.period_ms : 0;
    for (;;) {
        bool draining = w->stop && w->drain;
        if (w->stop && (!draining || (ran_draining && next == BRIG_WORKER_IDLE)))
            break;
        int64_t now = brig_now_mono_ms();
        bool run = w->gen != seen || next == BRIG_WORKER_AGAIN || (next > 0 && now >= next) ||
                   (period_at && now >= period_at) || (draining && !ran_draining);
        if (!run) {
            int64_t until = next > 0 ? next : 0;
            if (period_at && (until == 0 || period_at < until))
                until = period_at;
            wait_until(w, until, now);
            continue;
        }
        seen = w->gen;
        ran_draining |= draining;
        pthread_mutex_unlock(&w->lock);
        next = w->spec.run(w->spec.arg);
        pthread_mutex_lock(&w->lock);
        if (w->spec.period_ms)
            period_at = brig_now_mono_ms() + w->spec.period_ms;
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int brig_worker_start(const brig_worker_spec *spec, brig_worker **out, brig_error **err)
{
    brig_worker *w = brig_xcalloc(1, sizeof(*w));
    w->spec = *spec;
    pthread_mutex_init(&w->lock, NULL);
    brig_cond_init_mono(&w->cond);
    int want = spec->threads < 1 ? 1 : spec->threads > MAX_THREADS ? MAX_THREADS : spec->threads;
    int e = 0;
    *out = w; /* before the threads run: a run may ask brig_worker_stopping(*out) */
    for (int i = 0; i < want; i++) {
        e = pthread_create(&w->threads[i], NULL, worker_thread, w);
        if (e != 0)
            break; /* fewer threads still work */
        w->n_threads++;
    }
    if (w->n_threads == 0) {
        *out = NULL;
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "start %s", spec->name);
    }
    return 0;
}

void brig_worker_kick(brig_worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->gen++;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

bool brig_worker_stopping(brig_worker *w)
{
    pthread_mutex_lock(&w->lock);
    bool stop = w->stop;
    pthread_mutex_unlock(&w->lock);
    return stop;
}

static void end(brig_worker *w, bool drain)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    w->drain = drain;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void brig_worker_stop(brig_worker *w)
{
    end(w, false);
}

void brig_worker_drain(brig_worker *w)
{
    end(w, true);
}
