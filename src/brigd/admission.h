/*
 * admission.h - host capacity, shared fairly between accounts.
 *
 * The host runs at most max_sandboxes live sandboxes, whose memory limits add
 * up to at most memory_overcommit x the host's RAM.  When it is full, create
 * requests wait, each account in its own FIFO, and freed capacity goes to the
 * accounts in turn (round robin): one tenant's burst of 500 requests cannot
 * starve another tenant's single request, which is served at the next turn.
 * A request that waits longer than the queue timeout gets 503; one that could
 * never fit (a tariff above the whole memory budget) gets it at once.
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
    int64_t mem_capacity;  /* MiB of memory limits; 0: not bounded */
    int64_t mem_used;      /* MiB of memory limits of live sandboxes */
    brig_waiter *queue;    /* waiting requests, in arrival order */
    char last_account[64]; /* who got the last slot: the turn passes on */
} brig_admission;

void brig_admission_init(brig_admission *a, int64_t capacity, int64_t mem_capacity_mib);
void brig_admission_dispose(brig_admission *a);

/* Takes a slot and mem_mib of memory for account_id, waiting up to timeout_ms
 * for them; BRIG_E_UNAVAILABLE when they did not come. */
int brig_admission_take(brig_admission *a, const char *account_id, int64_t mem_mib,
                        int64_t timeout_ms, brig_error **err);
/* Returns a slot and its memory (to the next accounts in turn, when they wait). */
void brig_admission_release(brig_admission *a, int64_t mem_mib);
/* Slots and memory in use and requests waiting, for /healthz. */
void brig_admission_stats(brig_admission *a, int64_t *used, int64_t *mem_used, int64_t *queued);

/* Marks a re-attached sandbox's slot and memory taken (start-up). */
void brig_admission_hold(brig_admission *a, int64_t mem_mib);

#endif
