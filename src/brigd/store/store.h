/*
 * store.h - brigd's persistent state: accounts, projects, API and operator keys,
 * the ledger and balances, secrets, sandboxes and the audit timeline.  The store's whole public
 * face: callers name what they want done (brig_store_account_get, _ledger_charge, ...); no SQL and
 * no transaction ever leaves store/.
 *
 * A backend is an ops table (struct brig_store_ops, store_ops.h), chosen once by
 * brig_store_open: SQLite (store/sqlite.c, WAL) is the one today; another (say
 * PostgreSQL) implements the same ops and callers do not change.  Each
 * brig_store_X below calls ops->X; the contract of both is the comment on the op.
 *
 * Common rules: every function is safe to call from any thread; each operation
 * is atomic (all of its writes happen, or none); strings handed in are copied;
 * rows handed out are the caller's.  Fallible operations return -1 with *err
 * (BRIG_E_INTERNAL for a database failure) and, where they say so, 1 for "done"
 * and 0 for "no such row".
 */
#ifndef BRIG_STORE_H
#define BRIG_STORE_H

#include "store_ops.h" /* the rows and the backend contract */

typedef struct brig_store brig_store;

/* ---- the operations (each calls the op of the same name) ------------------------------ */

/* Opens the store at where: a file path (SQLite), or a URL whose scheme names
 * another backend.  BRIG_E_INVALID for a scheme no backend of this build serves. */
int brig_store_open(brig_store **out, const char *where, brig_error **err);
void brig_store_close(brig_store *st);

int brig_store_account_create(brig_store *st, const brig_account_new *a, brig_error **err);
int brig_store_account_get(brig_store *st, const char *id, brig_account_row *out, brig_error **err);
int brig_store_account_each(brig_store *st, void (*fn)(const char *id, void *), void *ctx,
                            brig_error **err);
int brig_store_account_update(brig_store *st, const char *id, const brig_account_update *u,
                              brig_error **err);

int brig_store_project_insert(brig_store *st, const char *id, const char *account_id,
                              const char *name, int64_t created_at, brig_error **err);
int brig_store_project_get(brig_store *st, const char *id, brig_project_row *out, brig_error **err);
int brig_store_project_each(brig_store *st, const char *account_id,
                            void (*fn)(const brig_project_row *, void *), void *ctx,
                            brig_error **err);
int brig_store_project_update(brig_store *st, const char *id, const char *name, const char *egress,
                              const char *isolation, brig_error **err);

int brig_store_key_insert(brig_store *st, const brig_key_row *k, int64_t at, brig_error **err);
int brig_store_key_lookup(brig_store *st, const char *hash, brig_key_row *out, brig_error **err);
int brig_store_key_each(brig_store *st, const char *project_id,
                        void (*fn)(const brig_key_listed *, void *), void *ctx, brig_error **err);
int brig_store_key_revoke(brig_store *st, const char *project_id, const char *key_id, int64_t at,
                          brig_error **err);
int brig_store_key_counts(brig_store *st, int64_t *api_keys, int64_t *operator_keys,
                          brig_error **err);
int brig_store_operator_key_insert(brig_store *st, const char *id, const char *hash, int64_t at,
                                   brig_error **err);

int brig_store_ledger_credit(brig_store *st, const char *account_id, int64_t amount,
                             const char *note, int64_t at, int64_t *balance, brig_error **err);
int brig_store_ledger_charge(brig_store *st, const char *sandbox_id, int64_t at,
                             brig_charge_plan_fn plan, void *ctx, int64_t *balance,
                             brig_error **err);
int brig_store_ledger_spent(brig_store *st, const char *account_id, int64_t from, int64_t to,
                            int64_t *out, brig_error **err);

int brig_store_ledger_page(brig_store *st, const char *account_id, int64_t before, int max,
                           brig_ledger_row *rows, int *n, brig_error **err);

int brig_store_secret_put(brig_store *st, const brig_secret_row *s, int64_t at, brig_error **err);
int brig_store_secret_each(brig_store *st, const char *owner,
                           int (*fn)(const brig_secret_row *, void *), void *ctx, brig_error **err);
int brig_store_secret_totals(brig_store *st, const char *owner, int64_t *count, int64_t *box_bytes,
                             brig_error **err);
int brig_store_secret_delete(brig_store *st, const char *owner, const char *name, brig_error **err);
int brig_store_secret_delete_all(brig_store *st, const char *owner, brig_error **err);

int brig_store_sandbox_insert(brig_store *st, const brig_sandbox_row *row, brig_error **err);
int brig_store_sandbox_set_state(brig_store *st, const char *id, const char *state,
                                 const char *reason, int64_t now, brig_error **err);
int brig_store_sandbox_get(brig_store *st, const char *id, brig_sandbox_row *out, brig_error **err);
int brig_store_sandbox_set_expiry(brig_store *st, const char *id, int64_t expires_at,
                                  brig_error **err);
int brig_store_sandbox_each_live(brig_store *st, void (*fn)(const brig_sandbox_row *, void *),
                                 void *ctx, brig_error **err);
int brig_store_sandbox_ended(brig_store *st, const brig_ended_query *q, brig_sandbox_row *rows,
                             int max, int *n, brig_error **err);
int brig_store_sandbox_count_reason(brig_store *st, const char *account_id, const char *reason,
                                    int64_t *n, brig_error **err);

int brig_store_blackbox_put(brig_store *st, const char *sandbox_id, int64_t at, const char *data,
                            brig_error **err);
int brig_store_blackbox_get(brig_store *st, const char *sandbox_id, char **data, int64_t *at,
                            brig_error **err);
int brig_store_blackbox_prune(brig_store *st, int64_t before, int64_t *pruned, brig_error **err);

int brig_store_snapshot_insert(brig_store *st, const brig_snapshot_row *s, brig_error **err);
int brig_store_snapshot_get(brig_store *st, const char *account_id, const char *id,
                            brig_snapshot_row *out, brig_error **err);
int brig_store_snapshot_each(brig_store *st, const char *account_id, const char *project_id,
                             void (*fn)(const brig_snapshot_row *, void *), void *ctx,
                             brig_error **err);
int brig_store_snapshot_delete(brig_store *st, const char *id, int64_t at, brig_error **err);
int brig_store_volume_insert(brig_store *st, const brig_volume_row *v, brig_error **err);
int brig_store_volume_get(brig_store *st, const char *project_id, const char *name,
                          brig_volume_row *out, brig_error **err);
int brig_store_volume_each(brig_store *st, const char *account_id, const char *project_id,
                           void (*fn)(const brig_volume_row *, void *), void *ctx,
                           brig_error **err);
int brig_store_volume_delete(brig_store *st, const char *id, int64_t at, brig_error **err);
int brig_store_volume_charge(brig_store *st, const char *id, int64_t at, brig_volume_plan_fn plan,
                             void *ctx, int64_t *balance, brig_error **err);
int brig_store_volume_mount_insert(brig_store *st, const brig_volume_mount_row *m,
                                   brig_error **err);
int brig_store_volume_mount_delete(brig_store *st, const char *sandbox_id, brig_error **err);
int brig_store_volume_mount_each(brig_store *st, void (*fn)(const brig_volume_mount_row *, void *),
                                 void *ctx, brig_error **err);
/* templates declared by users (store_ops.h: utpl_*) */
int brig_store_utpl_put(brig_store *st, const brig_utpl_row *t, brig_error **err);
int brig_store_utpl_get(brig_store *st, const char *account_id, const char *name, const char *tag,
                        brig_utpl_row *out, brig_error **err);
int brig_store_utpl_each(brig_store *st, const char *account_id,
                         void (*fn)(const brig_utpl_row *, void *), void *ctx, brig_error **err);
int brig_store_utpl_delete(brig_store *st, const char *account_id, const char *name,
                           const char *tag, brig_error **err);
void brig_utpl_row_dispose(brig_utpl_row *t);

int brig_store_audit_chain(brig_store *st, const char *account_id, brig_audit_chain *out,
                           brig_error **err);
int brig_store_audit_append(brig_store *st, brig_audit_row *rows, size_t n, brig_error **err);
int brig_store_audit_each(brig_store *st, const brig_audit_query *q,
                          int (*fn)(const brig_audit_row *, void *), void *ctx, brig_error **err);
int brig_store_audit_chains(brig_store *st, void (*fn)(const brig_audit_chain *, void *), void *ctx,
                            brig_error **err);
int brig_store_audit_prune(brig_store *st, int64_t before, int64_t *pruned, brig_error **err);

int brig_store_injections_put(brig_store *st, const char *project_id, const char *rules,
                              brig_error **err);
int brig_store_injections_get(brig_store *st, const char *project_id, char **rules,
                              brig_error **err);

/* E2B sandbox records (store_ops.h: e2b_*) */
int brig_store_e2b_put(brig_store *st, const char *sandbox_id, const char *record,
                       brig_error **err);
int brig_store_e2b_get(brig_store *st, const char *sandbox_id, char **record, brig_error **err);
int brig_store_e2b_delete(brig_store *st, const char *sandbox_id, brig_error **err);
int brig_store_e2b_prune(brig_store *st, int64_t *pruned, brig_error **err);

#endif
