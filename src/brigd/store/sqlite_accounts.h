/*
 * sqlite_accounts.h - the SQLite backend's operations on accounts, projects,
 * keys and the ledger (private to store/; store_ops.h has the contract of each, at
 * the op of the same name).
 */
#ifndef BRIG_SQLITE_ACCOUNTS_H
#define BRIG_SQLITE_ACCOUNTS_H

#include "store_ops.h"

int brig_sqlite_account_create(brig_store_conn *c, const brig_account_new *a, brig_error **err);
int brig_sqlite_account_get(brig_store_conn *c, const char *id, brig_account_row *out,
                            brig_error **err);
int brig_sqlite_account_update(brig_store_conn *c, const char *id, const brig_account_update *u,
                               brig_error **err);

int brig_sqlite_account_each(brig_store_conn *c, void (*fn)(const char *id, void *), void *ctx,
                             brig_error **err);
int brig_sqlite_project_insert(brig_store_conn *c, const char *id, const char *account_id,
                               const char *name, int64_t created_at, brig_error **err);
int brig_sqlite_project_get(brig_store_conn *c, const char *id, brig_project_row *out,
                            brig_error **err);
int brig_sqlite_project_each(brig_store_conn *c, const char *account_id,
                             void (*fn)(const brig_project_row *, void *), void *ctx,
                             brig_error **err);
int brig_sqlite_project_set_on_idle(brig_store_conn *c, const char *id, const char *on_idle,
                                    brig_error **err);
int brig_sqlite_project_update(brig_store_conn *c, const char *id, const char *name,
                               const char *egress, const char *isolation, brig_error **err);

int brig_sqlite_key_insert(brig_store_conn *c, const brig_key_row *k, int64_t at, brig_error **err);
int brig_sqlite_key_lookup(brig_store_conn *c, const char *hash, brig_key_row *out,
                           brig_error **err);
int brig_sqlite_key_revoke(brig_store_conn *c, const char *project_id, const char *key_id,
                           int64_t at, brig_error **err);
int brig_sqlite_key_each(brig_store_conn *c, const char *project_id,
                         void (*fn)(const brig_key_listed *, void *), void *ctx, brig_error **err);
int brig_sqlite_key_counts(brig_store_conn *c, int64_t *api_keys, int64_t *operator_keys,
                           brig_error **err);
int brig_sqlite_operator_key_insert(brig_store_conn *c, const char *id, const char *hash,
                                    int64_t at, brig_error **err);

int brig_sqlite_ledger_credit(brig_store_conn *c, const char *account_id, int64_t amount,
                              const char *note, int64_t at, int64_t *balance, brig_error **err);
int brig_sqlite_ledger_charge(brig_store_conn *c, const char *sandbox_id, int64_t at,
                              brig_charge_plan_fn plan, void *ctx, int64_t *balance,
                              brig_error **err);
/* Inside a charge's transaction (sandboxes here, volumes in sqlite_volumes.c): the
 * account's balance (1, 0 for no such account, -1), and a charge's ledger row with the
 * balance it leaves. */
typedef struct brig_ledger_charge_entry {
    const char *account_id, *sandbox_id, *volume_id, *snapshot_id, *note; /* NULL: none */
    int64_t at, amount, seconds, balance;
} brig_ledger_charge_entry;
int brig_sqlite_balance(brig_store_conn *c, const char *account_id, int64_t *out, brig_error **err);
int brig_sqlite_ledger_book(brig_store_conn *c, const brig_ledger_charge_entry *e,
                            brig_error **err);
int brig_sqlite_ledger_spent(brig_store_conn *c, const char *account_id, int64_t from, int64_t to,
                             int64_t *out, brig_error **err);
int brig_sqlite_ledger_page(brig_store_conn *c, const char *account_id, int64_t before, int max,
                            brig_ledger_row *rows, int *n, brig_error **err);

#endif
