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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

struct brig_store {
    sqlite3 *db;
    pthread_mutex_t lock; /* serialises every use of db */
};

static const char *const migrations[] = {
    /* 1: accounts, keys, sandboxes */
    ("CREATE TABLE accounts ("
     "  id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL);"
     "CREATE TABLE api_keys ("
     "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
     "  hash TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, created_at INTEGER NOT NULL,"
     "  revoked_at INTEGER);"
     "CREATE TABLE sandboxes ("
     "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
     "  template TEXT NOT NULL, template_key TEXT NOT NULL, state TEXT NOT NULL,"
     "  reason TEXT, created_at INTEGER NOT NULL, deleted_at INTEGER);"
     "CREATE INDEX sandboxes_live ON sandboxes(state) WHERE state NOT IN ('deleted','failed');"),
    /* 2: per-sandbox user namespace ranges */
    ("ALTER TABLE sandboxes ADD COLUMN uid_base INTEGER NOT NULL DEFAULT 0;"),
    /* 3: tariffs and the plain environment */
    ("ALTER TABLE sandboxes ADD COLUMN tariff TEXT NOT NULL DEFAULT 'small';"
     "ALTER TABLE sandboxes ADD COLUMN env TEXT;"),
    /* 4: projects, key scopes, money, secrets */
    ("CREATE TABLE projects ("
     "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
     "  name TEXT NOT NULL, egress TEXT NOT NULL DEFAULT '{\"mode\":\"open\"}',"
     "  created_at INTEGER NOT NULL);"
     "INSERT INTO projects(id, account_id, name, created_at)"
     "  SELECT 'prj_' || substr(lower(hex(randomblob(13))), 1, 26), id, 'default', created_at"
     "  FROM accounts;"
     "ALTER TABLE accounts ADD COLUMN default_project_id TEXT;"
     "UPDATE accounts SET default_project_id ="
     "  (SELECT p.id FROM projects p WHERE p.account_id = accounts.id);"
     "ALTER TABLE accounts ADD COLUMN balance_micro_usd INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE accounts ADD COLUMN daily_limit_micro_usd INTEGER;"
     "ALTER TABLE accounts ADD COLUMN monthly_limit_micro_usd INTEGER;"
     "ALTER TABLE accounts ADD COLUMN max_live_sandboxes INTEGER NOT NULL DEFAULT 20;"
     "ALTER TABLE api_keys ADD COLUMN project_id TEXT;"
     "UPDATE api_keys SET project_id ="
     "  (SELECT a.default_project_id FROM accounts a WHERE a.id = api_keys.account_id);"
     "ALTER TABLE sandboxes ADD COLUMN project_id TEXT;"
     "UPDATE sandboxes SET project_id ="
     "  (SELECT a.default_project_id FROM accounts a WHERE a.id = sandboxes.account_id);"
     "ALTER TABLE sandboxes ADD COLUMN cost_micro_usd INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN billed_ms INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN price_micro_usd INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN idle_timeout_ms INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;"
     "CREATE TABLE ledger ("
     "  seq INTEGER PRIMARY KEY AUTOINCREMENT, account_id TEXT NOT NULL REFERENCES accounts(id),"
     "  at INTEGER NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('credit', 'charge')),"
     "  amount_micro_usd INTEGER NOT NULL CHECK (amount_micro_usd >= 0),"
     "  sandbox_id TEXT, seconds INTEGER, note TEXT);"
     "CREATE INDEX ledger_account_at ON ledger(account_id, at);"
     "CREATE TRIGGER ledger_append_only_u BEFORE UPDATE ON ledger"
     "  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;"
     "CREATE TRIGGER ledger_append_only_d BEFORE DELETE ON ledger"
     "  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;"
     "CREATE TABLE secrets ("
     "  owner TEXT NOT NULL, name TEXT NOT NULL, nonce BLOB NOT NULL, box BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL, PRIMARY KEY (owner, name));"
     "CREATE TABLE operator_keys ("
     "  id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);"),
    /* 5: the tariffs an account may use (a JSON array of names; NULL: all) */
    ("ALTER TABLE accounts ADD COLUMN tariffs TEXT;"),
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
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->lock, &ma);
    pthread_mutexattr_destroy(&ma);
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

static void copy_col(char *dst, size_t cap, sqlite3_stmt *stmt, int col)
{
    const unsigned char *s = sqlite3_column_text(stmt, col);
    snprintf(dst, cap, "%s", s ? (const char *)s : "");
}

int brig_store_sandbox_insert(brig_store *st, const brig_sandbox_row *row, brig_error **err)
{
    pthread_mutex_lock(&st->lock);
    int r = run(st,
                prepare(st,
                        "INSERT INTO sandboxes(id, account_id, template, template_key, state,"
                        " created_at, uid_base, tariff, env, project_id, price_micro_usd,"
                        " idle_timeout_ms, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        "sssssiisssiii", row->id, row->account_id, row->template, row->template_key,
                        row->state, row->created_at, row->uid_base, row->tariff, row->env_json,
                        row->project_id, row->price, row->idle_timeout_ms, row->expires_at),
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

int brig_store_sandbox_get(brig_store *st, const char *id, brig_sandbox_row *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *stmt = prepare(st,
                                 "SELECT id, account_id, template, template_key, state, created_at,"
                                 " uid_base, tariff, project_id, price_micro_usd, idle_timeout_ms,"
                                 " expires_at, reason, deleted_at, cost_micro_usd"
                                 " FROM sandboxes WHERE id = ?",
                                 "s", id);
    if (stmt == NULL) {
        pthread_mutex_unlock(&st->lock);
        return db_error(st->db, err, "read sandbox");
    }
    int rc = sqlite3_step(stmt), r = 0;
    if (rc == SQLITE_ROW) {
        copy_col(out->id, sizeof(out->id), stmt, 0);
        copy_col(out->account_id, sizeof(out->account_id), stmt, 1);
        copy_col(out->template, sizeof(out->template), stmt, 2);
        copy_col(out->template_key, sizeof(out->template_key), stmt, 3);
        copy_col(out->state, sizeof(out->state), stmt, 4);
        out->created_at = sqlite3_column_int64(stmt, 5);
        out->uid_base = sqlite3_column_int64(stmt, 6);
        copy_col(out->tariff, sizeof(out->tariff), stmt, 7);
        copy_col(out->project_id, sizeof(out->project_id), stmt, 8);
        out->price = sqlite3_column_int64(stmt, 9);
        out->idle_timeout_ms = sqlite3_column_int64(stmt, 10);
        out->expires_at = sqlite3_column_int64(stmt, 11);
        copy_col(out->reason, sizeof(out->reason), stmt, 12);
        out->deleted_at = sqlite3_column_int64(stmt, 13);
        out->cost = sqlite3_column_int64(stmt, 14);
        r = 1;
    } else if (rc != SQLITE_DONE) {
        r = db_error(st->db, err, "read sandbox");
    }
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_sandbox_set_expiry(brig_store *st, const char *id, int64_t expires_at,
                                  brig_error **err)
{
    pthread_mutex_lock(&st->lock);
    int r = run(
        st, prepare(st, "UPDATE sandboxes SET expires_at = ? WHERE id = ?", "is", expires_at, id),
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
                " tariff, env, project_id, price_micro_usd, idle_timeout_ms,"
                " expires_at"
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
        copy_col(row->project_id, sizeof(row->project_id), stmt, 9);
        row->price = sqlite3_column_int64(stmt, 10);
        row->idle_timeout_ms = sqlite3_column_int64(stmt, 11);
        row->expires_at = sqlite3_column_int64(stmt, 12);
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

/* ---- generic access ---------------------------------------------------------- */

struct brig_row {
    sqlite3_stmt *stmt;
};

const char *brig_row_text(brig_row *r, int col)
{
    return (const char *)sqlite3_column_text(r->stmt, col);
}

int64_t brig_row_int(brig_row *r, int col)
{
    return sqlite3_column_int64(r->stmt, col);
}

bool brig_row_is_null(brig_row *r, int col)
{
    return sqlite3_column_type(r->stmt, col) == SQLITE_NULL;
}

const void *brig_row_blob(brig_row *r, int col, size_t *len)
{
    const void *p = sqlite3_column_blob(r->stmt, col);
    *len = (size_t)sqlite3_column_bytes(r->stmt, col);
    return p;
}

static sqlite3_stmt *vprepare(brig_store *st, const char *sql, const char *fmt, va_list ap)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return NULL;
    for (int i = 0; fmt && fmt[i]; i++) {
        if (fmt[i] == 's') {
            const char *v = va_arg(ap, const char *);
            if (v)
                sqlite3_bind_text(stmt, i + 1, v, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(stmt, i + 1);
        } else if (fmt[i] == 'b') {
            const void *p = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            sqlite3_bind_blob(stmt, i + 1, p, (int)n, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_int64(stmt, i + 1, va_arg(ap, int64_t));
        }
    }
    return stmt;
}

int brig_store_run(brig_store *st, brig_error **err, int64_t *changes, const char *sql,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *stmt = vprepare(st, sql, fmt, ap);
    va_end(ap);
    int r = 0;
    if (stmt == NULL || sqlite3_step(stmt) != SQLITE_DONE)
        r = db_error(st->db, err, "write");
    else if (changes)
        *changes = sqlite3_changes(st->db);
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->lock);
    return r;
}

int brig_store_query(brig_store *st, brig_error **err, int (*fn)(brig_row *, void *), void *ctx,
                     const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *stmt = vprepare(st, sql, fmt, ap);
    va_end(ap);
    int n = 0, rc = SQLITE_DONE;
    if (stmt != NULL) {
        brig_row row = {stmt};
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
            n++;
            if (fn && fn(&row, ctx) != 0) {
                rc = SQLITE_DONE;
                break;
            }
        }
    }
    if (stmt == NULL || rc != SQLITE_DONE)
        n = db_error(st->db, err, "read");
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->lock);
    return n;
}

int brig_store_begin(brig_store *st, brig_error **err)
{
    pthread_mutex_lock(&st->lock);
    if (exec_sql(st->db, "BEGIN IMMEDIATE", err) < 0) {
        pthread_mutex_unlock(&st->lock);
        return -1;
    }
    return 0; /* the lock stays held until commit or rollback */
}

int brig_store_commit(brig_store *st, brig_error **err)
{
    int r = exec_sql(st->db, "COMMIT", err);
    if (r < 0)
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_unlock(&st->lock);
    return r;
}

void brig_store_rollback(brig_store *st)
{
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_unlock(&st->lock);
}
