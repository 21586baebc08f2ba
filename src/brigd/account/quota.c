/*
 * quota.c - see quota.h.
 *
 * Accounts that hold something are kept in a small array, searched linearly: they are
 * the accounts with requests in flight right now, a few hundred at most, and an account
 * leaves it when it holds nothing again.
 */
#include "quota.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/id.h"
#include "util.h"

typedef struct holder {
    char account[BRIG_ID_MAX];
    int64_t used;
} holder;

struct brig_quota {
    pthread_mutex_t lock;
    int64_t total, per_account; /* bounds; 0: none */
    int64_t used;               /* by everyone */
    holder *h;                  /* accounts holding something */
    size_t n, cap;
};

brig_quota *brig_quota_new(int64_t total, int64_t per_account)
{
    brig_quota *q = brig_xcalloc(1, sizeof(*q));
    pthread_mutex_init(&q->lock, NULL);
    q->total = total;
    q->per_account = per_account;
    return q;
}

void brig_quota_free(brig_quota *q)
{
    if (q == NULL)
        return;
    pthread_mutex_destroy(&q->lock);
    free(q->h);
    free(q);
}

static holder *find(brig_quota *q, const char *account)
{
    for (size_t i = 0; i < q->n; i++)
        if (strncmp(q->h[i].account, account, sizeof(q->h[i].account) - 1) == 0)
            return &q->h[i];
    return NULL;
}

brig_quota_result brig_quota_take(brig_quota *q, const char *account, int64_t n)
{
    pthread_mutex_lock(&q->lock);
    holder *h = find(q, account);
    int64_t mine = h ? h->used : 0;
    brig_quota_result r = BRIG_QUOTA_OK;
    if (q->per_account && mine + n > q->per_account)
        r = BRIG_QUOTA_ACCOUNT;
    else if (q->total && q->used + n > q->total)
        r = BRIG_QUOTA_TOTAL;
    if (r == BRIG_QUOTA_OK) {
        if (h == NULL) {
            if (q->n == q->cap) {
                q->cap = q->cap ? 2 * q->cap : 16;
                q->h = brig_xrealloc(q->h, q->cap * sizeof(*q->h));
            }
            h = &q->h[q->n++];
            memset(h, 0, sizeof(*h));
            strncpy(h->account, account, sizeof(h->account) - 1);
        }
        h->used += n;
        q->used += n;
    }
    pthread_mutex_unlock(&q->lock);
    return r;
}

void brig_quota_give(brig_quota *q, const char *account, int64_t n)
{
    pthread_mutex_lock(&q->lock);
    holder *h = find(q, account);
    if (h) {
        h->used -= n;
        q->used -= n;
        if (h->used <= 0) {
            q->used -= h->used; /* never below zero: a give without its take is ignored */
            *h = q->h[--q->n];
        }
    }
    pthread_mutex_unlock(&q->lock);
}

int64_t brig_quota_used(brig_quota *q, const char *account)
{
    pthread_mutex_lock(&q->lock);
    holder *h = find(q, account);
    int64_t n = h ? h->used : 0;
    pthread_mutex_unlock(&q->lock);
    return n;
}

int64_t brig_quota_total_used(brig_quota *q)
{
    pthread_mutex_lock(&q->lock);
    int64_t n = q->used;
    pthread_mutex_unlock(&q->lock);
    return n;
}
