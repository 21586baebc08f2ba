/*
 * orchestrator.c - a sandbox's life (see orchestrator.h).
 *
 * A create, in order, so that a failure or a crash at any point is cleaned up:
 *   resolve   its tariff (and the account's right to it), project and template;
 *   admit     limits: balance and spend, concurrency (reserved until it is listed), the
 *             disk reserve;
 *   reserve   host capacity (slot, memory, disk; may wait), then its id and uid range,
 *             or a warm sandbox's (the pool's; none for a sandbox with volumes); its
 *             volumes (one writer or many readers: volmounts.h);
 *   seal      its secrets, under its id; its redactor;
 *   record    its store row (creating); listed (the list counts it from now on);
 *   start     the runtime driver starts it (a warm one runs already; a gVisor one gets its
 *             network before it starts, under "none": net_first);
 *   attach    its network under its project's policy;
 *   activate  running: watched, its row, the answer.
 * From reserve on, a failure unwinds through retire(), as a delete does: secrets wiped,
 * row failed, unlisted, and the teardown returns what it holds.
 *
 * A delete: state deleting (no new borrowers; still listed) -> SIGKILL (in-flight
 * requests see their agent connection close) -> final charge -> retire() (secrets
 * wiped -> row deleted, with its reason -> unlisted -> teardown) -> the answer (a DELETE
 * waits up to 2 s for the processes to die; brigd's own stops do not wait).
 */
#include "orchestrator.h"

#include <string.h>
#include <sys/statvfs.h>

#include "account/billing.h"
#include "account/tenants.h"
#include "attach.h"
#include "core/format.h"
#include "ends.h"
#include "log.h"
#include "pool.h"
#include "registry.h"
#include "secrets.h"
#include "snapshots.h"
#include "spares.h"
#include "teardown.h"
#include "template.h"
#include "timeline.h"
#include "usage.h"
#include "usertpl.h"
#include "usertpl_start.h"
#include "util.h"
#include "vault/vault.h"
#include "view.h"
#include "watch.h"

#define DELETE_KILL_WAIT_MS 2000 /* how long a DELETE waits for the processes to die */

/* ---- ending ---------------------------------------------------------------------------- */

/* How every sandbox ends, deleted or failed at create: its secrets go, its row (when
 * stored) says how, it leaves the list (when listed), and the teardown takes the list's
 * reference (or, never listed, the creator's).  extra (taken; may be NULL): more of
 * its sandbox.ended event (an agent's last words). */
static void retire(brigd *d, brig_sandbox *sb, brig_sb_state final, const char *reason, bool stored,
                   bool listed, int64_t now, const brig_caller *c, json_t *extra)
{
    const char *id = brig_sandbox_id(sb);
    if (final == BRIG_SB_DELETED) /* counted; its usage's last sample, its black box */
        brig_usage_ended(d, sb, reason);
    const char *code = brig_end_code(reason, final == BRIG_SB_FAILED);
    if (stored) { /* before its secrets go: its redactor may still have to be built */
        brig_bg_ended_with(d, sb, code);
        json_t *ev = json_pack("{s:s, s:s, s:s}", "state", brig_sb_state_name(final), "reason",
                               reason, "end_reason", code);
        if (extra)
            json_object_update(ev, extra);
        brig_timeline_record(d, sb, c, "sandbox.ended", ev);
    }
    json_decref(extra);
    brig_vault_delete_all(d->store, id);
    if (stored)
        brig_store_sandbox_set_state(d->store, id, brig_sb_state_name(final), reason, now, NULL);
    if (listed)
        brig_registry_remove(d, sb, final);
    brig_teardown_begin(d, sb);
}

/* Ends a sandbox that brig_registry_take marked deleting.  What the caller is promised
 * happens before the answer: SIGKILL to every process (and up to wait_ms for them to
 * die: a process in uninterruptible sleep dies only when it wakes, and the teardown
 * waits for that, not the caller), the final charge, the secrets gone, the row
 * deleted.  The rest is the teardown's: a create or a delete should not wait ~20 ms
 * for runc, the kernel and the file system. */
static void finish(brigd *d, brig_sandbox *sb, const char *reason, int wait_ms,
                   const brig_caller *c, json_t *extra)
{
    brig_registry_set_reason(d, sb, reason);
    /* Stored too: should brigd die before the end is, the next start keeps the reason. */
    brig_store_sandbox_set_state(d->store, brig_sandbox_id(sb),
                                 brig_sb_state_name(BRIG_SB_DELETING), reason, brig_now_real_ms(),
                                 NULL);
    brig_rt_sandbox *rt = brig_sandbox_runtime(sb);
    if (brig_sandbox_paused_at(d, sb)) { /* frozen: killed, then thawed to die of it */
        d->rt->ops->kill(d->rt, rt, 0);
        d->rt->ops->resume(d->rt, rt, NULL);
    }
    d->rt->ops->kill(d->rt, rt, wait_ms);
    int64_t now = brig_now_real_ms();
    brig_error *err = NULL;
    if (brig_sandbox_paused_at(d, sb) && /* its paused time at the paused price */
        brig_billing_charge_paused(d, brig_sandbox_id(sb), now, false,
                                   brig_billing_paused_price(d, brig_sandbox_spec_of(sb)->disk_mib),
                                   NULL, &err) < 0) {
        brig_err("sandbox %s: paused charge: %s", brig_sandbox_id(sb), err->msg);
        brig_error_clear(&err);
    }
    if (brig_billing_charge(d, brig_sandbox_id(sb), now, true, NULL, &err) < 0) {
        brig_err("sandbox %s: final charge: %s", brig_sandbox_id(sb), err->msg);
        brig_error_clear(&err);
    }
    brig_info("sandbox %s: ended (%s)", brig_sandbox_id(sb), reason);
    retire(d, sb, BRIG_SB_DELETED, reason, true, true, now, c, extra);
}

int brig_sandbox_delete(brigd *d, const brig_caller *c, const char *id, const char *reason,
                        brig_error **err)
{
    brig_sandbox *sb = brig_registry_take(d, c, id);
    if (sb == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    finish(d, sb, reason, DELETE_KILL_WAIT_MS, c, NULL);
    return 0;
}

/* brigd's own stops (the janitor, the watch, --destroy-all) wait for nothing: the
 * janitor must never wait on a sandbox. */
static int stop(brigd *d, const char *id, const char *reason, json_t *extra)
{
    brig_sandbox *sb = brig_registry_take(d, NULL, id);
    if (sb == NULL) {
        json_decref(extra);
        return -1;
    }
    brig_warn("sandbox %s: stopping (%s)", id, reason);
    finish(d, sb, reason, 0, NULL, extra);
    return 0;
}

int brig_sandbox_stop(brigd *d, const char *id, const char *reason)
{
    return stop(d, id, reason, NULL);
}

/* Its agent died: killed by the OOM killer (the cgroup's count says so) or lost; what
 * it wrote last goes with its end (the timeline's sandbox.ended, the log). */
void brig_sandbox_agent_lost(brigd *d, const char *id)
{
    brig_sandbox *sb = brig_registry_ref_id(d, id);
    if (sb == NULL)
        return;
    char words[512];
    const char *why = brig_agent_death(d, sb, words, sizeof(words));
    brig_sandbox_unref(d, sb);
    json_t *extra = NULL;
    if (words[0]) {
        brig_warn("sandbox %s: its agent's last words: %s", id, words);
        json_t *w = json_string(words);
        extra = w ? json_pack("{s:o}", "last_words", w) : NULL;
    }
    stop(d, id, why, extra);
}

int brig_sandbox_set_timeout(brigd *d, const brig_caller *c, const char *id, int64_t ms,
                             json_t **out, brig_error **err)
{
    brig_sandbox_view v;
    bool listed = brig_registry_view(d, c, id, &v);
    if (listed)
        brig_sandbox_view_dispose(&v);
    if (!listed || (v.state != BRIG_SB_RUNNING && v.state != BRIG_SB_PAUSED))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    int64_t now = brig_now_real_ms(), until = now + ms;
    if (until - v.spec.created_at > d->cfg.lifetime_max_ms) {
        int64_t left = (v.spec.created_at + d->cfg.lifetime_max_ms - now) / 1000;
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a sandbox lives at most %lld s: this one can be extended by at "
                              "most %lld s from now",
                              (long long)(d->cfg.lifetime_max_ms / 1000),
                              (long long)(left > 0 ? left : 0));
    }
    if (!brig_registry_set_expiry(d, c, id, until)) /* it ended meanwhile */
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    brig_store_sandbox_set_expiry(d->store, id, until, NULL);
    brig_sandbox *sb = brig_registry_ref_id(d, id);
    if (sb) {
        char at[32];
        brig_format_time(until, at);
        brig_timeline_record(
            d, sb, c, "sandbox.timeout",
            json_pack("{s:I, s:s}", "timeout_ms", (json_int_t)ms, "expires_at", at));
        brig_sandbox_unref(d, sb);
    }
    return brig_sandbox_info(d, c, id, out, err);
}

/* ---- create: the steps ------------------------------------------------------------------ */

/* A create on its way, from resolve to activate. */
typedef struct create {
    brigd *d;
    const brig_caller *c;
    const brig_sandbox_opts *o;
    const brig_tariff *tariff;
    const char *project;
    brig_isolation iso;
    bool pause_on_idle;     /* what its idle timeout does: the create's, else its project's */
    brig_template t;        /* its template, looked up (disposed when the create ends) */
    brig_reservation res;   /* the account's concurrency, until it is listed */
    brig_sandbox *sb;       /* once host capacity is held: the creator's reference */
    int64_t expires_at;     /* ms since the epoch */
    bool stored, listed;    /* its row is written; it is in the registry */
    char *resolv;           /* gvisor: its /etc/resolv.conf, attached before start */
    int64_t t0;             /* mono ms: when it got its capacity */
    bool claimed;           /* a warm sandbox of the pool */
    bool builtin;           /* a template of templates_dir (the pool keeps only those) */
    int64_t begun;          /* mono ms: when the request came */
    brig_volset vols;       /* its volumes, resolved in its project (volmounts.h) */
    brig_snapshot_row snap; /* the snapshot it starts from (snap.id[0]: none) */
    brig_utpl_run run;      /* a user template's env, workdir, start command (usertpl.h) */
    const char *failed;     /* the step that failed, for an error that says no more */
} create;

/* rc of the create's step `name`, remembered when it failed. */
static int step(create *x, const char *name, int rc)
{
    if (rc < 0 && x->failed == NULL)
        x->failed = name;
    return rc;
}

/* Its volumes: an admin key's, of its project, mountable at their paths in its template
 * (volmounts.h). */
static int resolve_volumes(create *x, brig_error **err)
{
    if (x->o->volumes == NULL || x->o->volumes->n == 0)
        return 0;
    if (!brig_caller_is(x->c, "admin"))
        return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                              "a sandbox-scoped key cannot mount volumes (an admin key can)");
    x->vols = *x->o->volumes;
    return brig_volset_check_root(x->t.rootfs, &x->vols, err) < 0 ||
                   brig_volmounts_resolve(x->d, x->project, &x->vols, err) < 0
               ? -1
               : 0;
}

/* The snapshot it starts from (snapshots.h): the caller's, whose template it takes. */
static int resolve_snapshot(create *x, brig_error **err)
{
    if (x->o->snapshot == NULL)
        return 0;
    if (brig_snapshot_lookup(x->d, x->c, x->o->snapshot, &x->snap, err) < 0) {
        if ((*err)->kind == BRIG_E_NOT_FOUND)
            (*err)->kind = BRIG_E_INVALID;
        return -1;
    }
    if (x->o->template && strcmp(x->o->template, x->snap.template) != 0)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "snapshot %s is of template '%s', not '%.64s' (leave 'template' out)",
                              x->snap.id, x->snap.template, x->o->template);
    return 0;
}

/* A snapshot's layer lies on its template as built then, in a disk of its size. */
static int snapshot_fits(create *x, brig_error **err)
{
    if (!x->snap.id[0])
        return 0;
    if (strcmp(x->snap.template_key, x->t.key) != 0)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "template '%s' was rebuilt since snapshot %s was taken: its files "
                              "would lie on another template",
                              x->snap.template, x->snap.id);
    if (x->snap.disk_mib != x->tariff->disk_mib)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "snapshot %s has a %lld MiB disk; tariff '%s' has %lld MiB: use a "
                              "tariff with the same disk",
                              x->snap.id, (long long)x->snap.disk_mib, x->tariff->name,
                              (long long)x->tariff->disk_mib);
    return 0;
}

/* What the request names: the tariff (the account may use it), the project (the
 * caller's, or one of its account's for an admin key), the isolation (the project's
 * policy allows it, this host runs it), a built template. */
static int resolve(create *x, brig_error **err)
{
    brigd *d = x->d;
    const brig_caller *c = x->c;
    if (resolve_snapshot(x, err) < 0)
        return -1;
    const char *tname = x->snap.id[0]    ? x->snap.template
                        : x->o->template ? x->o->template
                                         : d->cfg.default_template;
    const char *tariff_name = x->o->tariff ? x->o->tariff : d->cfg.default_tariff;
    x->tariff = brig_config_tariff(&d->cfg, tariff_name);
    if (x->tariff == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "no tariff named '%.32s' (see GET /v1/tariffs)", tariff_name);
    if (brig_account_tariff_allowed(d, c->account_id, x->tariff->name, err) < 0)
        return -1;
    x->project = c->project_id;
    if (x->o->project_id) {
        json_t *p = NULL;
        if (!brig_caller_is(c, "admin") && strcmp(x->o->project_id, c->project_id) != 0)
            return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                                  "a sandbox-scoped key creates sandboxes in its own project only");
        if (brig_project_get(d, c, x->o->project_id, &p, err) < 0) {
            (*err)->kind = BRIG_E_INVALID;
            return -1;
        }
        json_decref(p);
        x->project = x->o->project_id;
    }
    /* The mode asked for, within the project's policy (or its default, or the
     * operator's), and never another than this host can run. */
    if (brig_project_isolation(d, x->project, x->o->isolation, &x->iso, err) < 0 ||
        brig_project_on_idle(d, x->project, x->o->on_idle, &x->pause_on_idle, err) < 0)
        return -1;
    if (d->rt->ops->available(d->rt, x->iso, err) < 0) {
        if (x->o->isolation == NULL) /* say why a mode nobody asked for */
            brig_error_prefix(err,
                              "no 'isolation' asked for, and the default here is %s (the "
                              "project's, or the operator's isolation_default)",
                              brig_isolation_name(x->iso));
        return -1;
    }
    if (x->o->host_layer && x->iso == BRIG_ISO_MICROVM)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'snapshots' is for gVisor sandboxes (a microvm sandbox can "
                              "always be snapshotted)");
    /* a built-in template, else one of the account's (usertpl.h) */
    x->builtin = brig_template_lookup(&d->cfg, tname, &x->t, NULL) == 0;
    if (!x->builtin && brig_utpl_lookup(d, c->account_id, tname, &x->t, &x->run, err) < 0) {
        if (err && *err && (*err)->kind == BRIG_E_NOT_FOUND)
            (*err)->kind = BRIG_E_INVALID;
        return -1;
    }
    if (!x->t.built) {
        brig_template_dispose(&x->t);
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "template '%s' is not built yet: run `brig template build %s`", tname,
                              tname);
    }
    if (resolve_volumes(x, err) < 0 || snapshot_fits(x, err) < 0) {
        brig_template_dispose(&x->t);
        return -1;
    }
    return 0;
}

/* While the state dir's file system has less free space than disk_reserve_mib, no
 * sandbox is created: that room is the store's and the logs', whatever the sandboxes
 * wrote (with disk_overcommit above 1 they may write more than the host has). */
static int disk_reserve_check(brigd *d, brig_error **err)
{
    struct statvfs st;
    if (d->cfg.disk_reserve_mib == 0 || statvfs(d->cfg.state_dir, &st) < 0)
        return 0;
    int64_t free_mib = (int64_t)(((uint64_t)st.f_bavail * st.f_frsize) >> 20);
    if (free_mib >= d->cfg.disk_reserve_mib)
        return 0;
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                          "this host's disk is down to its reserve: %lld MiB free on the state "
                          "dir's file system, %lld MiB kept for brigd's store and logs "
                          "(disk_reserve_mib); no sandbox can be created until space is freed",
                          (long long)free_mib, (long long)d->cfg.disk_reserve_mib);
}

/* The account's limits, in order: balance and spend; concurrency, checked and reserved
 * at once (x->res); the disk reserve.  On failure nothing stays held. */
static int admit(create *x, brig_error **err)
{
    brigd *d = x->d;
    const char *account_id = x->c->account_id;
    int64_t max_live = 0;
    if (brig_billing_admit(d, account_id, brig_now_real_ms(), &max_live, err) < 0 ||
        brig_registry_reserve(d, account_id, max_live, &x->res, err) < 0)
        return -1;
    if (disk_reserve_check(d, err) < 0) {
        brig_registry_unreserve(d, &x->res);
        return -1;
    }
    return 0;
}

/* Host capacity (which may wait), then the sandbox: a warm one of this template build,
 * tariff and isolation if the pool has one, else a new id and a free uid range. */
static int reserve(create *x, brig_error **err)
{
    brigd *d = x->d;
    const brig_tariff *tf = x->tariff;
    const brig_sandbox_opts *o = x->o;
    if (brig_admission_take(&d->admission, x->c->account_id,
                            (brig_capacity){tf->memory_mib, tf->disk_mib},
                            d->cfg.create_queue_timeout_ms, err) < 0)
        return -1;
    x->t0 = brig_now_mono_ms();
    brig_sandbox_spec sp = {.memory_mib = tf->memory_mib,
                            .disk_mib = tf->disk_mib,
                            .created_at = brig_now_real_ms(),
                            .price = tf->price_micro_usd,
                            .vcpus = tf->vcpus,
                            .isolation = x->iso,
                            .egress_none = o->egress_none};
    snprintf(sp.account_id, sizeof(sp.account_id), "%s", x->c->account_id);
    snprintf(sp.project_id, sizeof(sp.project_id), "%s", x->project);
    snprintf(sp.template, sizeof(sp.template), "%s", x->t.name);
    memcpy(sp.template_key, x->t.key, sizeof(sp.template_key));
    snprintf(sp.tariff, sizeof(sp.tariff), "%s", tf->name);
    sp.idle_timeout_ms = o->idle_timeout_ms ? o->idle_timeout_ms : d->cfg.idle_timeout_default_ms;
    sp.pause_on_idle = x->pause_on_idle;
    x->expires_at =
        sp.created_at + (o->max_lifetime_ms ? o->max_lifetime_ms : d->cfg.lifetime_default_ms);
    brig_pooled warm;
    /* A warm sandbox has its mounts and layer already.  A user template's pool is its
     * account's; its start command ran there with the template's env, so a create with an
     * env of its own (which the start command would see) is a cold one, and so is a
     * gVisor build's or one made to be snapshotted (its writes must reach the host's layer;
     * pooled ones keep theirs). */
    bool own_env = x->run.start && o->env && json_object_size(o->env);
    bool claimed = x->vols.n == 0 && !x->snap.id[0] && !own_env &&
                   !(o->host_layer && x->iso == BRIG_ISO_GVISOR) &&
                   brig_pool_claim(d, x->builtin ? "" : x->c->account_id, x->t.name, x->t.build,
                                   tf->name, x->iso, &warm) == 0;
    x->claimed = claimed;
    if (claimed) {
        memcpy(sp.id, warm.id, sizeof(sp.id));
        sp.uid_base = warm.uid_base;
    } else {
        brig_id_new("sbx", sp.id);
        sp.uid_base = brig_registry_uid_take(d);
    }
    if (x->run.workdir)
        snprintf(sp.workdir, sizeof(sp.workdir), "%s", x->run.workdir);
    json_t *env = x->run.env ? json_deep_copy(x->run.env) : NULL; /* the request's wins */
    if (o->env && json_object_size(o->env))
        env = env ? (json_object_update(env, o->env), env) : json_deep_copy(o->env);
    x->sb = brig_sandbox_new(&sp, x->expires_at, env);
    if (claimed) {
        brig_sandbox_set_runtime(x->sb, warm.rt);
        brig_sandbox_set_net(x->sb, warm.net);
    }
    if (sp.uid_base == 0)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "all %lld user-id ranges are in use: too many live sandboxes",
                              (long long)d->cfg.uid_ranges);
    return 0;
}

/* Its secrets, sealed under its id, and its redactor, built once for its life before
 * anyone can use it. */
static int seal(create *x, brig_error **err)
{
    brig_redactor *unused = NULL;
    if (brig_sandbox_seal_secrets(x->d, brig_sandbox_id(x->sb), x->project, x->o->secrets,
                                  x->o->secret_refs, err) < 0 ||
        brig_sandbox_redactor(x->d, x->sb, &unused, err) < 0)
        return -1;
    brig_redactor_free(unused);
    return 0;
}

/* Its store row (creating: a crash from here on is cleaned up by reconcile), then its
 * place in the registry. */
static int record(create *x, brig_error **err)
{
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(x->sb);
    brig_sandbox_row row = {0};
    memcpy(row.id, sp->id, sizeof(row.id));
    memcpy(row.account_id, sp->account_id, sizeof(row.account_id));
    memcpy(row.project_id, sp->project_id, sizeof(row.project_id));
    memcpy(row.template, sp->template, sizeof(row.template));
    memcpy(row.template_key, sp->template_key, sizeof(row.template_key));
    memcpy(row.tariff, sp->tariff, sizeof(row.tariff));
    snprintf(row.state, sizeof(row.state), "%s", brig_sb_state_name(BRIG_SB_CREATING));
    row.created_at = sp->created_at;
    row.uid_base = sp->uid_base;
    row.price = sp->price;
    row.idle_timeout_ms = sp->idle_timeout_ms;
    row.pause_on_idle = sp->pause_on_idle;
    row.expires_at = x->expires_at;
    snprintf(row.isolation, sizeof(row.isolation), "%s", brig_isolation_name(sp->isolation));
    row.egress_none = sp->egress_none;
    const json_t *env = brig_sandbox_env(x->sb);
    row.env_json = env ? json_dumps(env, JSON_COMPACT) : NULL;
    int r = brig_store_sandbox_insert(x->d->store, &row, err);
    free(row.env_json);
    if (r < 0)
        return -1;
    x->stored = true;
    brig_registry_add(x->d, x->sb, &x->res);
    x->listed = true;
    return brig_volmounts_record(x->d, sp->id, &x->vols, err);
}

/* The driver's net_first: a gVisor sandbox's network stack takes the interfaces it finds
 * when it starts, so its namespace is connected first (reaching nothing, as a warm
 * sandbox's); attach then gives it its project's policy, as to a claimed warm one. */
static int net_first(void *arg, int netns_fd, brig_error **err)
{
    create *x = arg;
    brig_net_sandbox *net = NULL;
    int r = brig_attach_early(x->d, brig_sandbox_id(x->sb), netns_fd, &net, &x->resolv, err);
    brig_sandbox_set_net(x->sb, net);
    return r;
}

/* The runtime driver starts it (a claimed warm sandbox runs already). */
static int start(create *x, brig_error **err)
{
    brigd *d = x->d;
    if (brig_sandbox_runtime(x->sb))
        return 0;
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(x->sb);
    brig_rt_spec spec = {
        .id = sp->id,
        .rootfs = x->t.rootfs,
        .memory_mib = sp->memory_mib,
        .pids_limit = d->cfg.pids_limit,
        .cpus = sp->vcpus,
        .disk_mib = sp->disk_mib,
        .uid_base = (unsigned)sp->uid_base,
        .uid_size = BRIG_UID_RANGE,
        .isolation = sp->isolation,
        .net_first = net_first,
        .net_arg = x,
        .host_layer = x->o->host_layer,
    };
    brig_rt_volume vols[BRIG_SANDBOX_VOLUMES_MAX];
    for (size_t i = 0; i < x->vols.n; i++)
        vols[i] = (brig_rt_volume){x->vols.v[i].id, x->vols.v[i].path, x->vols.v[i].read_only};
    spec.volumes = vols;
    spec.n_volumes = x->vols.n;
    if (x->snap.id[0]) {
        spec.snapshot = x->snap.id;
        spec.snapshot_digest = x->snap.digest;
        spec.snapshot_uid_base = (unsigned)x->snap.uid_base;
        spec.snapshot_memory = x->o->snapshot_memory;
    }
    brig_rt_sandbox *h = NULL;
    if (d->rt->ops->create(d->rt, &spec, &h, err) < 0)
        return -1;
    brig_sandbox_set_runtime(x->sb, h);
    return brig_attach_resolv(d, h, x->resolv, err);
}

/* The timeline's first event: what it was created as, and under which policy. */
static json_t *created_event(create *x, json_t *answer)
{
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(x->sb);
    brig_project_row prj = {0};
    json_t *egress = NULL;
    if (brig_store_project_get(x->d->store, sp->project_id, &prj, NULL) == 1 && prj.egress)
        egress = json_loads(prj.egress, 0, NULL);
    free(prj.egress);
    char expires[32];
    brig_format_time(x->expires_at, expires);
    json_t *ev = json_pack(
        "{s:s, s:s, s:s, s:o, s:O, s:I, s:s, s:b}", "template", sp->template, "tariff", sp->tariff,
        "isolation", brig_isolation_name(sp->isolation), "egress", egress ? egress : json_null(),
        "secrets", json_object_get(answer, "secrets"), "idle_timeout_ms",
        (json_int_t)sp->idle_timeout_ms, "expires_at", expires, "warm", x->claimed);
    if (x->vols.n > 0)
        json_object_set(ev, "volumes", json_object_get(answer, "volumes"));
    if (x->snap.id[0])
        json_object_set_new(ev, "snapshot", json_string(x->snap.id));
    return ev;
}

/* Running: its agent watched, its row, the answer; the create's use of it ends. */
static void activate(create *x, json_t **out)
{
    brigd *d = x->d;
    brig_sandbox *sb = x->sb;
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    brig_registry_set_state(d, sb, BRIG_SB_CREATING, BRIG_SB_RUNNING);
    brig_watch_add(d, sb);
    brig_store_sandbox_set_state(d->store, sp->id, brig_sb_state_name(BRIG_SB_RUNNING), NULL,
                                 brig_now_real_ms(), NULL);
    brig_info("sandbox %s: running (%s, %s, %lld ms)", sp->id, sp->template, sp->tariff,
              (long long)(brig_now_mono_ms() - x->t0));
    *out = brig_sandbox_json(d, sb);
    json_object_set_new(*out, "secrets", brig_vault_names(d->store, sp->id));
    brig_timeline_record(d, sb, x->c, "sandbox.created", created_event(x, *out));
    brig_usage_created(d, sb, x->claimed, brig_now_mono_ms() - x->begun);
    if (x->claimed) /* a warm sandbox's first command follows: its connections first */
        brig_spares_fill(d, sb);
    brig_sandbox_put(d, sb);
}

/* A create that failed after admission: what it holds goes the way of a deleted
 * sandbox's (retire): nothing of it may stay.  The teardown destroys what the runtime
 * started (a claimed warm sandbox and its network included) and returns its capacity
 * slot and uid range only when that is done, retrying as for any ended sandbox. */
static void unwind(create *x, brig_error **err)
{
    brigd *d = x->d;
    brig_registry_unreserve(d, &x->res); /* when it failed before it was listed */
    if (x->sb == NULL)                   /* before host capacity was held: nothing is */
        return;
    if (err && *err == NULL) /* a step broke the error convention: still answer, and say so */
        brig_error_set(err, BRIG_E_INTERNAL, 0, "create failed at %s%s (no reason given: a bug)",
                       x->failed ? x->failed : "?", x->claimed ? " of a warm sandbox" : "");
    const char *msg = err && *err ? (*err)->msg : NULL;
    brig_usage_create_failed(d);
    brig_warn("sandbox %s: create failed: %s", brig_sandbox_id(x->sb), msg ? msg : "?");
    if (x->listed) /* the create's use ends; the list's reference goes to the teardown */
        brig_sandbox_put(d, x->sb);
    retire(d, x->sb, BRIG_SB_FAILED, msg ? msg : "create failed", x->stored, x->listed,
           brig_now_real_ms(), x->c, NULL);
}

/* A user template's start command, started once it runs; the answer waits for its ready
 * check.  One that never becomes ready is deleted: the create failed. */
static int started(create *x, json_t **out, brig_error **err)
{
    const char *id = json_string_value(json_object_get(*out, "id"));
    brig_sandbox *sb = NULL;
    int r = brig_sandbox_get(x->d, x->c, id, &sb, err);
    if (r == 0) {
        r = brig_utpl_start(x->d, sb, &x->run, err);
        brig_sandbox_put(x->d, sb);
    }
    if (r < 0) {
        brig_warn("sandbox %s: %s", id, err && *err ? (*err)->msg : "not ready");
        brig_sandbox_delete(x->d, x->c, id, "deleted_by_api", NULL);
        json_decref(*out);
        *out = NULL;
    }
    return r;
}

/* ---- create: the checklist --------------------------------------------------------------- */

int brig_sandbox_create(brigd *d, const brig_caller *c, const brig_sandbox_opts *opts, json_t **out,
                        brig_error **err)
{
    create x = {.d = d, .c = c, .o = opts, .begun = brig_now_mono_ms()};
    if (resolve(&x, err) < 0) /* tariff, project, a built template */
        return -1;
    int r = -1;
    if (admit(&x, err) < 0) { /* balance, spend, concurrency (reserved), disk reserve */
        brig_usage_refused(d, *err);
        goto out;
    }
    /* From here on, a failure unwinds the way a deleted sandbox ends. */
    if (step(&x, "reserve", reserve(&x, err)) < 0 || /* capacity; a warm one, or id + uids */
        step(&x, "volumes", brig_volmounts_claim(d, brig_sandbox_id(x.sb), &x.vols, err)) < 0 ||
        step(&x, "seal", seal(&x, err)) < 0 ||     /* its secrets, its redactor */
        step(&x, "record", record(&x, err)) < 0 || /* its row (creating); listed */
        step(&x, "start", start(&x, err)) < 0 ||   /* the runtime driver starts it */
        step(&x, "attach", brig_attach_project(d, x.sb, err)) < 0) { /* its project's policy */
        unwind(&x, err);
        goto out;
    }
    activate(&x, out); /* running: watched, its row, the answer */
    /* a user template's start command (a warm one's ran in the pool) */
    r = x.run.start && !x.claimed ? started(&x, out, err) : 0;
out:
    brig_utpl_run_dispose(&x.run);
    brig_template_dispose(&x.t);
    free(x.resolv);
    return r;
}
