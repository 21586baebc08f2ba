/*
 * store.h - brigd's persistent state in SQLite (WAL): accounts, API keys and
 * sandboxes.  One connection guarded by a mutex; every function is safe to call
 * from any thread.  Strings handed in are copied; rows handed out are the
 * caller's.
 */
#ifndef BRIG_STORE_H
#define BRIG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "core/id.h"

typedef struct brig_store brig_store;

typedef struct brig_sandbox_row {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char template[64];
    char template_key[17];
    char state[16];     /* creating | running | deleting | deleted | failed */
    int64_t created_at; /* ms since the epoch */
    int64_t uid_base;   /* first host uid of its user namespace range */
    char tariff[32];
    char *env_json; /* the sandbox's plain env as JSON, or NULL (owned by the row) */
    char project_id[BRIG_ID_MAX];
    int64_t price;           /* micro-dollars per second */
    int64_t idle_timeout_ms; /* 0: none */
    int64_t expires_at;      /* 0: never */
    /* Of an ended sandbox (brig_store_sandbox_get): */
    char reason[32];    /* why it ended ("" while it lives) */
    int64_t deleted_at; /* ms since the epoch; 0 while it lives */
    int64_t cost;       /* micro-dollars charged so far */
} brig_sandbox_row;

/* ---- generic access, for modules that own their tables (tenants, billing, vault)
 *
 * Arguments are bound from fmt: 's' a string (NULL binds SQL NULL), 'i' an
 * int64_t, 'b' a blob (const void *, size_t).  The store's lock is recursive:
 * inside brig_store_begin .. commit/rollback the calling thread keeps it, so a
 * transaction's statements see no interleaving from other threads. */
typedef struct brig_row brig_row;
const char *brig_row_text(brig_row *r, int col); /* NULL for SQL NULL */
int64_t brig_row_int(brig_row *r, int col);
bool brig_row_is_null(brig_row *r, int col);
const void *brig_row_blob(brig_row *r, int col, size_t *len);

/* Runs a statement that returns no rows; *changes (may be NULL) = rows changed. */
int brig_store_run(brig_store *st, brig_error **err, int64_t *changes, const char *sql,
                   const char *fmt, ...);
/* Runs a query and calls fn for each row (a non-zero return stops early);
 * returns the number of rows seen, or -1. */
int brig_store_query(brig_store *st, brig_error **err, int (*fn)(brig_row *, void *), void *ctx,
                     const char *sql, const char *fmt, ...);
int brig_store_begin(brig_store *st, brig_error **err);
int brig_store_commit(brig_store *st, brig_error **err);
void brig_store_rollback(brig_store *st);

/* Opens (creating and migrating) the database at path. */
int brig_store_open(brig_store **out, const char *path, brig_error **err);
void brig_store_close(brig_store *st);

int brig_store_sandbox_insert(brig_store *st, const brig_sandbox_row *row, brig_error **err);
/* Sets state (and reason, may be NULL); `deleted` and `failed` also stamp deleted_at. */
int brig_store_sandbox_set_state(brig_store *st, const char *id, const char *state,
                                 const char *reason, int64_t now, brig_error **err);
/* One sandbox's row, whatever its state: 1 and *out (its env_json left NULL), 0 when
 * there is none, -1 on error. */
int brig_store_sandbox_get(brig_store *st, const char *id, brig_sandbox_row *out, brig_error **err);
int brig_store_sandbox_set_expiry(brig_store *st, const char *id, int64_t expires_at,
                                  brig_error **err);
/* Calls fn for every sandbox not in a final state (deleted, failed). */
int brig_store_sandbox_each_live(brig_store *st, void (*fn)(const brig_sandbox_row *, void *),
                                 void *ctx, brig_error **err);

#endif
