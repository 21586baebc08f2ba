/*
 * registry.h - the one owner of live sandboxes.
 *
 * A sandbox is in the registry ("listed") from the moment its row is written until it
 * has ended: states creating -> running -> deleting, then deleted (in the store), or
 * creating -> failed.  struct brig_sandbox is opaque: what a sandbox is (its spec and
 * env) is fixed when it is made and read without a lock; its state, activity,
 * lifetime, network and cached redactor change under the registry's lock, through the
 * functions here only.  Nobody else walks the list or touches a reference count.
 *
 * Borrowing: API threads borrow a running sandbox (brig_sandbox_get / _put), which
 * counts as its use (the idle timeout starts again) and keeps its network; brigd's own
 * walks take a plain reference (brig_sandbox_ref / _unref, brig_registry_each_running).
 * The list holds one reference of its own, which passes to the teardown when the
 * sandbox leaves the list; the last reference frees it.  Callers only ever see
 * sandboxes their key may see (auth.h); any other id is "not found", exactly like one
 * that never existed.
 *
 * Also here: the uid ranges of user namespaces (one per sandbox, warm ones included),
 * and the creates counted against their account's concurrency limit before they are
 * listed (reservations).
 */
#ifndef BRIG_REGISTRY_H
#define BRIG_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "account/auth.h"
#include "core/id.h"
#include "error.h"
#include "net/net.h"
#include "runtime/runtime.h"
#include "server.h"
#include "vault/redact.h"

#define BRIG_UID_RANGE 65536

typedef enum brig_sb_state {
    BRIG_SB_CREATING,
    BRIG_SB_RUNNING,
    BRIG_SB_DELETING, /* ending: listed (and shown) as such until its row says deleted */
    BRIG_SB_DELETED,
    BRIG_SB_FAILED,
    BRIG_SB_PAUSED, /* every process stopped (pause.h); listed, not borrowable */
} brig_sb_state;

/* "creating", "running"...: the state as the API shows it and the store keeps it. */
const char *brig_sb_state_name(brig_sb_state s);
/* The state a store row names; -1 for a name that is none. */
int brig_sb_state_parse(const char *name);

/* What a sandbox is: fixed when it is made (create, or its row at reconcile). */
typedef struct brig_sandbox_spec {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char project_id[BRIG_ID_MAX];
    char template[64];
    char template_key[17];
    char tariff[32];
    int64_t memory_mib;      /* its tariff's memory limit, held in the host's admission */
    int64_t disk_mib;        /* its tariff's disk, held in the host's admission */
    int64_t created_at;      /* ms since the epoch */
    int64_t price;           /* micro-dollars per second, fixed at create */
    double vcpus;            /* its CPU quota (abuse detection) */
    int64_t uid_base;        /* its user namespace range (0: none held) */
    int64_t idle_timeout_ms; /* 0: none */
    bool pause_on_idle;      /* its idle timeout pauses it (pause.h), else deletes it */
    brig_isolation isolation;
    char workdir[256]; /* commands' default cwd (a user template's); "": the agent's */
    bool egress_none;  /* no egress, whatever its project's policy (attach.h) */
} brig_sandbox_spec;

/* A copy of a live sandbox, for views (view.c). */
typedef struct brig_sandbox_view {
    brig_sandbox_spec spec;
    brig_sb_state state;
    int64_t expires_at;    /* ms since the epoch; 0: never */
    char end_reason[32];   /* why it ends, once it is deleting; else "" */
    int64_t last_activity; /* ms since the epoch: its last API use */
    int64_t paused_at;     /* ms since the epoch: when it was paused (paused); else 0 */
    json_t *env_names;     /* ["NAME"] of its plain env (owned: brig_sandbox_view_dispose) */
} brig_sandbox_view;

/* The janitor's own marks on a sandbox: only the janitor's thread touches them. */
typedef struct brig_sandbox_marks {
    int64_t cpu_last_ns, cpu_last_at, cpu_busy_since, billed_at;
} brig_sandbox_marks;

/* A create counted against its account's concurrency limit before its sandbox is
 * listed (the caller's storage; see brig_registry_reserve). */
typedef struct brig_reservation {
    char account_id[BRIG_ID_MAX];
    struct brig_reservation *next;
} brig_reservation;

/* ---- the registry itself ---- */

/* Makes d->registry (uid ranges from d->cfg). */
void brig_registry_init(brigd *d);
/* Shutdown: forgets every sandbox without destroying it (the next start re-attaches
 * them), then frees the registry.  NULL registry: nothing. */
void brig_registry_free(brigd *d);

/* ---- making and listing ---- */

/* A new sandbox, not listed: state creating, one reference (the caller's), expiring at
 * expires_at (ms since the epoch; 0: never).  Takes env (an object of strings, or NULL;
 * immutable from now on). */
brig_sandbox *brig_sandbox_new(const brig_sandbox_spec *spec, int64_t expires_at, json_t *env);
/* Its runtime handle / network, set by whoever made it before it runs (create,
 * reconcile); read by borrowers. */
void brig_sandbox_set_runtime(brig_sandbox *sb, brig_rt_sandbox *rt);
void brig_sandbox_set_net(brig_sandbox *sb, brig_net_sandbox *net);

/* Lists a new sandbox: the list takes a reference of its own, and the caller's
 * becomes a use (an API request in flight) that ends with its brig_sandbox_put.  The
 * account's reservation res (may be NULL) ends: the list counts it from now on. */
void brig_registry_add(brigd *d, brig_sandbox *sb, brig_reservation *res);
/* from -> to; false (nothing changed) when it is not in state from.  To paused: its
 * paused_at is now; from paused: it is used now (its idle timeout starts again). */
bool brig_registry_set_state(brigd *d, brig_sandbox *sb, brig_sb_state from, brig_sb_state to);
/* Marks a running or paused sandbox the caller may see (c NULL: any) deleting and returns it,
 * for the one caller that ends it; NULL when there is none.  It stays listed (the
 * list's reference keeps it) until brig_registry_remove. */
brig_sandbox *brig_registry_take(brigd *d, const brig_caller *c, const char *id);
/* Records why a sandbox being ended ends (shown from now on). */
void brig_registry_set_reason(brigd *d, brig_sandbox *sb, const char *reason);
/* Unlists a sandbox in its final state; the list's reference is now the caller's. */
void brig_registry_remove(brigd *d, brig_sandbox *sb, brig_sb_state final);

/* ---- borrowing ---- */

/* Borrows a running sandbox the caller may see; BRIG_E_CONFLICT for a paused one
 * ("paused"), BRIG_E_NOT_FOUND otherwise.  Counts as use (it resets the idle timeout)
 * until brig_sandbox_put. */
int brig_sandbox_get(brigd *d, const brig_caller *c, const char *id, brig_sandbox **out,
                     brig_error **err);
void brig_sandbox_put(brigd *d, brig_sandbox *sb);
/* A plain reference to the listed sandbox id, whatever its state (no use: the idle
 * timeout does not see it), or NULL; brig_sandbox_unref gives it back. */
brig_sandbox *brig_registry_ref_id(brigd *d, const char *id);
/* Takes / drops a plain reference (no use): for brigd's own walks. */
void brig_sandbox_ref(brigd *d, brig_sandbox *sb);
void brig_sandbox_unref(brigd *d, brig_sandbox *sb);

enum {
    BRIG_EACH_USE = 1 << 0,        /* borrow as use (brig_sandbox_get), not a plain reference */
    BRIG_EACH_NETWORKED = 1 << 1,  /* only those with a network */
    BRIG_EACH_PAUSED = 1 << 2,     /* the paused ones instead of the running ones */
    BRIG_EACH_TOO_PAUSED = 1 << 3, /* the paused ones as well as the running ones */
};
/* Calls fn for every running sandbox (of project_id; NULL: all), outside the lock,
 * each borrowed for the call (flags: BRIG_EACH_*). */
void brig_registry_each_running(brigd *d, const char *project_id, int flags,
                                void (*fn)(brigd *d, brig_sandbox *sb, void *arg), void *arg);

/* ---- what it is (no lock: fixed, valid while the caller holds a reference) ---- */

const char *brig_sandbox_id(const brig_sandbox *sb);
const brig_sandbox_spec *brig_sandbox_spec_of(const brig_sandbox *sb);
const json_t *brig_sandbox_env(const brig_sandbox *sb);
/* Its runtime handle (NULL until started). */
brig_rt_sandbox *brig_sandbox_runtime(const brig_sandbox *sb);
/* Its network (NULL: none): valid while borrowed (brig_sandbox_get, BRIG_EACH_USE) or
 * for whoever made it, until it runs. */
brig_net_sandbox *brig_sandbox_net(const brig_sandbox *sb);
/* A number no other sandbox of this run has (1, 2, ...). */
uint64_t brig_sandbox_serial(const brig_sandbox *sb);
brig_sandbox_marks *brig_sandbox_marks_of(brig_sandbox *sb);
/* What brigd keeps of its commands until it saw them end (cmdends.h). */
struct brig_cmdends *brig_sandbox_cmdends(const brig_sandbox *sb);

/* ---- views and counts ---- */

/* A copy of the live sandbox id that the caller may see (c NULL: any); false when
 * there is none. */
bool brig_registry_view(brigd *d, const brig_caller *c, const char *id, brig_sandbox_view *out);
void brig_registry_view_of(brigd *d, const brig_sandbox *sb, brig_sandbox_view *out);
/* Copies of every live sandbox the caller may see, newest first (*n of them; each
 * disposed, the array freed by the caller). */
brig_sandbox_view *brig_registry_views(brigd *d, const brig_caller *c, size_t *n);
void brig_sandbox_view_dispose(brig_sandbox_view *v);
/* The id of the running sandbox with this serial number, into id; false when none. */
bool brig_registry_running_id(brigd *d, uint64_t serial, char id[BRIG_ID_MAX]);
/* The ids of every listed sandbox (*n of them; each and the array freed by the caller). */
char **brig_registry_ids(brigd *d, size_t *n);
/* Listed sandboxes: all of them / an account's. */
int brig_registry_size(brigd *d);
int brig_sandbox_count(brigd *d, const char *account_id);

/* ---- lifetime and activity ---- */

/* When it was paused (ms since the epoch); 0 when it is not paused. */
int64_t brig_sandbox_paused_at(brigd *d, brig_sandbox *sb);
/* Sets a running (or paused) sandbox's expiry (ms since the epoch), as use; false when the caller
 * may see no running sandbox of that id. */
bool brig_registry_set_expiry(brigd *d, const brig_caller *c, const char *id, int64_t until);
bool brig_sandbox_expired(brigd *d, brig_sandbox *sb, int64_t now);

/* The janitor's question to an idle sandbox's agent: does a command still run? */
enum { BRIG_PROBE_NONE, BRIG_PROBE_ASKING, BRIG_PROBE_BUSY, BRIG_PROBE_IDLE };
/* Records the probe's state (BRIG_PROBE_*); ASKING with the time it asks. */
void brig_sandbox_probe_set(brigd *d, brig_sandbox *sb, int probe, int64_t now);
/* Idle: no use for its idle timeout, no request in flight, and its agent said no
 * command runs (a probe asked after it became idle, with no use since).  Takes a
 * probe's answer: "busy" counts as use at the time it asked. */
enum { BRIG_IDLE_NO, BRIG_IDLE_ASK, BRIG_IDLE_YES };
int brig_sandbox_idle_check(brigd *d, brig_sandbox *sb, int64_t now);

/* The host was used just now (a pool claim: the claimer's requests follow at once). */
void brig_registry_touch(brigd *d);
/* How long from now (mono ms) until no sandbox request has run for quiet_ms (0: quiet
 * already). */
int64_t brig_registry_quiet_in(brigd *d, int64_t quiet_ms, int64_t now);

/* ---- its network's end ---- */

/* Removes a torn-down sandbox's network now, or, while a request still uses it, when
 * that request's brig_sandbox_put ends it.  destroyed: its runtime was destroyed (the
 * kernel took the link pair with the namespace; else the link is deleted). */
void brig_registry_drop_net(brigd *d, brig_sandbox *sb, bool destroyed);

/* ---- its secrets' redactor, built once (secrets.c) ---- */

/* true, with a new reference in *out (NULL: it has no secrets), once one was kept. */
bool brig_sandbox_redactor_cached(brigd *d, brig_sandbox *sb, brig_redactor **out);
/* true once a redactor was kept and it is none: the sandbox has no secrets (and never will). */
bool brig_sandbox_secretless(brigd *d, const brig_sandbox *sb);
/* Keeps r (taken) unless one was kept meanwhile; a new reference to the kept one in *out. */
void brig_sandbox_redactor_keep(brigd *d, brig_sandbox *sb, brig_redactor *r, brig_redactor **out);

/* ---- admission: concurrency and uid ranges ---- */

/* Checks the account's listed sandboxes and reserved creates against max_live and,
 * under the same hold of the lock, reserves one more (res, the caller's, until
 * brig_registry_add or _unreserve): N concurrent creates against a limit of L leave
 * exactly L. */
int brig_registry_reserve(brigd *d, const char *account_id, int64_t max_live, brig_reservation *res,
                          brig_error **err);
/* Ends a reservation (a no-op when it ended already). */
void brig_registry_unreserve(brigd *d, brig_reservation *res);

/* A free uid range for a sandbox (0 when all are taken) / returning one / marking one
 * (from the store) taken. */
int64_t brig_registry_uid_take(brigd *d);
void brig_registry_uid_release(brigd *d, int64_t base);
void brig_registry_uid_hold(brigd *d, int64_t base);

#endif
