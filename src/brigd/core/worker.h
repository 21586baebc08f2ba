/*
 * worker.h - one worker-thread helper: a few threads that run a function when kicked,
 * on a period, or when the time it asked for is due.  brigd's background threads are
 * all of this kind: the janitor's tick (a period), the teardown workers (kicked when a
 * sandbox is queued, due when its next attempt is) and the warm pool's filler (kicked
 * by a claim, due when the host has been quiet, and on a period).
 *
 * The function runs on the worker's threads only and never under the worker's lock,
 * so it may take its own locks and block.  A kick that comes while it runs makes it
 * run once more: no wake-up is lost.  With several threads every kick wakes them all;
 * the function hands out its own work under its own lock.
 *
 * Two ways to end: brig_worker_stop ends the threads at their next wait (a run in
 * progress completes first); brig_worker_drain lets each thread run until the
 * function says it has nothing left (BRIG_WORKER_IDLE), brig_worker_stopping()
 * telling it to hurry (no backoff, last attempts).  Both join the threads and free
 * the worker.
 */
#ifndef BRIG_WORKER_H
#define BRIG_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

typedef struct brig_worker brig_worker;

/* What a run returns: when the worker runs the function next. */
#define BRIG_WORKER_AGAIN 0    /* at once: it did something, and there may be more */
#define BRIG_WORKER_IDLE  (-1) /* when kicked, or once the period has passed */
/* Any other value: the monotonic ms when it is due again (sooner when kicked or on
 * the period). */

typedef struct brig_worker_spec {
    const char *name;  /* for errors: "the janitor" */
    int threads;       /* how many threads run the function (at least 1) */
    int64_t period_ms; /* a run at the latest this long after the last; 0: no period */
    int64_t (*run)(void *arg);
    void *arg;
} brig_worker_spec;

/* Starts the threads (all that can be started; an error when not one can).  *out is
 * set before they start, so a run may use it.  The first run comes with the first kick
 * or after the first period. */
int brig_worker_start(const brig_worker_spec *spec, brig_worker **out, brig_error **err);

/* Makes every thread run the function once more as soon as it can. */
void brig_worker_kick(brig_worker *w);

/* True once stop or drain was asked: for the function, to hurry or to stop early. */
bool brig_worker_stopping(brig_worker *w);

/* Ends the threads at their next wait, joins them and frees w (NULL: nothing). */
void brig_worker_stop(brig_worker *w);

/* Runs each thread's function until it returns BRIG_WORKER_IDLE (at least once more
 * each), then as brig_worker_stop. */
void brig_worker_drain(brig_worker *w);

#endif
