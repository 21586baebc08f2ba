/*
 * quota.h - an amount that requests hold for a while (bytes of memory, requests in
 * flight), bounded for everyone together and for each account alone.
 *
 * A take is all or nothing: it fails, taking nothing, when it would pass either bound;
 * what was taken is given back by the holder.  One account's bound below the total
 * leaves room for the others: a tenant that fills its own share cannot fill the host's.
 */
#ifndef BRIG_QUOTA_H
#define BRIG_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

typedef struct brig_quota brig_quota;

/* total: the bound for everyone (0: none); per_account: for each account (0: none). */
brig_quota *brig_quota_new(int64_t total, int64_t per_account);
void brig_quota_free(brig_quota *q);

typedef enum {
    BRIG_QUOTA_OK,
    BRIG_QUOTA_ACCOUNT, /* the account's bound would be passed */
    BRIG_QUOTA_TOTAL,   /* the bound for everyone would be passed */
} brig_quota_result;

/* Takes n for account (any string; "" is an account too). */
brig_quota_result brig_quota_take(brig_quota *q, const char *account, int64_t n);
/* Gives back n that account took. */
void brig_quota_give(brig_quota *q, const char *account, int64_t n);

/* What everyone, and what account, holds now. */
int64_t brig_quota_used(brig_quota *q, const char *account);
int64_t brig_quota_total_used(brig_quota *q);

#endif
