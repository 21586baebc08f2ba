/*
 * sqlite_volumes.c - volumes, their charges and which sandbox mounts which, in SQLite
 * (the ops' contracts are in store_ops.h).  Money as in sqlite_accounts.c: computed in C
 * (billing's plan), written whole, inside one BEGIN IMMEDIATE transaction.
 */
#include "sqlite_volumes.h"

#include <stdlib.h>
#include <string.h>

#include "sqlite_accounts.h"
#include "sqlite_stmt.h"
#include "util.h"

#define VOLUME_COLS "SELECT id, account_id, project_id, name, size_mib, created_at, cost_micro_usd"

static void read_volume(sqlite3_stmt *s, void *row)
{
    brig_volume_row *v = row;
    memset(v, 0, sizeof(*v));
    brig_sqlite_text(s, 0, v->id, sizeof(v->id));
    brig_sqlite_text(s, 1, v->account_id, sizeof(v->account_id));
    brig_sqlite_text(s, 2, v->project_id, sizeof(v->project_id));
    brig_sqlite_text(s, 3, v->name, sizeof(v->name));
    v->size_mib = brig_sqlite_int(s, 4, 0);
    v->created_at = brig_sqlite_int(s, 5, 0);
    v->cost = brig_sqlite_int(s, 6, 0);
}

int brig_sqlite_volume_insert(brig_store_conn *c, const brig_volume_row *v, brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    int64_t taken = 0;
    if (brig_sqlite_query_int(c, err, &taken, "read volumes",
                              "SELECT count(*) FROM volumes WHERE project_id = ? AND name = ?"
                              " AND deleted_at IS NULL",
                              "ss", v->project_id, v->name) < 0)
        goto fail;
    if (taken > 0) {
        brig_sqlite_rollback(c);
        return 0;
    }
    if (brig_sqlite_exec(c, err, NULL, "insert volume",
                         "INSERT INTO volumes(id, account_id, project_id, name, size_mib,"
                         " created_at, billed_at) VALUES (?,?,?,?,?,?,?)",
                         "ssssiii", v->id, v->account_id, v->project_id, v->name, v->size_mib,
                         v->created_at, v->created_at) < 0)
        goto fail;
    return brig_sqlite_commit(c, err) < 0 ? -1 : 1;
fail:
    brig_sqlite_rollback(c);
    return -1;
}

int brig_sqlite_volume_get(brig_store_conn *c, const char *project_id, const char *name,
                           brig_volume_row *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          VOLUME_COLS " FROM volumes WHERE project_id = ?"
                                                      " AND (name = ? OR id = ?)"
                                                      " AND deleted_at IS NULL",
                                          "sss", project_id, name, name);
    int r = brig_sqlite_step(c, s, "read volume", err);
    if (r == 1)
        read_volume(s, out);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_volume_each(brig_store_conn *c, const char *account_id, const char *project_id,
                            void (*fn)(const brig_volume_row *, void *), void *ctx,
                            brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          VOLUME_COLS " FROM volumes WHERE deleted_at IS NULL"
                                                      " AND (? IS NULL OR account_id = ?)"
                                                      " AND (? IS NULL OR project_id = ?)"
                                                      " ORDER BY created_at, id",
                                          "ssss", account_id, account_id, project_id, project_id);
    /* Collect first, call back after unlocking: fn may use the store. */
    void *all;
    size_t n;
    int r = brig_sqlite_collect(c, s, "list volumes", sizeof(brig_volume_row), read_volume, &all,
                                &n, err);
    brig_volume_row *rows = all;
    for (size_t i = 0; r == 0 && i < n; i++)
        fn(&rows[i], ctx);
    free(rows);
    return r;
}

int brig_sqlite_volume_delete(brig_store_conn *c, const char *id, int64_t at, brig_error **err)
{
    int64_t n = 0;
    if (brig_sqlite_exec(c, err, &n, "delete volume",
                         "UPDATE volumes SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                         "is", at, id) < 0)
        return -1;
    return n > 0 ? 1 : 0;
}

/* A volume's billing state, inside the charge's transaction: 1, 0 for none, -1. */
/* What is charged by size and time: volumes (their size), snapshots (their data). */
typedef struct charged {
    const char *what;  /* "volume", "snapshot": the ledger's note */
    const char *state; /* SELECT account_id, size in MiB, billed_at, charge_rem, cost ... */
    const char *update;
} charged;

static const charged VOLUME = {
    "volume",
    "SELECT account_id, size_mib, billed_at, charge_rem, cost_micro_usd FROM volumes WHERE id = ?",
    "UPDATE volumes SET billed_at = ?, charge_rem = ?, cost_micro_usd = ? WHERE id = ?"};
static const charged SNAPSHOT = {
    "snapshot",
    "SELECT account_id, (bytes + 1048575) / 1048576, billed_at, charge_rem, cost_micro_usd"
    " FROM snapshots WHERE id = ?",
    "UPDATE snapshots SET billed_at = ?, charge_rem = ?, cost_micro_usd = ? WHERE id = ?"};

static int charge_state(brig_store_conn *c, const charged *k, const char *id,
                        brig_volume_charge_state *st, brig_error **err)
{
    memset(st, 0, sizeof(*st));
    sqlite3_stmt *s = brig_sqlite_prepare(c, k->state, "s", id);
    int r = brig_sqlite_step(c, s, k->what, err);
    if (r == 1) {
        brig_sqlite_text(s, 0, st->account_id, sizeof(st->account_id));
        st->size_mib = brig_sqlite_int(s, 1, 0);
        st->billed_at = brig_sqlite_int(s, 2, 0);
        st->rem = brig_sqlite_int(s, 3, 0);
        st->cost = brig_sqlite_int(s, 4, 0);
    }
    brig_sqlite_release(c, s);
    if (r == 1 && brig_sqlite_balance(c, st->account_id, &st->balance, err) < 0)
        return -1;
    return r;
}

static int charge(brig_store_conn *c, const charged *k, const char *id, int64_t at,
                  brig_volume_plan_fn plan, void *ctx, int64_t *balance, brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    brig_volume_charge_state st;
    int found = charge_state(c, k, id, &st, err);
    if (found == 0)
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no %s '%.40s'", k->what, id);
    if (found <= 0)
        goto fail;
    brig_volume_charge ch = {0};
    plan(&st, &ch, ctx);
    brig_ledger_charge_entry e = {.account_id = st.account_id,
                                  .volume_id = k == &VOLUME ? id : NULL,
                                  .snapshot_id = k == &SNAPSHOT ? id : NULL,
                                  .note = k->what,
                                  .at = at,
                                  .amount = ch.amount,
                                  .seconds = ch.seconds,
                                  .balance = ch.balance};
    if (ch.amount > 0 && brig_sqlite_ledger_book(c, &e, err) < 0)
        goto fail;
    if (brig_sqlite_exec(c, err, NULL, k->what, k->update, "iiis", ch.billed_at, ch.rem,
                         ch.amount > 0 ? ch.cost : st.cost, id) < 0)
        goto fail;
    if (brig_sqlite_commit(c, err) < 0)
        return -1;
    if (balance)
        *balance = ch.amount > 0 ? ch.balance : st.balance;
    return 0;
fail:
    brig_sqlite_rollback(c);
    return -1;
}

int brig_sqlite_volume_charge(brig_store_conn *c, const char *id, int64_t at,
                              brig_volume_plan_fn plan, void *ctx, int64_t *balance,
                              brig_error **err)
{
    return charge(c, &VOLUME, id, at, plan, ctx, balance, err);
}

int brig_sqlite_snapshot_charge(brig_store_conn *c, const char *id, int64_t at,
                                brig_volume_plan_fn plan, void *ctx, int64_t *balance,
                                brig_error **err)
{
    return charge(c, &SNAPSHOT, id, at, plan, ctx, balance, err);
}

int brig_sqlite_volume_mount_insert(brig_store_conn *c, const brig_volume_mount_row *m,
                                    brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "record a volume's mount",
                            "INSERT OR REPLACE INTO volume_mounts(sandbox_id, volume_id, path,"
                            " read_only) VALUES (?,?,?,?)",
                            "sssi", m->sandbox_id, m->volume_id, m->path,
                            (int64_t)(m->read_only ? 1 : 0));
}

int brig_sqlite_volume_mount_delete(brig_store_conn *c, const char *sandbox_id, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "forget a sandbox's volumes",
                            "DELETE FROM volume_mounts WHERE sandbox_id = ?", "s", sandbox_id);
}

static void read_mount(sqlite3_stmt *s, void *row)
{
    brig_volume_mount_row *m = row;
    brig_sqlite_text(s, 0, m->sandbox_id, sizeof(m->sandbox_id));
    brig_sqlite_text(s, 1, m->volume_id, sizeof(m->volume_id));
    brig_sqlite_text(s, 2, m->path, sizeof(m->path));
    m->read_only = brig_sqlite_int(s, 3, 0) != 0;
}

int brig_sqlite_volume_mount_each(brig_store_conn *c,
                                  void (*fn)(const brig_volume_mount_row *, void *), void *ctx,
                                  brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s =
        brig_sqlite_prepare(c,
                            "SELECT sandbox_id, volume_id, path, read_only FROM volume_mounts"
                            " ORDER BY sandbox_id, rowid",
                            "");
    void *all;
    size_t n;
    int r = brig_sqlite_collect(c, s, "list volume mounts", sizeof(brig_volume_mount_row),
                                read_mount, &all, &n, err);
    brig_volume_mount_row *rows = all;
    for (size_t i = 0; r == 0 && i < n; i++)
        fn(&rows[i], ctx);
    free(rows);
    return r;
}
