/*
 * test_admission.c - host capacity shared between accounts (admission.c), with real
 * threads: a burst of 500 waiting requests of one account does not starve another
 * account's single request; memory and disk are admitted like slots; a request
 * that can never fit is refused at once; one account's request that does not fit
 * does not hold up another account's that does.
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

#include "account/admission.h"

#define BURST   500
#define NONE    ((brig_capacity){0, 0})
#define MEM(n)  ((brig_capacity){(n), 0})
#define DISK(n) ((brig_capacity){0, (n)})

typedef struct waiter_arg {
    brig_admission *a;
    const char *account;
    int64_t mem, disk;
    int rc;
    int order; /* the how-many-th grant it was, or 0 */
} waiter_arg;

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int grants;

static void *waiter(void *p)
{
    waiter_arg *w = p;
    brig_error *err = NULL;
    w->rc = brig_admission_take(w->a, w->account, (brig_capacity){w->mem, w->disk}, 60000, &err);
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
        int64_t used, queued;
        brig_capacity in_use;
        brig_admission_stats(a, &used, &in_use, &queued);
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
    brig_admission_init(&a, 1, 0, 0);
    brig_error *err = NULL;
    assert_int_equal(brig_admission_take(&a, "acc_busy", NONE, 1000, &err),
                     0); /* the host is full */
    for (int i = 0; i < BURST; i++) {
        ws[i] = (waiter_arg){.a = &a, .account = "acc_busy"};
        start(&ts[i], &ws[i]);
    }
    wait_queued(&a, BURST);
    ws[BURST] = (waiter_arg){.a = &a, .account = "acc_lone"};
    start(&ts[BURST], &ws[BURST]);
    wait_queued(&a, BURST + 1);

    brig_admission_release(&a, NONE); /* one slot frees: the lone request's turn */
    wait_grants(1);
    assert_int_equal(ws[BURST].order, 1);
    for (int i = 0; i < BURST; i++)
        assert_int_equal(ws[i].order, 0);

    for (int i = 0; i < BURST; i++) /* drain: each release serves one more */
        brig_admission_release(&a, NONE);
    for (int i = 0; i <= BURST; i++) {
        pthread_join(ts[i], NULL);
        assert_int_equal(ws[i].rc, 0);
    }
    /* Every one of the burst was served, after the lone one. */
    for (int i = 0; i < BURST; i++)
        assert_true(ws[i].order >= 2 && ws[i].order <= BURST + 1);
    brig_admission_release(&a, NONE);
    int64_t used, queued;
    brig_capacity in_use;
    brig_admission_stats(&a, &used, &in_use, &queued);
    assert_int_equal(used, 0);
    assert_int_equal(queued, 0);
    brig_admission_dispose(&a);
}

static void test_memory_is_admitted_like_slots(void **state)
{
    (void)state;
    brig_admission a;
    grants = 0;
    brig_admission_init(&a, 100, 1000, 0);
    brig_error *err = NULL;
    assert_int_equal(brig_admission_take(&a, "acc_a", MEM(600), 1000, &err), 0);
    /* Too big for what is left: waits; then a timeout says why. */
    assert_int_equal(brig_admission_take(&a, "acc_b", MEM(600), 50, &err), -1);
    assert_int_equal(err->kind, BRIG_E_UNAVAILABLE);
    assert_non_null(strstr(err->msg, "600 of 1000 MiB"));
    brig_error_clear(&err);
    /* Can never fit: at once. */
    assert_int_equal(brig_admission_take(&a, "acc_b", MEM(1001), 60000, &err), -1);
    assert_non_null(strstr(err->msg, "can never fit"));
    brig_error_clear(&err);
    /* A waiter gets the memory a release frees. */
    pthread_t t;
    waiter_arg w = {.a = &a, .account = "acc_b", .mem = 600};
    start(&t, &w);
    wait_queued(&a, 1);
    assert_int_equal(w.order, 0);
    brig_admission_release(&a, MEM(600));
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    int64_t used, queued;
    brig_capacity in_use;
    brig_admission_stats(&a, &used, &in_use, &queued);
    assert_int_equal(used, 1);
    assert_int_equal(in_use.mem_mib, 600);
    brig_admission_release(&a, MEM(600));
    brig_admission_dispose(&a);
}

static void test_disk_is_admitted_like_memory(void **state)
{
    (void)state;
    brig_admission a;
    grants = 0;
    brig_admission_init(&a, 100, 0, 1000);
    brig_error *err = NULL;
    assert_int_equal(brig_admission_take(&a, "acc_a", DISK(600), 1000, &err), 0);
    assert_int_equal(brig_admission_take(&a, "acc_b", DISK(600), 50, &err), -1);
    assert_int_equal(err->kind, BRIG_E_UNAVAILABLE);
    assert_non_null(strstr(err->msg, "600 of 1000 MiB of disk"));
    brig_error_clear(&err);
    assert_int_equal(brig_admission_take(&a, "acc_b", DISK(1001), 60000, &err), -1);
    assert_non_null(strstr(err->msg, "can never fit"));
    assert_non_null(strstr(err->msg, "disk budget is 1000 MiB"));
    brig_error_clear(&err);
    /* Memory is not bounded here, disk is: a memory-heavy one fits. */
    assert_int_equal(brig_admission_take(&a, "acc_b", (brig_capacity){1 << 20, 400}, 50, &err), 0);
    pthread_t t;
    waiter_arg w = {.a = &a, .account = "acc_c", .disk = 500};
    start(&t, &w);
    wait_queued(&a, 1);
    brig_admission_release(&a, DISK(600));
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    int64_t used, queued;
    brig_capacity in_use;
    brig_admission_stats(&a, &used, &in_use, &queued);
    assert_int_equal(used, 2);
    assert_int_equal(in_use.disk_mib, 900);
    assert_int_equal(in_use.mem_mib, 1 << 20);
    brig_admission_release(&a, (brig_capacity){1 << 20, 400});
    brig_admission_release(&a, DISK(500));
    brig_admission_stats(&a, &used, &in_use, &queued);
    assert_int_equal(used, 0);
    assert_int_equal(in_use.disk_mib, 0);
    brig_admission_dispose(&a);
}

static void test_a_big_request_holds_up_only_its_own_account(void **state)
{
    (void)state;
    brig_admission a;
    grants = 0;
    brig_admission_init(&a, 100, 0, 1000);
    brig_error *err = NULL;
    assert_int_equal(brig_admission_take(&a, "acc_big", DISK(600), 1000, &err), 0);
    /* acc_small was served last: the next turn is acc_big's. */
    assert_int_equal(brig_admission_take(&a, "acc_small", DISK(100), 1000, &err), 0);
    pthread_t tb, tb2, ts;
    waiter_arg big = {.a = &a, .account = "acc_big", .disk = 600};
    waiter_arg big_small = {.a = &a, .account = "acc_big", .disk = 100};
    waiter_arg small = {.a = &a, .account = "acc_small", .disk = 100};
    start(&tb, &big);
    wait_queued(&a, 1);
    start(&tb2, &big_small); /* behind its own account's big one */
    wait_queued(&a, 2);
    /* Another account's request that fits is served at once, though the big
     * one's turn came first. */
    start(&ts, &small);
    pthread_join(ts, NULL);
    assert_int_equal(small.rc, 0);
    assert_int_equal(small.order, 1);
    assert_int_equal(big.order, 0);
    assert_int_equal(big_small.order, 0); /* an account's requests keep their order */
    int64_t used, queued;
    brig_capacity in_use;
    brig_admission_stats(&a, &used, &in_use, &queued);
    assert_int_equal(queued, 2);
    assert_int_equal(in_use.disk_mib, 800);
    /* The disk freed serves the big one, then its account's next. */
    brig_admission_release(&a, DISK(600));
    pthread_join(tb, NULL);
    pthread_join(tb2, NULL);
    assert_int_equal(big.rc, 0);
    assert_int_equal(big_small.rc, 0);
    brig_admission_stats(&a, &used, &in_use, &queued);
    assert_int_equal(queued, 0);
    assert_int_equal(in_use.disk_mib, 900);
    brig_admission_dispose(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_does_not_starve_a_single_request),
        cmocka_unit_test(test_memory_is_admitted_like_slots),
        cmocka_unit_test(test_disk_is_admitted_like_memory),
        cmocka_unit_test(test_a_big_request_holds_up_only_its_own_account),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
