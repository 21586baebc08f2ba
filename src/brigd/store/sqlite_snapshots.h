/*
 * sqlite_snapshots.h - the SQLite backend's operations on snapshots (private to store/;
 * store_ops.h has the contract of each, at the op of the same name).
 */
#ifndef BRIG_SQLITE_SNAPSHOTS_H
#define BRIG_SQLITE_SNAPSHOTS_H

#include "store_ops.h"

int brig_sqlite_snapshot_insert(brig_store_conn *c, const brig_snapshot_row *s, brig_error **err);
int brig_sqlite_snapshot_get(brig_store_conn *c, const char *account_id, const char *id,
                             brig_snapshot_row *out, brig_error **err);
int brig_sqlite_snapshot_each(brig_store_conn *c, const char *account_id, const char *project_id,
                              void (*fn)(const brig_snapshot_row *, void *), void *ctx,
                              brig_error **err);
int brig_sqlite_snapshot_delete(brig_store_conn *c, const char *id, int64_t at, brig_error **err);

#endif
