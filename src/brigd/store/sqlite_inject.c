/*
 * sqlite_inject.c - a project's credential injection rules: one row of JSON text per
 * project (docs/secrets.md); what the text means is sandbox/inject.c's.
 */
#include "sqlite_inject.h"

#include "sqlite_stmt.h"
#include "util.h"

int brig_sqlite_injections_put(brig_store_conn *c, const char *project_id, const char *rules,
                               brig_error **err)
{
    return brig_sqlite_exec(c, err, NULL, "store injection rules",
                            "INSERT OR REPLACE INTO injections(project_id, rules) VALUES (?,?)",
                            "ss", project_id, rules);
}

int brig_sqlite_injections_get(brig_store_conn *c, const char *project_id, char **rules,
                               brig_error **err)
{
    *rules = NULL;
    brig_sqlite_lock(c);
    sqlite3_stmt *s = brig_sqlite_prepare(c, "SELECT rules FROM injections WHERE project_id = ?",
                                          "s", project_id);
    int r = brig_sqlite_step(c, s, "read injection rules", err);
    if (r == 1) {
        const unsigned char *text = sqlite3_column_text(s, 0);
        *rules = brig_xstrdup(text ? (const char *)text : "[]");
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}
