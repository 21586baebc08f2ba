/*
 * sqlite.h - the SQLite backend of the store: its ops table (store_ops.h has the
 * contract of each op).  brig_store_open picks it for a plain file path.
 */
#ifndef BRIG_STORE_SQLITE_H
#define BRIG_STORE_SQLITE_H

#include "store_ops.h"

extern const brig_store_ops brig_store_sqlite_ops;

#endif
