/*
 * admission.h - host capacity, shared fairly between accounts.
 *
 * The host runs at most max_sandboxes live sandboxes.  When it is full, create
 * requests wait, each account in its own FIFO, and a freed slot goes to the
 * accounts in turn (round robin): one tenant's burst of 500 requests cannot
 * starve another tenant's single request, which is served at the next turn.
 * A request that waits longer than the queue timeout gets 503.
 */
#ifndef BRIG_ADMISSION_H
#define BRIG_ADMISSION_H

#include <pthread.h>
#include <stdint.h>

#include "error.h"

typedef struct brig_waiter brig_waiter;
typedef struct brig_admission {
    pthread_mutex_t lock;
    int64_t capacity;      /* slots */
    int64_t used;          /* slots held by live sandboxes */
    brig_waiter *queue;    /* waiting requests, in arrival order */
    char last_account[64]; /* who got the last slot: the turn passes on */
} brig_admission;

void brig_admission_init(brig_admission *a, int64_t capacity);
void brig_admission_dispose(brig_admission *a);

/* Takes a slot for account_id, waiting up to timeout_ms for one;
 * BRIG_E_UNAVAILABLE when none came. */
int brig_admission_take(brig_admission *a, const char *account_id, int64_t timeout_ms,
                        brig_error **err);
/* Returns a slot (to the next account in turn, when someone waits). */
void brig_admission_release(brig_admission *a);
/* Slots in use and requests waiting, for /healthz. */
void brig_admission_stats(brig_admission *a, int64_t *used, int64_t *queued);

/* Marks slots of re-attached sandboxes taken (start-up). */
void brig_admission_hold(brig_admission *a, int64_t n);

#endif
