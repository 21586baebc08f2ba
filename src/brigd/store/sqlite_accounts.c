/*
 * sqlite_accounts.c - accounts, projects, keys and the ledger in SQLite (the ops'
 * contracts are in store_ops.h).
 *
 * Money: balances are computed here in C, checked, and written whole, never as
 * `balance + ?` in SQL: SQLite turns an integer sum that overflows into a float.
 * A credit or a charge reads the balance and writes it back, with its ledger
 * row, inside one BEGIN IMMEDIATE transaction.
 */
#include "sqlite_accounts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/money.h"
#include "sqlite_stmt.h"
#include "util.h"

/* ---- accounts -------------------------------------------------------------------- */

int brig_sqlite_account_create(brig_store_conn *c, const brig_account_new *a, brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    if (brig_sqlite_exec(c, err, NULL, "insert account",
                         "INSERT INTO accounts(id, name, created_at, default_project_id,"
                         " max_live_sandboxes) VALUES (?,?,?,?,?)",
                         "ssisi", a->id, a->name, a->created_at, a->project_id, a->max_live) < 0 ||
        brig_sqlite_exec(c, err, NULL, "insert project",
                         "INSERT INTO projects(id, account_id, name, created_at) VALUES (?,?,?,?)",
                         "sssi", a->project_id, a->id, "default", a->created_at) < 0 ||
        brig_sqlite_exec(c, err, NULL, "insert key",
                         "INSERT INTO api_keys(id, account_id, project_id, hash, scope,"
                         " created_at) VALUES (?,?,?,?,?,?)",
                         "sssssi", a->key_id, a->id, a->project_id, a->key_hash, "admin",
                         a->created_at) < 0) {
        brig_sqlite_rollback(c);
        return -1;
    }
    return brig_sqlite_commit(c, err);
}

int brig_sqlite_account_each(brig_store_conn *c, void (*fn)(const char *id, void *), void *ctx,
                             brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c, "SELECT id FROM accounts ORDER BY created_at, id", "");
    /* Collect first, call back after unlocking: fn may use the store. */
    char(*ids)[BRIG_ID_MAX] = NULL;
    size_t n = 0;
    int r;
    while ((r = brig_sqlite_step(c, s, "list accounts", err)) == 1) {
        ids = brig_xrealloc(ids, (n + 1) * sizeof(*ids));
        brig_sqlite_text(s, 0, ids[n++], sizeof(ids[0]));
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    for (size_t i = 0; r == 0 && i < n; i++)
        fn(ids[i], ctx);
    free(ids);
    return r;
}

int brig_sqlite_account_get(brig_store_conn *c, const char *id, brig_account_row *out,
                            brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c,
        "SELECT name, default_project_id, balance_micro_usd, daily_limit_micro_usd,"
        " monthly_limit_micro_usd, max_live_sandboxes, created_at, tariffs FROM accounts"
        " WHERE id = ?",
        "s", id);
    int r = brig_sqlite_step(c, s, "read account", err);
    if (r == 1) {
        brig_sqlite_text(s, 0, out->name, sizeof(out->name));
        brig_sqlite_text(s, 1, out->default_project_id, sizeof(out->default_project_id));
        out->balance = brig_sqlite_int(s, 2, 0);
        out->daily_limit = brig_sqlite_int(s, 3, -1);
        out->monthly_limit = brig_sqlite_int(s, 4, -1);
        out->max_live = brig_sqlite_int(s, 5, 0);
        out->created_at = brig_sqlite_int(s, 6, 0);
        brig_sqlite_text(s, 7, out->tariffs, sizeof(out->tariffs));
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_account_update(brig_store_conn *c, const char *id, const brig_account_update *u,
                               brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    int64_t found = 0;
    if (brig_sqlite_query_int(c, err, &found, "read account",
                              "SELECT count(*) FROM accounts WHERE id = ?", "s", id) < 0)
        goto fail;
    if (found == 0) {
        brig_sqlite_rollback(c);
        return 0;
    }
    if ((u->set_max_live &&
         brig_sqlite_exec(c, err, NULL, "update account",
                          "UPDATE accounts SET max_live_sandboxes = ? WHERE id = ?", "is",
                          u->max_live, id) < 0) ||
        (u->set_tariffs && brig_sqlite_exec(c, err, NULL, "update account",
                                            "UPDATE accounts SET tariffs = ? WHERE id = ?", "ss",
                                            u->tariffs, id) < 0) ||
        (u->set_daily_limit &&
         brig_sqlite_exec(c, err, NULL, "update account",
                          "UPDATE accounts SET daily_limit_micro_usd = ? WHERE id = ?", "ns",
                          u->daily_limit, id) < 0) ||
        (u->set_monthly_limit &&
         brig_sqlite_exec(c, err, NULL, "update account",
                          "UPDATE accounts SET monthly_limit_micro_usd = ? WHERE id = ?", "ns",
                          u->monthly_limit, id) < 0))
        goto fail;
    return brig_sqlite_commit(c, err) < 0 ? -1 : 1;
fail:
    brig_sqlite_rollback(c);
    return -1;
}

/* ---- projects -------------------------------------------------------------------- */

#define PROJECT_COLS                                                                               \
    "SELECT id, account_id, name, egress, created_at, isolation, on_idle FROM projects"

static void read_project(sqlite3_stmt *s, void *row)
{
    brig_project_row *p = row;
    brig_sqlite_text(s, 0, p->id, sizeof(p->id));
    brig_sqlite_text(s, 1, p->account_id, sizeof(p->account_id));
    brig_sqlite_text(s, 2, p->name, sizeof(p->name));
    const unsigned char *e = sqlite3_column_text(s, 3);
    p->egress = e ? brig_xstrdup((const char *)e) : NULL;
    p->created_at = brig_sqlite_int(s, 4, 0);
    brig_sqlite_text(s, 5, p->isolation, sizeof(p->isolation));
    brig_sqlite_text(s, 6, p->on_idle, sizeof(p->on_idle));
}

int brig_sqlite_project_insert(brig_store_conn *c, const char *id, const char *account_id,
                               const char *name, int64_t created_at, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "insert project",
                            "INSERT INTO projects(id, account_id, name, created_at)"
                            " VALUES (?,?,?,?)",
                            "sssi", id, account_id, name, created_at);
}

int brig_sqlite_project_get(brig_store_conn *c, const char *id, brig_project_row *out,
                            brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c, PROJECT_COLS " WHERE id = ?", "s", id);
    int r = brig_sqlite_step(c, s, "read project", err);
    if (r == 1)
        read_project(s, out);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_project_each(brig_store_conn *c, const char *account_id,
                             void (*fn)(const brig_project_row *, void *), void *ctx,
                             brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c, PROJECT_COLS " WHERE account_id = ? ORDER BY created_at", "s", account_id);
    /* Collect first, call back after unlocking: fn may use the store. */
    void *all;
    size_t n;
    int r = brig_sqlite_collect(c, s, "list projects", sizeof(brig_project_row), read_project, &all,
                                &n, err);
    brig_project_row *rows = all;
    for (size_t i = 0; i < n; i++) {
        if (r == 0)
            fn(&rows[i], ctx);
        free(rows[i].egress);
    }
    free(rows);
    return r;
}

int brig_sqlite_project_update(brig_store_conn *c, const char *id, const char *name,
                               const char *egress, const char *isolation, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "update project",
                            "UPDATE projects SET name = coalesce(?, name),"
                            " egress = coalesce(?, egress), isolation = coalesce(?, isolation)"
                            " WHERE id = ?",
                            "ssss", name, egress, isolation, id);
}

int brig_sqlite_project_set_on_idle(brig_store_conn *c, const char *id, const char *on_idle,
                                    brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "update project",
                            "UPDATE projects SET on_idle = ? WHERE id = ?", "ss", on_idle, id);
}

/* ---- keys ------------------------------------------------------------------------ */

int brig_sqlite_key_insert(brig_store_conn *c, const brig_key_row *k, int64_t at, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "insert key",
                            "INSERT INTO api_keys(id, account_id, project_id, hash, scope,"
                            " created_at) VALUES (?,?,?,?,?,?)",
                            "sssssi", k->id, k->account_id, k->project_id, k->hash, k->scope, at);
}

int brig_sqlite_key_lookup(brig_store_conn *c, const char *hash, brig_key_row *out,
                           brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s =
        brig_sqlite_prepare(c,
                            "SELECT id, account_id, project_id, scope FROM api_keys"
                            " WHERE hash = ? AND revoked_at IS NULL"
                            " UNION ALL SELECT id, '', '', 'operator' FROM operator_keys"
                            " WHERE hash = ?",
                            "ss", hash, hash);
    int r = brig_sqlite_step(c, s, "read key", err);
    if (r == 1) {
        brig_sqlite_text(s, 0, out->id, sizeof(out->id));
        brig_sqlite_text(s, 1, out->account_id, sizeof(out->account_id));
        brig_sqlite_text(s, 2, out->project_id, sizeof(out->project_id));
        brig_sqlite_text(s, 3, out->scope, sizeof(out->scope));
        snprintf(out->hash, sizeof(out->hash), "%s", hash);
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_key_revoke(brig_store_conn *c, const char *project_id, const char *key_id,
                           int64_t at, brig_error **err)
{
    int64_t n = 0;
    if (brig_sqlite_exec(c, err, &n, "revoke key",
                         "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND project_id = ?"
                         " AND revoked_at IS NULL",
                         "iss", at, key_id, project_id) < 0)
        return -1;
    return n > 0 ? 1 : 0;
}

int brig_sqlite_key_each(brig_store_conn *c, const char *project_id,
                         void (*fn)(const brig_key_listed *, void *), void *ctx, brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          "SELECT id, scope, created_at, revoked_at FROM api_keys"
                                          " WHERE project_id = ? ORDER BY created_at, id",
                                          "s", project_id);
    int r;
    while ((r = brig_sqlite_step(c, s, "list keys", err)) == 1) {
        brig_key_listed k = {0};
        brig_sqlite_text(s, 0, k.id, sizeof(k.id));
        brig_sqlite_text(s, 1, k.scope, sizeof(k.scope));
        k.created_at = brig_sqlite_int(s, 2, 0);
        k.revoked_at = brig_sqlite_int(s, 3, 0);
        fn(&k, ctx);
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_key_counts(brig_store_conn *c, int64_t *api_keys, int64_t *operator_keys,
                           brig_error **err)
{
    *api_keys = *operator_keys = 0;
    if (brig_sqlite_query_int(c, err, api_keys, "count keys",
                              "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", "") < 0 ||
        brig_sqlite_query_int(c, err, operator_keys, "count keys",
                              "SELECT count(*) FROM operator_keys", "") < 0)
        return -1;
    return 0;
}

int brig_sqlite_operator_key_insert(brig_store_conn *c, const char *id, const char *hash,
                                    int64_t at, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "insert operator key",
                            "INSERT INTO operator_keys(id, hash, created_at) VALUES (?,?,?)", "ssi",
                            id, hash, at);
}

/* ---- the ledger ------------------------------------------------------------------ */

static int set_balance(brig_store_conn *c, const char *account_id, int64_t balance,
                       brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "update balance",
                            "UPDATE accounts SET balance_micro_usd = ? WHERE id = ?", "is", balance,
                            account_id);
}

int brig_sqlite_balance(brig_store_conn *c, const char *account_id, int64_t *out, brig_error **err)
{
    return brig_sqlite_query_int(c, err, out, "read balance",
                                 "SELECT balance_micro_usd FROM accounts WHERE id = ?", "s",
                                 account_id);
}

int brig_sqlite_ledger_book(brig_store_conn *c, const brig_ledger_charge_entry *e, brig_error **err)
{
    if (brig_sqlite_exec(c, err, NULL, "append to the ledger",
                         "INSERT INTO ledger(account_id, at, kind, amount_micro_usd, seconds,"
                         " sandbox_id, volume_id, snapshot_id, note)"
                         " VALUES (?,?,'charge',?,?,?,?,?,?)",
                         "siiissss", e->account_id, e->at, e->amount, e->seconds, e->sandbox_id,
                         e->volume_id, e->snapshot_id, e->note) < 0)
        return -1;
    return set_balance(c, e->account_id, e->balance, err);
}

int brig_sqlite_ledger_credit(brig_store_conn *c, const char *account_id, int64_t amount,
                              const char *note, int64_t at, int64_t *balance, brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    int64_t have = 0, nb = 0;
    int found = brig_sqlite_balance(c, account_id, &have, err);
    if (found == 0)
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", account_id);
    if (found <= 0)
        goto fail;
    if (!brig_money_add(have, amount, &nb)) {
        *balance = have;
        brig_sqlite_rollback(c);
        return 1;
    }
    if (set_balance(c, account_id, nb, err) < 0 ||
        brig_sqlite_exec(c, err, NULL, "append to the ledger",
                         "INSERT INTO ledger(account_id, at, kind, amount_micro_usd, note)"
                         " VALUES (?,?,'credit',?,?)",
                         "siis", account_id, at, amount, note) < 0)
        goto fail;
    if (brig_sqlite_commit(c, err) < 0)
        return -1;
    *balance = nb;
    return 0;
fail:
    brig_sqlite_rollback(c);
    return -1;
}

/* The billing state of a sandbox: 1, 0 when there is none, -1.  Inside the
 * charge's transaction. */
static int charge_state(brig_store_conn *c, const char *sandbox_id, brig_charge_state *st,
                        brig_error **err)
{
    memset(st, 0, sizeof(*st));
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          "SELECT account_id, created_at, billed_ms,"
                                          " price_micro_usd, cost_micro_usd FROM sandboxes"
                                          " WHERE id = ?",
                                          "s", sandbox_id);
    int r = brig_sqlite_step(c, s, "read sandbox", err);
    if (r == 1) {
        brig_sqlite_text(s, 0, st->account_id, sizeof(st->account_id));
        st->created_at = brig_sqlite_int(s, 1, 0);
        st->billed_ms = brig_sqlite_int(s, 2, 0);
        st->price = brig_sqlite_int(s, 3, 0);
        st->cost = brig_sqlite_int(s, 4, 0);
    }
    brig_sqlite_release(c, s);
    if (r == 1 && brig_sqlite_balance(c, st->account_id, &st->balance, err) < 0)
        return -1;
    return r;
}

int brig_sqlite_ledger_charge(brig_store_conn *c, const char *sandbox_id, int64_t at,
                              brig_charge_plan_fn plan, void *ctx, int64_t *balance,
                              brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    brig_charge_state st;
    int found = charge_state(c, sandbox_id, &st, err);
    if (found == 0)
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", sandbox_id);
    if (found <= 0)
        goto fail;
    brig_charge ch = {0};
    plan(&st, &ch, ctx);
    brig_ledger_charge_entry e = {.account_id = st.account_id,
                                  .sandbox_id = sandbox_id,
                                  .at = at,
                                  .amount = ch.amount,
                                  .seconds = ch.seconds,
                                  .balance = ch.balance};
    if (ch.seconds > 0 &&
        (brig_sqlite_ledger_book(c, &e, err) < 0 ||
         brig_sqlite_exec(c, err, NULL, "update sandbox",
                          "UPDATE sandboxes SET billed_ms = ?, cost_micro_usd = ? WHERE id = ?",
                          "iis", ch.billed_ms, ch.cost, sandbox_id) < 0))
        goto fail;
    if (brig_sqlite_commit(c, err) < 0)
        return -1;
    if (balance)
        *balance = ch.seconds > 0 ? ch.balance : st.balance;
    return 0;
fail:
    brig_sqlite_rollback(c);
    return -1;
}

int brig_sqlite_ledger_spent(brig_store_conn *c, const char *account_id, int64_t from, int64_t to,
                             int64_t *out, brig_error **err)
{
    *out = 0;
    return brig_sqlite_query_int(c, err, out, "read the ledger",
                                 "SELECT coalesce(sum(amount_micro_usd), 0) FROM ledger"
                                 " WHERE account_id = ? AND kind = 'charge' AND at >= ?"
                                 " AND at < ?",
                                 "sii", account_id, from, to) < 0
               ? -1
               : 0;
}

int brig_sqlite_ledger_page(brig_store_conn *c, const char *account_id, int64_t before, int max,
                            brig_ledger_row *rows, int *n, brig_error **err)
{
    *n = 0;
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c,
        "SELECT seq, at, kind, amount_micro_usd, sandbox_id, seconds, note, volume_id,"
        " snapshot_id FROM ledger"
        " WHERE account_id = ? AND (? = 0 OR seq < ?) ORDER BY seq DESC LIMIT ?",
        "siii", account_id, before, before, (int64_t)max);
    int r = 0;
    while (*n < max && (r = brig_sqlite_step(c, s, "read the ledger", err)) == 1) {
        brig_ledger_row *l = &rows[(*n)++];
        memset(l, 0, sizeof(*l));
        l->seq = brig_sqlite_int(s, 0, 0);
        l->at = brig_sqlite_int(s, 1, 0);
        brig_sqlite_text(s, 2, l->kind, sizeof(l->kind));
        l->amount = brig_sqlite_int(s, 3, 0);
        brig_sqlite_text(s, 4, l->sandbox_id, sizeof(l->sandbox_id));
        l->seconds = brig_sqlite_int(s, 5, -1);
        brig_sqlite_text(s, 6, l->note, sizeof(l->note));
        brig_sqlite_text(s, 7, l->volume_id, sizeof(l->volume_id));
        brig_sqlite_text(s, 8, l->snapshot_id, sizeof(l->snapshot_id));
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r < 0 ? -1 : 0;
}
