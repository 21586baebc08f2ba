/*
 * janitor.h - the janitor: one thread that, every tick, ends sandboxes whose
 * time is up and charges the ones that live on.
 *
 *   idle_timeout       no API use for idle_timeout, no request in flight and no
 *                      command running in it (foreground or background): a long
 *                      build is never "idle".  The agent is asked by a probe
 *                      thread, never by the janitor itself; no answer within 5 s
 *                      counts as "no command runs".  A sandbox whose on_idle is
 *                      "pause" is paused instead (pause.h)
 *   paused_too_long    paused for paused_max_age
 *   max_lifetime       past its expiry (POST …/timeout extends it)
 *   cpu_abuse          at >= 95 % of its CPU quota for longer than the abuse
 *                      window (the account sees it in cpu_abuse_stops)
 *   tcp_memory         its TCP buffers passed twice tcp_memory_mib (cgroup v1:
 *                      stuck sockets' kernel-granted minimums past the limit)
 *   balance_exhausted  incremental billing took the account's balance to zero
 *
 * The janitor never waits on a sandbox (an agent or agent helper that stalls
 * delays nobody's deadline), and its stops do not wait for processes to die.
 */
#ifndef BRIG_JANITOR_H
#define BRIG_JANITOR_H

#include <stdint.h>

#include "error.h"
#include "server.h"

/* Starts the janitor (a worker ticking every 500 ms, core/worker.h) / stops it and its
 * probes (their agent connections are cut). */
int brig_janitor_start(brigd *d, brig_error **err);
void brig_janitor_stop(brigd *d);

/* One pass over every running sandbox at time now_ms (ms since the epoch): the
 * janitor's tick. */
void brig_janitor_tick(brigd *d, int64_t now_ms);

#endif
