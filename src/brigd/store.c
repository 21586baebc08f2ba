/*
 * store.c - SQLite persistence (see store.h).
 *
 * Invariants: the schema version lives in PRAGMA user_version and migrations
 * only ever move it forward; sandboxes are never deleted from the table, they
 * reach a final state (deleted | failed) so history and billing stay auditable.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

struct brig_store {
    sqlite3 *db;
    pthread_mutex_t lock; /* serialises every use of db */
};

static const char *const migrations[] = {
    /* 1: accounts, keys, sandboxes */
    "CREATE TABLE accounts ("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
    "  hash TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, created_at INTEGER NOT NULL,"
    "  revoked_at INTEGER);"
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
    "  template TEXT NOT NULL, template_key TEXT NOT NULL, state TEXT NOT NULL,"
    "  reason TEXT, created_at INTEGER NOT NULL, deleted_at INTEGER);"
    "CREATE INDEX sandboxes_live ON sandboxes(state) WHERE state NOT IN ('deleted','failed');",
    /* 2: per-sandbox user namespace ranges */
    "ALTER TABLE sandboxes ADD COLUMN uid_base INTEGER NOT NULL DEFAULT 0;",
    /* 3: tariffs and the plain environment */
    "ALTER TABLE sandboxes ADD COLUMN tariff TEXT NOT NULL DEFAULT 'small';"
    "ALTER TABLE sandboxes ADD COLUMN env TEXT;",
};

static int db_error(sqlite3 *db, brig_error **err, const char *what)
{
    return brig_error_set(err, BRIG_E_INTERNAL, 0, "store: %s: %s", what, sqlite3_errmsg(db));
}

static int exec_sql(sqlite3 *db, const char *sql, brig_error **err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        brig_error_set(err, BRIG_E_INTERNAL, 0, "store: %s", msg ? msg : "exec failed");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int brig_store_open(brig_store **out, const char *path, brig_error **err)
{
    sqlite3 *db = NULL;
    /* Created 0600 by us: SQLite would use the umask, and its -wal and -shm
     * files copy the database's mode. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return brig_error_sys(err, "store: create %s", path);
    close(fd);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        brig_error_set(err, BRIG_E_INTERNAL, 0, "store: open %s: %s", path,
                       db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 5000);
    if (exec_sql(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
                 err) < 0)
        goto fail;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) {
        db_error(db, err, "read schema version");
        goto fail;
    }
    int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    if (version > (int)BRIG_ARRAY_LEN(migrations)) {
        brig_error_set(err, BRIG_E_INTERNAL, 0,
                       "store: %s has schema version %d, newer than this brigd (%zu)", path,
                       version, BRIG_ARRAY_LEN(migrations));
        goto fail;
    }
    for (int v = version; v < (int)BRIG_ARRAY_LEN(migrations); v++) {
        _cleanup_free_ char *sql =
            brig_asprintf("BEGIN; %s PRAGMA user_version=%d; COMMIT;", migrations[v], v + 1);
        if (exec_sql(db, sql, err) < 0) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            brig_error_prefix(err, "migration to schema %d", v + 1);
            goto fail;
        }
    }
    brig_store *s = brig_xcalloc(1, sizeof(*s));
    s->db = db;
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
fail:
    sqlite3_close(db);
    return -1;
}

void brig_store_close(brig_store *st)
{
    if (st == NULL)
        return;
    sqlite3_close(st->db);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* Prepares sql and binds text (type 's') and int64 (type 'i') arguments per fmt. */
static sqlite3_stmt *prepare(brig_store *st, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt[i]; i++) {
        if (fmt[i] == 's') {
            const char *s = va_arg(ap, const char *);
            if (s)
                sqlite3_bind_text(stmt, i + 1, s, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(stmt, i + 1);
        } else {
            sqlite3_bind_int64(stmt, i + 1, va_arg(ap, int64_t));
        }
    }
    va_end(ap);
    return stmt;
}

/* Runs a statement that returns no rows. */
static int run(brig_store *st, sqlite3_stmt *stmt, const char *what, brig_error **err)
{
    if (stmt == NULL)
        return db_error(st->db, err, what);
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE)
        return db_error(st->db, err, what);
    return 0;
}

int brig_store_account_create(brig_store *st, const char *id, const char *name, int64_t now,
                              brig_error **err)
{
    pthread_mutex_lock(&st->lock);
    int r = run(st,
                prepare(st, "INSERT INTO accounts(id, name, created_at) VALUES (?,?,?)", "ssi", id,
                        name, now),
                "create account", err);
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_key_insert(brig_store *st, const char *key_id, const char *account_id,
                          const char *hash, const char *scope, int64_t now, brig_error **err)
{
    pthread_mutex_lock(&st->lock);
    int r = run(st,
                prepare(st,
                        "INSERT INTO api_keys(id, account_id, hash, scope, created_at)"
                        " VALUES (?,?,?,?,?)",
                        "ssssi", key_id, account_id, hash, scope, now),
                "insert key", err);
    pthread_mutex_unlock(&st->lock);
    return r;
}

static void copy_col(char *dst, size_t cap, sqlite3_stmt *stmt, int col)
{
    const unsigned char *s = sqlite3_column_text(stmt, col);
    snprintf(dst, cap, "%s", s ? (const char *)s : "");
}

int brig_store_key_lookup(brig_store *st, const char *hash, brig_key_row *out, brig_error **err)
{
    int r = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *stmt = prepare(st,
                                 "SELECT id, account_id, scope FROM api_keys"
                                 " WHERE hash = ? AND revoked_at IS NULL",
                                 "s", hash);
    if (stmt == NULL) {
        db_error(st->db, err, "look up key");
        goto out;
    }
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        copy_col(out->id, sizeof(out->id), stmt, 0);
        copy_col(out->account_id, sizeof(out->account_id), stmt, 1);
        copy_col(out->scope, sizeof(out->scope), stmt, 2);
        r = 0;
    } else if (rc == SQLITE_DONE) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no such key");
    } else {
        db_error(st->db, err, "look up key");
    }
    sqlite3_finalize(stmt);
out:
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_key_count(brig_store *st, int64_t *n, brig_error **err)
{
    int r = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *stmt = prepare(st, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", "");
    if (stmt != NULL && sqlite3_step(stmt) == SQLITE_ROW) {
        *n = sqlite3_column_int64(stmt, 0);
        r = 0;
    } else {
        db_error(st->db, err, "count keys");
    }
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_sandbox_insert(brig_store *st, const brig_sandbox_row *row, brig_error **err)
{
    pthread_mutex_lock(&st->lock);
    int r = run(st,
                prepare(st,
                        "INSERT INTO sandboxes(id, account_id, template, template_key, state,"
                        " created_at, uid_base, tariff, env) VALUES (?,?,?,?,?,?,?,?,?)",
                        "sssssiiss", row->id, row->account_id, row->template, row->template_key,
                        row->state, row->created_at, row->uid_base, row->tariff, row->env_json),
                "insert sandbox", err);
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_sandbox_set_state(brig_store *st, const char *id, const char *state,
                                 const char *reason, int64_t now, brig_error **err)
{
    int final = strcmp(state, "deleted") == 0 || strcmp(state, "failed") == 0;
    pthread_mutex_lock(&st->lock);
    int r = run(st,
                prepare(st,
                        "UPDATE sandboxes SET state = ?, reason = coalesce(?, reason),"
                        " deleted_at = CASE WHEN ? THEN ? ELSE deleted_at END WHERE id = ?",
                        "ssiis", state, reason, (int64_t) final, now, id),
                "update sandbox", err);
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_sandbox_each_live(brig_store *st, void (*fn)(const brig_sandbox_row *, void *),
                                 void *ctx, brig_error **err)
{
    int r = 0;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *stmt =
        prepare(st,
                "SELECT id, account_id, template, template_key, state, created_at, uid_base,"
                " tariff, env"
                " FROM sandboxes WHERE state NOT IN ('deleted','failed')"
                " ORDER BY created_at",
                "");
    if (stmt == NULL) {
        pthread_mutex_unlock(&st->lock);
        return db_error(st->db, err, "list sandboxes");
    }
    /* Collect first, call back after unlocking: fn may use the store. */
    brig_sandbox_row *rows = NULL;
    size_t n = 0;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        rows = brig_xrealloc(rows, (n + 1) * sizeof(*rows));
        brig_sandbox_row *row = &rows[n++];
        copy_col(row->id, sizeof(row->id), stmt, 0);
        copy_col(row->account_id, sizeof(row->account_id), stmt, 1);
        copy_col(row->template, sizeof(row->template), stmt, 2);
        copy_col(row->template_key, sizeof(row->template_key), stmt, 3);
        copy_col(row->state, sizeof(row->state), stmt, 4);
        row->created_at = sqlite3_column_int64(stmt, 5);
        row->uid_base = sqlite3_column_int64(stmt, 6);
        copy_col(row->tariff, sizeof(row->tariff), stmt, 7);
        const unsigned char *env = sqlite3_column_text(stmt, 8);
        row->env_json = env ? brig_xstrdup((const char *)env) : NULL;
    }
    if (rc != SQLITE_DONE)
        r = db_error(st->db, err, "list sandboxes");
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->lock);
    for (size_t i = 0; i < n; i++) {
        if (r == 0)
            fn(&rows[i], ctx);
        free(rows[i].env_json);
    }
    free(rows);
    return r;
}
