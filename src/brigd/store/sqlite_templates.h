/*
 * sqlite_templates.h - the SQLite backend's operations on templates declared by users
 * (private to store/; store_ops.h has the contract of each, at the op of the same name).
 */
#ifndef BRIG_SQLITE_TEMPLATES_H
#define BRIG_SQLITE_TEMPLATES_H

#include "store_ops.h"

int brig_sqlite_utpl_put(brig_store_conn *c, const brig_utpl_row *t, brig_error **err);
int brig_sqlite_utpl_get(brig_store_conn *c, const char *account_id, const char *name,
                         const char *tag, brig_utpl_row *out, brig_error **err);
int brig_sqlite_utpl_each(brig_store_conn *c, const char *account_id,
                          void (*fn)(const brig_utpl_row *, void *), void *ctx, brig_error **err);
int brig_sqlite_utpl_delete(brig_store_conn *c, const char *account_id, const char *name,
                            const char *tag, brig_error **err);

#endif
