/*
 * fork.h - forking a sandbox (docs/snapshots.md): N new sandboxes that start from its file
 * system as it is now, each then its own.
 */
#ifndef BRIG_FORK_H
#define BRIG_FORK_H

#include <jansson.h>
#include <stdint.h>

#include "account/auth.h"
#include "error.h"
#include "server.h"

#define BRIG_FORK_MAX 16 /* children per fork */

/* Forks sandbox id (running or paused; a container, or a gVisor one made to be
 * snapshotted) count times: one snapshot of it (memory: with its memory, a running gVisor
 * sandbox's, which each child restores: its processes go on in each), then count creates from that
 * snapshot (a few side by side) with its template, tariff, project and environment, each admitted
 * like any create of the caller's; the snapshot is deleted afterwards (the children keep links to
 * its layer).  The source goes on.  *out: {"source_id", "sandboxes": [...], "refused", "error"}: no
 * create starts after the first one refused (a limit, the host full), whose error is "error";
 * "refused" counts the children not made; when none was made, that error is the answer. */
int brig_sandbox_fork(brigd *d, const brig_caller *c, const char *id, int64_t count, bool memory,
                      json_t **out, brig_error **err);

#endif
