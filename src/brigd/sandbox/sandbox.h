/*
 * sandbox.h - sandbox lifecycle: admission, create, look up, delete, reconcile.
 *
 * States: creating -> running -> deleting -> deleted (in the store), or
 * creating -> failed.  Live sandboxes (creating, running) are in brigd's list;
 * API threads borrow them with a reference (brig_sandbox_get / _put), so a
 * delete never frees a sandbox another thread is still using.  Callers only
 * ever see sandboxes their key may see (auth.h); any other id is "not found",
 * exactly like one that never existed.
 */
#ifndef BRIG_SANDBOX_H
#define BRIG_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "account/auth.h"
#include "error.h"
#include "core/id.h"
#include "net/net.h"
#include "server.h"

struct brig_sandbox {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char project_id[BRIG_ID_MAX];
    char template[64];
    char template_key[17];
    char tariff[32];
    int64_t memory_mib;    /* its tariff's memory limit, held in the host's admission */
    int64_t disk_mib;      /* its tariff's disk, held in the host's admission */
    int64_t created_at;    /* ms since the epoch */
    int64_t price;         /* micro-dollars per second, fixed at create */
    double vcpus;          /* its CPU quota (abuse detection) */
    int64_t uid_base;      /* its user namespace range (0: none held) */
    json_t *env;           /* plain environment of every command (owned; immutable) */
    brig_rt_sandbox *rt;   /* runtime handle once running */
    brig_net_sandbox *net; /* its network, when brigd has networking */
    int net_drop;          /* torn down while borrowed: the last borrower removes net
                              (1: release, 2: detach; see sandbox.c); brigd.lock */
    /* Guarded by brigd.lock: */
    const char *state;       /* static string */
    char end_reason[32];     /* why it ended, from the moment it is deleting */
    int refs;                /* list membership + borrowers */
    int64_t idle_timeout_ms; /* 0: none */
    int64_t expires_at;      /* ms since the epoch; 0: never */
    int64_t last_activity;   /* ms since the epoch: the last API use */
    int active_ops;          /* API requests using it right now */
    uint64_t watch_id;       /* its key in the watch on inits (0: not watched) */
    int probe;               /* the janitor's idle probe: BRIG_PROBE_* */
    int64_t probe_at;        /* ms since the epoch: when that probe asked */
    /* The janitor's own (only it touches these): */
    int64_t cpu_last_ns, cpu_last_at, cpu_busy_since, billed_at;
    struct brig_sandbox *next;
    /* Its teardown (brigd.teardown_lock while queued; then the worker's that took it): */
    struct brig_sandbox *teardown_next; /* in brigd's teardown queue */
    int64_t teardown_due;               /* mono ms: its next attempt */
    int teardown_checks;                /* attempts that found its processes alive */
    int teardown_fails;                 /* attempts whose cleanup left something behind */
    bool procs_gone;                    /* its processes are dead; its capacity was returned */
    /* Its secrets' redactor (redact.h; one reference), built at create, or at first use
     * after a restart, and kept: a sandbox's secrets never change.  NULL with
     * redactor_built: it has none.  Guarded by brigd.lock. */
    struct brig_redactor *redactor;
    bool redactor_built;
};

/* The janitor's question to an idle sandbox's agent: does a command still run? */
enum { BRIG_PROBE_NONE, BRIG_PROBE_ASKING, BRIG_PROBE_BUSY, BRIG_PROBE_IDLE };

typedef struct brig_sandbox_opts {
    const char *template;    /* NULL: the configured default */
    const char *tariff;      /* NULL: the configured default */
    const char *project_id;  /* NULL: the caller's project */
    json_t *env;             /* object of strings or NULL (borrowed) */
    json_t *secrets;         /* {"NAME": "value"} or NULL (borrowed) */
    json_t *secret_refs;     /* ["NAME"] of project secrets, or NULL (borrowed) */
    int64_t idle_timeout_ms; /* 0: the default */
    int64_t max_lifetime_ms; /* 0: the default */
} brig_sandbox_opts;

/* Admits (limits, host capacity) and creates a sandbox, waiting until it is
 * ready; returns its JSON. */
int brig_sandbox_create(brigd *d, const brig_caller *c, const brig_sandbox_opts *opts, json_t **out,
                        brig_error **err);

/* Borrows a running sandbox the caller may see; BRIG_E_NOT_FOUND otherwise.
 * Counts as activity (it resets the idle timeout) until brig_sandbox_put. */
int brig_sandbox_get(brigd *d, const brig_caller *c, const char *id, brig_sandbox **out,
                     brig_error **err);
void brig_sandbox_put(brigd *d, brig_sandbox *sb);
/* Takes / drops a plain reference (no activity): for brigd's own walks. */
void brig_sandbox_ref(brigd *d, brig_sandbox *sb);
void brig_sandbox_unref(brigd *d, brig_sandbox *sb);

/* The sandbox's secrets, decrypted, in *out ({"NAME": "value"}, or NULL when
 * it has none): the caller releases them with brig_vault_wipe as soon as
 * possible.  -1 when they exist but do not open (another master key): what
 * needs them (a command's env, the redaction of output) must not go on. */
int brig_sandbox_secrets(brigd *d, const brig_sandbox *sb, json_t **out, brig_error **err);

/* The redactor of the sandbox's secrets (redact.h): a new reference in *out
 * (brig_redactor_free it), or NULL when it has none.  Built once per sandbox.
 * -1 like brig_sandbox_secrets when they do not open: output must not go out. */
int brig_sandbox_redactor(brigd *d, brig_sandbox *sb, struct brig_redactor **out, brig_error **err);

/* The environment of a command: the sandbox's env, then its secrets, then the
 * request's own (any may be NULL); a new object (holding secret values: wipe
 * it), or NULL when all are empty. */
json_t *brig_sandbox_command_env(const brig_sandbox *sb, json_t *secrets, json_t *request_env);

/* Connects a started sandbox (id, rt) to the network under policy and writes its
 * /etc/resolv.conf; on failure nothing of it stays on the host side. */
int brig_sandbox_net_attach(brigd *d, const char *id, brig_rt_sandbox *rt,
                            const brig_egress *policy, brig_net_sandbox **out, brig_error **err);

/* Opens an agent connection to a borrowed sandbox (the caller closes it). */
int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err);

/* Ending a sandbox: its processes are sent SIGKILL, its final charge made and its
 * row marked deleted at once; the host-side cleanup (runtime, cgroups, mounts,
 * disk, link) follows on the teardown workers, retried with backoff until it
 * succeeds.  Its capacity slot is returned once its processes are dead, its uid
 * range once nothing of it is left. */
int brig_sandbox_teardown_start(brigd *d, brig_error **err);
/* Waits up to timeout_ms until every queued teardown is done; returns how many
 * are not. */
int brig_sandbox_teardown_drain(brigd *d, int64_t timeout_ms);
/* One last attempt for each queued teardown (what still fails is left for the
 * next start's reconcile), then ends the workers (shutdown). */
void brig_sandbox_teardown_stop(brigd *d);

/* The watch on running sandboxes' inits: an agent that dies while its sandbox
 * runs ends the sandbox at once with reason agent_lost.  Start before
 * reconcile (re-attached sandboxes are watched), stop before forgetting them. */
int brig_sandbox_watch_start(brigd *d, brig_error **err);
void brig_sandbox_watch_stop(brigd *d);

/* Deletes a sandbox the caller may see (reason: "deleted_by_api"...). */
int brig_sandbox_delete(brigd *d, const brig_caller *c, const char *id, const char *reason,
                        brig_error **err);
/* Same, by id, for brigd itself (the janitor). */
int brig_sandbox_stop(brigd *d, const char *id, const char *reason);
/* A request whose agent connection failed (*err: a protocol or internal error)
 * because the sandbox ended meanwhile: *err becomes a conflict that says so. */
void brig_sandbox_explain_end(brigd *d, const brig_caller *c, const char *id, brig_error **err);

/* The API's view of a live sandbox. */
json_t *brig_sandbox_json(brigd *d, const brig_sandbox *sb);

/* One sandbox (live, or ended within the retention period) / the live ones. */
int brig_sandbox_info(brigd *d, const brig_caller *c, const char *id, json_t **out,
                      brig_error **err);
json_t *brig_sandbox_list(brigd *d, const brig_caller *c);
int brig_sandbox_count(brigd *d, const char *account_id);

/* Extends a sandbox's lifetime to now + ms (within the server maximum). */
int brig_sandbox_set_timeout(brigd *d, const brig_caller *c, const char *id, int64_t ms,
                             json_t **out, brig_error **err);

/* Applies a project's new egress policy to its running sandboxes. */
void brig_sandbox_apply_policy(brigd *d, const char *project_id, const brig_egress *policy);
/* The network log of a sandbox. */
int brig_sandbox_network_log(brigd *d, const brig_caller *c, const char *id, json_t **out,
                             brig_error **err);

#define BRIG_UID_RANGE 65536

/* A free uid range for a sandbox (0 when all are taken) / returning one. */
int64_t brig_sandbox_uid_take(brigd *d);
void brig_sandbox_uid_release(brigd *d, int64_t base);

/* Start-up: re-attaches live sandboxes of a previous run and destroys everything
 * else the runtime still holds.  Never fails start-up for one bad sandbox. */
void brig_sandbox_reconcile(brigd *d);

/* Shutdown: forgets every sandbox without destroying it (the next start
 * re-attaches them). */
void brig_sandbox_forget_all(brigd *d);

/* "2026-12-01T10:00:00.123Z" */
void brig_format_time(int64_t ms, char out[32]);

#endif
