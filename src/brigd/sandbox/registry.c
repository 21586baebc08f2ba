/*
 * registry.c - the one owner of live sandboxes (see registry.h).
 *
 * One lock guards the list, the reservations, the uid flags, the count of requests in
 * flight and every sandbox's changing fields.  It is never held while talking to a
 * sandbox, the runtime, the network or the store: what has to happen outside it
 * (removing a network, freeing a sandbox) is taken out under it and done after.
 */
#include "registry.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "account/billing.h"
#include "cmdends.h"
#include "util.h"

struct brig_sandbox {
    brig_sandbox_spec spec; /* fixed */
    json_t *env;            /* plain environment of every command (owned; fixed) */
    brig_rt_sandbox *rt;    /* runtime handle, set before it runs (then fixed) */
    uint64_t serial;        /* given when it is listed (then fixed) */
    /* Guarded by the registry's lock: */
    brig_net_sandbox *net; /* its network, when brigd has networking */
    int net_drop;          /* torn down while in use: the last user removes net
                              (1: release, 2: detach; see brig_registry_drop_net) */
    brig_sb_state state;
    char end_reason[32];   /* why it ended, from the moment it is deleting */
    int refs;              /* the list's + borrowers' + the teardown's */
    int active_ops;        /* API requests using it right now */
    int64_t expires_at;    /* ms since the epoch; 0: never */
    int64_t last_activity; /* ms since the epoch: the last API use */
    int64_t paused_at;     /* ms since the epoch: when it was paused; 0: not paused */
    int probe;             /* the janitor's idle probe: BRIG_PROBE_* */
    int64_t probe_at;      /* ms since the epoch: when that probe asked */
    /* Its secrets' redactor (one reference), built at create, or at first use after a
     * restart, and kept: a sandbox's secrets never change.  NULL with redactor_built:
     * it has none. */
    struct brig_redactor *redactor;
    bool redactor_built;
    brig_sandbox_marks marks; /* the janitor's (its thread only, no lock) */
    brig_cmdends *cmdends;    /* its commands until their end is seen (its own lock) */
    struct brig_sandbox *next;
};

struct brig_registry {
    pthread_mutex_t lock;
    brig_sandbox *head;          /* listed sandboxes, newest first */
    int n;                       /* how many */
    brig_reservation *reserving; /* creates counted against their account, not listed yet */
    int ops_inflight;            /* API requests using a sandbox right now (creates included) */
    int64_t ops_idle_since;      /* mono ms: when the last of them ended (or a pool claim) */
    uint8_t *uid_used;           /* range i (uid_base + i * BRIG_UID_RANGE) taken */
    int64_t uid_base, uid_ranges;
    uint64_t serial; /* the last serial number given */
};

#define LOCK(d)   pthread_mutex_lock(&(d)->registry->lock)
#define UNLOCK(d) pthread_mutex_unlock(&(d)->registry->lock)

static const char *const state_names[] = {"creating", "running", "deleting",
                                          "deleted",  "failed",  "paused"};

const char *brig_sb_state_name(brig_sb_state s)
{
    return (unsigned)s < BRIG_ARRAY_LEN(state_names) ? state_names[s] : "?";
}

int brig_sb_state_parse(const char *name)
{
    for (size_t i = 0; i < BRIG_ARRAY_LEN(state_names); i++)
        if (strcmp(state_names[i], name) == 0)
            return (int)i;
    return -1;
}

void brig_registry_init(brigd *d)
{
    brig_registry *r = brig_xcalloc(1, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    r->uid_base = d->cfg.uid_base;
    r->uid_ranges = d->cfg.uid_ranges;
    r->uid_used = brig_xcalloc((size_t)r->uid_ranges, 1);
    d->registry = r;
}

static void sandbox_free(brigd *d, brig_sandbox *sb)
{
    if (sb->rt)
        d->rt->ops->release(d->rt, sb->rt);
    json_decref(sb->env);
    brig_redactor_free(sb->redactor);
    brig_cmdends_free(sb->cmdends);
    free(sb);
}

void brig_registry_free(brigd *d)
{
    brig_registry *r = d->registry;
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    brig_sandbox *list = r->head;
    r->head = NULL;
    r->n = 0;
    pthread_mutex_unlock(&r->lock);
    while (list) {
        brig_sandbox *next = list->next;
        if (list->net)
            brig_net_forget(d->net, list->net);
        sandbox_free(d, list);
        list = next;
    }
    pthread_mutex_destroy(&r->lock);
    free(r->uid_used);
    free(r);
    d->registry = NULL;
}

/* ---- making and listing ------------------------------------------------------------ */

brig_sandbox *brig_sandbox_new(const brig_sandbox_spec *spec, int64_t expires_at, json_t *env)
{
    brig_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    sb->spec = *spec;
    sb->env = env;
    sb->state = BRIG_SB_CREATING;
    sb->refs = 1;
    sb->expires_at = expires_at;
    sb->last_activity = brig_now_real_ms();
    sb->cmdends = brig_cmdends_new();
    return sb;
}

void brig_sandbox_set_runtime(brig_sandbox *sb, brig_rt_sandbox *rt)
{
    sb->rt = rt;
}

void brig_sandbox_set_net(brig_sandbox *sb, brig_net_sandbox *net)
{
    sb->net = net;
}

/* Takes res off the reservations (a no-op when it is not on them).  Needs the lock. */
static void unreserve_locked(brig_registry *r, brig_reservation *res)
{
    for (brig_reservation **pp = &r->reserving; *pp; pp = &(*pp)->next)
        if (*pp == res) {
            *pp = res->next;
            return;
        }
}

void brig_registry_add(brigd *d, brig_sandbox *sb, brig_reservation *res)
{
    brig_registry *r = d->registry;
    LOCK(d);
    sb->serial = ++r->serial;
    sb->next = r->head;
    r->head = sb;
    r->n++;
    sb->refs++;       /* the list's */
    sb->active_ops++; /* the caller's, until its brig_sandbox_put */
    r->ops_inflight++;
    if (res)
        unreserve_locked(r, res); /* the list counts it from now on */
    UNLOCK(d);
}

bool brig_registry_set_state(brigd *d, brig_sandbox *sb, brig_sb_state from, brig_sb_state to)
{
    LOCK(d);
    bool ok = sb->state == from;
    if (ok) {
        sb->state = to;
        if (to == BRIG_SB_PAUSED || from == BRIG_SB_PAUSED)
            sb->last_activity = brig_now_real_ms();
        sb->paused_at = to == BRIG_SB_PAUSED ? sb->last_activity : 0;
    }
    UNLOCK(d);
    return ok;
}

/* Finds a listed sandbox the caller may see (any state).  Needs the lock. */
static brig_sandbox *find_locked(brigd *d, const brig_caller *c, const char *id)
{
    for (brig_sandbox *sb = d->registry->head; sb; sb = sb->next)
        if (strcmp(sb->spec.id, id) == 0 &&
            (c == NULL || brig_caller_sees(c, sb->spec.account_id, sb->spec.project_id)))
            return sb;
    return NULL;
}

brig_sandbox *brig_registry_take(brigd *d, const brig_caller *c, const char *id)
{
    LOCK(d);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb && (sb->state == BRIG_SB_RUNNING || sb->state == BRIG_SB_PAUSED))
        sb->state = BRIG_SB_DELETING;
    else
        sb = NULL;
    UNLOCK(d);
    return sb;
}

void brig_registry_set_reason(brigd *d, brig_sandbox *sb, const char *reason)
{
    LOCK(d);
    snprintf(sb->end_reason, sizeof(sb->end_reason), "%s", reason);
    UNLOCK(d);
}

void brig_registry_remove(brigd *d, brig_sandbox *sb, brig_sb_state final)
{
    brig_registry *r = d->registry;
    LOCK(d);
    sb->state = final;
    for (brig_sandbox **pp = &r->head; *pp; pp = &(*pp)->next) {
        if (*pp == sb) {
            *pp = sb->next;
            sb->next = NULL;
            r->n--;
            break;
        }
    }
    UNLOCK(d);
}

/* ---- borrowing ----------------------------------------------------------------------- */

/* Removes a torn-down sandbox's network: how = 1 after its runtime was destroyed (the
 * kernel takes the link pair with the namespace), 2 when that failed (we delete the
 * link). */
static void net_drop(brigd *d, brig_net_sandbox *net, int how)
{
    if (net == NULL)
        return;
    if (how == 1)
        brig_net_release(d->net, net);
    else
        brig_net_detach(d->net, net);
}

int brig_sandbox_get(brigd *d, const brig_caller *c, const char *id, brig_sandbox **out,
                     brig_error **err)
{
    brig_registry *r = d->registry;
    LOCK(d);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb && sb->state == BRIG_SB_RUNNING) {
        sb->refs++;
        sb->active_ops++;
        r->ops_inflight++;
        sb->last_activity = brig_now_real_ms();
        UNLOCK(d);
        *out = sb;
        return 0;
    }
    bool paused = sb && sb->state == BRIG_SB_PAUSED;
    UNLOCK(d);
    if (paused)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "sandbox '%.40s' is paused: resume it first (POST "
                              "/v1/sandboxes/%.40s/resume)",
                              id, id);
    /* Same answer for "never existed" and "someone else's": ids leak nothing. */
    return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
}

void brig_sandbox_put(brigd *d, brig_sandbox *sb)
{
    if (sb == NULL)
        return;
    brig_registry *r = d->registry;
    LOCK(d);
    if (--r->ops_inflight == 0)
        r->ops_idle_since = brig_now_mono_ms();
    brig_net_sandbox *net = NULL;
    int how = sb->net_drop;
    if (--sb->active_ops == 0 && how) { /* the last user of a torn-down one */
        net = sb->net;
        sb->net = NULL;
        sb->net_drop = 0;
    }
    sb->last_activity = brig_now_real_ms();
    bool dead = --sb->refs == 0;
    UNLOCK(d);
    net_drop(d, net, how);
    if (dead)
        sandbox_free(d, sb);
}

brig_sandbox *brig_registry_ref_id(brigd *d, const char *id)
{
    LOCK(d);
    brig_sandbox *sb = find_locked(d, NULL, id);
    if (sb)
        sb->refs++;
    UNLOCK(d);
    return sb;
}

void brig_sandbox_ref(brigd *d, brig_sandbox *sb)
{
    LOCK(d);
    sb->refs++;
    UNLOCK(d);
}

void brig_sandbox_unref(brigd *d, brig_sandbox *sb)
{
    LOCK(d);
    bool dead = --sb->refs == 0;
    UNLOCK(d);
    if (dead)
        sandbox_free(d, sb);
}

void brig_registry_each_running(brigd *d, const char *project_id, int flags,
                                void (*fn)(brigd *d, brig_sandbox *sb, void *arg), void *arg)
{
    brig_registry *r = d->registry;
    brig_sandbox **list = NULL;
    size_t n = 0;
    LOCK(d);
    for (brig_sandbox *sb = r->head; sb; sb = sb->next) {
        brig_sb_state want = (flags & BRIG_EACH_PAUSED) ? BRIG_SB_PAUSED : BRIG_SB_RUNNING;
        bool too = (flags & BRIG_EACH_TOO_PAUSED) && sb->state == BRIG_SB_PAUSED;
        if ((sb->state != want && !too) ||
            (project_id && strcmp(sb->spec.project_id, project_id) != 0) ||
            ((flags & BRIG_EACH_NETWORKED) && sb->net == NULL))
            continue;
        sb->refs++;
        if (flags & BRIG_EACH_USE) {
            sb->active_ops++;
            r->ops_inflight++;
        }
        list = brig_xrealloc(list, (n + 1) * sizeof(*list));
        list[n++] = sb;
    }
    UNLOCK(d);
    for (size_t i = 0; i < n; i++) {
        fn(d, list[i], arg);
        if (flags & BRIG_EACH_USE)
            brig_sandbox_put(d, list[i]);
        else
            brig_sandbox_unref(d, list[i]);
    }
    free(list);
}

/* ---- what it is ---------------------------------------------------------------------- */

const char *brig_sandbox_id(const brig_sandbox *sb)
{
    return sb->spec.id;
}

const brig_sandbox_spec *brig_sandbox_spec_of(const brig_sandbox *sb)
{
    return &sb->spec;
}

const json_t *brig_sandbox_env(const brig_sandbox *sb)
{
    return sb->env;
}

brig_rt_sandbox *brig_sandbox_runtime(const brig_sandbox *sb)
{
    return sb->rt;
}

brig_net_sandbox *brig_sandbox_net(const brig_sandbox *sb)
{
    return sb->net;
}

uint64_t brig_sandbox_serial(const brig_sandbox *sb)
{
    return sb->serial;
}

brig_sandbox_marks *brig_sandbox_marks_of(brig_sandbox *sb)
{
    return &sb->marks;
}

brig_cmdends *brig_sandbox_cmdends(const brig_sandbox *sb)
{
    return sb->cmdends;
}

/* ---- views and counts ---------------------------------------------------------------- */

/* Needs the lock. */
static void view_locked(const brig_sandbox *sb, brig_sandbox_view *out)
{
    out->spec = sb->spec;
    out->state = sb->state;
    out->expires_at = sb->expires_at;
    out->last_activity = sb->last_activity;
    out->paused_at = sb->paused_at;
    memcpy(out->end_reason, sb->end_reason, sizeof(out->end_reason));
    out->env_names = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(sb->env, k, v) json_array_append_new(out->env_names, json_string(k));
}

bool brig_registry_view(brigd *d, const brig_caller *c, const char *id, brig_sandbox_view *out)
{
    LOCK(d);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb)
        view_locked(sb, out);
    UNLOCK(d);
    return sb != NULL;
}

void brig_registry_view_of(brigd *d, const brig_sandbox *sb, brig_sandbox_view *out)
{
    LOCK(d);
    view_locked(sb, out);
    UNLOCK(d);
}

brig_sandbox_view *brig_registry_views(brigd *d, const brig_caller *c, size_t *n)
{
    brig_sandbox_view *v = NULL;
    *n = 0;
    LOCK(d);
    for (brig_sandbox *sb = d->registry->head; sb; sb = sb->next) {
        if (!brig_caller_sees(c, sb->spec.account_id, sb->spec.project_id))
            continue;
        v = brig_xrealloc(v, (*n + 1) * sizeof(*v));
        view_locked(sb, &v[(*n)++]);
    }
    UNLOCK(d);
    return v;
}

void brig_sandbox_view_dispose(brig_sandbox_view *v)
{
    json_decref(v->env_names);
    v->env_names = NULL;
}

bool brig_registry_running_id(brigd *d, uint64_t serial, char id[BRIG_ID_MAX])
{
    bool found = false;
    LOCK(d);
    for (brig_sandbox *sb = d->registry->head; sb && !found; sb = sb->next) {
        if (sb->serial == serial && sb->state == BRIG_SB_RUNNING) {
            snprintf(id, BRIG_ID_MAX, "%s", sb->spec.id);
            found = true;
        }
    }
    UNLOCK(d);
    return found;
}

char **brig_registry_ids(brigd *d, size_t *n)
{
    LOCK(d);
    char **ids = brig_xcalloc((size_t)d->registry->n + 1, sizeof(*ids));
    *n = 0;
    for (brig_sandbox *sb = d->registry->head; sb; sb = sb->next)
        ids[(*n)++] = brig_xstrdup(sb->spec.id);
    UNLOCK(d);
    return ids;
}

int brig_registry_size(brigd *d)
{
    LOCK(d);
    int n = d->registry->n;
    UNLOCK(d);
    return n;
}

int brig_sandbox_count(brigd *d, const char *account_id)
{
    if (d->registry == NULL)
        return 0;
    int n = 0;
    LOCK(d);
    for (brig_sandbox *sb = d->registry->head; sb; sb = sb->next)
        n += strcmp(sb->spec.account_id, account_id) == 0;
    UNLOCK(d);
    return n;
}

/* ---- lifetime and activity ----------------------------------------------------------- */

bool brig_registry_set_expiry(brigd *d, const brig_caller *c, const char *id, int64_t until)
{
    LOCK(d);
    brig_sandbox *sb = find_locked(d, c, id);
    bool ok = sb && (sb->state == BRIG_SB_RUNNING || sb->state == BRIG_SB_PAUSED);
    if (ok) {
        sb->expires_at = until;
        sb->last_activity = brig_now_real_ms();
    }
    UNLOCK(d);
    return ok;
}

int64_t brig_sandbox_paused_at(brigd *d, brig_sandbox *sb)
{
    LOCK(d);
    int64_t at = sb->paused_at;
    UNLOCK(d);
    return at;
}

bool brig_sandbox_expired(brigd *d, brig_sandbox *sb, int64_t now)
{
    LOCK(d);
    bool expired = sb->expires_at && now >= sb->expires_at;
    UNLOCK(d);
    return expired;
}

void brig_sandbox_probe_set(brigd *d, brig_sandbox *sb, int probe, int64_t now)
{
    LOCK(d);
    sb->probe = probe;
    if (probe == BRIG_PROBE_ASKING)
        sb->probe_at = now;
    UNLOCK(d);
}

int brig_sandbox_idle_check(brigd *d, brig_sandbox *sb, int64_t now)
{
    LOCK(d);
    bool quiet = sb->spec.idle_timeout_ms && sb->active_ops == 0 &&
                 now - sb->last_activity >= sb->spec.idle_timeout_ms;
    int answer = sb->probe;
    if (answer == BRIG_PROBE_BUSY || answer == BRIG_PROBE_IDLE)
        sb->probe = BRIG_PROBE_NONE; /* taken */
    if (answer == BRIG_PROBE_BUSY && sb->last_activity < sb->probe_at)
        sb->last_activity = sb->probe_at; /* busy is not idle */
    bool idle = quiet && answer == BRIG_PROBE_IDLE && sb->last_activity <= sb->probe_at;
    bool ask = quiet && answer == BRIG_PROBE_NONE;
    UNLOCK(d);
    return idle ? BRIG_IDLE_YES : ask ? BRIG_IDLE_ASK : BRIG_IDLE_NO;
}

void brig_registry_touch(brigd *d)
{
    LOCK(d);
    d->registry->ops_idle_since = brig_now_mono_ms();
    UNLOCK(d);
}

int64_t brig_registry_quiet_in(brigd *d, int64_t quiet_ms, int64_t now)
{
    brig_registry *r = d->registry;
    LOCK(d);
    int64_t left = r->ops_inflight > 0 ? quiet_ms : r->ops_idle_since + quiet_ms - now;
    UNLOCK(d);
    return left > 0 ? left : 0;
}

void brig_registry_drop_net(brigd *d, brig_sandbox *sb, bool destroyed)
{
    int how = destroyed ? 1 : 2;
    brig_net_sandbox *net = NULL;
    LOCK(d);
    if (sb->active_ops == 0) {
        net = sb->net;
        sb->net = NULL;
    } else if (sb->net) {
        sb->net_drop = how;
    }
    UNLOCK(d);
    net_drop(d, net, how);
}

/* ---- the redactor -------------------------------------------------------------------- */

bool brig_sandbox_redactor_cached(brigd *d, brig_sandbox *sb, brig_redactor **out)
{
    LOCK(d);
    bool built = sb->redactor_built;
    if (built)
        *out = brig_redactor_ref(sb->redactor);
    UNLOCK(d);
    return built;
}

bool brig_sandbox_secretless(brigd *d, const brig_sandbox *sb)
{
    LOCK(d);
    bool none = sb->redactor_built && sb->redactor == NULL;
    UNLOCK(d);
    return none;
}

void brig_sandbox_redactor_keep(brigd *d, brig_sandbox *sb, brig_redactor *r, brig_redactor **out)
{
    LOCK(d);
    if (!sb->redactor_built) {
        sb->redactor = r;
        sb->redactor_built = true;
        r = NULL;
    }
    *out = brig_redactor_ref(sb->redactor);
    UNLOCK(d);
    brig_redactor_free(r);
}

/* ---- admission: concurrency and uid ranges -------------------------------------------- */

/* The account's listed sandboxes and its creates not listed yet.  Needs the lock. */
static int64_t live_locked(brig_registry *r, const char *account_id)
{
    int64_t n = 0;
    for (brig_sandbox *sb = r->head; sb; sb = sb->next)
        n += strcmp(sb->spec.account_id, account_id) == 0;
    for (brig_reservation *res = r->reserving; res; res = res->next)
        n += strcmp(res->account_id, account_id) == 0;
    return n;
}

int brig_registry_reserve(brigd *d, const char *account_id, int64_t max_live, brig_reservation *res,
                          brig_error **err)
{
    brig_registry *r = d->registry;
    snprintf(res->account_id, sizeof(res->account_id), "%s", account_id);
    LOCK(d);
    int rc = brig_billing_live_check(live_locked(r, account_id), max_live, err);
    if (rc == 0) {
        res->next = r->reserving;
        r->reserving = res;
    }
    UNLOCK(d);
    return rc;
}

void brig_registry_unreserve(brigd *d, brig_reservation *res)
{
    LOCK(d);
    unreserve_locked(d->registry, res);
    UNLOCK(d);
}

int64_t brig_registry_uid_take(brigd *d)
{
    brig_registry *r = d->registry;
    int64_t base = 0;
    LOCK(d);
    for (int64_t i = 0; i < r->uid_ranges && base == 0; i++) {
        if (!r->uid_used[i]) {
            r->uid_used[i] = 1;
            base = r->uid_base + i * BRIG_UID_RANGE;
        }
    }
    UNLOCK(d);
    return base;
}

/* Marks a range (from the store) taken or free.  Needs the lock. */
static void uid_mark_locked(brig_registry *r, int64_t base, uint8_t used)
{
    int64_t i = (base - r->uid_base) / BRIG_UID_RANGE;
    if (base >= r->uid_base && i < r->uid_ranges && base == r->uid_base + i * BRIG_UID_RANGE)
        r->uid_used[i] = used;
}

void brig_registry_uid_release(brigd *d, int64_t base)
{
    LOCK(d);
    uid_mark_locked(d->registry, base, 0);
    UNLOCK(d);
}

void brig_registry_uid_hold(brigd *d, int64_t base)
{
    LOCK(d);
    uid_mark_locked(d->registry, base, 1);
    UNLOCK(d);
}
