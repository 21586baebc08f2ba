/*
 * spareconn.h - agent connections opened before anyone asks for them, for one sandbox.
 *
 * Opening an agent connection makes the agent fork a handler process (brig-agent's main.c)
 * and answer the handshake: a fork and two round trips that every exec, file transfer or
 * process call used to wait for (docs/benchmarks.md, "Where the time goes").  A sandbox in use
 * keeps a few connections whose handshake is done, their handlers waiting in their first read;
 * connect (rtmux.c) hands those out first and opens a new one only when none is left.  Who
 * opens them, when, and how many: sandbox/spares.c, through the driver's `spares` op.
 *
 * An idle handler sends nothing, so a spare that has turned readable (EOF: its handler was
 * killed, by a gVisor checkpoint's quiesce or the sandbox's end) is dead: it is closed, never
 * handed out.  While a sandbox is paused or ending none is kept (brig_spareconn_close with
 * `off`), since its agent would not answer or not for long.
 *
 * Thread-safe: one lock per set; no system call but close and a zero-timeout poll under it.
 */
#ifndef BRIG_SPARECONN_H
#define BRIG_SPARECONN_H

#include <pthread.h>
#include <stdbool.h>

#define BRIG_SPARECONN_MAX 4 /* the most connections kept per sandbox */

typedef struct brig_spareconn {
    pthread_mutex_t lock;
    int fd[BRIG_SPARECONN_MAX]; /* handshake done, idle; the first n are valid */
    int n;
    bool off; /* paused or ending: none is kept until brig_spareconn_allow */
} brig_spareconn;

void brig_spareconn_init(brig_spareconn *s);
/* Closes what it keeps. */
void brig_spareconn_dispose(brig_spareconn *s);

/* A kept connection whose handler is still there (the caller owns it now), or -1. */
int brig_spareconn_take(brig_spareconn *s);
/* Keeps fd (taken) unless the set is full or off: then false, and the caller still owns fd. */
bool brig_spareconn_keep(brig_spareconn *s, int fd);
/* How many it keeps (some may have died since: take finds out). */
int brig_spareconn_count(brig_spareconn *s);
/* Closes every kept connection; with off, keeps none from now on until brig_spareconn_allow. */
void brig_spareconn_close(brig_spareconn *s, bool off);
void brig_spareconn_allow(brig_spareconn *s);

#endif
