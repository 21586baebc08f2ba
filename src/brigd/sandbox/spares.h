/*
 * spares.h - agent connections kept ready for the sandboxes in use, so that a request's
 * connect takes one instead of waiting for the agent to fork a handler and answer the
 * handshake (runtime/spareconn.h; docs/benchmarks.md, "Where the time goes").
 *
 * brig_sandbox_connect (a request's connection) hands out a spare when the sandbox keeps
 * one and begins the next ones; a sandbox claimed from the warm pool gets its spares when it
 * is claimed, since its first command follows.  A sandbox with no API use for
 * BRIG_SPARES_IDLE_MS keeps none: each spare is a handler process waiting in the sandbox and
 * a descriptor in brigd, which an idle sandbox should not hold.  brigd's own connections
 * (the janitor's probes) use the driver's connect and begin none.
 */
#ifndef BRIG_SPARES_H
#define BRIG_SPARES_H

#include "error.h"
#include "server.h"

/* Spares per sandbox in use: an exec's connection, and the second that some requests open
 * right after it (a background exec's process object; E2B's output stream with an agent that
 * cannot follow on the exec's own connection). */
#define BRIG_SPARES_KEEP 2
/* No API use for this long: its spares are closed (and opened again at its next use). */
#define BRIG_SPARES_IDLE_MS 30000

/* Starts the trimmer / stops it (what is kept is closed with each sandbox's runtime handle). */
int brig_spares_start(brigd *d, brig_error **err);
void brig_spares_stop(brigd *d);

/* Opens an agent connection to a borrowed sandbox for a request (the caller closes it): a
 * spare when it keeps one, else a new one; either way its spares are then begun again. */
int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err);

/* Begins sb's spares up to BRIG_SPARES_KEEP (a sandbox about to be used: a claimed warm one).
 * Waits for nothing. */
void brig_spares_fill(brigd *d, brig_sandbox *sb);

#endif
