/*
 * sqlite_sandboxes.c - sandboxes, their black boxes and sealed secrets in SQLite (the ops'
 * contracts are in store_ops.h).
 */
#include "sqlite_sandboxes.h"

#include <stdlib.h>
#include <string.h>

#include "sqlite_stmt.h"
#include "util.h"

/* ---- secrets --------------------------------------------------------------------- */

int brig_sqlite_secret_put(brig_store_conn *c, const brig_secret_row *s, int64_t at,
                           brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "store secret",
                            "INSERT OR REPLACE INTO secrets(owner, name, nonce, box, created_at)"
                            " VALUES (?,?,?,?,?)",
                            "ssbbi", s->owner, s->name, s->nonce, s->nonce_len, s->box, s->box_len,
                            at);
}

int brig_sqlite_secret_each(brig_store_conn *c, const char *owner,
                            int (*fn)(const brig_secret_row *, void *), void *ctx, brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c, "SELECT name, nonce, box FROM secrets WHERE owner = ? ORDER BY name", "s", owner);
    int r;
    while ((r = brig_sqlite_step(c, s, "read secrets", err)) == 1) {
        brig_secret_row row = {
            .owner = owner,
            .name = (const char *)sqlite3_column_text(s, 0),
            .nonce = sqlite3_column_blob(s, 1),
            .nonce_len = (size_t)sqlite3_column_bytes(s, 1),
            .box = sqlite3_column_blob(s, 2),
            .box_len = (size_t)sqlite3_column_bytes(s, 2),
        };
        if (fn(&row, ctx) != 0) {
            r = 0;
            break;
        }
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_secret_totals(brig_store_conn *c, const char *owner, int64_t *count,
                              int64_t *box_bytes, brig_error **err)
{
    *count = *box_bytes = 0;
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c, "SELECT count(*), coalesce(sum(length(box)), 0) FROM secrets WHERE owner = ?", "s",
        owner);
    int r = brig_sqlite_step(c, s, "read secrets", err);
    if (r == 1) {
        *count = sqlite3_column_int64(s, 0);
        *box_bytes = sqlite3_column_int64(s, 1);
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r < 0 ? -1 : 0;
}

int brig_sqlite_secret_delete(brig_store_conn *c, const char *owner, const char *name,
                              brig_error **err)
{
    int64_t n = 0;
    if (brig_sqlite_exec(c, err, &n, "delete secret",
                         "DELETE FROM secrets WHERE owner = ? AND name = ?", "ss", owner, name) < 0)
        return -1;
    return n > 0 ? 1 : 0;
}

int brig_sqlite_secret_delete_all(brig_store_conn *c, const char *owner, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "delete secrets", "DELETE FROM secrets WHERE owner = ?",
                            "s", owner);
}

/* ---- sandboxes ------------------------------------------------------------------- */

int brig_sqlite_sandbox_insert(brig_store_conn *c, const brig_sandbox_row *row, brig_error **err)
{
    return brig_sqlite_exec(
        c, err, NULL, "insert sandbox",
        "INSERT INTO sandboxes(id, account_id, template, template_key, state,"
        " created_at, uid_base, tariff, env, project_id, price_micro_usd,"
        " idle_timeout_ms, expires_at, isolation, egress_none)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "sssssiisssiiisi", row->id, row->account_id, row->template, row->template_key, row->state,
        row->created_at, row->uid_base, row->tariff, row->env_json, row->project_id, row->price,
        row->idle_timeout_ms, row->expires_at, row->isolation[0] ? row->isolation : "container",
        (int64_t)row->egress_none);
}

int brig_sqlite_sandbox_set_state(brig_store_conn *c, const char *id, const char *state,
                                  const char *reason, int64_t now, brig_error **err)
{
    int64_t final = strcmp(state, "deleted") == 0 || strcmp(state, "failed") == 0;
    return brig_sqlite_exec(c, err, NULL, "update sandbox",
                            "UPDATE sandboxes SET state = ?, reason = coalesce(?, reason),"
                            " deleted_at = CASE WHEN ? THEN ? ELSE deleted_at END WHERE id = ?",
                            "ssiis", state, reason, final, now, id);
}

/* The columns both readers share, first in their SELECT. */
#define SANDBOX_COLS                                                                               \
    "SELECT id, account_id, template, template_key, state, created_at, uid_base, tariff,"          \
    " project_id, price_micro_usd, idle_timeout_ms, expires_at, isolation, egress_none"

static void read_sandbox(sqlite3_stmt *s, brig_sandbox_row *row)
{
    brig_sqlite_text(s, 0, row->id, sizeof(row->id));
    brig_sqlite_text(s, 1, row->account_id, sizeof(row->account_id));
    brig_sqlite_text(s, 2, row->template, sizeof(row->template));
    brig_sqlite_text(s, 3, row->template_key, sizeof(row->template_key));
    brig_sqlite_text(s, 4, row->state, sizeof(row->state));
    row->created_at = sqlite3_column_int64(s, 5);
    row->uid_base = sqlite3_column_int64(s, 6);
    brig_sqlite_text(s, 7, row->tariff, sizeof(row->tariff));
    brig_sqlite_text(s, 8, row->project_id, sizeof(row->project_id));
    row->price = sqlite3_column_int64(s, 9);
    row->idle_timeout_ms = sqlite3_column_int64(s, 10);
    row->expires_at = sqlite3_column_int64(s, 11);
    brig_sqlite_text(s, 12, row->isolation, sizeof(row->isolation));
    row->egress_none = sqlite3_column_int64(s, 13) != 0;
}

/* SANDBOX_COLS and what an ended one adds, for read_ended. */
#define ENDED_COLS SANDBOX_COLS ", reason, deleted_at, cost_micro_usd"

static void read_ended(sqlite3_stmt *s, brig_sandbox_row *row)
{
    memset(row, 0, sizeof(*row));
    read_sandbox(s, row);
    brig_sqlite_text(s, 14, row->reason, sizeof(row->reason));
    row->deleted_at = sqlite3_column_int64(s, 15);
    row->cost = sqlite3_column_int64(s, 16);
}

int brig_sqlite_sandbox_get(brig_store_conn *c, const char *id, brig_sandbox_row *out,
                            brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c, ENDED_COLS " FROM sandboxes WHERE id = ?", "s", id);
    int r = brig_sqlite_step(c, s, "read sandbox", err);
    if (r == 1)
        read_ended(s, out);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_sandbox_ended(brig_store_conn *c, const brig_ended_query *q, brig_sandbox_row *rows,
                              int max, int *n, brig_error **err)
{
    const char *prj = q->project_id ? q->project_id : "";
    const char *bid = q->before_id ? q->before_id : "";
    *n = 0;
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c,
        ENDED_COLS " FROM sandboxes WHERE account_id = ? AND state IN ('deleted','failed')"
                   " AND deleted_at >= ? AND (? = '' OR project_id = ?)"
                   " AND (? = 0 OR deleted_at < ? OR (deleted_at = ? AND id < ?))"
                   " ORDER BY deleted_at DESC, id DESC LIMIT ?",
        "sissiiisi", q->account_id, q->since, prj, prj, q->before_at, q->before_at, q->before_at,
        bid, (int64_t)max);
    int r = 0;
    while (*n < max && (r = brig_sqlite_step(c, s, "list ended sandboxes", err)) == 1)
        read_ended(s, &rows[(*n)++]);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r < 0 ? -1 : 0;
}

int brig_sqlite_sandbox_set_expiry(brig_store_conn *c, const char *id, int64_t expires_at,
                                   brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "update sandbox",
                            "UPDATE sandboxes SET expires_at = ? WHERE id = ?", "is", expires_at,
                            id);
}

/* A row of each_live: the sandbox, its environment and why it ended. */
static void read_live(sqlite3_stmt *s, void *p)
{
    brig_sandbox_row *row = p;
    read_sandbox(s, row);
    const unsigned char *env = sqlite3_column_text(s, 14);
    row->env_json = env ? brig_xstrdup((const char *)env) : NULL;
    brig_sqlite_text(s, 15, row->reason, sizeof(row->reason));
}

int brig_sqlite_sandbox_each_live(brig_store_conn *c, void (*fn)(const brig_sandbox_row *, void *),
                                  void *ctx, brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          SANDBOX_COLS ", env, reason FROM sandboxes"
                                                       " WHERE state NOT IN ('deleted','failed')"
                                                       " ORDER BY created_at",
                                          "");
    /* Collect first, call back after unlocking: fn may use the store. */
    void *all;
    size_t n;
    int r = brig_sqlite_collect(c, s, "list sandboxes", sizeof(brig_sandbox_row), read_live, &all,
                                &n, err);
    brig_sandbox_row *rows = all;
    for (size_t i = 0; i < n; i++) {
        if (r == 0)
            fn(&rows[i], ctx);
        free(rows[i].env_json);
    }
    free(rows);
    return r;
}

int brig_sqlite_sandbox_count_reason(brig_store_conn *c, const char *account_id, const char *reason,
                                     int64_t *n, brig_error **err)
{
    *n = 0;
    return brig_sqlite_query_int(c, err, n, "count sandboxes",
                                 "SELECT count(*) FROM sandboxes WHERE account_id = ?"
                                 " AND reason = ?",
                                 "ss", account_id, reason) < 0
               ? -1
               : 0;
}

/* ---- black boxes ----------------------------------------------------------------- */

int brig_sqlite_blackbox_put(brig_store_conn *c, const char *sandbox_id, int64_t at,
                             const char *data, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "store black box",
                            "INSERT OR REPLACE INTO blackboxes(sandbox_id, ended_at, data)"
                            " VALUES (?,?,?)",
                            "sis", sandbox_id, at, data);
}

int brig_sqlite_blackbox_get(brig_store_conn *c, const char *sandbox_id, char **data, int64_t *at,
                             brig_error **err)
{
    *data = NULL;
    *at = 0;
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c, "SELECT ended_at, data FROM blackboxes WHERE sandbox_id = ?", "s", sandbox_id);
    int r = brig_sqlite_step(c, s, "read black box", err);
    if (r == 1) {
        *at = sqlite3_column_int64(s, 0);
        const unsigned char *text = sqlite3_column_text(s, 1);
        *data = brig_xstrdup(text ? (const char *)text : "");
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_blackbox_prune(brig_store_conn *c, int64_t before, int64_t *pruned,
                               brig_error **err)
{
    *pruned = 0;
    return brig_sqlite_exec(c, err, pruned, "prune black boxes",
                            "DELETE FROM blackboxes WHERE ended_at < ?", "i", before);
}
