/*
 * store_ops.h - the store's rows and its backend contract: struct brig_store_ops, one
 * function per operation, with the contract of each (store.h's brig_store_X calls
 * ops->X).  A backend (sqlite.c) includes this and nothing above it; callers include
 * store.h.
 */
#ifndef BRIG_STORE_OPS_H
#define BRIG_STORE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "core/id.h"

/* ---- rows ------------------------------------------------------------------------- */

#define BRIG_REASON_MAX 256 /* a sandbox's end reason as read back, its NUL included */

typedef struct brig_account_row {
    char name[80];
    char default_project_id[BRIG_ID_MAX];
    int64_t created_at;    /* ms since the epoch */
    int64_t balance;       /* micro-dollars */
    int64_t daily_limit;   /* micro-dollars; -1: none */
    int64_t monthly_limit; /* micro-dollars; -1: none */
    int64_t max_live;      /* live sandboxes at once */
    char tariffs[1024];    /* a JSON array of tariff names; "": every tariff */
} brig_account_row;

/* One row of the ledger (GET /v1/account/ledger). */
typedef struct brig_ledger_row {
    int64_t seq;
    int64_t at;     /* ms since the epoch */
    char kind[8];   /* "credit" | "charge" */
    int64_t amount; /* micro-dollars, >= 0 */
    char sandbox_id[BRIG_ID_MAX];
    int64_t seconds; /* a charge's; -1: none */
    char note[256];
    char volume_id[BRIG_ID_MAX]; /* a volume's charge; "" for none */
} brig_ledger_row;

/* A new account with its default project (named "default") and its first key, an
 * admin key of that project. */
typedef struct brig_account_new {
    const char *id, *name;
    const char *project_id; /* the default project */
    int64_t max_live;
    const char *key_id, *key_hash; /* the admin key (its hash only) */
    int64_t created_at;
} brig_account_new;

/* What changes on an account: only the fields whose set_ flag is true. */
typedef struct brig_account_update {
    bool set_max_live;
    int64_t max_live;
    bool set_tariffs;
    const char *tariffs; /* a JSON array of names; NULL: every tariff */
    bool set_daily_limit;
    int64_t daily_limit; /* -1: none */
    bool set_monthly_limit;
    int64_t monthly_limit; /* -1: none */
} brig_account_update;

typedef struct brig_project_row {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char name[80];
    char *egress; /* the egress policy as JSON (owned by the row: free() it) */
    int64_t created_at;
    char isolation[256]; /* its isolation policy as JSON; "": none (every mode, no default) */
} brig_project_row;

/* An API key (account_id and project_id set) or, from key_lookup, the operator's
 * key (scope "operator", account_id and project_id ""). */
typedef struct brig_key_row {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char project_id[BRIG_ID_MAX];
    char scope[16];
    char hash[65]; /* hex BLAKE2b of the key (brig_key_hash); never the key */
} brig_key_row;

/* A project's API key as listed: what it is, never its hash. */
typedef struct brig_key_listed {
    char id[BRIG_ID_MAX];
    char scope[16];
    int64_t created_at, revoked_at; /* ms since the epoch; revoked_at 0: in force */
} brig_key_listed;

/* A sandbox's billing as a charge finds it, inside the charge's transaction. */
typedef struct brig_charge_state {
    char account_id[BRIG_ID_MAX];
    int64_t created_at; /* ms since the epoch */
    int64_t billed_ms;  /* how much of its life was charged already */
    int64_t price;      /* micro-dollars per second */
    int64_t cost;       /* micro-dollars charged so far */
    int64_t balance;    /* its account's balance */
} brig_charge_state;

/* What a charge writes.  seconds == 0: nothing at all.  Otherwise a ledger row of
 * `amount` for `seconds`, and the new balance, cost and billed_ms, as given. */
typedef struct brig_charge {
    int64_t seconds, amount;
    int64_t balance, cost, billed_ms;
} brig_charge;

/* Decides a charge from the state it was given (pure: it must not call the store). */
typedef void (*brig_charge_plan_fn)(const brig_charge_state *in, brig_charge *out, void *ctx);

/* A sealed secret (vault.h): the store keeps the bytes it is given. */
typedef struct brig_secret_row {
    const char *owner; /* a project or sandbox id */
    const char *name;
    const void *nonce;
    size_t nonce_len;
    const void *box; /* ciphertext and tag */
    size_t box_len;
} brig_secret_row;

typedef struct brig_sandbox_row {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char template[64];
    char template_key[17];
    char state[16];     /* creating | running | deleting | deleted | failed */
    int64_t created_at; /* ms since the epoch */
    int64_t uid_base;   /* first host uid of its user namespace range */
    char tariff[32];
    char *env_json; /* the sandbox's plain env as JSON, or NULL (owned by the row) */
    char project_id[BRIG_ID_MAX];
    int64_t price;           /* micro-dollars per second */
    int64_t idle_timeout_ms; /* 0: none */
    int64_t expires_at;      /* 0: never */
    char isolation[16];      /* container | gvisor */
    bool egress_none;        /* no egress, whatever its project's policy */
    /* Of an ended sandbox (brig_store_sandbox_get; reason also of one ending): */
    char reason[BRIG_REASON_MAX]; /* why it ended ("" while it lives): a detail, or a failed
                                   * create's error */
    int64_t deleted_at;           /* ms since the epoch; 0 while it lives */
    int64_t cost;                 /* micro-dollars charged so far */
} brig_sandbox_row;

/* Which ended sandboxes a listing wants (brig_store_sandbox_ended). */
typedef struct brig_ended_query {
    const char *account_id;
    const char *project_id; /* "" or NULL: every project of the account */
    int64_t since;          /* ended at or after this (ms since the epoch) */
    int64_t before_at;      /* 0: from the last ended; else only those before (before_at, */
    const char *before_id;  /* before_id) in the listing's order */
} brig_ended_query;
/* A volume (docs/volumes.md): a project's named file system of a bounded size.  A deleted
 * one keeps its row (deleted_at set) for the ledger's sake; names are unique among the
 * project's live ones. */
typedef struct brig_volume_row {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char project_id[BRIG_ID_MAX];
    char name[64];
    int64_t size_mib;
    int64_t created_at; /* ms since the epoch; billed from then on */
    int64_t cost;       /* micro-dollars charged so far */
} brig_volume_row;

/* A snapshot (docs/snapshots.md): a copy of a sandbox's writable layer, owned by its
 * account, that new sandboxes start from.  A deleted one keeps its row (deleted_at). */
typedef struct brig_snapshot_row {
    char id[BRIG_ID_MAX]; /* snp_... */
    char account_id[BRIG_ID_MAX];
    char project_id[BRIG_ID_MAX];
    char name[64];               /* "" for none */
    char source_id[BRIG_ID_MAX]; /* the sandbox it was taken of */
    char template[64];
    char template_key[17];
    int64_t disk_mib;   /* its layer's size (the source's tariff's disk) */
    int64_t uid_base;   /* the source's id range, whose ids its files carry */
    int64_t bytes;      /* data in its layer */
    char digest[65];    /* its manifest: sha256 of its layer's data (runtime.h) */
    int64_t created_at; /* ms since the epoch */
} brig_snapshot_row;

/* A volume's billing as a charge finds it, inside the charge's transaction. */
typedef struct brig_volume_charge_state {
    char account_id[BRIG_ID_MAX];
    int64_t size_mib;
    int64_t billed_at; /* ms since the epoch: charged up to here */
    int64_t rem;  /* what was owed but not charged yet, below one micro-dollar (billing.c's unit) */
    int64_t cost; /* micro-dollars charged so far */
    int64_t balance; /* its account's balance */
} brig_volume_charge_state;

/* What a volume's charge writes: billed_at and rem always; when amount > 0 also a ledger
 * row of amount for `seconds`, the balance and the cost, as given. */
typedef struct brig_volume_charge {
    int64_t seconds, amount;
    int64_t balance, cost, billed_at, rem;
} brig_volume_charge;

/* Decides a volume's charge (pure: it must not call the store). */
typedef void (*brig_volume_plan_fn)(const brig_volume_charge_state *in, brig_volume_charge *out,
                                    void *ctx);

/* A volume a sandbox mounts, from its create until its teardown is done. */
typedef struct brig_volume_mount_row {
    char sandbox_id[BRIG_ID_MAX];
    char volume_id[BRIG_ID_MAX];
    char path[256];
    bool read_only;
} brig_volume_mount_row;

/* A template an account declared and built (docs/templates.md, "Templates declared by
 * users"): named name:tag within its account; its layer is kept by key (content-addressed),
 * so two names may share one. */
typedef struct brig_utpl_row {
    char account_id[BRIG_ID_MAX];
    char name[40];
    char tag[32];
    char key[17];
    char parent[80]; /* what it was built from: "base", "minimal" or "name:tag" */
    char parent_key[17];
    char *spec;                 /* its canonical spec, JSON (owned by whoever filled the row) */
    char *log;                  /* its build's steps, JSON (owned; may be NULL) */
    int64_t size_bytes;         /* bytes of its own layer (what the steps wrote) */
    int64_t build_ms;           /* how long its build took */
    int64_t built_at;           /* ms since the epoch */
    char built_by[BRIG_ID_MAX]; /* the key (its id) that built it */
} brig_utpl_row;

/* One record of the audit timeline (audit/audit.h says what they mean).  Records form
 * one hash chain per account: n counts the account's records from 1, prev is the hash
 * of record n - 1 (64 zeros for the first), hash the record's own. */
typedef struct brig_audit_row {
    int64_t seq; /* brigd-wide order (set by the store on append) */
    char account_id[BRIG_ID_MAX];
    int64_t n;
    int64_t at; /* ms since the epoch */
    char kind[32];
    char sandbox_id[BRIG_ID_MAX]; /* "" for none (a project's event) */
    char project_id[BRIG_ID_MAX]; /* "" for none */
    char actor[BRIG_ID_MAX];      /* the key id that asked, or "brigd" */
    char *data;                   /* the event's fields as JSON text (owned by the row) */
    char prev[65], hash[65];      /* hex SHA-256 */
} brig_audit_row;

/* An account's chain: its last record (head_n 0 and head_hash 64 zeros when none yet)
 * and the checkpoint where the kept records begin (base_n, base_prev: record base_n's
 * prev; 1 and 64 zeros until the janitor pruned). */
typedef struct brig_audit_chain {
    char account_id[BRIG_ID_MAX];
    int64_t head_n, base_n;
    char head_hash[65], base_prev[65];
} brig_audit_chain;

/* Which records a read wants: after seq `after`, oldest first, at most `limit`.
 * account_id NULL: every account's.  sandbox_id set: that sandbox's, and its
 * project's own events (sandbox_id "") from `from` to `to` (0: still live). */
typedef struct brig_audit_query {
    const char *account_id;
    const char *sandbox_id, *project_id;
    int64_t from, to;
    int64_t after, since; /* seq; ms since the epoch (0: any) */
    int64_t limit;
} brig_audit_query;

/* ---- the backend interface ------------------------------------------------------- */

typedef struct brig_store_conn brig_store_conn; /* backend-defined connection */

typedef struct brig_store_ops {
    const char *name;   /* "sqlite" */
    const char *scheme; /* the URL scheme it serves ("postgres"), "" for a file path */
    /* Opens (creating it, and bringing its schema up to date) the store at where. */
    int (*open)(const char *where, brig_store_conn **out, brig_error **err);
    void (*close)(brig_store_conn *c);

    /* -- accounts */
    /* Creates the account, its default project and its admin key, all or none. */
    int (*account_create)(brig_store_conn *c, const brig_account_new *a, brig_error **err);
    /* 1 and *out, or 0 when there is no such account. */
    int (*account_get)(brig_store_conn *c, const char *id, brig_account_row *out, brig_error **err);
    /* Calls fn with the id of each account, oldest first (after the store is let go: fn may
     * use it). */
    int (*account_each)(brig_store_conn *c, void (*fn)(const char *id, void *), void *ctx,
                        brig_error **err);
    /* Applies the fields that are set, all or none: 1, or 0 when there is no
     * such account (nothing changed). */
    int (*account_update)(brig_store_conn *c, const char *id, const brig_account_update *u,
                          brig_error **err);

    /* -- projects */
    /* A new project (its egress policy: open). */
    int (*project_insert)(brig_store_conn *c, const char *id, const char *account_id,
                          const char *name, int64_t created_at, brig_error **err);
    /* 1 and *out (its egress is the caller's), or 0 when there is no such project. */
    int (*project_get)(brig_store_conn *c, const char *id, brig_project_row *out, brig_error **err);
    /* Calls fn for each project of the account, oldest first (the row is lent for
     * the call; fn may use the store). */
    int (*project_each)(brig_store_conn *c, const char *account_id,
                        void (*fn)(const brig_project_row *, void *), void *ctx, brig_error **err);
    /* Sets the name, the egress policy and/or the isolation policy (JSON texts); NULL
     * leaves one as is. */
    int (*project_update)(brig_store_conn *c, const char *id, const char *name, const char *egress,
                          const char *isolation, brig_error **err);

    /* -- keys */
    /* Stores an API key (account_id, project_id, scope, hash) created at `at`. */
    int (*key_insert)(brig_store_conn *c, const brig_key_row *k, int64_t at, brig_error **err);
    /* The key whose hash this is: an API key not revoked, or an operator key.
     * 1 and *out, or 0 when there is none. */
    int (*key_lookup)(brig_store_conn *c, const char *hash, brig_key_row *out, brig_error **err);
    /* Revokes key_id of project_id at `at`: 1, or 0 when the project has no such
     * key not revoked yet. */
    int (*key_revoke)(brig_store_conn *c, const char *project_id, const char *key_id, int64_t at,
                      brig_error **err);
    /* Calls fn for each API key of project_id, oldest first (fn must not use the store). */
    int (*key_each)(brig_store_conn *c, const char *project_id,
                    void (*fn)(const brig_key_listed *, void *), void *ctx, brig_error **err);
    /* How many API keys are not revoked, and how many operator keys there are. */
    int (*key_counts)(brig_store_conn *c, int64_t *api_keys, int64_t *operator_keys,
                      brig_error **err);
    int (*operator_key_insert)(brig_store_conn *c, const char *id, const char *hash, int64_t at,
                               brig_error **err);

    /* -- the ledger (append-only) and balances */
    /* Credits amount (> 0) to the account at `at`: appends the credit and raises
     * the balance together.  0 and *balance = the new balance; 1 when it would
     * leave [-BRIG_MONEY_MAX, BRIG_MONEY_MAX] (core/money.h), nothing written and
     * *balance = the balance as it is; -1 with BRIG_E_NOT_FOUND for no account. */
    int (*ledger_credit)(brig_store_conn *c, const char *account_id, int64_t amount,
                         const char *note, int64_t at, int64_t *balance, brig_error **err);
    /* Charges a sandbox at `at`, in one transaction: reads its billing state and
     * its account's balance, asks plan what to write, and writes the ledger row,
     * the balance and the sandbox's cost and billed_ms together.  *balance (may be
     * NULL) = the balance afterwards; BRIG_E_NOT_FOUND for no sandbox. */
    int (*ledger_charge)(brig_store_conn *c, const char *sandbox_id, int64_t at,
                         brig_charge_plan_fn plan, void *ctx, int64_t *balance, brig_error **err);
    /* *out = the sum of the account's charges in [from, to). */
    int (*ledger_spent)(brig_store_conn *c, const char *account_id, int64_t from, int64_t to,
                        int64_t *out, brig_error **err);
    /* The account's ledger rows with seq < before (0: from the newest), newest first, at most
     * max of them, into rows[] (the caller's, max long); *n = how many. */
    int (*ledger_page)(brig_store_conn *c, const char *account_id, int64_t before, int max,
                       brig_ledger_row *rows, int *n, brig_error **err);

    /* -- secrets (sealed by the vault; the store never sees a plaintext) */
    /* Stores s at `at`, replacing the owner's secret of that name. */
    int (*secret_put)(brig_store_conn *c, const brig_secret_row *s, int64_t at, brig_error **err);
    /* Calls fn for each secret of owner, by name; the row is lent for the call, and
     * fn runs while the store is held: it must not call the store.  A non-zero
     * return from fn stops early. */
    int (*secret_each)(brig_store_conn *c, const char *owner,
                       int (*fn)(const brig_secret_row *, void *), void *ctx, brig_error **err);
    /* How many secrets owner has, and the bytes of their boxes in all. */
    int (*secret_totals)(brig_store_conn *c, const char *owner, int64_t *count, int64_t *box_bytes,
                         brig_error **err);
    /* 1 when owner's secret `name` was deleted, 0 when there was none. */
    int (*secret_delete)(brig_store_conn *c, const char *owner, const char *name, brig_error **err);
    /* Deletes every secret of owner. */
    int (*secret_delete_all)(brig_store_conn *c, const char *owner, brig_error **err);

    /* -- sandboxes (never deleted: they reach a final state, deleted or failed) */
    int (*sandbox_insert)(brig_store_conn *c, const brig_sandbox_row *row, brig_error **err);
    /* Sets state (and reason, when not NULL); `deleted` and `failed` also stamp
     * deleted_at = now. */
    int (*sandbox_set_state)(brig_store_conn *c, const char *id, const char *state,
                             const char *reason, int64_t now, brig_error **err);
    /* One sandbox, whatever its state: 1 and *out (its env_json left NULL), or 0. */
    int (*sandbox_get)(brig_store_conn *c, const char *id, brig_sandbox_row *out, brig_error **err);
    int (*sandbox_set_expiry)(brig_store_conn *c, const char *id, int64_t expires_at,
                              brig_error **err);
    /* Calls fn for every sandbox not in a final state, oldest first, with its env_json
     * and reason (the row is lent for the call; fn may use the store). */
    int (*sandbox_each_live)(brig_store_conn *c, void (*fn)(const brig_sandbox_row *, void *),
                             void *ctx, brig_error **err);
    /* Up to max sandboxes in a final state that match q, the last ended first (equal
     * times: by id, descending), into rows (env_json NULL); *n = how many. */
    int (*sandbox_ended)(brig_store_conn *c, const brig_ended_query *q, brig_sandbox_row *rows,
                         int max, int *n, brig_error **err);
    /* *n = how many sandboxes of the account ended for `reason`. */
    int (*sandbox_count_reason)(brig_store_conn *c, const char *account_id, const char *reason,
                                int64_t *n, brig_error **err);
    /* -- black boxes: an ended sandbox's last minute of usage samples (sandbox/usage.h),
     * kept for the retention period */
    /* Stores sandbox_id's black box (data: text in the caller's format), ended at `at`;
     * replaces the one it had. */
    int (*blackbox_put)(brig_store_conn *c, const char *sandbox_id, int64_t at, const char *data,
                        brig_error **err);
    /* 1, *data (malloc'd: the caller frees it) and *at, or 0 when it has none. */
    int (*blackbox_get)(brig_store_conn *c, const char *sandbox_id, char **data, int64_t *at,
                        brig_error **err);
    /* Deletes the black boxes that ended before `before`; *pruned = how many. */
    int (*blackbox_prune)(brig_store_conn *c, int64_t before, int64_t *pruned, brig_error **err);
    /* -- snapshots */
    int (*snapshot_insert)(brig_store_conn *c, const brig_snapshot_row *s, brig_error **err);
    /* account_id's live snapshot id: 1 and *out, or 0. */
    int (*snapshot_get)(brig_store_conn *c, const char *account_id, const char *id,
                        brig_snapshot_row *out, brig_error **err);
    /* Calls fn for each live snapshot of account_id and project_id (either NULL: any), oldest
     * first (the row is lent for the call; fn may use the store). */
    int (*snapshot_each)(brig_store_conn *c, const char *account_id, const char *project_id,
                         void (*fn)(const brig_snapshot_row *, void *), void *ctx,
                         brig_error **err);
    /* Marks the live snapshot id deleted at `at`: 1, or 0 when there is none. */
    int (*snapshot_delete)(brig_store_conn *c, const char *id, int64_t at, brig_error **err);
    /* -- volumes */
    /* A new volume (cost 0, billed from created_at): 1, or 0 when its project has a live
     * volume of that name (nothing written). */
    int (*volume_insert)(brig_store_conn *c, const brig_volume_row *v, brig_error **err);
    /* The live volume of project_id whose name, or id, is `name`: 1 and *out, or 0. */
    int (*volume_get)(brig_store_conn *c, const char *project_id, const char *name,
                      brig_volume_row *out, brig_error **err);
    /* Calls fn for each live volume of account_id and project_id (either NULL: any),
     * oldest first (the row is lent for the call; fn may use the store). */
    int (*volume_each)(brig_store_conn *c, const char *account_id, const char *project_id,
                       void (*fn)(const brig_volume_row *, void *), void *ctx, brig_error **err);
    /* Marks the live volume id deleted at `at`: 1, or 0 when there is none. */
    int (*volume_delete)(brig_store_conn *c, const char *id, int64_t at, brig_error **err);
    /* Charges volume id (live or not) at `at`, in one transaction, as ledger_charge does a
     * sandbox: reads its billing state and its account's balance, asks plan, writes
     * what the plan says (brig_volume_charge).  *balance (may be NULL) = the balance
     * afterwards; BRIG_E_NOT_FOUND for no volume. */
    int (*volume_charge)(brig_store_conn *c, const char *id, int64_t at, brig_volume_plan_fn plan,
                         void *ctx, int64_t *balance, brig_error **err);
    /* Records that a sandbox mounts a volume. */
    int (*volume_mount_insert)(brig_store_conn *c, const brig_volume_mount_row *m,
                               brig_error **err);
    /* Forgets every volume sandbox_id mounts. */
    int (*volume_mount_delete)(brig_store_conn *c, const char *sandbox_id, brig_error **err);
    /* Calls fn for every row (lent for the call; fn may use the store). */
    int (*volume_mount_each)(brig_store_conn *c, void (*fn)(const brig_volume_mount_row *, void *),
                             void *ctx, brig_error **err);
    /* -- templates declared by users */
    /* Writes the account's template name:tag (a new one, or replacing the one of that
     * name and tag). */
    int (*utpl_put)(brig_store_conn *c, const brig_utpl_row *t, brig_error **err);
    /* The account's template name:tag: 1 and *out (its spec and log malloc'd: the caller
     * frees them), or 0. */
    int (*utpl_get)(brig_store_conn *c, const char *account_id, const char *name, const char *tag,
                    brig_utpl_row *out, brig_error **err);
    /* Calls fn for each template of account_id (NULL: every account's), by name and tag
     * (lent for the call, without spec and log; fn may use the store). */
    int (*utpl_each)(brig_store_conn *c, const char *account_id,
                     void (*fn)(const brig_utpl_row *, void *), void *ctx, brig_error **err);
    /* Deletes the account's template name:tag: 1, or 0 when there is none. */
    int (*utpl_delete)(brig_store_conn *c, const char *account_id, const char *name,
                       const char *tag, brig_error **err);
    /* -- the audit timeline (append-only but for the janitor's prune) */
    /* The account's chain: 1 and *out, or 0 when it has no record yet. */
    int (*audit_chain)(brig_store_conn *c, const char *account_id, brig_audit_chain *out,
                       brig_error **err);
    /* Appends the n rows in one transaction (their seq are set), each account's head
     * moved to its last row. */
    int (*audit_append)(brig_store_conn *c, brig_audit_row *rows, size_t n, brig_error **err);
    /* Calls fn for each record q selects (the row is lent for the call; fn runs while
     * the store is held: it must not call the store); a non-zero return stops early. */
    int (*audit_each)(brig_store_conn *c, const brig_audit_query *q,
                      int (*fn)(const brig_audit_row *, void *), void *ctx, brig_error **err);
    /* Calls fn for every account's chain (lent; fn must not call the store). */
    int (*audit_chains)(brig_store_conn *c, void (*fn)(const brig_audit_chain *, void *), void *ctx,
                        brig_error **err);
    /* Deletes every account's records up to its last one older than `before`, in one
     * transaction per account, and moves its checkpoint to the first record kept (its
     * n and prev; past the head when none is kept).  *pruned = records deleted. */
    int (*audit_prune)(brig_store_conn *c, int64_t before, int64_t *pruned, brig_error **err);
    /* -- credential injection rules */
    /* Replaces project_id's rules (JSON text, the caller's format). */
    int (*injections_put)(brig_store_conn *c, const char *project_id, const char *rules,
                          brig_error **err);
    /* 1 and *rules (malloc'd: the caller frees it), or 0 when the project has none. */
    int (*injections_get)(brig_store_conn *c, const char *project_id, char **rules,
                          brig_error **err);
    /* -- E2B sandbox records (api/e2b_rec.c) */
    /* Replaces sandbox_id's record (JSON text, the caller's format). */
    int (*e2b_put)(brig_store_conn *c, const char *sandbox_id, const char *record,
                   brig_error **err);
    /* 1 and *record (malloc'd: the caller frees it), or 0 when the sandbox has none. */
    int (*e2b_get)(brig_store_conn *c, const char *sandbox_id, char **record, brig_error **err);
    /* Deletes sandbox_id's record (none: done too). */
    int (*e2b_delete)(brig_store_conn *c, const char *sandbox_id, brig_error **err);
    /* Deletes the records of ended sandboxes; *pruned = how many. */
    int (*e2b_prune)(brig_store_conn *c, int64_t *pruned, brig_error **err);
} brig_store_ops;

#endif
