/*
 * sqlite_stmt.h - the SQLite backend's connection and the statement helpers its
 * operations share (private to store/).
 *
 * One connection, guarded by a recursive mutex: an operation takes the lock for
 * all of its statements (brig_sqlite_lock, or brig_sqlite_begin for a
 * transaction), so no other thread's statements interleave with them.
 */
#ifndef BRIG_SQLITE_STMT_H
#define BRIG_SQLITE_STMT_H

#include <pthread.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "store_ops.h"

#define BRIG_SQLITE_STMT_CACHE 64

/* A prepared statement kept for the next use of the same SQL (brig_sqlite_prepare). */
typedef struct brig_sqlite_cached {
    const char *sql; /* the caller's text, compared by address, then by content */
    sqlite3_stmt *s;
    bool busy; /* handed out, not yet released */
} brig_sqlite_cached;

struct brig_store_conn {
    sqlite3 *db;
    pthread_mutex_t lock; /* recursive; serialises every use of db */
    brig_sqlite_cached cache[BRIG_SQLITE_STMT_CACHE];
};

void brig_sqlite_lock(brig_store_conn *c);
void brig_sqlite_unlock(brig_store_conn *c);

/* BEGIN IMMEDIATE with the lock taken; the lock stays held until commit or
 * rollback.  -1 (lock released) when it fails. */
int brig_sqlite_begin(brig_store_conn *c, brig_error **err);
/* COMMIT (ROLLBACK when that fails), then releases the lock. */
int brig_sqlite_commit(brig_store_conn *c, brig_error **err);
void brig_sqlite_rollback(brig_store_conn *c);

/* Sets *err from the connection's last error; returns -1. */
int brig_sqlite_error(brig_store_conn *c, brig_error **err, const char *what);

/* Prepares sql (or takes the statement cached for the same text: SQLite parses each of
 * brigd's statements once, not on every call) and binds its parameters per fmt, one
 * character each:
 *   's' a string (const char *; NULL binds NULL)
 *   'i' an int64_t
 *   'n' an int64_t, where a negative one binds NULL (a limit of "none")
 *   'b' a blob (const void *, size_t)
 * NULL when sql does not prepare (brig_sqlite_step then reports it). */
sqlite3_stmt *brig_sqlite_prepare(brig_store_conn *c, const char *sql, const char *fmt, ...);

/* Done with a statement of brig_sqlite_prepare: a cached one is reset for its next use,
 * another finalized.  s may be NULL. */
void brig_sqlite_release(brig_store_conn *c, sqlite3_stmt *s);

/* Finalizes every cached statement (before the connection closes). */
void brig_sqlite_cache_clear(brig_store_conn *c);

/* Steps a prepared statement: 1 for a row, 0 when done (or when *changes rows
 * changed), -1 with *err (`what` failed).  s may be NULL (a failed prepare). */
int brig_sqlite_step(brig_store_conn *c, sqlite3_stmt *s, const char *what, brig_error **err);

/* The rows of a list: steps s (prepared with the lock held by the caller) to its end,
 * reading each row into a zeroed element of row_size bytes with read, then releases s and
 * the lock.  The caller then calls back for each of *rows (*n of them) without the lock,
 * since a callback may use the store, frees what read allocated, and frees *rows.
 * 0, or -1 with *err (the rows read so far are still returned, for freeing). */
int brig_sqlite_collect(brig_store_conn *c, sqlite3_stmt *s, const char *what, size_t row_size,
                        void (*read)(sqlite3_stmt *s, void *row), void **rows, size_t *n,
                        brig_error **err);

/* Prepares, runs and finalizes a statement that returns no rows; *changes (may be
 * NULL) = the rows it changed.  Takes the lock for itself. */
int brig_sqlite_exec(brig_store_conn *c, brig_error **err, int64_t *changes, const char *what,
                     const char *sql, const char *fmt, ...);

/* Runs a query for one integer (the first column of the first row), taking the
 * lock for itself: 1 and *out, 0 when there is no row (*out untouched), -1. */
int brig_sqlite_query_int(brig_store_conn *c, brig_error **err, int64_t *out, const char *what,
                          const char *sql, const char *fmt, ...);

/* Column helpers: a text column copied into dst (NULL as ""); an integer
 * column, `null` for NULL. */
void brig_sqlite_text(sqlite3_stmt *s, int col, char *dst, size_t cap);
int64_t brig_sqlite_int(sqlite3_stmt *s, int col, int64_t null);

#endif
