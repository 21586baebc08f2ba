/*
 * usage.h - what each sandbox uses (docs/metrics.md): CPU, memory, tasks, disk, network
 * and execs, sampled every metrics_interval (the janitor's tick) through the runtime
 * driver's stats op and net/'s link counters into a ring that holds its last minute.
 * An ended sandbox's ring is kept as its "black box" (after an OOM the climb is there)
 * in the store, with its row, for the retention period: a brigd restart keeps them.
 */
#ifndef BRIG_USAGE_H
#define BRIG_USAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "account/auth.h"
#include "error.h"
#include "registry.h"
#include "server.h"

typedef struct brig_usage brig_usage;

/* Makes / frees d->usage (the janitor's start and stop). */
void brig_usage_start(brigd *d);
void brig_usage_stop(brigd *d);
/* Samples every running sandbox once metrics_interval passed since the last time; the
 * store's black boxes past the retention period go (at most once a minute). */
void brig_usage_tick(brigd *d, int64_t now);
/* One more exec of sb. */
void brig_usage_exec(brigd *d, const brig_sandbox *sb);
/* sb was created (a warm one claimed, or not) in ms: counted (docs/metrics.md). */
void brig_usage_created(brigd *d, const brig_sandbox *sb, bool claimed, int64_t ms);
/* A create refused before host capacity (balance, spend or concurrency limit): counted by
 * err's code. */
void brig_usage_refused(brigd *d, const brig_error *err);
/* A create failed after admission: counted. */
void brig_usage_create_failed(brigd *d);
/* sb ends (deleted or stopped) for reason (the detail): counted by its typed reason
 * (brig_sandboxes_ended_total), a last sample taken, and its ring stored as its black
 * box (sb's store row must exist). */
void brig_usage_ended(brigd *d, brig_sandbox *sb, const char *reason);
/* A sandbox brigd found ended without running it (the reconcile at start): counted. */
void brig_usage_ended_unseen(brigd *d, const char *reason);
/* GET /v1/sandboxes/{id}/metrics: a running sandbox the caller may see, or an ended
 * one's black box. */
int brig_usage_json(brigd *d, const brig_caller *c, const char *id, json_t **out, brig_error **err);

#endif
