/*
 * sqlite_e2b.c - E2B sandbox records (docs/e2b.md): one row of JSON text per sandbox made or
 * connected through E2B's API; what the text means is api/e2b_rec.c's.
 */
#include "sqlite_e2b.h"

#include "sqlite_stmt.h"
#include "util.h"

int brig_sqlite_e2b_put(brig_store_conn *c, const char *sandbox_id, const char *record,
                        brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "store an E2B record",
                            "INSERT OR REPLACE INTO e2b_sandboxes(sandbox_id, record) VALUES (?,?)",
                            "ss", sandbox_id, record);
}

int brig_sqlite_e2b_get(brig_store_conn *c, const char *sandbox_id, char **record, brig_error **err)
{
    *record = NULL;
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(
        c, "SELECT record FROM e2b_sandboxes WHERE sandbox_id = ?", "s", sandbox_id);
    int r = brig_sqlite_step(c, s, "read an E2B record", err);
    if (r == 1) {
        const unsigned char *text = sqlite3_column_text(s, 0);
        *record = brig_xstrdup(text ? (const char *)text : "{}");
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

int brig_sqlite_e2b_delete(brig_store_conn *c, const char *sandbox_id, brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "delete an E2B record",
                            "DELETE FROM e2b_sandboxes WHERE sandbox_id = ?", "s", sandbox_id);
}

int brig_sqlite_e2b_prune(brig_store_conn *c, int64_t *pruned, brig_error **err)
{
    return brig_sqlite_exec(
        c, err, pruned, "prune E2B records",
        "DELETE FROM e2b_sandboxes WHERE sandbox_id IN (SELECT id FROM sandboxes"
        " WHERE state IN ('deleted','failed'))",
        "");
}
