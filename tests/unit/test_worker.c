/*
 * test_worker.c - the worker-thread helper (core/worker.c): a kick runs the function, a
 * kick that comes while it runs is not lost, a due time and a period bring the next
 * run, a stop ends the threads without another run, and a drain lets several threads
 * empty their work first, told to hurry.  Each test waits on a condition with a
 * deadline, never for a fixed time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/worker.h"
#include "util.h"

#define DEADLINE_MS 10000

typedef struct work {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* runs changed; release changed */
    int runs;            /* calls so far */
    int64_t first_at;    /* mono ms of the first and second calls */
    int64_t second_at;
    int64_t again_in; /* > 0: the first call asks to be due again this much later */
    bool hold;        /* the first call waits until release */
    bool release;
    int items;   /* drain: work left; each call takes one */
    int done;    /* ... and counts it */
    int hurried; /* calls that saw brig_worker_stopping */
    brig_worker *w;
} work;

static void work_init(work *k)
{
    memset(k, 0, sizeof(*k));
    pthread_mutex_init(&k->lock, NULL);
    brig_cond_init_mono(&k->cond);
}

static void work_dispose(work *k)
{
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
}

static int64_t run(void *arg)
{
    work *k = arg;
    pthread_mutex_lock(&k->lock);
    int n = ++k->runs;
    if (n == 1)
        k->first_at = brig_now_mono_ms();
    if (n == 2)
        k->second_at = brig_now_mono_ms();
    pthread_cond_broadcast(&k->cond);
    while (n == 1 && k->hold && !k->release)
        pthread_cond_wait(&k->cond, &k->lock);
    int64_t next = BRIG_WORKER_IDLE;
    if (n == 1 && k->again_in > 0)
        next = brig_now_mono_ms() + k->again_in;
    pthread_mutex_unlock(&k->lock);
    return next;
}

/* Waits until k->runs >= n (true) or the deadline passes (false). */
static bool wait_runs(work *k, int n)
{
    struct timespec ts = brig_mono_after(DEADLINE_MS);
    pthread_mutex_lock(&k->lock);
    int e = 0;
    while (k->runs < n && e == 0)
        e = pthread_cond_timedwait(&k->cond, &k->lock, &ts);
    bool ok = k->runs >= n;
    pthread_mutex_unlock(&k->lock);
    return ok;
}

static int runs(work *k)
{
    pthread_mutex_lock(&k->lock);
    int n = k->runs;
    pthread_mutex_unlock(&k->lock);
    return n;
}

static brig_worker *start(work *k, int threads, int64_t period_ms, int64_t (*fn)(void *))
{
    brig_worker_spec spec = {
        .name = "a test worker", .threads = threads, .period_ms = period_ms, .run = fn, .arg = k};
    brig_worker *w = NULL;
    brig_error *err = NULL;
    assert_int_equal(brig_worker_start(&spec, &w, &err), 0);
    assert_non_null(w);
    k->w = w;
    return w;
}

static void test_kick_runs_it(void **state)
{
    (void)state;
    work k;
    work_init(&k);
    brig_worker *w = start(&k, 1, 0, run);
    assert_int_equal(runs(&k), 0); /* no period, no kick: nothing runs */
    brig_worker_kick(w);
    assert_true(wait_runs(&k, 1));
    brig_worker_kick(w);
    assert_true(wait_runs(&k, 2));
    brig_worker_stop(w);
    work_dispose(&k);
}

static void test_kick_while_running_is_not_lost(void **state)
{
    (void)state;
    work k;
    work_init(&k);
    k.hold = true;
    brig_worker *w = start(&k, 1, 0, run);
    brig_worker_kick(w);
    assert_true(wait_runs(&k, 1)); /* the first run is in progress, held */
    brig_worker_kick(w);           /* ... and this kick comes meanwhile */
    pthread_mutex_lock(&k.lock);
    k.release = true;
    pthread_cond_broadcast(&k.cond);
    pthread_mutex_unlock(&k.lock);
    assert_true(wait_runs(&k, 2));
    brig_worker_stop(w);
    work_dispose(&k);
}

static void test_due_time_brings_the_next_run(void **state)
{
    (void)state;
    work k;
    work_init(&k);
    k.again_in = 50;
    brig_worker *w = start(&k, 1, 0, run);
    brig_worker_kick(w);
    assert_true(wait_runs(&k, 2)); /* no second kick: the due time brings it */
    assert_true(k.second_at - k.first_at >= 50);
    brig_worker_stop(w);
    work_dispose(&k);
}

static void test_period_brings_runs(void **state)
{
    (void)state;
    work k;
    work_init(&k);
    int64_t t0 = brig_now_mono_ms();
    brig_worker *w = start(&k, 1, 20, run);
    assert_true(wait_runs(&k, 3));
    assert_true(k.first_at - t0 >= 20); /* the first run after the first period */
    brig_worker_stop(w);
    work_dispose(&k);
}

static void test_stop_runs_nothing_more(void **state)
{
    (void)state;
    work k;
    work_init(&k);
    brig_worker *w = start(&k, 3, 0, run);
    brig_worker_kick(w);
    assert_true(wait_runs(&k, 3)); /* a kick wakes every thread */
    brig_worker_stop(w);           /* joined: no thread runs any more */
    assert_int_equal(runs(&k), 3);
    work_dispose(&k);
}

/* Takes one item per call; IDLE once none is left. */
static int64_t take_item(void *arg)
{
    work *k = arg;
    bool hurry = brig_worker_stopping(k->w);
    pthread_mutex_lock(&k->lock);
    k->runs++;
    k->hurried += hurry;
    bool took = k->items > 0;
    if (took) {
        k->items--;
        k->done++;
    }
    pthread_mutex_unlock(&k->lock);
    return took ? BRIG_WORKER_AGAIN : BRIG_WORKER_IDLE;
}

static void test_drain_empties_the_work_first(void **state)
{
    (void)state;
    work k;
    work_init(&k);
    k.items = 100;
    brig_worker *w = start(&k, 4, 0, take_item); /* never kicked: nothing ran yet */
    brig_worker_drain(w);
    assert_int_equal(k.done, 100);
    assert_int_equal(k.items, 0);
    assert_true(k.hurried >= 4); /* every thread ran, told to hurry */
    work_dispose(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kick_runs_it),
        cmocka_unit_test(test_kick_while_running_is_not_lost),
        cmocka_unit_test(test_due_time_brings_the_next_run),
        cmocka_unit_test(test_period_brings_runs),
        cmocka_unit_test(test_stop_runs_nothing_more),
        cmocka_unit_test(test_drain_empties_the_work_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
