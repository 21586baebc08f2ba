/*
 * test_billing.c - ledger arithmetic: the 60-second minimum, partial seconds,
 * incremental charging that never charges a second twice, money formatting,
 * UTC day/month boundaries (the clock is an argument: injected), and volumes' charges
 * by size and second with what is below a micro-dollar carried.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "account/billing.h"

static void test_minimum_and_rounding(void **state)
{
    (void)state;
    assert_int_equal(brig_bill_seconds(0, 0, true), 60); /* created and deleted at once */
    assert_int_equal(brig_bill_seconds(59999, 0, true), 60);
    assert_int_equal(brig_bill_seconds(60000, 0, true), 60);
    assert_int_equal(brig_bill_seconds(60001, 0, true), 61); /* a started second counts */
    assert_int_equal(brig_bill_seconds(125400, 0, true), 126);
    assert_int_equal(brig_bill_seconds(-5, 0, true), 60); /* clock skew never refunds */
}

static void test_incremental_never_twice(void **state)
{
    (void)state;
    /* Ticks every 10 s charge whole elapsed seconds; the end charges the rest. */
    int64_t billed = 0, total = 0;
    int64_t ticks[] = {10400, 20999, 31000, 45500};
    for (size_t i = 0; i < 4; i++) {
        int64_t s = brig_bill_seconds(ticks[i], billed, false);
        billed += s;
        total += s;
    }
    assert_int_equal(billed, 45); /* floor at each tick */
    int64_t last = brig_bill_seconds(45500, billed, false);
    assert_int_equal(last, 0); /* the same instant again: nothing more */
    total += brig_bill_seconds(125100, billed, true);
    assert_int_equal(total, 126); /* ceil(125.1) overall */
    /* A short life billed incrementally still totals the minimum. */
    assert_int_equal(brig_bill_seconds(30000, 30, true), 30);
    /* Past the minimum already: a final charge adds only the partial second. */
    assert_int_equal(brig_bill_seconds(90500, 90, true), 1);
    assert_int_equal(brig_bill_seconds(90000, 90, true), 0);
}

static void test_money(void **state)
{
    (void)state;
    char b[32];
    brig_money_format(600, b);
    assert_string_equal(b, "$0.000600");
    brig_money_format(1000000, b);
    assert_string_equal(b, "$1.000000");
    brig_money_format(-2500001, b);
    assert_string_equal(b, "-$2.500001");
    brig_money_format(0, b);
    assert_string_equal(b, "$0.000000");
    brig_money_format(INT64_MIN, b); /* no overflow on the extreme */
    assert_string_equal(b, "-$9223372036854.775808");
}

static void test_boundaries(void **state)
{
    (void)state;
    /* 2026-12-31T23:59:59.999Z */
    int64_t t = 1798761599999;
    assert_int_equal(brig_day_start(t), 1798675200000);   /* 2026-12-31T00:00Z */
    assert_int_equal(brig_next_day(t), 1798761600000);    /* 2027-01-01T00:00Z */
    assert_int_equal(brig_month_start(t), 1796083200000); /* 2026-12-01T00:00Z */
    assert_int_equal(brig_next_month(t), 1798761600000);  /* 2027-01-01T00:00Z */
    /* 2028-02-29 exists (leap year): next day is March 1st. */
    int64_t leap = 1835395200000; /* 2028-02-29T00:00Z */
    assert_int_equal(brig_day_start(leap + 5), leap);
    assert_int_equal(brig_next_day(leap), 1835481600000);    /* 2028-03-01 */
    assert_int_equal(brig_month_start(leap), 1832976000000); /* 2028-02-01 */
    /* Exactly on a boundary belongs to the new day. */
    assert_int_equal(brig_day_start(1798761600000), 1798761600000);
}

static void test_checked_money(void **state)
{
    (void)state;
    int64_t r = 7;
    assert_true(brig_money_add(1, 2, &r) && r == 3);
    assert_true(brig_money_add(BRIG_MONEY_MAX - 1, 1, &r) && r == BRIG_MONEY_MAX);
    r = 7;
    assert_false(brig_money_add(BRIG_MONEY_MAX, 1, &r));
    assert_false(brig_money_add(INT64_MAX, 1, &r));
    assert_false(brig_money_add(INT64_MIN, -1, &r));
    assert_false(brig_money_add(-BRIG_MONEY_MAX, -1, &r));
    assert_false(brig_money_add(0, INT64_MAX, &r));
    assert_int_equal(r, 7); /* untouched on failure */
    assert_int_equal(brig_money_times(60, 10), 600);
    assert_int_equal(brig_money_times(INT64_MAX, 2), BRIG_MONEY_MAX);
    assert_int_equal(brig_money_times((int64_t)1 << 32, (int64_t)1 << 40), BRIG_MONEY_MAX);
    assert_int_equal(brig_money_times(-5, 10), 0);
    assert_int_equal(brig_money_times(0, INT64_MAX), 0);
}

static void test_volume_charges(void **state)
{
    (void)state;
    int64_t rem = 0, amount = -1;
    /* 1 GiB at 3,600,000 micro-dollars per GiB-hour: 1000 a second, exactly. */
    brig_bill_volume(1024, 7, 3600000, false, &rem, &amount);
    assert_int_equal(amount, 7000);
    assert_int_equal(rem, 0);
    /* Below a micro-dollar: carried, never lost, never charged twice. */
    brig_bill_volume(1024, 1800, 1, false, &rem, &amount); /* half a micro-dollar */
    assert_int_equal(amount, 0);
    assert_int_equal(rem, 1024 * 1800);
    brig_bill_volume(1024, 1800, 1, false, &rem, &amount);
    assert_int_equal(amount, 1);
    assert_int_equal(rem, 0);
    /* The final charge rounds what is carried up. */
    brig_bill_volume(16, 1, 1, true, &rem, &amount);
    assert_int_equal(amount, 1);
    assert_int_equal(rem, 0);
    brig_bill_volume(16, 0, 1, true, &rem, &amount);
    assert_int_equal(amount, 0);
    /* Nothing for nothing; negative inputs charge nothing. */
    brig_bill_volume(1024, 100, 0, false, &rem, &amount);
    assert_int_equal(amount, 0);
    brig_bill_volume(-1, 100, 5, false, &rem, &amount);
    assert_int_equal(amount, 0);
    /* Huge: no overflow, held at the money bound. */
    brig_bill_volume((int64_t)1 << 22, (int64_t)1 << 40, 1000000000, false, &rem, &amount);
    assert_int_equal(amount, BRIG_MONEY_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimum_and_rounding),
        cmocka_unit_test(test_incremental_never_twice),
        cmocka_unit_test(test_money),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_checked_money),
        cmocka_unit_test(test_volume_charges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
