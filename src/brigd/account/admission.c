/*
 * admission.c - fair sharing of host capacity (see admission.h).
 */
#include "admission.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/metrics.h"
#include "util.h"

struct brig_waiter {
    char account[64];
    brig_capacity need;
    bool granted;
    pthread_cond_t cond;
    brig_waiter *next;
};

void brig_admission_init(brig_admission *a, int64_t capacity, int64_t mem_capacity_mib,
                         int64_t disk_capacity_mib)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->lock, NULL);
    a->capacity = capacity;
    a->mem_capacity = mem_capacity_mib;
    a->disk_capacity = disk_capacity_mib;
}

/* Whether one more sandbox needing `need` fits now.  Needs a->lock. */
static bool fits_locked(const brig_admission *a, brig_capacity need)
{
    return a->used < a->capacity &&
           (a->mem_capacity == 0 || a->mem_used + need.mem_mib <= a->mem_capacity) &&
           (a->disk_capacity == 0 || a->disk_used + need.disk_mib <= a->disk_capacity);
}

static void grant_locked(brig_admission *a, const char *account, brig_capacity need)
{
    a->used++;
    a->mem_used += need.mem_mib;
    a->disk_used += need.disk_mib;
    snprintf(a->last_account, sizeof(a->last_account), "%s", account);
}

void brig_admission_dispose(brig_admission *a)
{
    pthread_mutex_destroy(&a->lock);
}

/* The waiter whose turn it is: the oldest waiter of the first account, in
 * arrival order, that comes after the account served last (wrapping around)
 * and whose oldest waiter fits now.  An account whose oldest waiter does not
 * fit is passed over and keeps its place; its younger waiters stay behind it
 * (an account's own requests are served in order).  Needs a->lock. */
static brig_waiter **next_turn_locked(brig_admission *a)
{
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
        bool fits = fits_locked(a, w->need);
        if (fits && first == NULL)
            first = pp;
        if (fits && seen_last && after == NULL)
            after = pp;
        if (strcmp(w->account, a->last_account) == 0)
            seen_last = true;
    }
    return after ? after : first;
}

/* Grants waiters in turn while one of them fits.  Needs a->lock. */
static void grant_waiting_locked(brig_admission *a)
{
    for (brig_waiter **pp; (pp = next_turn_locked(a)) != NULL;) {
        brig_waiter *w = *pp;
        *pp = w->next;
        w->granted = true;
        grant_locked(a, w->account, w->need);
        pthread_cond_signal(&w->cond);
    }
}

/* Why a request can never fit, or 0.  Needs a->lock. */
static int never_fits_locked(const brig_admission *a, brig_capacity need, brig_error **err)
{
    if (a->mem_capacity > 0 && need.mem_mib > a->mem_capacity)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "a sandbox with %lld MiB of memory can never fit on this host: its "
                              "memory budget is %lld MiB (memory_overcommit x RAM)",
                              (long long)need.mem_mib, (long long)a->mem_capacity);
    if (a->disk_capacity > 0 && need.disk_mib > a->disk_capacity)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "a sandbox with %lld MiB of disk can never fit on this host: its "
                              "disk budget is %lld MiB (disk_overcommit x the state dir's free "
                              "space, less disk_reserve_mib)",
                              (long long)need.disk_mib, (long long)a->disk_capacity);
    return 0;
}

int brig_admission_take(brig_admission *a, const char *account_id, brig_capacity need,
                        int64_t timeout_ms, brig_error **err)
{
    pthread_mutex_lock(&a->lock);
    if (never_fits_locked(a, need, err) < 0) {
        pthread_mutex_unlock(&a->lock);
        brig_metric_add(BRIG_M_ADMISSION_REFUSED, "reason=\"never_fits\"", 1);
        return -1;
    }
    if (a->queue == NULL && fits_locked(a, need)) {
        grant_locked(a, account_id, need);
        pthread_mutex_unlock(&a->lock);
        return 0;
    }
    brig_waiter w;
    memset(&w, 0, sizeof(w));
    snprintf(w.account, sizeof(w.account), "%s", account_id);
    w.need = need;
    brig_cond_init_mono(&w.cond);
    brig_waiter **tail = &a->queue;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &w;
    /* Waiters of other accounts that do not fit must not hold this one up. */
    grant_waiting_locked(a);
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
    int64_t disk_used = a->disk_used, disk_cap = a->disk_capacity;
    pthread_mutex_unlock(&a->lock);
    pthread_cond_destroy(&w.cond);
    if (w.granted)
        return 0;
    brig_metric_add(BRIG_M_ADMISSION_REFUSED, "reason=\"capacity\"", 1);
    char mem[96] = "", disk[96] = "";
    if (mem_cap > 0)
        snprintf(mem, sizeof(mem), ", %lld of %lld MiB of memory limits", (long long)mem_used,
                 (long long)mem_cap);
    if (disk_cap > 0)
        snprintf(disk, sizeof(disk), ", %lld of %lld MiB of disk", (long long)disk_used,
                 (long long)disk_cap);
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                          "this host is at capacity (%lld live sandboxes%s%s); nothing freed up "
                          "within %lld s for %lld MiB of memory and %lld MiB of disk: try again "
                          "later",
                          (long long)used, mem, disk, (long long)(timeout_ms / 1000),
                          (long long)need.mem_mib, (long long)need.disk_mib);
}

void brig_admission_release(brig_admission *a, brig_capacity held)
{
    pthread_mutex_lock(&a->lock);
    if (a->used > 0)
        a->used--;
    a->mem_used = a->mem_used > held.mem_mib ? a->mem_used - held.mem_mib : 0;
    a->disk_used = a->disk_used > held.disk_mib ? a->disk_used - held.disk_mib : 0;
    grant_waiting_locked(a);
    pthread_mutex_unlock(&a->lock);
}

void brig_admission_stats(brig_admission *a, int64_t *used, brig_capacity *in_use, int64_t *queued)
{
    pthread_mutex_lock(&a->lock);
    *used = a->used;
    in_use->mem_mib = a->mem_used;
    in_use->disk_mib = a->disk_used;
    *queued = 0;
    for (brig_waiter *w = a->queue; w; w = w->next)
        (*queued)++;
    pthread_mutex_unlock(&a->lock);
}

void brig_admission_hold(brig_admission *a, brig_capacity held)
{
    pthread_mutex_lock(&a->lock);
    a->used++;
    a->mem_used += held.mem_mib;
    a->disk_used += held.disk_mib;
    pthread_mutex_unlock(&a->lock);
}

int brig_admission_take_disk(brig_admission *a, int64_t mib, brig_error **err)
{
    pthread_mutex_lock(&a->lock);
    int64_t used = a->disk_used, cap = a->disk_capacity;
    bool fits = cap == 0 || used + mib <= cap;
    if (fits)
        a->disk_used += mib;
    pthread_mutex_unlock(&a->lock);
    if (fits)
        return 0;
    return brig_error_set(err, BRIG_E_NO_SPACE, 0,
                          "this host's disk budget has %lld MiB left (%lld of %lld MiB held by "
                          "sandboxes and volumes): a volume of %lld MiB does not fit",
                          (long long)(cap > used ? cap - used : 0), (long long)used, (long long)cap,
                          (long long)mib);
}

void brig_admission_hold_disk(brig_admission *a, int64_t mib)
{
    pthread_mutex_lock(&a->lock);
    a->disk_used += mib;
    pthread_mutex_unlock(&a->lock);
}

void brig_admission_release_disk(brig_admission *a, int64_t mib)
{
    pthread_mutex_lock(&a->lock);
    a->disk_used = a->disk_used > mib ? a->disk_used - mib : 0;
    grant_waiting_locked(a);
    pthread_mutex_unlock(&a->lock);
}
