/*
 * sqlite_snapshots.c - snapshots in SQLite (the ops' contracts are in store_ops.h).
 */
#include "sqlite_snapshots.h"

#include <stdlib.h>
#include <string.h>

#include "sqlite_stmt.h"
#include "util.h"

#define SNAPSHOT_COLS                                                                              \
    "SELECT id, account_id, project_id, name, source_id, template, template_key, disk_mib,"        \
    " uid_base, bytes, digest, created_at"

static void read_snapshot(sqlite3_stmt *s, void *row)
{
    brig_snapshot_row *r = row;
    memset(r, 0, sizeof(*r));
    brig_sqlite_text(s, 0, r->id, sizeof(r->id));
    brig_sqlite_text(s, 1, r->account_id, sizeof(r->account_id));
    brig_sqlite_text(s, 2, r->project_id, sizeof(r->project_id));
    brig_sqlite_text(s, 3, r->name, sizeof(r->name));
    brig_sqlite_text(s, 4, r->source_id, sizeof(r->source_id));
    brig_sqlite_text(s, 5, r->template, sizeof(r->template));
    brig_sqlite_text(s, 6, r->template_key, sizeof(r->template_key));
    r->disk_mib = brig_sqlite_int(s, 7, 0);
    r->uid_base = brig_sqlite_int(s, 8, 0);
    r->bytes = brig_sqlite_int(s, 9, 0);
    brig_sqlite_text(s, 10, r->digest, sizeof(r->digest));
    r->created_at = brig_sqlite_int(s, 11, 0);
}

int brig_sqlite_snapshot_insert(brig_store_conn *c, const brig_snapshot_row *r, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "insert snapshot",
                            "INSERT INTO snapshots(id, account_id, project_id, name, source_id,"
                            " template, template_key, disk_mib, uid_base, bytes, digest,"
                            " created_at, billed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            "sssssssiiisii", r->id, r->account_id, r->project_id, r->name,
                            r->source_id, r->template, r->template_key, r->disk_mib, r->uid_base,
                            r->bytes, r->digest, r->created_at, r->created_at);
}

int brig_sqlite_snapshot_get(brig_store_conn *c, const char *account_id, const char *id,
                             brig_snapshot_row *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          SNAPSHOT_COLS " FROM snapshots WHERE id = ?"
                                                        " AND account_id = ?"
                                                        " AND deleted_at IS NULL",
                                          "ss", id, account_id);
    int r = brig_sqlite_step(c, s, "read snapshot", err);
    if (r == 1)
        read_snapshot(s, out);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_snapshot_each(brig_store_conn *c, const char *account_id, const char *project_id,
                              void (*fn)(const brig_snapshot_row *, void *), void *ctx,
                              brig_error **err)
{
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c,
                                          SNAPSHOT_COLS " FROM snapshots WHERE deleted_at IS NULL"
                                                        " AND (? IS NULL OR account_id = ?)"
                                                        " AND (? IS NULL OR project_id = ?)"
                                                        " ORDER BY created_at, id",
                                          "ssss", account_id, account_id, project_id, project_id);
    /* Collect first, call back after unlocking: fn may use the store. */
    void *all;
    size_t n;
    int r = brig_sqlite_collect(c, s, "list snapshots", sizeof(brig_snapshot_row), read_snapshot,
                                &all, &n, err);
    brig_snapshot_row *rows = all;
    for (size_t i = 0; r == 0 && i < n; i++)
        fn(&rows[i], ctx);
    free(rows);
    return r;
}

int brig_sqlite_snapshot_delete(brig_store_conn *c, const char *id, int64_t at, brig_error **err)
{
    int64_t n = 0;
    if (brig_sqlite_exec(c, err, &n, "delete snapshot",
                         "UPDATE snapshots SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                         "is", at, id) < 0)
        return -1;
    return n > 0 ? 1 : 0;
}
