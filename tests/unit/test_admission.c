/*
 * test_admission.c - host capacity shared between accounts (admission.c), with real
 * threads: a burst of 500 waiting requests of one account does not starve another
 * account's single request; memory is admitted like slots; a request that can
 * never fit is refused at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admission.h"

#define BURST 500

typedef struct waiter_arg {
    brig_admission *a;
    const char *account;
    int64_t mem;
    int rc;
    int order; /* the how-many-th grant it was, or 0 */
} waiter_arg;

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int grants;

static void *waiter(void *p)
{
    waiter_arg *w = p;
    brig_error *err = NULL;
    w->rc = brig_admission_take(w->a, w->account, w->mem, 60000, &err);
    brig_error_clear(&err);
    if (w->rc == 0) {
        pthread_mutex_lock(&order_lock);
        w->order = ++grants;
        pthread_mutex_unlock(&order_lock);
    }
    return NULL;
}

/* Polls the admission's observable state (no sleeps as synchronisation). */
static void wait_queued(brig_admission *a, int64_t n)
{
    for (int i = 0; i < 60000; i++) {
        int64_t used, mem, queued;
        brig_admission_stats(a, &used, &mem, &queued);
        if (queued == n)
            return;
        usleep(1000);
    }
    fail_msg("never %lld queued", (long long)n);
}

static void wait_grants(int n)
{
    for (int i = 0; i < 60000; i++) {
        pthread_mutex_lock(&order_lock);
        int g = grants;
        pthread_mutex_unlock(&order_lock);
        if (g >= n)
            return;
        usleep(1000);
    }
    fail_msg("never %d grants", n);
}

static void start(pthread_t *t, waiter_arg *w)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    assert_int_equal(pthread_create(t, &attr, waiter, w), 0);
    pthread_attr_destroy(&attr);
}

static void test_burst_does_not_starve_a_single_request(void **state)
{
    (void)state;
    static brig_admission a;
    static pthread_t ts[BURST + 1];
    static waiter_arg ws[BURST + 1];
    grants = 0;
    brig_admission_init(&a, 1, 0);
    brig_error *err = NULL;
    assert_int_equal(brig_admission_take(&a, "acc_busy", 0, 1000, &err), 0); /* the host is full */
    for (int i = 0; i < BURST; i++) {
        ws[i] = (waiter_arg){.a = &a, .account = "acc_busy"};
        start(&ts[i], &ws[i]);
    }
    wait_queued(&a, BURST);
    ws[BURST] = (waiter_arg){.a = &a, .account = "acc_lone"};
    start(&ts[BURST], &ws[BURST]);
    wait_queued(&a, BURST + 1);

    brig_admission_release(&a, 0); /* one slot frees: the lone request's turn */
    wait_grants(1);
    assert_int_equal(ws[BURST].order, 1);
    for (int i = 0; i < BURST; i++)
        assert_int_equal(ws[i].order, 0);

    for (int i = 0; i < BURST; i++) /* drain: each release serves one more */
        brig_admission_release(&a, 0);
    for (int i = 0; i <= BURST; i++) {
        pthread_join(ts[i], NULL);
        assert_int_equal(ws[i].rc, 0);
    }
    /* Every one of the burst was served, after the lone one. */
    for (int i = 0; i < BURST; i++)
        assert_true(ws[i].order >= 2 && ws[i].order <= BURST + 1);
    brig_admission_release(&a, 0);
    int64_t used, mem, queued;
    brig_admission_stats(&a, &used, &mem, &queued);
    assert_int_equal(used, 0);
    assert_int_equal(queued, 0);
    brig_admission_dispose(&a);
}

static void test_memory_is_admitted_like_slots(void **state)
{
    (void)state;
    brig_admission a;
    grants = 0;
    brig_admission_init(&a, 100, 1000);
    brig_error *err = NULL;
    assert_int_equal(brig_admission_take(&a, "acc_a", 600, 1000, &err), 0);
    /* Too big for what is left: waits; then a timeout says why. */
    assert_int_equal(brig_admission_take(&a, "acc_b", 600, 50, &err), -1);
    assert_int_equal(err->kind, BRIG_E_UNAVAILABLE);
    assert_non_null(strstr(err->msg, "600 of 1000 MiB"));
    brig_error_clear(&err);
    /* Can never fit: at once. */
    assert_int_equal(brig_admission_take(&a, "acc_b", 1001, 60000, &err), -1);
    assert_non_null(strstr(err->msg, "can never fit"));
    brig_error_clear(&err);
    /* A waiter gets the memory a release frees. */
    pthread_t t;
    waiter_arg w = {.a = &a, .account = "acc_b", .mem = 600};
    start(&t, &w);
    wait_queued(&a, 1);
    assert_int_equal(w.order, 0);
    brig_admission_release(&a, 600);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    int64_t used, mem, queued;
    brig_admission_stats(&a, &used, &mem, &queued);
    assert_int_equal(used, 1);
    assert_int_equal(mem, 600);
    brig_admission_release(&a, 600);
    brig_admission_dispose(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_does_not_starve_a_single_request),
        cmocka_unit_test(test_memory_is_admitted_like_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
