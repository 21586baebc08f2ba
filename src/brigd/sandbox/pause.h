/*
 * pause.h - pausing and resuming a sandbox (docs/snapshots.md).
 *
 * Paused, every process of a sandbox stops where it is (the runtime driver's pause op:
 * the cgroup freezer, or runsc pause) and its memory stays resident; it is listed as
 * "paused" and stored so (a restarted brigd finds it paused again: reconcile).  While
 * paused: requests that need its agent answer 409 (registry.h, brig_sandbox_get), its
 * idle timeout stands still, its lifetime runs on, and it is charged
 * pause_price_micro_usd_per_gib_s for its disk instead of its tariff's price (the
 * janitor's ticks, and its end).  Both are idempotent: pausing a paused sandbox, or
 * resuming a running one, answers its state and changes nothing.
 */
#ifndef BRIG_PAUSE_H
#define BRIG_PAUSE_H

#include <jansson.h>

#include "account/auth.h"
#include "error.h"
#include "registry.h"
#include "server.h"

/* Pauses / resumes the sandbox id the caller may see; *out: its JSON, with "memory"
 * (what pausing kept of its memory: "resident", or "checkpoint": on disk, its processes
 * ended until the resume restores them).  memory: "checkpoint" asks for that (gvisor only:
 * BRIG_E_INVALID for others), NULL or "resident" for a freeze; a paused sandbox stays as it
 * is.  BRIG_E_NOT_FOUND for none, BRIG_E_CONFLICT for one that is neither running nor
 * paused (creating, deleting). */
int brig_sandbox_pause(brigd *d, const brig_caller *c, const char *id, const char *memory,
                       json_t **out, brig_error **err);
int brig_sandbox_resume(brigd *d, const brig_caller *c, const char *id, json_t **out,
                        brig_error **err);

/* The janitor's pause of a sandbox whose idle timeout passed and whose on_idle is "pause"
 * (its timeline says "by": "idle_timeout").  A paused sandbox is deleted once it was paused
 * for paused_max_age (janitor.c, "paused_too_long"). */
int brig_sandbox_pause_idle(brigd *d, const char *id, brig_error **err);

/* Runs fn(arg, its runtime handle) while every process of sandbox sb (referenced by the
 * caller) stands still: a running one is frozen by the driver for the call and thawed
 * after (it stays listed running: requests meanwhile wait, they are not refused), a
 * paused one stays paused.  Never interleaves with a pause or resume.  fn's result;
 * BRIG_E_CONFLICT for a sandbox neither running nor paused. */
int brig_sandbox_frozen_do(brigd *d, brig_sandbox *sb,
                           int (*fn)(void *arg, brig_rt_sandbox *rt, brig_error **err), void *arg,
                           brig_error **err);

#endif
