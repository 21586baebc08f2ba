/*
 * sqlite_sandboxes.h - the SQLite backend's operations on sandboxes, their black
 * boxes and secrets
 * (private to store/; store_ops.h has the contract of each, at the op of the same
 * name).
 */
#ifndef BRIG_SQLITE_SANDBOXES_H
#define BRIG_SQLITE_SANDBOXES_H

#include "store_ops.h"

int brig_sqlite_secret_put(brig_store_conn *c, const brig_secret_row *s, int64_t at,
                           brig_error **err);
int brig_sqlite_secret_each(brig_store_conn *c, const char *owner,
                            int (*fn)(const brig_secret_row *, void *), void *ctx,
                            brig_error **err);
int brig_sqlite_secret_totals(brig_store_conn *c, const char *owner, int64_t *count,
                              int64_t *box_bytes, brig_error **err);
int brig_sqlite_secret_delete(brig_store_conn *c, const char *owner, const char *name,
                              brig_error **err);
int brig_sqlite_secret_delete_all(brig_store_conn *c, const char *owner, brig_error **err);

int brig_sqlite_sandbox_insert(brig_store_conn *c, const brig_sandbox_row *row, brig_error **err);
int brig_sqlite_sandbox_set_state(brig_store_conn *c, const char *id, const char *state,
                                  const char *reason, int64_t now, brig_error **err);
int brig_sqlite_sandbox_get(brig_store_conn *c, const char *id, brig_sandbox_row *out,
                            brig_error **err);
int brig_sqlite_sandbox_set_expiry(brig_store_conn *c, const char *id, int64_t expires_at,
                                   brig_error **err);
int brig_sqlite_sandbox_each_live(brig_store_conn *c, void (*fn)(const brig_sandbox_row *, void *),
                                  void *ctx, brig_error **err);
int brig_sqlite_sandbox_ended(brig_store_conn *c, const brig_ended_query *q, brig_sandbox_row *rows,
                              int max, int *n, brig_error **err);
int brig_sqlite_sandbox_count_reason(brig_store_conn *c, const char *account_id, const char *reason,
                                     int64_t *n, brig_error **err);

int brig_sqlite_blackbox_put(brig_store_conn *c, const char *sandbox_id, int64_t at,
                             const char *data, brig_error **err);
int brig_sqlite_blackbox_get(brig_store_conn *c, const char *sandbox_id, char **data, int64_t *at,
                             brig_error **err);
int brig_sqlite_blackbox_prune(brig_store_conn *c, int64_t before, int64_t *pruned,
                               brig_error **err);

#endif
