/*
 * admission.h - host capacity, shared fairly between accounts.
 *
 * The host runs at most max_sandboxes live sandboxes, whose memory limits add
 * up to at most memory_overcommit x the host's RAM and whose disks add up to at
 * most the disk budget (disk_overcommit x the state dir's free space at start,
 * less disk_reserve_mib).  When a request does not fit, it waits, each account
 * in its own FIFO, and freed capacity goes to the accounts in turn (round
 * robin): one tenant's burst of 500 requests cannot starve another tenant's
 * single request, which is served at the next turn.  An account whose oldest
 * request does not fit now is passed over (keeping its place), so one tenant's
 * big request never holds up another tenant's request that fits; the big one
 * is served when enough is free at its turn.  A request that waits longer than
 * the queue timeout gets 503; one that could never fit (a tariff above the
 * whole memory or disk budget) gets it at once.
 */
#ifndef BRIG_ADMISSION_H
#define BRIG_ADMISSION_H

#include <pthread.h>
#include <stdint.h>

#include "error.h"

/* What one sandbox holds of the host while it lives. */
typedef struct brig_capacity {
    int64_t mem_mib;  /* its tariff's memory limit */
    int64_t disk_mib; /* its tariff's disk (the writable layer's image) */
} brig_capacity;

typedef struct brig_waiter brig_waiter;
typedef struct brig_admission {
    pthread_mutex_t lock;
    int64_t capacity;      /* slots */
    int64_t used;          /* slots held by live sandboxes */
    int64_t mem_capacity;  /* MiB of memory limits; 0: not bounded */
    int64_t mem_used;      /* MiB of memory limits of live sandboxes */
    int64_t disk_capacity; /* MiB of disk images; 0: not bounded */
    int64_t disk_used;     /* MiB of disk images of live sandboxes */
    brig_waiter *queue;    /* waiting requests, in arrival order */
    char last_account[64]; /* who got the last slot: the turn passes on */
} brig_admission;

/* Budgets in MiB; 0: not bounded. */
void brig_admission_init(brig_admission *a, int64_t capacity, int64_t mem_capacity_mib,
                         int64_t disk_capacity_mib);
void brig_admission_dispose(brig_admission *a);

/* Takes a slot, and need's memory and disk, for account_id, waiting up to
 * timeout_ms for them; BRIG_E_UNAVAILABLE when they did not come (or never
 * can). */
int brig_admission_take(brig_admission *a, const char *account_id, brig_capacity need,
                        int64_t timeout_ms, brig_error **err);
/* Returns a slot and what it held (to the next accounts in turn, when they wait). */
void brig_admission_release(brig_admission *a, brig_capacity held);
/* Slots, memory and disk in use and requests waiting, for /healthz. */
void brig_admission_stats(brig_admission *a, int64_t *used, brig_capacity *in_use, int64_t *queued);

/* Marks a re-attached sandbox's slot, memory and disk taken (start-up). */
void brig_admission_hold(brig_admission *a, brig_capacity held);

/* Volumes' disk (docs/volumes.md), held from their create to their delete, in the same
 * disk budget as sandboxes' disks: a take never waits (BRIG_E_NO_SPACE when mib does not
 * fit now); a hold is a volume's at start-up; a release hands it to waiting creates. */
int brig_admission_take_disk(brig_admission *a, int64_t mib, brig_error **err);
void brig_admission_hold_disk(brig_admission *a, int64_t mib);
void brig_admission_release_disk(brig_admission *a, int64_t mib);

#endif
