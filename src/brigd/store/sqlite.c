/*
 * sqlite.c - the SQLite backend of the store (see store_ops.h): its ops table, the
 * connection (WAL, created 0600) and the schema with its migrations.  The
 * operations live in sqlite_accounts.c, sqlite_sandboxes.c, sqlite_volumes.c,
 * sqlite_templates.c and
 * sqlite_audit.c.
 *
 * Invariants: the schema version lives in PRAGMA user_version and migrations
 * only ever move it forward, each in its own transaction; a migration once
 * released never changes (existing state dirs must open unchanged); sandboxes
 * are never deleted from the table, they reach a final state (deleted | failed)
 * so history and billing stay auditable; the ledger is append-only (triggers).
 */
#include "sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "sqlite_accounts.h"
#include "sqlite_audit.h"
#include "sqlite_e2b.h"
#include "sqlite_inject.h"
#include "sqlite_sandboxes.h"
#include "sqlite_stmt.h"
#include "sqlite_templates.h"
#include "sqlite_snapshots.h"
#include "sqlite_volumes.h"
#include "util.h"

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
    /* 6: isolation: a project's policy (JSON; NULL: every mode, no default of its own) and
     * each sandbox's mode */
    ("ALTER TABLE projects ADD COLUMN isolation TEXT;"
     "ALTER TABLE sandboxes ADD COLUMN isolation TEXT NOT NULL DEFAULT 'container';"),
    /* 7: the audit timeline: one hash chain per account (audit/audit.h), kept after
     * its sandboxes ended, pruned by the janitor behind a checkpoint */
    ("CREATE TABLE audit ("
     "  seq INTEGER PRIMARY KEY AUTOINCREMENT, account_id TEXT NOT NULL, n INTEGER NOT NULL,"
     "  at INTEGER NOT NULL, kind TEXT NOT NULL, sandbox_id TEXT, project_id TEXT,"
     "  actor TEXT NOT NULL, data TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL,"
     "  UNIQUE (account_id, n));"
     "CREATE INDEX audit_sandbox ON audit(sandbox_id, seq) WHERE sandbox_id IS NOT NULL;"
     "CREATE INDEX audit_project ON audit(project_id, seq) WHERE sandbox_id IS NULL;"
     "CREATE INDEX audit_at ON audit(at);"
     "CREATE TABLE audit_chains ("
     "  account_id TEXT PRIMARY KEY, head_n INTEGER NOT NULL, head_hash TEXT NOT NULL,"
     "  base_n INTEGER NOT NULL DEFAULT 1, base_prev TEXT NOT NULL);"),
    /* 8: black boxes: an ended sandbox's last minute of usage samples (sandbox/usage.c's
     * text), pruned by the janitor after the retention period */
    ("CREATE TABLE blackboxes ("
     "  sandbox_id TEXT PRIMARY KEY REFERENCES sandboxes(id), ended_at INTEGER NOT NULL,"
     "  data TEXT NOT NULL);"
     "CREATE INDEX blackboxes_ended ON blackboxes(ended_at);"),
    /* 9: an account's ended sandboxes, the last ended first (GET /v1/sandboxes?state=ended) */
    ("CREATE INDEX sandboxes_ended ON sandboxes(account_id, deleted_at)"
     " WHERE state IN ('deleted','failed');"),
    /* 10: volumes (docs/volumes.md): a project's named file systems, billed by size; which
     * sandbox mounts which (until its teardown is done); a volume's charges in the ledger */
    ("CREATE TABLE volumes ("
     "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
     "  project_id TEXT NOT NULL REFERENCES projects(id), name TEXT NOT NULL,"
     "  size_mib INTEGER NOT NULL, created_at INTEGER NOT NULL, deleted_at INTEGER,"
     "  billed_at INTEGER NOT NULL, charge_rem INTEGER NOT NULL DEFAULT 0,"
     "  cost_micro_usd INTEGER NOT NULL DEFAULT 0);"
     "CREATE UNIQUE INDEX volumes_live_name ON volumes(project_id, name)"
     "  WHERE deleted_at IS NULL;"
     "CREATE TABLE volume_mounts ("
     "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
     "  volume_id TEXT NOT NULL REFERENCES volumes(id), path TEXT NOT NULL,"
     "  read_only INTEGER NOT NULL, PRIMARY KEY (sandbox_id, volume_id));"
     "ALTER TABLE ledger ADD COLUMN volume_id TEXT;"),
    /* templates declared by users (docs/templates.md): an account's name:tag, its layer's
     * key, its canonical spec and its build's steps */
    ("CREATE TABLE user_templates ("
     "  account_id TEXT NOT NULL REFERENCES accounts(id), name TEXT NOT NULL,"
     "  tag TEXT NOT NULL, key TEXT NOT NULL, parent TEXT NOT NULL, parent_key TEXT NOT NULL,"
     "  spec TEXT NOT NULL, log TEXT, size_bytes INTEGER NOT NULL, build_ms INTEGER NOT NULL,"
     "  built_at INTEGER NOT NULL, built_by TEXT NOT NULL, PRIMARY KEY (account_id, name, tag));"),
    /* credential injection (docs/secrets.md): a project's rules, one JSON array */
    ("CREATE TABLE injections ("
     "  project_id TEXT PRIMARY KEY REFERENCES projects(id), rules TEXT NOT NULL);"),
    /* snapshots (docs/snapshots.md): an account's copies of sandboxes' writable layers */
    ("CREATE TABLE snapshots ("
     "  id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id),"
     "  project_id TEXT NOT NULL REFERENCES projects(id), name TEXT NOT NULL,"
     "  source_id TEXT NOT NULL, template TEXT NOT NULL, template_key TEXT NOT NULL,"
     "  disk_mib INTEGER NOT NULL, uid_base INTEGER NOT NULL, bytes INTEGER NOT NULL,"
     "  digest TEXT NOT NULL, created_at INTEGER NOT NULL, deleted_at INTEGER);"
     "CREATE INDEX snapshots_live ON snapshots(account_id, created_at) WHERE deleted_at IS NULL;"),
    /* E2B's API (docs/e2b.md): a sandbox's metadata and the key envd acts as, one JSON
     * object per sandbox made or connected through it; a sandbox with no egress whatever its
     * project's policy (allow_internet_access: false) */
    ("CREATE TABLE e2b_sandboxes ("
     "  sandbox_id TEXT PRIMARY KEY REFERENCES sandboxes(id), record TEXT NOT NULL);"
     "ALTER TABLE sandboxes ADD COLUMN egress_none INTEGER NOT NULL DEFAULT 0;"),
};

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

/* Brings the schema of db (at path) up to the newest version. */
static int migrate(sqlite3 *db, const char *path, brig_error **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "store: read schema version: %s",
                              sqlite3_errmsg(db));
    int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    if (version > (int)BRIG_ARRAY_LEN(migrations))
        return brig_error_set(err, BRIG_E_INTERNAL, 0,
                              "store: %s has schema version %d, newer than this brigd (%zu)", path,
                              version, BRIG_ARRAY_LEN(migrations));
    for (int v = version; v < (int)BRIG_ARRAY_LEN(migrations); v++) {
        _cleanup_free_ char *sql =
            brig_asprintf("BEGIN; %s PRAGMA user_version=%d; COMMIT;", migrations[v], v + 1);
        if (exec_sql(db, sql, err) < 0) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            brig_error_prefix(err, "migration to schema %d", v + 1);
            return -1;
        }
    }
    return 0;
}

static int sqlite_open(const char *path, brig_store_conn **out, brig_error **err)
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
                 err) < 0 ||
        migrate(db, path, err) < 0) {
        sqlite3_close(db);
        return -1;
    }
    brig_store_conn *c = brig_xcalloc(1, sizeof(*c));
    c->db = db;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    *out = c;
    return 0;
}

static void sqlite_close(brig_store_conn *c)
{
    if (c == NULL)
        return;
    brig_sqlite_cache_clear(c);
    sqlite3_close(c->db);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const brig_store_ops brig_store_sqlite_ops = {
    .name = "sqlite",
    .scheme = "",
    .open = sqlite_open,
    .close = sqlite_close,
    .account_create = brig_sqlite_account_create,
    .account_get = brig_sqlite_account_get,
    .account_update = brig_sqlite_account_update,
    .project_insert = brig_sqlite_project_insert,
    .project_get = brig_sqlite_project_get,
    .project_each = brig_sqlite_project_each,
    .account_each = brig_sqlite_account_each,
    .project_update = brig_sqlite_project_update,
    .key_insert = brig_sqlite_key_insert,
    .key_lookup = brig_sqlite_key_lookup,
    .key_revoke = brig_sqlite_key_revoke,
    .key_each = brig_sqlite_key_each,
    .key_counts = brig_sqlite_key_counts,
    .operator_key_insert = brig_sqlite_operator_key_insert,
    .ledger_credit = brig_sqlite_ledger_credit,
    .ledger_charge = brig_sqlite_ledger_charge,
    .ledger_spent = brig_sqlite_ledger_spent,
    .ledger_page = brig_sqlite_ledger_page,
    .secret_put = brig_sqlite_secret_put,
    .secret_each = brig_sqlite_secret_each,
    .secret_totals = brig_sqlite_secret_totals,
    .secret_delete = brig_sqlite_secret_delete,
    .secret_delete_all = brig_sqlite_secret_delete_all,
    .sandbox_insert = brig_sqlite_sandbox_insert,
    .sandbox_set_state = brig_sqlite_sandbox_set_state,
    .sandbox_get = brig_sqlite_sandbox_get,
    .sandbox_set_expiry = brig_sqlite_sandbox_set_expiry,
    .sandbox_each_live = brig_sqlite_sandbox_each_live,
    .sandbox_ended = brig_sqlite_sandbox_ended,
    .sandbox_count_reason = brig_sqlite_sandbox_count_reason,
    .blackbox_put = brig_sqlite_blackbox_put,
    .blackbox_get = brig_sqlite_blackbox_get,
    .blackbox_prune = brig_sqlite_blackbox_prune,
    .snapshot_insert = brig_sqlite_snapshot_insert,
    .snapshot_get = brig_sqlite_snapshot_get,
    .snapshot_each = brig_sqlite_snapshot_each,
    .snapshot_delete = brig_sqlite_snapshot_delete,
    .volume_insert = brig_sqlite_volume_insert,
    .volume_get = brig_sqlite_volume_get,
    .volume_each = brig_sqlite_volume_each,
    .volume_delete = brig_sqlite_volume_delete,
    .volume_charge = brig_sqlite_volume_charge,
    .volume_mount_insert = brig_sqlite_volume_mount_insert,
    .volume_mount_delete = brig_sqlite_volume_mount_delete,
    .volume_mount_each = brig_sqlite_volume_mount_each,
    .utpl_put = brig_sqlite_utpl_put,
    .utpl_get = brig_sqlite_utpl_get,
    .utpl_each = brig_sqlite_utpl_each,
    .utpl_delete = brig_sqlite_utpl_delete,
    .audit_chain = brig_sqlite_audit_chain,
    .audit_append = brig_sqlite_audit_append,
    .audit_each = brig_sqlite_audit_each,
    .audit_chains = brig_sqlite_audit_chains,
    .audit_prune = brig_sqlite_audit_prune,
    .injections_put = brig_sqlite_injections_put,
    .injections_get = brig_sqlite_injections_get,
    .e2b_put = brig_sqlite_e2b_put,
    .e2b_get = brig_sqlite_e2b_get,
    .e2b_delete = brig_sqlite_e2b_delete,
    .e2b_prune = brig_sqlite_e2b_prune,
};
