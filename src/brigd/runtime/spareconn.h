/*
 * spareconn.h - agent connections opened before anyone asks for them, for one sandbox.
 *
 * Opening an agent connection makes the agent fork a handler process (brig-agent's main.c)
 * and answer the handshake: a fork and a round trip that every exec, file transfer or process
 * call used to wait for (docs/benchmarks.md, "Where the time goes").  A sandbox in use keeps a
 * few connections begun ahead (connected, our HELLO sent: the driver's connect_begin), whose
 * handlers the agent forks meanwhile; connect (rtmux.c) hands those out first, reading their
 * HELLO answer then (it is there by then), and opens a new one only when none is left.  Who
 * begins them and when: sandbox/spares.c, through the driver's `spares` op.
 *
 * An idle handler sends nothing after its HELLO, so a spare that is readable once its answer
 * is read (EOF: its handler was killed, by a gVisor checkpoint's quiesce or the sandbox's end)
 * is dead: it is closed, never handed out.  While a sandbox is paused or ending none is kept
 * (brig_spareconn_close with `off`), since its agent would not answer or not for long.
 *
 * Thread-safe: one lock per set, never held across a wait for the agent.
 */
#ifndef BRIG_SPARECONN_H
#define BRIG_SPARECONN_H

#include <pthread.h>
#include <stdbool.h>

#define BRIG_SPARECONN_MAX 4 /* the most connections kept per sandbox */

typedef struct brig_spareconn {
    pthread_mutex_t lock;
    int fd[BRIG_SPARECONN_MAX]; /* connected, our HELLO sent; the first n are valid */
    int n;
    bool off; /* paused or ending: none is kept until brig_spareconn_allow */
} brig_spareconn;

void brig_spareconn_init(brig_spareconn *s);
/* Closes what it keeps. */
void brig_spareconn_dispose(brig_spareconn *s);

/* A kept connection, its handshake finished, whose handler is still there (the caller
 * owns it now), or -1. */
int brig_spareconn_take(brig_spareconn *s);
/* Keeps fd (taken; our HELLO sent, its answer not read) unless the set is full or off: then
 * false, and the caller still owns fd. */
bool brig_spareconn_keep(brig_spareconn *s, int fd);
/* How many it keeps (some may have died since: take finds out). */
int brig_spareconn_count(brig_spareconn *s);
/* Closes every kept connection; with off, keeps none from now on until brig_spareconn_allow. */
void brig_spareconn_close(brig_spareconn *s, bool off);
void brig_spareconn_allow(brig_spareconn *s);

#endif
