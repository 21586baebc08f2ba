/*
 * store.h - brigd's persistent state in SQLite (WAL): accounts, API keys and
 * sandboxes.  One connection guarded by a mutex; every function is safe to call
 * from any thread.  Strings handed in are copied; rows handed out are the
 * caller's.
 */
#ifndef BRIG_STORE_H
#define BRIG_STORE_H

#include <stdint.h>

#include "error.h"
#include "id.h"

typedef struct brig_store brig_store;

typedef struct brig_key_row {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char scope[16]; /* "admin" | "sandbox" */
} brig_key_row;

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
} brig_sandbox_row;

/* Opens (creating and migrating) the database at path. */
int brig_store_open(brig_store **out, const char *path, brig_error **err);
void brig_store_close(brig_store *st);

int brig_store_account_create(brig_store *st, const char *id, const char *name, int64_t now,
                              brig_error **err);
int brig_store_key_insert(brig_store *st, const char *key_id, const char *account_id,
                          const char *hash, const char *scope, int64_t now, brig_error **err);
/* Finds a live key by hash; BRIG_E_NOT_FOUND when there is none. */
int brig_store_key_lookup(brig_store *st, const char *hash, brig_key_row *out, brig_error **err);
int brig_store_key_count(brig_store *st, int64_t *n, brig_error **err);

int brig_store_sandbox_insert(brig_store *st, const brig_sandbox_row *row, brig_error **err);
/* Sets state (and reason, may be NULL); `deleted` and `failed` also stamp deleted_at. */
int brig_store_sandbox_set_state(brig_store *st, const char *id, const char *state,
                                 const char *reason, int64_t now, brig_error **err);
/* Calls fn for every sandbox not in a final state (deleted, failed). */
int brig_store_sandbox_each_live(brig_store *st, void (*fn)(const brig_sandbox_row *, void *),
                                 void *ctx, brig_error **err);

#endif
