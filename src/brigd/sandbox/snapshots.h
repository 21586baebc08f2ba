/*
 * snapshots.h - an account's snapshots (docs/snapshots.md): a sandbox's file system, taken
 * while its processes stand still (crash-consistent), that new sandboxes start from like a
 * template ("snapshot" on create).  The layer itself is the runtime driver's
 * (snapshot_take, snapshot_remove; checked against its digest once, shared by the
 * sandboxes made from it); the record, the store's.  A caller sees the snapshots of what
 * its key sees: an admin key its account's, a sandbox key its project's.
 */
#ifndef BRIG_SNAPSHOTS_H
#define BRIG_SNAPSHOTS_H

#include <jansson.h>

#include "account/auth.h"
#include "error.h"
#include "server.h"
#include "store/store.h"

/* Takes a snapshot of sandbox sandbox_id (running or paused; name may be NULL); *out:
 * the snapshot's JSON.  durable: on disk when it returns (a fork's need not be: see
 * runtime.h). */
int brig_snapshot_take(brigd *d, const brig_caller *c, const char *sandbox_id, const char *name,
                       bool durable, json_t **out, brig_error **err);
/* The same, and its memory (gvisor, running: runtime.h's snapshot_memory), for a fork. */
int brig_snapshot_take_memory(brigd *d, const brig_caller *c, const char *sandbox_id, json_t **out,
                              brig_error **err);
/* The caller's snapshot id: its row (1), or BRIG_E_NOT_FOUND. */
int brig_snapshot_lookup(brigd *d, const brig_caller *c, const char *id, brig_snapshot_row *out,
                         brig_error **err);
int brig_snapshot_get(brigd *d, const brig_caller *c, const char *id, json_t **out,
                      brig_error **err);
/* {"snapshots": [...]}, oldest first. */
int brig_snapshot_list(brigd *d, const brig_caller *c, json_t **out, brig_error **err);
/* Deletes one for good (sandboxes made from it keep their copies). */
int brig_snapshot_delete(brigd *d, const brig_caller *c, const char *id, brig_error **err);

/* The janitor's: every snapshot charged up to now (snapshot_price_micro_usd_per_gib_s of
 * its data), every billing_interval; its last charge is made at its delete. */
void brig_snapshots_bill(brigd *d, int64_t now);
/* At a start: a snapshot's layer no record names (a crash while it was taken or deleted)
 * is removed (sandboxes made from it keep their links to its files). */
void brig_snapshots_reconcile(brigd *d);

#endif
