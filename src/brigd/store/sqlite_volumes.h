/*
 * sqlite_volumes.h - the SQLite backend's operations on volumes and the sandboxes that
 * mount them (private to store/; store_ops.h has the contract of each, at the op of the
 * same name).
 */
#ifndef BRIG_SQLITE_VOLUMES_H
#define BRIG_SQLITE_VOLUMES_H

#include "store_ops.h"

int brig_sqlite_volume_insert(brig_store_conn *c, const brig_volume_row *v, brig_error **err);
int brig_sqlite_volume_get(brig_store_conn *c, const char *project_id, const char *name,
                           brig_volume_row *out, brig_error **err);
int brig_sqlite_volume_each(brig_store_conn *c, const char *account_id, const char *project_id,
                            void (*fn)(const brig_volume_row *, void *), void *ctx,
                            brig_error **err);
int brig_sqlite_volume_delete(brig_store_conn *c, const char *id, int64_t at, brig_error **err);
int brig_sqlite_snapshot_charge(brig_store_conn *c, const char *id, int64_t at,
                                brig_volume_plan_fn plan, void *ctx, int64_t *balance,
                                brig_error **err);
int brig_sqlite_volume_charge(brig_store_conn *c, const char *id, int64_t at,
                              brig_volume_plan_fn plan, void *ctx, int64_t *balance,
                              brig_error **err);
int brig_sqlite_volume_mount_insert(brig_store_conn *c, const brig_volume_mount_row *m,
                                    brig_error **err);
int brig_sqlite_volume_mount_delete(brig_store_conn *c, const char *sandbox_id, brig_error **err);
int brig_sqlite_volume_mount_each(brig_store_conn *c,
                                  void (*fn)(const brig_volume_mount_row *, void *), void *ctx,
                                  brig_error **err);

#endif
