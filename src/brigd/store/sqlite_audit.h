/*
 * sqlite_audit.h - the SQLite backend's operations on the audit timeline (private to
 * store/; store_ops.h has the contract of each, at the op of the same name).
 */
#ifndef BRIG_SQLITE_AUDIT_H
#define BRIG_SQLITE_AUDIT_H

#include "store_ops.h"

int brig_sqlite_audit_chain(brig_store_conn *c, const char *account_id, brig_audit_chain *out,
                            brig_error **err);
int brig_sqlite_audit_append(brig_store_conn *c, brig_audit_row *rows, size_t n, brig_error **err);
int brig_sqlite_audit_each(brig_store_conn *c, const brig_audit_query *q,
                           int (*fn)(const brig_audit_row *, void *), void *ctx, brig_error **err);
int brig_sqlite_audit_chains(brig_store_conn *c, void (*fn)(const brig_audit_chain *, void *),
                             void *ctx, brig_error **err);
int brig_sqlite_audit_prune(brig_store_conn *c, int64_t before, int64_t *pruned, brig_error **err);

#endif
