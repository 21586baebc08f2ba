/*
 * sqlite_stmt.c - the SQLite backend's connection lock, transactions and
 * statement helpers (see sqlite_stmt.h).
 */
#include "sqlite_stmt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

void brig_sqlite_lock(brig_store_conn *c)
{
    pthread_mutex_lock(&c->lock);
}

void brig_sqlite_unlock(brig_store_conn *c)
{
    pthread_mutex_unlock(&c->lock);
}

int brig_sqlite_error(brig_store_conn *c, brig_error **err, const char *what)
{
    return brig_error_set(err, BRIG_E_INTERNAL, 0, "store: %s: %s", what, sqlite3_errmsg(c->db));
}

static int exec_plain(brig_store_conn *c, const char *sql, brig_error **err)
{
    char *msg = NULL;
    if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        brig_error_set(err, BRIG_E_INTERNAL, 0, "store: %s", msg ? msg : "exec failed");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int brig_sqlite_begin(brig_store_conn *c, brig_error **err)
{
    brig_sqlite_lock(c);
    if (exec_plain(c, "BEGIN IMMEDIATE", err) < 0) {
        brig_sqlite_unlock(c);
        return -1;
    }
    return 0;
}

int brig_sqlite_commit(brig_store_conn *c, brig_error **err)
{
    int r = exec_plain(c, "COMMIT", err);
    if (r < 0)
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    brig_sqlite_unlock(c);
    return r;
}

void brig_sqlite_rollback(brig_store_conn *c)
{
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    brig_sqlite_unlock(c);
}

/* The cache slot of sql: its own, a free one, or NULL (taken by other text, or busy: a
 * statement of the same text still being read, as in a nested call). */
static brig_sqlite_cached *cache_slot(brig_store_conn *c, const char *sql)
{
    size_t h = ((uintptr_t)sql >> 3) % BRIG_SQLITE_STMT_CACHE;
    for (size_t i = 0; i < 4; i++) {
        brig_sqlite_cached *e = &c->cache[(h + i) % BRIG_SQLITE_STMT_CACHE];
        if (e->s == NULL)
            return e;
        /* The address first; the text too, for SQL a caller built in memory it reused. */
        if (e->sql == sql && strcmp(sqlite3_sql(e->s), sql) == 0)
            return e->busy ? NULL : e;
    }
    return NULL;
}

static sqlite3_stmt *take(brig_store_conn *c, const char *sql)
{
    brig_sqlite_cached *e = cache_slot(c, sql);
    sqlite3_stmt *s = NULL;
    if (e && e->s) {
        e->busy = true;
        return e->s;
    }
    if (e == NULL)
        return sqlite3_prepare_v2(c->db, sql, -1, &s, NULL) == SQLITE_OK ? s : NULL;
    if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
        return NULL;
    *e = (brig_sqlite_cached){.sql = sql, .s = s, .busy = true};
    return s;
}

void brig_sqlite_release(brig_store_conn *c, sqlite3_stmt *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < BRIG_SQLITE_STMT_CACHE; i++) {
        if (c->cache[i].s == s) {
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            c->cache[i].busy = false;
            return;
        }
    }
    sqlite3_finalize(s);
}

void brig_sqlite_cache_clear(brig_store_conn *c)
{
    for (size_t i = 0; i < BRIG_SQLITE_STMT_CACHE; i++) {
        sqlite3_finalize(c->cache[i].s);
        c->cache[i] = (brig_sqlite_cached){0};
    }
}

static sqlite3_stmt *vprepare(brig_store_conn *c, const char *sql, const char *fmt, va_list ap)
{
    sqlite3_stmt *s = take(c, sql);
    if (s == NULL)
        return NULL;
    for (int i = 0; fmt[i]; i++) {
        if (fmt[i] == 's') {
            const char *v = va_arg(ap, const char *);
            if (v)
                sqlite3_bind_text(s, i + 1, v, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(s, i + 1);
        } else if (fmt[i] == 'b') {
            const void *p = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            sqlite3_bind_blob(s, i + 1, p, (int)n, SQLITE_TRANSIENT);
        } else if (fmt[i] == 'n') {
            int64_t v = va_arg(ap, int64_t);
            if (v < 0)
                sqlite3_bind_null(s, i + 1);
            else
                sqlite3_bind_int64(s, i + 1, v);
        } else {
            sqlite3_bind_int64(s, i + 1, va_arg(ap, int64_t));
        }
    }
    return s;
}

sqlite3_stmt *brig_sqlite_prepare(brig_store_conn *c, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *s = vprepare(c, sql, fmt, ap);
    va_end(ap);
    return s;
}

int brig_sqlite_step(brig_store_conn *c, sqlite3_stmt *s, const char *what, brig_error **err)
{
    int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return brig_sqlite_error(c, err, what);
}

int brig_sqlite_collect(brig_store_conn *c, sqlite3_stmt *s, const char *what, size_t row_size,
                        void (*read)(sqlite3_stmt *s, void *row), void **rows, size_t *n,
                        brig_error **err)
{
    char *all = NULL;
    size_t count = 0;
    int r;
    while ((r = brig_sqlite_step(c, s, what, err)) == 1) {
        all = brig_xrealloc(all, (count + 1) * row_size);
        memset(all + count * row_size, 0, row_size);
        read(s, all + count * row_size);
        count++;
    }
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    *rows = all;
    *n = count;
    return r;
}

int brig_sqlite_exec(brig_store_conn *c, brig_error **err, int64_t *changes, const char *what,
                     const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    brig_sqlite_lock(c);
    sqlite3_stmt *s = vprepare(c, sql, fmt, ap);
    va_end(ap);
    int r = brig_sqlite_step(c, s, what, err);
    if (r == 0 && changes)
        *changes = sqlite3_changes(c->db);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r < 0 ? -1 : 0;
}

int brig_sqlite_query_int(brig_store_conn *c, brig_error **err, int64_t *out, const char *what,
                          const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    brig_sqlite_lock(c);
    sqlite3_stmt *s = vprepare(c, sql, fmt, ap);
    va_end(ap);
    int r = brig_sqlite_step(c, s, what, err);
    if (r == 1)
        *out = sqlite3_column_int64(s, 0);
    brig_sqlite_release(c, s);
    brig_sqlite_unlock(c);
    return r;
}

void brig_sqlite_text(sqlite3_stmt *s, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

int64_t brig_sqlite_int(sqlite3_stmt *s, int col, int64_t null)
{
    if (sqlite3_column_type(s, col) == SQLITE_NULL)
        return null;
    return sqlite3_column_int64(s, col);
}
