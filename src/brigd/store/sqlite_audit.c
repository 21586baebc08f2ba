/*
 * sqlite_audit.c - the audit timeline in SQLite (the ops' contracts are in
 * store_ops.h): the records (table audit) and each account's chain, its head and
 * its checkpoint (table audit_chains).  The chain's hashes are the audit module's;
 * the store keeps what it is given.
 */
#include "sqlite_audit.h"

#include <stdlib.h>
#include <string.h>

#include "sqlite_stmt.h"
#include "util.h"

#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

static void read_chain(sqlite3_stmt *s, brig_audit_chain *out)
{
    brig_sqlite_text(s, 0, out->account_id, sizeof(out->account_id));
    out->head_n = sqlite3_column_int64(s, 1);
    brig_sqlite_text(s, 2, out->head_hash, sizeof(out->head_hash));
    out->base_n = sqlite3_column_int64(s, 3);
    brig_sqlite_text(s, 4, out->base_prev, sizeof(out->base_prev));
}

#define CHAIN_COLS "SELECT account_id, head_n, head_hash, base_n, base_prev FROM audit_chains"

int brig_sqlite_audit_chain(brig_store_conn *c, const char *account_id, brig_audit_chain *out,
                            brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c, CHAIN_COLS " WHERE account_id = ?", "s", account_id);
    int r = brig_sqlite_step(c, s, "read audit chain", err);
    if (r == 1)
        read_chain(s, out);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

static int append_one(brig_store_conn *c, brig_audit_row *w, brig_error **err)
{
    sqlite3_stmt *s = brig_sqlite_prepare(
        c,
        "INSERT INTO audit(account_id, n, at, kind, sandbox_id, project_id, actor, data, prev,"
        " hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
        "siisssssss", w->account_id, w->n, w->at, w->kind, w->sandbox_id[0] ? w->sandbox_id : NULL,
        w->project_id[0] ? w->project_id : NULL, w->actor, w->data, w->prev, w->hash);
    int r = brig_sqlite_step(c, s, "append audit record", err);
    brig_sqlite_release(c, s);
    if (r < 0)
        return -1;
    w->seq = sqlite3_last_insert_rowid(c->db);
    s = brig_sqlite_prepare(c,
                            "INSERT INTO audit_chains(account_id, head_n, head_hash, base_n,"
                            " base_prev) VALUES (?,?,?,1,'" ZERO_HASH "')"
                            " ON CONFLICT(account_id) DO UPDATE SET head_n = excluded.head_n,"
                            " head_hash = excluded.head_hash",
                            "sis", w->account_id, w->n, w->hash);
    r = brig_sqlite_step(c, s, "move audit head", err);
    brig_sqlite_release(c, s);
    return r < 0 ? -1 : 0;
}

int brig_sqlite_audit_append(brig_store_conn *c, brig_audit_row *rows, size_t n, brig_error **err)
{
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (append_one(c, &rows[i], err) < 0) {
            brig_sqlite_rollback(c);
            return -1;
        }
    return brig_sqlite_commit(c, err);
}

static void read_row(sqlite3_stmt *s, brig_audit_row *row)
{
    memset(row, 0, sizeof(*row));
    row->seq = sqlite3_column_int64(s, 0);
    brig_sqlite_text(s, 1, row->account_id, sizeof(row->account_id));
    row->n = sqlite3_column_int64(s, 2);
    row->at = sqlite3_column_int64(s, 3);
    brig_sqlite_text(s, 4, row->kind, sizeof(row->kind));
    brig_sqlite_text(s, 5, row->sandbox_id, sizeof(row->sandbox_id));
    brig_sqlite_text(s, 6, row->project_id, sizeof(row->project_id));
    brig_sqlite_text(s, 7, row->actor, sizeof(row->actor));
    row->data = (char *)sqlite3_column_text(s, 8); /* lent */
    brig_sqlite_text(s, 9, row->prev, sizeof(row->prev));
    brig_sqlite_text(s, 10, row->hash, sizeof(row->hash));
}

int brig_sqlite_audit_each(brig_store_conn *c, const brig_audit_query *q,
                           int (*fn)(const brig_audit_row *, void *), void *ctx, brig_error **err)
{
    brig_sqlite_lock(c);
    /* brigd's order (an account's n grow with it: one writer appends both); a
     * sandbox's records come with its project's own events of its lifetime. */
    sqlite3_stmt *s = brig_sqlite_prepare(
        c,
        "SELECT seq, account_id, n, at, kind, sandbox_id, project_id, actor, data, prev, hash"
        " FROM audit WHERE seq > ?1 AND (?2 IS NULL OR account_id = ?2) AND at >= ?3"
        " AND (?4 IS NULL OR sandbox_id = ?4 OR (sandbox_id IS NULL AND project_id = ?5"
        "      AND at >= ?6 AND (?7 = 0 OR at <= ?7)))"
        " ORDER BY seq LIMIT ?8",
        "isissiii", q->after, q->account_id, q->since, q->sandbox_id, q->project_id, q->from, q->to,
        q->limit > 0 ? q->limit : INT64_MAX);
    int r;
    brig_audit_row row;
    while ((r = brig_sqlite_step(c, s, "read audit", err)) == 1) {
        read_row(s, &row);
        if (fn(&row, ctx) != 0) {
            r = 0;
            break;
        }
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_audit_chains(brig_store_conn *c, void (*fn)(const brig_audit_chain *, void *),
                             void *ctx, brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c, CHAIN_COLS " ORDER BY account_id", "");
    int r;
    brig_audit_chain ch;
    while ((r = brig_sqlite_step(c, s, "read audit chains", err)) == 1) {
        read_chain(s, &ch);
        fn(&ch, ctx);
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

/* One account's prune: its records up to its last one older than before. */
static int prune_account(brig_store_conn *c, const char *account, int64_t before, int64_t *pruned,
                         brig_error **err)
{
    int64_t last = 0, changed = 0;
    if (brig_sqlite_begin(c, err) < 0)
        return -1;
    if (brig_sqlite_query_int(c, err, &last, "audit prune",
                              "SELECT coalesce(max(n), 0) FROM audit WHERE account_id = ?"
                              " AND at < ?",
                              "si", account, before) < 0)
        goto fail;
    /* The checkpoint: the first record kept (n = last + 1), its prev being the hash of
     * the last record deleted. */
    if (last > 0 && (brig_sqlite_exec(c, err, NULL, "audit checkpoint",
                                      "UPDATE audit_chains SET base_n = ?2, base_prev ="
                                      " (SELECT hash FROM audit WHERE account_id = ?1 AND n = ?3)"
                                      " WHERE account_id = ?1 AND base_n <= ?3 AND EXISTS"
                                      " (SELECT 1 FROM audit WHERE account_id = ?1 AND n = ?3)",
                                      "sii", account, last + 1, last) < 0 ||
                     brig_sqlite_exec(c, err, &changed, "audit prune",
                                      "DELETE FROM audit WHERE account_id = ? AND n <= ?", "si",
                                      account, last) < 0))
        goto fail;
    *pruned += changed;
    return brig_sqlite_commit(c, err);
fail:
    brig_sqlite_rollback(c);
    return -1;
}

static void collect_account(const brig_audit_chain *ch, void *ctx)
{
    brig_buf *b = ctx;
    brig_buf_append(b, ch->account_id, strlen(ch->account_id) + 1);
}

int brig_sqlite_audit_prune(brig_store_conn *c, int64_t before, int64_t *pruned, brig_error **err)
{
    *pruned = 0;
    brig_buf accounts = {0};
    int r = brig_sqlite_audit_chains(c, collect_account, &accounts, err);
    for (size_t off = 0; r >= 0 && off < accounts.len; off += strlen(accounts.data + off) + 1)
        r = prune_account(c, accounts.data + off, before, pruned, err);
    brig_buf_dispose(&accounts);
    return r < 0 ? -1 : 0;
}
