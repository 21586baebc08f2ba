/*
 * teardown.h - the host side of ended sandboxes, after the caller got its answer.
 *
 * A sandbox that ended (a delete, brigd's own stops, a create that failed) is handed
 * here unlisted, with one reference.  On a few workers, attempt after attempt with
 * backoff until it succeeds: its processes dead -> its capacity slot and memory
 * returned -> the runtime destroy (runc state, cgroups, mounts, disk, directory) -> its
 * network -> its uid range returned; the sandbox itself is freed by its last borrower.
 * Each attempt is bounded (it never waits for a sandbox's processes), so one that
 * cannot die delays no other.  A sandbox the runtime never started holds only its
 * capacity and uid range: those go back at once, on the caller's thread.
 */
#ifndef BRIG_TEARDOWN_H
#define BRIG_TEARDOWN_H

#include <stdint.h>

#include "error.h"
#include "registry.h"
#include "server.h"

/* Starts the workers.  Without them (a failed start-up) each teardown gets one attempt
 * on the caller's thread. */
int brig_teardown_start(brigd *d, brig_error **err);
/* Waits up to timeout_ms until every queued teardown is done; returns how many are
 * not. */
int brig_teardown_drain(brigd *d, int64_t timeout_ms);
/* One last attempt for each queued teardown (what still fails is left for the next
 * start's reconcile), then ends the workers (shutdown). */
void brig_teardown_stop(brigd *d);

/* Tears down an ended, unlisted sandbox; takes the caller's reference. */
void brig_teardown_begin(brigd *d, brig_sandbox *sb);
/* Tears down what the runtime still holds of a sandbox of an earlier run whose
 * processes are gone and that holds no capacity slot (sb: its id and uid range, which
 * must be marked taken); takes the caller's reference. */
void brig_teardown_leftover(brigd *d, brig_sandbox *sb);

#endif
