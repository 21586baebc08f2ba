/*
 * test_quota.c - an amount held per account and in all (quota.c): a take is all or
 * nothing, one account's bound leaves the rest to others, what is given back can be
 * taken again, and an account that holds nothing is forgotten.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>

#include "account/quota.h"

static void test_account_bound_leaves_room_for_others(void **state)
{
    (void)state;
    brig_quota *q = brig_quota_new(100, 40);
    assert_int_equal(brig_quota_take(q, "acc_a", 30), BRIG_QUOTA_OK);
    assert_int_equal(brig_quota_take(q, "acc_a", 11), BRIG_QUOTA_ACCOUNT); /* 41 > 40 */
    assert_int_equal(brig_quota_used(q, "acc_a"), 30);                     /* nothing taken */
    assert_int_equal(brig_quota_take(q, "acc_a", 10), BRIG_QUOTA_OK);
    assert_int_equal(brig_quota_take(q, "acc_b", 40), BRIG_QUOTA_OK);
    assert_int_equal(brig_quota_take(q, "acc_c", 21), BRIG_QUOTA_TOTAL); /* 101 > 100 */
    assert_int_equal(brig_quota_take(q, "acc_c", 20), BRIG_QUOTA_OK);
    assert_int_equal(brig_quota_total_used(q), 100);
    brig_quota_give(q, "acc_a", 40);
    assert_int_equal(brig_quota_used(q, "acc_a"), 0);
    assert_int_equal(brig_quota_total_used(q), 60);
    assert_int_equal(brig_quota_take(q, "acc_c", 20), BRIG_QUOTA_OK);
    brig_quota_give(q, "acc_b", 40);
    brig_quota_give(q, "acc_c", 40);
    assert_int_equal(brig_quota_total_used(q), 0);
    brig_quota_free(q);
}

static void test_no_bounds_and_stray_gives(void **state)
{
    (void)state;
    brig_quota *q = brig_quota_new(0, 0);
    for (int i = 0; i < 1000; i++) {
        char acct[16];
        snprintf(acct, sizeof(acct), "acc_%d", i);
        assert_int_equal(brig_quota_take(q, acct, 1 << 20), BRIG_QUOTA_OK);
    }
    assert_int_equal(brig_quota_total_used(q), (int64_t)1000 << 20);
    for (int i = 0; i < 1000; i++) {
        char acct[16];
        snprintf(acct, sizeof(acct), "acc_%d", i);
        brig_quota_give(q, acct, 1 << 20);
    }
    brig_quota_give(q, "acc_never", 5); /* a give without a take changes nothing */
    brig_quota_give(q, "", 5);
    assert_int_equal(brig_quota_total_used(q), 0);
    assert_int_equal(brig_quota_take(q, "", 7), BRIG_QUOTA_OK); /* "" is an account too */
    brig_quota_give(q, "", 9);                                  /* over-give: back to 0 */
    assert_int_equal(brig_quota_total_used(q), 0);
    brig_quota_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_account_bound_leaves_room_for_others),
        cmocka_unit_test(test_no_bounds_and_stray_gives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
