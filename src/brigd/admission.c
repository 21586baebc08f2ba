/*
 * admission.c - fair sharing of host capacity (see admission.h).
 */
#include "admission.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

struct brig_waiter {
    char account[64];
    int64_t mem; /* MiB */
    bool granted;
    pthread_cond_t cond;
    brig_waiter *next;
};

void brig_admission_init(brig_admission *a, int64_t capacity, int64_t mem_capacity_mib)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->lock, NULL);
    a->capacity = capacity;
    a->mem_capacity = mem_capacity_mib;
}

/* Whether one more sandbox of mem MiB fits now.  Needs a->lock. */
static bool fits_locked(const brig_admission *a, int64_t mem)
{
    return a->used < a->capacity && (a->mem_capacity == 0 || a->mem_used + mem <= a->mem_capacity);
}

static void grant_locked(brig_admission *a, const char *account, int64_t mem)
{
    a->used++;
    a->mem_used += mem;
    snprintf(a->last_account, sizeof(a->last_account), "%s", account);
}

void brig_admission_dispose(brig_admission *a)
{
    pthread_mutex_destroy(&a->lock);
}

/* The waiter whose turn it is: the oldest waiter of the first account, in
 * arrival order, that comes after the account served last (wrapping around).
 * Needs a->lock. */
static brig_waiter **next_turn_locked(brig_admission *a)
{
    if (a->queue == NULL)
        return NULL;
    /* Accounts in order of their oldest waiter. */
    brig_waiter **first = NULL, **after = NULL;
    bool seen_last = false;
    for (brig_waiter **pp = &a->queue; *pp; pp = &(*pp)->next) {
        brig_waiter *w = *pp;
        bool older_same = false;
        for (brig_waiter *o = a->queue; o != w; o = o->next)
            older_same |= strcmp(o->account, w->account) == 0;
        if (older_same)
            continue; /* not the head of its account's FIFO */
        if (first == NULL)
            first = pp;
        if (seen_last && after == NULL)
            after = pp;
        if (strcmp(w->account, a->last_account) == 0)
            seen_last = true;
    }
    return after ? after : first;
}

/* Grants waiters in turn, as long as the one whose turn it is fits: a big
 * request is not overtaken by smaller ones behind it.  Needs a->lock. */
static void grant_waiting_locked(brig_admission *a)
{
    for (brig_waiter **pp; (pp = next_turn_locked(a)) != NULL && fits_locked(a, (*pp)->mem);) {
        brig_waiter *w = *pp;
        *pp = w->next;
        w->granted = true;
        grant_locked(a, w->account, w->mem);
        pthread_cond_signal(&w->cond);
    }
}

int brig_admission_take(brig_admission *a, const char *account_id, int64_t mem_mib,
                        int64_t timeout_ms, brig_error **err)
{
    pthread_mutex_lock(&a->lock);
    if (a->mem_capacity > 0 && mem_mib > a->mem_capacity) {
        int64_t cap = a->mem_capacity;
        pthread_mutex_unlock(&a->lock);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "a sandbox with %lld MiB of memory can never fit on this host: its "
                              "memory budget is %lld MiB (memory_overcommit x RAM)",
                              (long long)mem_mib, (long long)cap);
    }
    if (a->queue == NULL && fits_locked(a, mem_mib)) {
        grant_locked(a, account_id, mem_mib);
        pthread_mutex_unlock(&a->lock);
        return 0;
    }
    brig_waiter w;
    memset(&w, 0, sizeof(w));
    snprintf(w.account, sizeof(w.account), "%s", account_id);
    w.mem = mem_mib;
    brig_cond_init_mono(&w.cond);
    brig_waiter **tail = &a->queue;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &w;
    struct timespec dl = brig_mono_after(timeout_ms);
    while (!w.granted) {
        if (pthread_cond_timedwait(&w.cond, &a->lock, &dl) == ETIMEDOUT && !w.granted)
            break;
    }
    if (!w.granted) {
        for (brig_waiter **pp = &a->queue; *pp; pp = &(*pp)->next)
            if (*pp == &w) {
                *pp = w.next;
                break;
            }
        grant_waiting_locked(a); /* we may have been the one in the way */
    }
    int64_t used = a->used, mem_used = a->mem_used, mem_cap = a->mem_capacity;
    pthread_mutex_unlock(&a->lock);
    pthread_cond_destroy(&w.cond);
    if (!w.granted && mem_cap > 0)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "this host is at capacity (%lld live sandboxes, %lld of %lld MiB "
                              "of memory limits); nothing freed up within %lld s: try again later",
                              (long long)used, (long long)mem_used, (long long)mem_cap,
                              (long long)(timeout_ms / 1000));
    if (!w.granted)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "this host is at capacity (%lld live sandboxes); no slot freed up "
                              "within %lld s: try again later",
                              (long long)used, (long long)(timeout_ms / 1000));
    return 0;
}

void brig_admission_release(brig_admission *a, int64_t mem_mib)
{
    pthread_mutex_lock(&a->lock);
    if (a->used > 0)
        a->used--;
    a->mem_used = a->mem_used > mem_mib ? a->mem_used - mem_mib : 0;
    grant_waiting_locked(a);
    pthread_mutex_unlock(&a->lock);
}

void brig_admission_stats(brig_admission *a, int64_t *used, int64_t *mem_used, int64_t *queued)
{
    pthread_mutex_lock(&a->lock);
    *used = a->used;
    *mem_used = a->mem_used;
    *queued = 0;
    for (brig_waiter *w = a->queue; w; w = w->next)
        (*queued)++;
    pthread_mutex_unlock(&a->lock);
}

void brig_admission_hold(brig_admission *a, int64_t mem_mib)
{
    pthread_mutex_lock(&a->lock);
    a->used++;
    a->mem_used += mem_mib;
    pthread_mutex_unlock(&a->lock);
}
