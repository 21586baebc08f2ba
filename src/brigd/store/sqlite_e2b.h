/*
 * sqlite_e2b.h - the SQLite backend's operations on E2B sandbox records (private to store/;
 * store_ops.h has the contract of each, at the op of the same name).
 */
#ifndef BRIG_SQLITE_E2B_H
#define BRIG_SQLITE_E2B_H

#include "store_ops.h"

int brig_sqlite_e2b_put(brig_store_conn *c, const char *sandbox_id, const char *record,
                        brig_error **err);
int brig_sqlite_e2b_get(brig_store_conn *c, const char *sandbox_id, char **record,
                        brig_error **err);
int brig_sqlite_e2b_delete(brig_store_conn *c, const char *sandbox_id, brig_error **err);
int brig_sqlite_e2b_prune(brig_store_conn *c, int64_t *pruned, brig_error **err);

#endif
