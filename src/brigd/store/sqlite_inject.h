/*
 * sqlite_inject.h - the SQLite backend's operations on credential injection rules
 * (private to store/; store_ops.h has the contract of each, at the op of the same name).
 */
#ifndef BRIG_SQLITE_INJECT_H
#define BRIG_SQLITE_INJECT_H

#include "store_ops.h"

int brig_sqlite_injections_put(brig_store_conn *c, const char *project_id, const char *rules,
                               brig_error **err);
int brig_sqlite_injections_get(brig_store_conn *c, const char *project_id, char **rules,
                               brig_error **err);

#endif
