/*
 * store.c - the store's front (see store.h): brig_store_open picks the backend
 * once, and every operation dispatches to its op.  Nothing here knows SQL.
 */
#include "store.h"

#include <stdlib.h>
#include <string.h>

#include "sqlite.h"
#include "util.h"

struct brig_store {
    const brig_store_ops *ops; /* the backend, chosen at open */
    brig_store_conn *conn;     /* its connection */
};

/* The backends of this build.  A plain path goes to the one whose scheme is "";
 * "SCHEME://..." to the one of that scheme. */
static const brig_store_ops *const backends[] = {&brig_store_sqlite_ops};

static const brig_store_ops *backend_for(const char *where)
{
    const char *sep = strstr(where, "://");
    size_t n = sep ? (size_t)(sep - where) : 0;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(backends); i++) {
        const char *scheme = backends[i]->scheme;
        if (strlen(scheme) == n && strncmp(scheme, where, n) == 0)
            return backends[i];
    }
    return NULL;
}

int brig_store_open(brig_store **out, const char *where, brig_error **err)
{
    const brig_store_ops *ops = backend_for(where);
    if (ops == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "store: no backend of this build serves '%.64s' (it has: sqlite, "
                              "for a file path)",
                              where);
    brig_store_conn *conn = NULL;
    if (ops->open(where, &conn, err) < 0)
        return -1;
    brig_store *st = brig_xcalloc(1, sizeof(*st));
    st->ops = ops;
    st->conn = conn;
    *out = st;
    return 0;
}

void brig_store_close(brig_store *st)
{
    if (st == NULL)
        return;
    st->ops->close(st->conn);
    free(st);
}

/* ---- dispatch: each operation is its op ---------------------------------------------- */

int brig_store_account_create(brig_store *st, const brig_account_new *a, brig_error **err)
{
    return st->ops->account_create(st->conn, a, err);
}

int brig_store_account_get(brig_store *st, const char *id, brig_account_row *out, brig_error **err)
{
    return st->ops->account_get(st->conn, id, out, err);
}

int brig_store_account_each(brig_store *st, void (*fn)(const char *id, void *), void *ctx,
                            brig_error **err)
{
    return st->ops->account_each(st->conn, fn, ctx, err);
}

int brig_store_account_update(brig_store *st, const char *id, const brig_account_update *u,
                              brig_error **err)
{
    return st->ops->account_update(st->conn, id, u, err);
}

int brig_store_project_insert(brig_store *st, const char *id, const char *account_id,
                              const char *name, int64_t created_at, brig_error **err)
{
    return st->ops->project_insert(st->conn, id, account_id, name, created_at, err);
}

int brig_store_project_get(brig_store *st, const char *id, brig_project_row *out, brig_error **err)
{
    return st->ops->project_get(st->conn, id, out, err);
}

int brig_store_project_each(brig_store *st, const char *account_id,
                            void (*fn)(const brig_project_row *, void *), void *ctx,
                            brig_error **err)
{
    return st->ops->project_each(st->conn, account_id, fn, ctx, err);
}

int brig_store_project_update(brig_store *st, const char *id, const char *name, const char *egress,
                              const char *isolation, brig_error **err)
{
    return st->ops->project_update(st->conn, id, name, egress, isolation, err);
}

int brig_store_key_insert(brig_store *st, const brig_key_row *k, int64_t at, brig_error **err)
{
    return st->ops->key_insert(st->conn, k, at, err);
}

int brig_store_key_lookup(brig_store *st, const char *hash, brig_key_row *out, brig_error **err)
{
    return st->ops->key_lookup(st->conn, hash, out, err);
}

int brig_store_key_revoke(brig_store *st, const char *project_id, const char *key_id, int64_t at,
                          brig_error **err)
{
    return st->ops->key_revoke(st->conn, project_id, key_id, at, err);
}

int brig_store_key_each(brig_store *st, const char *project_id,
                        void (*fn)(const brig_key_listed *, void *), void *ctx, brig_error **err)
{
    return st->ops->key_each(st->conn, project_id, fn, ctx, err);
}

int brig_store_key_counts(brig_store *st, int64_t *api_keys, int64_t *operator_keys,
                          brig_error **err)
{
    return st->ops->key_counts(st->conn, api_keys, operator_keys, err);
}

int brig_store_operator_key_insert(brig_store *st, const char *id, const char *hash, int64_t at,
                                   brig_error **err)
{
    return st->ops->operator_key_insert(st->conn, id, hash, at, err);
}

int brig_store_ledger_credit(brig_store *st, const char *account_id, int64_t amount,
                             const char *note, int64_t at, int64_t *balance, brig_error **err)
{
    return st->ops->ledger_credit(st->conn, account_id, amount, note, at, balance, err);
}

int brig_store_ledger_charge(brig_store *st, const char *sandbox_id, int64_t at,
                             brig_charge_plan_fn plan, void *ctx, int64_t *balance,
                             brig_error **err)
{
    return st->ops->ledger_charge(st->conn, sandbox_id, at, plan, ctx, balance, err);
}

int brig_store_ledger_spent(brig_store *st, const char *account_id, int64_t from, int64_t to,
                            int64_t *out, brig_error **err)
{
    return st->ops->ledger_spent(st->conn, account_id, from, to, out, err);
}

int brig_store_ledger_page(brig_store *st, const char *account_id, int64_t before, int max,
                           brig_ledger_row *rows, int *n, brig_error **err)
{
    return st->ops->ledger_page(st->conn, account_id, before, max, rows, n, err);
}

int brig_store_secret_put(brig_store *st, const brig_secret_row *s, int64_t at, brig_error **err)
{
    return st->ops->secret_put(st->conn, s, at, err);
}

int brig_store_secret_each(brig_store *st, const char *owner,
                           int (*fn)(const brig_secret_row *, void *), void *ctx, brig_error **err)
{
    return st->ops->secret_each(st->conn, owner, fn, ctx, err);
}

int brig_store_secret_totals(brig_store *st, const char *owner, int64_t *count, int64_t *box_bytes,
                             brig_error **err)
{
    return st->ops->secret_totals(st->conn, owner, count, box_bytes, err);
}

int brig_store_secret_delete(brig_store *st, const char *owner, const char *name, brig_error **err)
{
    return st->ops->secret_delete(st->conn, owner, name, err);
}

int brig_store_secret_delete_all(brig_store *st, const char *owner, brig_error **err)
{
    return st->ops->secret_delete_all(st->conn, owner, err);
}

int brig_store_sandbox_insert(brig_store *st, const brig_sandbox_row *row, brig_error **err)
{
    return st->ops->sandbox_insert(st->conn, row, err);
}

int brig_store_sandbox_set_state(brig_store *st, const char *id, const char *state,
                                 const char *reason, int64_t now, brig_error **err)
{
    return st->ops->sandbox_set_state(st->conn, id, state, reason, now, err);
}

int brig_store_sandbox_get(brig_store *st, const char *id, brig_sandbox_row *out, brig_error **err)
{
    return st->ops->sandbox_get(st->conn, id, out, err);
}

int brig_store_sandbox_set_expiry(brig_store *st, const char *id, int64_t expires_at,
                                  brig_error **err)
{
    return st->ops->sandbox_set_expiry(st->conn, id, expires_at, err);
}

int brig_store_sandbox_each_live(brig_store *st, void (*fn)(const brig_sandbox_row *, void *),
                                 void *ctx, brig_error **err)
{
    return st->ops->sandbox_each_live(st->conn, fn, ctx, err);
}

int brig_store_sandbox_ended(brig_store *st, const brig_ended_query *q, brig_sandbox_row *rows,
                             int max, int *n, brig_error **err)
{
    return st->ops->sandbox_ended(st->conn, q, rows, max, n, err);
}

int brig_store_sandbox_count_reason(brig_store *st, const char *account_id, const char *reason,
                                    int64_t *n, brig_error **err)
{
    return st->ops->sandbox_count_reason(st->conn, account_id, reason, n, err);
}

int brig_store_blackbox_put(brig_store *st, const char *sandbox_id, int64_t at, const char *data,
                            brig_error **err)
{
    return st->ops->blackbox_put(st->conn, sandbox_id, at, data, err);
}

int brig_store_blackbox_get(brig_store *st, const char *sandbox_id, char **data, int64_t *at,
                            brig_error **err)
{
    return st->ops->blackbox_get(st->conn, sandbox_id, data, at, err);
}

int brig_store_blackbox_prune(brig_store *st, int64_t before, int64_t *pruned, brig_error **err)
{
    return st->ops->blackbox_prune(st->conn, before, pruned, err);
}

int brig_store_snapshot_insert(brig_store *st, const brig_snapshot_row *s, brig_error **err)
{
    return st->ops->snapshot_insert(st->conn, s, err);
}

int brig_store_snapshot_get(brig_store *st, const char *account_id, const char *id,
                            brig_snapshot_row *out, brig_error **err)
{
    return st->ops->snapshot_get(st->conn, account_id, id, out, err);
}

int brig_store_snapshot_each(brig_store *st, const char *account_id, const char *project_id,
                             void (*fn)(const brig_snapshot_row *, void *), void *ctx,
                             brig_error **err)
{
    return st->ops->snapshot_each(st->conn, account_id, project_id, fn, ctx, err);
}

int brig_store_snapshot_delete(brig_store *st, const char *id, int64_t at, brig_error **err)
{
    return st->ops->snapshot_delete(st->conn, id, at, err);
}

int brig_store_volume_insert(brig_store *st, const brig_volume_row *v, brig_error **err)
{
    return st->ops->volume_insert(st->conn, v, err);
}

int brig_store_volume_get(brig_store *st, const char *project_id, const char *name,
                          brig_volume_row *out, brig_error **err)
{
    return st->ops->volume_get(st->conn, project_id, name, out, err);
}

int brig_store_volume_each(brig_store *st, const char *account_id, const char *project_id,
                           void (*fn)(const brig_volume_row *, void *), void *ctx, brig_error **err)
{
    return st->ops->volume_each(st->conn, account_id, project_id, fn, ctx, err);
}

int brig_store_volume_delete(brig_store *st, const char *id, int64_t at, brig_error **err)
{
    return st->ops->volume_delete(st->conn, id, at, err);
}

int brig_store_volume_charge(brig_store *st, const char *id, int64_t at, brig_volume_plan_fn plan,
                             void *ctx, int64_t *balance, brig_error **err)
{
    return st->ops->volume_charge(st->conn, id, at, plan, ctx, balance, err);
}

int brig_store_volume_mount_insert(brig_store *st, const brig_volume_mount_row *m, brig_error **err)
{
    return st->ops->volume_mount_insert(st->conn, m, err);
}

int brig_store_volume_mount_delete(brig_store *st, const char *sandbox_id, brig_error **err)
{
    return st->ops->volume_mount_delete(st->conn, sandbox_id, err);
}

int brig_store_volume_mount_each(brig_store *st, void (*fn)(const brig_volume_mount_row *, void *),
                                 void *ctx, brig_error **err)
{
    return st->ops->volume_mount_each(st->conn, fn, ctx, err);
}

int brig_store_audit_chain(brig_store *st, const char *account_id, brig_audit_chain *out,
                           brig_error **err)
{
    return st->ops->audit_chain(st->conn, account_id, out, err);
}

int brig_store_audit_append(brig_store *st, brig_audit_row *rows, size_t n, brig_error **err)
{
    return st->ops->audit_append(st->conn, rows, n, err);
}

int brig_store_audit_each(brig_store *st, const brig_audit_query *q,
                          int (*fn)(const brig_audit_row *, void *), void *ctx, brig_error **err)
{
    return st->ops->audit_each(st->conn, q, fn, ctx, err);
}

int brig_store_audit_chains(brig_store *st, void (*fn)(const brig_audit_chain *, void *), void *ctx,
                            brig_error **err)
{
    return st->ops->audit_chains(st->conn, fn, ctx, err);
}

int brig_store_audit_prune(brig_store *st, int64_t before, int64_t *pruned, brig_error **err)
{
    return st->ops->audit_prune(st->conn, before, pruned, err);
}

int brig_store_utpl_put(brig_store *st, const brig_utpl_row *t, brig_error **err)
{
    return st->ops->utpl_put(st->conn, t, err);
}

int brig_store_utpl_get(brig_store *st, const char *account_id, const char *name, const char *tag,
                        brig_utpl_row *out, brig_error **err)
{
    return st->ops->utpl_get(st->conn, account_id, name, tag, out, err);
}

int brig_store_utpl_each(brig_store *st, const char *account_id,
                         void (*fn)(const brig_utpl_row *, void *), void *ctx, brig_error **err)
{
    return st->ops->utpl_each(st->conn, account_id, fn, ctx, err);
}

int brig_store_utpl_delete(brig_store *st, const char *account_id, const char *name,
                           const char *tag, brig_error **err)
{
    return st->ops->utpl_delete(st->conn, account_id, name, tag, err);
}

void brig_utpl_row_dispose(brig_utpl_row *t)
{
    free(t->spec);
    free(t->log);
    t->spec = t->log = NULL;
}

int brig_store_injections_put(brig_store *st, const char *project_id, const char *rules,
                              brig_error **err)
{
    return st->ops->injections_put(st->conn, project_id, rules, err);
}

int brig_store_injections_get(brig_store *st, const char *project_id, char **rules,
                              brig_error **err)
{
    return st->ops->injections_get(st->conn, project_id, rules, err);
}

int brig_store_e2b_put(brig_store *st, const char *sandbox_id, const char *record, brig_error **err)
{
    return st->ops->e2b_put(st->conn, sandbox_id, record, err);
}

int brig_store_e2b_get(brig_store *st, const char *sandbox_id, char **record, brig_error **err)
{
    return st->ops->e2b_get(st->conn, sandbox_id, record, err);
}

int brig_store_e2b_delete(brig_store *st, const char *sandbox_id, brig_error **err)
{
    return st->ops->e2b_delete(st->conn, sandbox_id, err);
}

int brig_store_e2b_prune(brig_store *st, int64_t *pruned, brig_error **err)
{
    return st->ops->e2b_prune(st->conn, pruned, err);
}
