/*
 * sqlite_templates.c - templates declared by users, in SQLite (the ops' contracts are in
 * store_ops.h).
 */
#include "sqlite_templates.h"

#include <stdlib.h>
#include <string.h>

#include "sqlite_stmt.h"
#include "util.h"

#define UTPL_COLS                                                                                  \
    "SELECT account_id, name, tag, key, parent, parent_key, size_bytes, build_ms, built_at,"       \
    " built_by"

static void read_utpl(sqlite3_stmt *s, void *row)
{
    brig_utpl_row *t = row;
    memset(t, 0, sizeof(*t));
    brig_sqlite_text(s, 0, t->account_id, sizeof(t->account_id));
    brig_sqlite_text(s, 1, t->name, sizeof(t->name));
    brig_sqlite_text(s, 2, t->tag, sizeof(t->tag));
    brig_sqlite_text(s, 3, t->key, sizeof(t->key));
    brig_sqlite_text(s, 4, t->parent, sizeof(t->parent));
    brig_sqlite_text(s, 5, t->parent_key, sizeof(t->parent_key));
    t->size_bytes = brig_sqlite_int(s, 6, 0);
    t->build_ms = brig_sqlite_int(s, 7, 0);
    t->built_at = brig_sqlite_int(s, 8, 0);
    brig_sqlite_text(s, 9, t->built_by, sizeof(t->built_by));
}

int brig_sqlite_utpl_put(brig_store_conn *c, const brig_utpl_row *t, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "write template",
                            "INSERT OR REPLACE INTO user_templates(account_id, name, tag, key,"
                            " parent, parent_key, spec, log, size_bytes, build_ms, built_at,"
                            " built_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                            "ssssssssiiis", t->account_id, t->name, t->tag, t->key, t->parent,
                            t->parent_key, t->spec ? t->spec : "{}", t->log, t->size_bytes,
                            t->build_ms, t->built_at, t->built_by);
}

static char *text_dup(sqlite3_stmt *s, int col)
{
    const unsigned char *text = sqlite3_column_text(s, col);
    return text ? brig_xstrdup((const char *)text) : NULL;
}

int brig_sqlite_utpl_get(brig_store_conn *c, const char *account_id, const char *name,
                         const char *tag, brig_utpl_row *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          UTPL_COLS ", spec, log FROM user_templates"
                                                    " WHERE account_id = ? AND name = ?"
                                                    " AND tag = ?",
                                          "sss", account_id, name, tag);
    int r = brig_sqlite_step(c, s, "read template", err);
    if (r == 1) {
        read_utpl(s, out);
        out->spec = text_dup(s, 10);
        out->log = text_dup(s, 11);
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_utpl_each(brig_store_conn *c, const char *account_id,
                          void (*fn)(const brig_utpl_row *, void *), void *ctx, brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          UTPL_COLS " FROM user_templates"
                                                    " WHERE (? IS NULL OR account_id = ?)"
                                                    " ORDER BY account_id, name, tag",
                                          "ss", account_id, account_id);
    /* Collect first, call back after unlocking: fn may use the store. */
    void *all;
    size_t n;
    int r = brig_sqlite_collect(c, s, "list templates", sizeof(brig_utpl_row), read_utpl, &all, &n,
                                err);
    brig_utpl_row *rows = all;
    for (size_t i = 0; r == 0 && i < n; i++)
        fn(&rows[i], ctx);
    free(rows);
    return r;
}

int brig_sqlite_utpl_delete(brig_store_conn *c, const char *account_id, const char *name,
                            const char *tag, brig_error **err)
{
    int64_t n = 0;
    if (brig_sqlite_exec(c, err, &n, "delete template",
                         "DELETE FROM user_templates WHERE account_id = ? AND name = ? AND tag = ?",
                         "sss", account_id, name, tag) < 0)
        return -1;
    return n > 0 ? 1 : 0;
}
