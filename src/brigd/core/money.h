/*
 * money.h - the bounds of money and checked arithmetic on it.
 *
 * Money is integer micro-dollars (int64_t) everywhere, never floating point.
 * Every amount brig keeps (a balance, a limit, a charge) stays within
 * [-BRIG_MONEY_MAX, BRIG_MONEY_MAX], far from int64's ends, so sums of a few of
 * them never overflow; what would leave the range is refused (credits, limits)
 * or held at the bound (charges), never wrapped and never turned into a float
 * (SQLite turns an integer that overflows into a REAL).
 */
#ifndef BRIG_MONEY_H
#define BRIG_MONEY_H

#include <stdbool.h>
#include <stdint.h>

#define BRIG_MONEY_MAX  INT64_C(1000000000000000) /* $1,000,000,000: a balance or a limit */
#define BRIG_CREDIT_MAX INT64_C(1000000000000)    /* $1,000,000: one credit */

/* *out = a + b; false (and *out untouched) when that overflows or leaves
 * [-BRIG_MONEY_MAX, BRIG_MONEY_MAX]. */
static inline bool brig_money_add(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r) || r > BRIG_MONEY_MAX || r < -BRIG_MONEY_MAX)
        return false;
    *out = r;
    return true;
}

/* The price of `seconds` at `per_second`, held at BRIG_MONEY_MAX (both >= 0). */
static inline int64_t brig_money_times(int64_t seconds, int64_t per_second)
{
    int64_t r;
    if (seconds < 0 || per_second < 0)
        return 0;
    if (__builtin_mul_overflow(seconds, per_second, &r) || r > BRIG_MONEY_MAX)
        return BRIG_MONEY_MAX;
    return r;
}

#endif
