/*
 * sandbox.c - sandbox lifecycle (see sandbox.h).
 *
 * Order of a create, so that a failure or a crash at any point is cleaned up:
 * the account's tariffs -> limits (balance, spend, concurrency: reserved until
 * the sandbox is listed) -> the disk reserve -> host capacity (slot, memory,
 * disk) -> secrets sealed
 * under the sandbox id -> store row (creating) -> list entry -> runtime create
 * -> network attach (a warm sandbox: policy only) -> store row (running).
 * Order of a delete: state deleting (no new borrowers; still listed) -> SIGKILL
 * (in-flight requests see their agent connection close) -> final charge ->
 * secrets wiped -> store row (deleted, with its reason) -> unlist -> the
 * answer (a DELETE waits up to 2 s for the processes to die; brigd's own stops
 * do not wait).  Then, on a teardown worker, attempt after attempt with backoff
 * until it succeeds: processes dead -> capacity slot returned -> runtime destroy
 * -> network release -> uid range returned; the handle is freed by the last
 * borrower.  A failed create's started sandbox takes the same way.
 * A watch on every running sandbox's init ends it (agent_lost) when its agent
 * dies on its own.
 */
#include "sandbox.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "agentc/agentc.h"
#include "account/billing.h"
#include "core/format.h"
#include "log.h"
#include "pool.h"
#include "vault/redact.h"
#include "template.h"
#include "account/tenants.h"
#include "util.h"
#include "vault/vault.h"

#define UID_RANGE BRIG_UID_RANGE

static json_t *time_or_null(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    char buf[32];
    brig_format_time(ms, buf);
    return json_string(buf);
}

/* The API's view of a live sandbox; needs d->lock. */
static json_t *sandbox_json_locked(brigd *d, const brig_sandbox *sb)
{
    char created[32];
    brig_format_time(sb->created_at, created);
    json_t *env_names = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(sb->env, k, v) json_array_append_new(env_names, json_string(k));
    int64_t idle_at = sb->idle_timeout_ms ? sb->last_activity + sb->idle_timeout_ms : 0;
    (void)d;
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:o, s:o, s:o}", "id",
                          sb->id, "project_id", sb->project_id, "template", sb->template, "tariff",
                          sb->tariff, "state", sb->state, "created_at", created, "env", env_names,
                          "idle_timeout", (json_int_t)(sb->idle_timeout_ms / 1000),
                          "price_micro_usd_per_second", (json_int_t)sb->price, "price_per_second",
                          brig_money_json(sb->price), "expires_at", time_or_null(sb->expires_at),
                          "idle_expires_at", time_or_null(idle_at));
    if (sb->end_reason[0]) /* deleting: why, already */
        json_object_set_new(j, "reason", json_string(sb->end_reason));
    return j;
}

static void add_secret_names(brigd *d, const char *id, json_t *j)
{
    json_object_set_new(j, "secrets", brig_vault_names(d->store, id));
}

/* ---- list and references ---------------------------------------------------------- */

static void unlink_locked(brigd *d, brig_sandbox *sb)
{
    for (brig_sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next) {
        if (*pp == sb) {
            *pp = sb->next;
            sb->next = NULL;
            d->n_sandboxes--;
            return;
        }
    }
}

/* Drops one reference; returns the sandbox when that was the last. Needs d->lock. */
static brig_sandbox *unref_locked(brig_sandbox *sb)
{
    return --sb->refs == 0 ? sb : NULL;
}

/* Takes the lowest free uid range; 0 when all are taken. Needs d->lock. */
static int64_t uid_take_locked(brigd *d)
{
    for (int64_t i = 0; i < d->cfg.uid_ranges; i++) {
        if (!d->uid_used[i]) {
            d->uid_used[i] = 1;
            return d->cfg.uid_base + i * UID_RANGE;
        }
    }
    return 0;
}

/* Marks a range (from the store) taken or free. Needs d->lock. */
static void uid_mark_locked(brigd *d, int64_t base, uint8_t used)
{
    int64_t i = (base - d->cfg.uid_base) / UID_RANGE;
    if (base >= d->cfg.uid_base && i < d->cfg.uid_ranges && base == d->cfg.uid_base + i * UID_RANGE)
        d->uid_used[i] = used;
}

static void sandbox_free(brigd *d, brig_sandbox *sb)
{
    if (sb->rt)
        d->rt->ops->release(d->rt, sb->rt);
    json_decref(sb->env);
    brig_redactor_free(sb->redactor);
    free(sb);
}

/* Removes a torn-down sandbox's network: how = 1 after its runtime was
 * destroyed (the kernel takes the link pair with the namespace), 2 when that
 * failed (we delete the link). */
static void net_drop(brigd *d, brig_net_sandbox *net, int how)
{
    if (net == NULL)
        return;
    if (how == 1)
        brig_net_release(d->net, net);
    else
        brig_net_detach(d->net, net);
}

static void teardown_enqueue(brigd *d, brig_sandbox *sb);
static void watch(brigd *d, brig_sandbox *sb);

void brig_sandbox_put(brigd *d, brig_sandbox *sb)
{
    if (sb == NULL)
        return;
    pthread_mutex_lock(&d->lock);
    if (--d->ops_inflight == 0)
        d->ops_idle_since = brig_now_mono_ms();
    brig_net_sandbox *net = NULL;
    int how = sb->net_drop;
    if (--sb->active_ops == 0 && how) { /* the last user of a torn-down one */
        net = sb->net;
        sb->net = NULL;
        sb->net_drop = 0;
    }
    sb->last_activity = brig_now_real_ms();
    brig_sandbox *dead = unref_locked(sb);
    pthread_mutex_unlock(&d->lock);
    net_drop(d, net, how);
    if (dead)
        sandbox_free(d, dead);
}

int64_t brig_sandbox_uid_take(brigd *d)
{
    pthread_mutex_lock(&d->lock);
    int64_t base = uid_take_locked(d);
    pthread_mutex_unlock(&d->lock);
    return base;
}

void brig_sandbox_uid_release(brigd *d, int64_t base)
{
    pthread_mutex_lock(&d->lock);
    uid_mark_locked(d, base, 0);
    pthread_mutex_unlock(&d->lock);
}

void brig_sandbox_ref(brigd *d, brig_sandbox *sb)
{
    pthread_mutex_lock(&d->lock);
    sb->refs++;
    pthread_mutex_unlock(&d->lock);
}

void brig_sandbox_unref(brigd *d, brig_sandbox *sb)
{
    pthread_mutex_lock(&d->lock);
    brig_sandbox *dead = unref_locked(sb);
    pthread_mutex_unlock(&d->lock);
    if (dead)
        sandbox_free(d, dead);
}

/* Finds a live sandbox the caller may see (any state). Needs d->lock. */
static brig_sandbox *find_locked(brigd *d, const brig_caller *c, const char *id)
{
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0 &&
            (c == NULL || brig_caller_sees(c, sb->account_id, sb->project_id)))
            return sb;
    return NULL;
}

int brig_sandbox_get(brigd *d, const brig_caller *c, const char *id, brig_sandbox **out,
                     brig_error **err)
{
    pthread_mutex_lock(&d->lock);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb && strcmp(sb->state, "running") == 0) {
        sb->refs++;
        sb->active_ops++;
        d->ops_inflight++;
        sb->last_activity = brig_now_real_ms();
        pthread_mutex_unlock(&d->lock);
        *out = sb;
        return 0;
    }
    pthread_mutex_unlock(&d->lock);
    /* Same answer for "never existed" and "someone else's": ids leak nothing. */
    return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
}

int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err)
{
    return d->rt->ops->connect(d->rt, sb->rt, err);
}

int brig_sandbox_secrets(brigd *d, const brig_sandbox *sb, json_t **out, brig_error **err)
{
    json_t *secrets = NULL;
    *out = NULL;
    if (brig_vault_open_all(d->vault, d->store, sb->id, &secrets, err) < 0) {
        brig_err("sandbox %s: %s", sb->id, (*err)->msg);
        brig_error_prefix(err, "sandbox %s: its secrets cannot be used", sb->id);
        return -1;
    }
    if (json_object_size(secrets) == 0)
        json_decref(secrets);
    else
        *out = secrets;
    return 0;
}

int brig_sandbox_redactor(brigd *d, brig_sandbox *sb, brig_redactor **out, brig_error **err)
{
    *out = NULL;
    pthread_mutex_lock(&d->lock);
    bool built = sb->redactor_built;
    if (built)
        *out = brig_redactor_ref(sb->redactor);
    pthread_mutex_unlock(&d->lock);
    if (built)
        return 0;
    /* Built outside the lock; two first uses at once (after a restart) may both
     * build, and the second one's is dropped. */
    json_t *secrets = NULL;
    if (brig_sandbox_secrets(d, sb, &secrets, err) < 0)
        return -1;
    brig_redactor *r = brig_redactor_new(secrets);
    brig_vault_wipe(secrets);
    pthread_mutex_lock(&d->lock);
    if (!sb->redactor_built) {
        sb->redactor = r;
        sb->redactor_built = true;
        r = NULL;
    }
    *out = brig_redactor_ref(sb->redactor);
    pthread_mutex_unlock(&d->lock);
    brig_redactor_free(r);
    return 0;
}

json_t *brig_sandbox_command_env(const brig_sandbox *sb, json_t *secrets, json_t *request_env)
{
    if (json_object_size(sb->env) == 0 && json_object_size(secrets) == 0 &&
        json_object_size(request_env) == 0)
        return NULL;
    /* Deep copies: the caller wipes this object, which must not scrub the
     * strings of the sandbox's env or of the request it came from. */
    json_t *env = sb->env ? json_deep_copy(sb->env) : json_object();
    json_t *layers[] = {secrets, request_env};
    for (size_t i = 0; i < 2; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(layers[i], k, v) json_object_set_new(env, k, json_deep_copy(v));
    }
    return env;
}

int brig_sandbox_count(brigd *d, const char *account_id)
{
    int n = 0;
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        n += strcmp(sb->account_id, account_id) == 0;
    pthread_mutex_unlock(&d->lock);
    return n;
}

/* ---- admission --------------------------------------------------------------------- */

/* A create counted against its account's concurrency limit before its sandbox
 * is listed: on d->reserving (brigd.lock) from the check until the sandbox is
 * listed (then the list counts it) or the create fails. */
struct brig_reservation {
    char account_id[BRIG_ID_MAX];
    struct brig_reservation *next;
};

/* The account's listed sandboxes and its creates not listed yet.  Needs d->lock. */
static int64_t live_locked(brigd *d, const char *account_id)
{
    int64_t n = 0;
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        n += strcmp(sb->account_id, account_id) == 0;
    for (brig_reservation *r = d->reserving; r; r = r->next)
        n += strcmp(r->account_id, account_id) == 0;
    return n;
}

/* Takes res off d->reserving (a no-op when it is not on it).  Needs d->lock. */
static void unreserve_locked(brigd *d, brig_reservation *res)
{
    for (brig_reservation **pp = &d->reserving; *pp; pp = &(*pp)->next)
        if (*pp == res) {
            *pp = res->next;
            return;
        }
}

/* While the state dir's file system has less free space than disk_reserve_mib,
 * no sandbox is created: that room is the store's and the logs', whatever the
 * sandboxes wrote (with disk_overcommit above 1 they may write more than the
 * host has). */
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

/* Admits a create for account_id that needs `need` of the host, in order:
 * balance and spend limits; the concurrency limit, checked and reserved (res,
 * the caller's, put on d->reserving) under one hold of d->lock, so that N
 * concurrent creates against a limit of L leave exactly L; the disk reserve;
 * host capacity (which may wait).  On failure nothing stays held. */
static int admit(brigd *d, const char *account_id, brig_capacity need, brig_reservation *res,
                 brig_error **err)
{
    int64_t max_live = 0;
    if (brig_billing_admit(d, account_id, brig_now_real_ms(), &max_live, err) < 0)
        return -1;
    snprintf(res->account_id, sizeof(res->account_id), "%s", account_id);
    pthread_mutex_lock(&d->lock);
    int r = brig_billing_live_check(live_locked(d, account_id), max_live, err);
    if (r == 0) {
        res->next = d->reserving;
        d->reserving = res;
    }
    pthread_mutex_unlock(&d->lock);
    if (r < 0)
        return -1;
    if (disk_reserve_check(d, err) < 0 ||
        brig_admission_take(&d->admission, account_id, need, d->cfg.create_queue_timeout_ms, err) <
            0) {
        pthread_mutex_lock(&d->lock);
        unreserve_locked(d, res);
        pthread_mutex_unlock(&d->lock);
        return -1;
    }
    return 0;
}

/* ---- create ------------------------------------------------------------------------- */

/* Seals the sandbox's secrets (inline values and project references). */
static int seal_secrets(brigd *d, const char *id, const char *project_id,
                        const brig_sandbox_opts *o, brig_error **err)
{
    /* The count first: nothing is sealed for a create that must be refused. */
    if (brig_vault_check_count(json_object_size(o->secrets) + json_array_size(o->secret_refs),
                               d->cfg.max_secrets, err) < 0)
        return -1;
    const char *name;
    json_t *v;
    json_object_foreach(o->secrets, name, v)
    {
        if (!json_is_string(v))
            return brig_error_set(err, BRIG_E_INVALID, 0, "secret '%.64s' must be a string", name);
        if (brig_vault_put(d->vault, d->store, id, name, json_string_value(v),
                           json_string_length(v), err) < 0)
            return -1;
    }
    if (o->secret_refs &&
        brig_vault_copy(d->vault, d->store, project_id, id, o->secret_refs, err) < 0)
        return -1;
    /* Their bytes, referenced ones included (the create's cleanup removes them). */
    return brig_vault_check_total(d->store, id, d->cfg.max_secrets, d->cfg.max_secret_bytes, err);
}

int brig_sandbox_net_attach(brigd *d, const char *id, brig_rt_sandbox *rt,
                            const brig_egress *policy, brig_net_sandbox **out, brig_error **err)
{
    *out = NULL;
    int fd = d->rt->ops->netns(d->rt, rt, err);
    char *resolv = NULL;
    int r = fd < 0 ? -1 : brig_net_attach(d->net, id, fd, policy, out, &resolv, err);
    if (fd >= 0)
        close(fd);
    if (r == 0 && resolv) {
        int afd = d->rt->ops->connect(d->rt, rt, err);
        r = afd < 0 ? -1 : brig_agentc_write_begin(afd, "/etc/resolv.conf", 0644, err);
        if (r == 0)
            r = brig_agentc_write_chunk(afd, resolv, strlen(resolv), err);
        if (r == 0)
            r = brig_agentc_write_end(afd, NULL, err);
        if (afd >= 0)
            close(afd);
    }
    free(resolv);
    if (r < 0 && *out) {
        brig_net_detach(d->net, *out);
        *out = NULL;
    }
    return r;
}

/* Connects the sandbox to the network under its project's policy (a claimed
 * warm sandbox is connected already, under "none": it only gets the policy). */
static int attach_network(brigd *d, brig_sandbox *sb, brig_error **err)
{
    if (d->net == NULL)
        return 0;
    json_t *ej = brig_project_egress(d, sb->project_id);
    brig_egress pol;
    if (ej == NULL || brig_egress_from_json(ej, &pol, err) < 0) {
        json_decref(ej);
        if (err && *err == NULL)
            brig_error_set(err, BRIG_E_INTERNAL, 0, "project %s has no egress policy",
                           sb->project_id);
        return -1;
    }
    json_decref(ej);
    int r = sb->net ? brig_net_set_policy(d->net, sb->net, &pol, err)
                    : brig_sandbox_net_attach(d, sb->id, sb->rt, &pol, &sb->net, err);
    brig_egress_dispose(&pol);
    return r;
}

int brig_sandbox_create(brigd *d, const brig_caller *c, const brig_sandbox_opts *opts, json_t **out,
                        brig_error **err)
{
    const char *tname = opts->template ? opts->template : d->cfg.default_template;
    const char *tariff_name = opts->tariff ? opts->tariff : d->cfg.default_tariff;
    const brig_tariff *tariff = brig_config_tariff(&d->cfg, tariff_name);
    if (tariff == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "no tariff named '%.32s' (see GET /v1/tariffs)", tariff_name);
    if (brig_account_tariff_allowed(d, c->account_id, tariff->name, err) < 0)
        return -1;
    const char *project = c->project_id;
    if (opts->project_id) {
        json_t *p = NULL;
        if (!brig_caller_is(c, "admin") && strcmp(opts->project_id, c->project_id) != 0)
            return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                                  "a sandbox-scoped key creates sandboxes in its own project only");
        if (brig_project_get(d, c, opts->project_id, &p, err) < 0) {
            (*err)->kind = BRIG_E_INVALID;
            return -1;
        }
        json_decref(p);
        project = opts->project_id;
    }
    brig_template t;
    if (brig_template_lookup(&d->cfg, tname, &t, err) < 0) {
        if (err && *err && (*err)->kind == BRIG_E_NOT_FOUND)
            (*err)->kind = BRIG_E_INVALID;
        return -1;
    }
    if (!t.built) {
        brig_template_dispose(&t);
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "template '%s' is not built yet: run `brig template build %s`", tname,
                              tname);
    }
    brig_reservation res;
    if (admit(d, c->account_id, (brig_capacity){tariff->memory_mib, tariff->disk_mib}, &res, err) <
        0) {
        brig_template_dispose(&t);
        return -1;
    }

    brig_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    brig_id_new("sbx", sb->id);
    snprintf(sb->account_id, sizeof(sb->account_id), "%s", c->account_id);
    snprintf(sb->project_id, sizeof(sb->project_id), "%s", project);
    snprintf(sb->template, sizeof(sb->template), "%s", t.name);
    memcpy(sb->template_key, t.key, sizeof(sb->template_key));
    snprintf(sb->tariff, sizeof(sb->tariff), "%s", tariff->name);
    sb->price = tariff->price_micro_usd;
    sb->vcpus = tariff->vcpus;
    sb->memory_mib = tariff->memory_mib;
    sb->disk_mib = tariff->disk_mib;
    sb->env = opts->env && json_object_size(opts->env) ? json_deep_copy(opts->env) : NULL;
    sb->created_at = sb->last_activity = brig_now_real_ms();
    sb->idle_timeout_ms =
        opts->idle_timeout_ms ? opts->idle_timeout_ms : d->cfg.idle_timeout_default_ms;
    sb->expires_at = sb->created_at +
                     (opts->max_lifetime_ms ? opts->max_lifetime_ms : d->cfg.lifetime_default_ms);
    sb->state = "creating";
    sb->refs = 2;       /* the list's and ours */
    sb->active_ops = 1; /* ours, until the create returns */
    bool listed = false, stored = false;
    int64_t t0 = brig_now_mono_ms();
    int r = -1;

    /* A warm sandbox of this template build and tariff, if the pool has one. */
    brig_pooled warm;
    if (brig_pool_claim(d, t.name, t.build, tariff->name, &warm) == 0) {
        memcpy(sb->id, warm.id, sizeof(sb->id));
        sb->uid_base = warm.uid_base;
        sb->rt = warm.rt;
        sb->net = warm.net;
    } else {
        pthread_mutex_lock(&d->lock);
        sb->uid_base = uid_take_locked(d);
        pthread_mutex_unlock(&d->lock);
    }
    if (sb->uid_base == 0) {
        brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                       "all %lld user-id ranges are in use: too many live sandboxes",
                       (long long)d->cfg.uid_ranges);
        goto out;
    }
    if (seal_secrets(d, sb->id, project, opts, err) < 0)
        goto out;
    /* Its redactor, once for its life, before anyone can use it. */
    brig_redactor *unused = NULL;
    if (brig_sandbox_redactor(d, sb, &unused, err) < 0)
        goto out;
    brig_redactor_free(unused);
    brig_sandbox_row row = {0};
    memcpy(row.id, sb->id, sizeof(row.id));
    memcpy(row.account_id, sb->account_id, sizeof(row.account_id));
    memcpy(row.project_id, sb->project_id, sizeof(row.project_id));
    memcpy(row.template, sb->template, sizeof(row.template));
    memcpy(row.template_key, sb->template_key, sizeof(row.template_key));
    memcpy(row.tariff, sb->tariff, sizeof(row.tariff));
    snprintf(row.state, sizeof(row.state), "creating");
    row.created_at = sb->created_at;
    row.uid_base = sb->uid_base;
    row.price = sb->price;
    row.idle_timeout_ms = sb->idle_timeout_ms;
    row.expires_at = sb->expires_at;
    row.env_json = sb->env ? json_dumps(sb->env, JSON_COMPACT) : NULL;
    int ins = brig_store_sandbox_insert(d->store, &row, err);
    free(row.env_json);
    if (ins < 0)
        goto out;
    stored = true;
    pthread_mutex_lock(&d->lock);
    sb->next = d->sandboxes;
    d->sandboxes = sb;
    d->n_sandboxes++;
    d->ops_inflight++;         /* the create's active op, ended by its brig_sandbox_put */
    unreserve_locked(d, &res); /* the list counts it from now on */
    pthread_mutex_unlock(&d->lock);
    listed = true;

    brig_rt_spec spec = {
        .id = sb->id,
        .rootfs = t.rootfs,
        .memory_mib = tariff->memory_mib,
        .pids_limit = d->cfg.pids_limit,
        .cpus = tariff->vcpus,
        .disk_mib = tariff->disk_mib,
        .uid_base = (unsigned)sb->uid_base,
        .uid_size = UID_RANGE,
    };
    if (sb->rt == NULL) { /* not from the pool: start it */
        brig_rt_sandbox *h = NULL;
        if (d->rt->ops->create(d->rt, &spec, &h, err) < 0)
            goto out;
        sb->rt = h;
    }
    if (attach_network(d, sb, err) < 0)
        goto out;
    pthread_mutex_lock(&d->lock);
    sb->state = "running";
    pthread_mutex_unlock(&d->lock);
    watch(d, sb);
    brig_store_sandbox_set_state(d->store, sb->id, "running", NULL, brig_now_real_ms(), NULL);
    r = 0;
    brig_info("sandbox %s: running (%s, %s, %lld ms)", sb->id, sb->template, sb->tariff,
              (long long)(brig_now_mono_ms() - t0));
    *out = brig_sandbox_json(d, sb);
    add_secret_names(d, sb->id, *out);

out:
    brig_template_dispose(&t);
    if (r == 0) {
        brig_sandbox_put(d, sb);
        return 0;
    }
    brig_warn("sandbox %s: create failed: %s", sb->id, err && *err ? (*err)->msg : "?");
    if (stored)
        brig_store_sandbox_set_state(d->store, sb->id, "failed",
                                     err && *err ? (*err)->msg : "create failed",
                                     brig_now_real_ms(), NULL);
    brig_vault_delete_all(d->store, sb->id);
    pthread_mutex_lock(&d->lock);
    if (listed) {
        unlink_locked(d, sb);
        if (--d->ops_inflight == 0)
            d->ops_idle_since = brig_now_mono_ms();
    }
    unreserve_locked(d, &res); /* when it failed before it was listed */
    pthread_mutex_unlock(&d->lock);
    if (sb->rt) {
        /* Started (or claimed warm): nothing of it may stay.  The teardown destroys
         * it (and its network, a claimed warm sandbox's) and returns its slot and uid
         * range only when that is done, retrying as for any ended sandbox. */
        sb->refs = 1; /* the teardown's; nobody else borrowed a sandbox still creating */
        sb->active_ops = 0;
        teardown_enqueue(d, sb);
        return -1;
    }
    pthread_mutex_lock(&d->lock);
    uid_mark_locked(d, sb->uid_base, 0); /* the runtime cleaned up after itself */
    pthread_mutex_unlock(&d->lock);
    brig_admission_release(&d->admission, (brig_capacity){sb->memory_mib, sb->disk_mib});
    sandbox_free(d, sb);
    return -1;
}

/* ---- delete -------------------------------------------------------------------------- */

#define DELETE_KILL_WAIT_MS 2000  /* how long a DELETE waits for the processes to die */
#define LAST_KILL_WAIT_MS   1000  /* per sandbox, for the last attempt (shutdown) */
#define RETRY_ALIVE_MS      50    /* first re-check of processes that have not died yet */
#define RETRY_ALIVE_MAX_MS  1000  /* ... doubling up to this */
#define RETRY_FAILED_MS     500   /* first retry of a cleanup that left something behind */
#define RETRY_FAILED_MAX_MS 15000 /* ... doubling up to this */

/* One attempt at the host side of an ended sandbox, on a teardown worker, bounded
 * (it never waits for the sandbox's processes unless wait_ms says so):
 * 1. its processes must be gone; then its capacity slot and memory go back to the
 *    admission at once (nothing of the sandbox runs any more);
 * 2. the runtime destroy (runc state, cgroups, mounts, disk, directory), then its
 *    network (after the runtime: with the namespace gone the kernel removes the
 *    link pair; not under a request that still uses it: that request's
 *    brig_sandbox_put removes it);
 * 3. its uid range is returned only once that succeeded: until then processes,
 *    files or cgroups of the range may be left, and no new sandbox may get it.
 * Returns 1 when done (the teardown's reference is dropped), 0 when it must be
 * attempted again. */
static int teardown_attempt(brigd *d, brig_sandbox *sb, int wait_ms)
{
    if (!sb->procs_gone) {
        if (d->rt->ops->kill(d->rt, sb->rt, wait_ms) < 0) {
            if (sb->teardown_checks++ == 0)
                brig_warn("sandbox %s: processes still alive after SIGKILL (uninterruptible "
                          "sleep?): its cleanup waits for them in the background",
                          sb->id);
            return 0;
        }
        sb->procs_gone = true;
        brig_admission_release(&d->admission, (brig_capacity){sb->memory_mib, sb->disk_mib});
    }
    int64_t t0 = brig_now_mono_ms();
    brig_error *derr = NULL;
    /* The runtime handle stays valid for requests that borrowed the sandbox
     * before it ended (their agent connections fail cleanly). */
    int r = d->rt->ops->destroy(d->rt, sb->id, sb->rt, &derr);
    pthread_mutex_lock(&d->lock);
    brig_net_sandbox *net = NULL;
    int how = r == 0 ? 1 : 2;
    if (sb->active_ops == 0) {
        net = sb->net;
        sb->net = NULL;
    } else if (sb->net) {
        sb->net_drop = how;
    }
    pthread_mutex_unlock(&d->lock);
    net_drop(d, net, how);
    if (r < 0) {
        /* 1st, 2nd, 4th, 8th... failure: a cleanup that keeps failing logs little. */
        int n = ++sb->teardown_fails;
        if ((n & (n - 1)) == 0)
            brig_err("sandbox %s: teardown (attempt %d; retried in the background): %s", sb->id, n,
                     derr ? derr->msg : "?");
        brig_error_clear(&derr);
        return 0;
    }
    if (sb->teardown_fails || sb->teardown_checks)
        brig_info("sandbox %s: deleted, at attempt %d", sb->id,
                  sb->teardown_fails + sb->teardown_checks + 1);
    else
        brig_info("sandbox %s: deleted (%lld ms)", sb->id, (long long)(brig_now_mono_ms() - t0));
    pthread_mutex_lock(&d->lock);
    uid_mark_locked(d, sb->uid_base, 0);
    brig_sandbox *dead = unref_locked(sb);
    pthread_mutex_unlock(&d->lock);
    if (dead)
        sandbox_free(d, dead);
    return 1;
}

/* Gives up on a teardown (shutdown, or no workers): its uid range stays taken for
 * the rest of this run, and the next start's reconcile removes what is left (its
 * row says deleted; the runtime still lists it). */
static void teardown_abandon(brigd *d, brig_sandbox *sb)
{
    brig_warn("sandbox %s: cleanup not finished; the next start completes it", sb->id);
    pthread_mutex_lock(&d->lock);
    brig_sandbox *dead = unref_locked(sb);
    pthread_mutex_unlock(&d->lock);
    if (dead)
        sandbox_free(d, dead);
}

/* The next attempt's delay: short while the processes are dying, longer for a
 * cleanup that failed; both double with every attempt. */
static int64_t retry_delay(const brig_sandbox *sb)
{
    int64_t base = sb->procs_gone ? RETRY_FAILED_MS : RETRY_ALIVE_MS;
    int64_t max = sb->procs_gone ? RETRY_FAILED_MAX_MS : RETRY_ALIVE_MAX_MS;
    int n = sb->procs_gone ? sb->teardown_fails : sb->teardown_checks;
    int64_t ms = base;
    while (--n > 0 && ms < max)
        ms *= 2;
    return ms < max ? ms : max;
}

/* Queues sb for an attempt at due (mono ms).  Needs d->teardown_lock. */
static void queue_locked(brigd *d, brig_sandbox *sb, int64_t due)
{
    sb->teardown_due = due;
    sb->teardown_next = d->teardown_queue;
    d->teardown_queue = sb;
    pthread_cond_broadcast(&d->teardown_cond);
}

/* Unlinks and returns the queued sandbox due first, when it is due (or at
 * shutdown: at once); else NULL, with *next its due time (0: queue empty).
 * Needs d->teardown_lock. */
static brig_sandbox *take_due_locked(brigd *d, int64_t now, int64_t *next)
{
    brig_sandbox **first = NULL;
    for (brig_sandbox **pp = &d->teardown_queue; *pp; pp = &(*pp)->teardown_next)
        if (first == NULL || (*pp)->teardown_due < (*first)->teardown_due)
            first = pp;
    *next = first ? (*first)->teardown_due : 0;
    if (first == NULL || ((*first)->teardown_due > now && !d->teardown_stop))
        return NULL;
    brig_sandbox *sb = *first;
    *first = sb->teardown_next;
    sb->teardown_next = NULL;
    return sb;
}

/* A teardown worker: attempts whatever is due.  Attempts never wait on a
 * sandbox's processes, so one that cannot die delays no other. */
static void *teardown_worker(void *arg)
{
    brigd *d = arg;
    pthread_mutex_lock(&d->teardown_lock);
    for (;;) {
        int64_t now = brig_now_mono_ms(), next = 0;
        brig_sandbox *sb = take_due_locked(d, now, &next);
        if (sb == NULL) {
            if (d->teardown_stop && d->teardown_queue == NULL)
                break;
            if (next > 0) {
                struct timespec ts = brig_mono_after(next - now);
                pthread_cond_timedwait(&d->teardown_cond, &d->teardown_lock, &ts);
            } else {
                pthread_cond_wait(&d->teardown_cond, &d->teardown_lock);
            }
            continue;
        }
        bool last = d->teardown_stop;
        pthread_mutex_unlock(&d->teardown_lock);
        int done = teardown_attempt(d, sb, last ? LAST_KILL_WAIT_MS : 0);
        if (!done && last) {
            teardown_abandon(d, sb);
            done = 1;
        }
        pthread_mutex_lock(&d->teardown_lock);
        if (!done)
            queue_locked(d, sb, brig_now_mono_ms() + retry_delay(sb));
        else if (--d->teardown_pending == 0)
            pthread_cond_broadcast(&d->teardown_cond);
    }
    pthread_mutex_unlock(&d->teardown_lock);
    return NULL;
}

/* Hands an ended, unlisted sandbox (its one reference) to the teardown. */
static void teardown_enqueue(brigd *d, brig_sandbox *sb)
{
    if (d->teardown_workers == 0) { /* none (a failed start-up): one attempt here */
        if (!teardown_attempt(d, sb, LAST_KILL_WAIT_MS))
            teardown_abandon(d, sb);
        return;
    }
    pthread_mutex_lock(&d->teardown_lock);
    d->teardown_pending++;
    queue_locked(d, sb, brig_now_mono_ms());
    pthread_mutex_unlock(&d->teardown_lock);
}

int brig_sandbox_teardown_start(brigd *d, brig_error **err)
{
    for (int i = 0; i < BRIG_TEARDOWN_WORKERS; i++) {
        int e = pthread_create(&d->teardown[i], NULL, teardown_worker, d);
        if (e != 0) {
            if (d->teardown_workers > 0)
                break; /* fewer workers still work */
            return brig_error_set(err, BRIG_E_INTERNAL, e, "start the teardown workers");
        }
        d->teardown_workers++;
    }
    return 0;
}

int brig_sandbox_teardown_drain(brigd *d, int64_t timeout_ms)
{
    struct timespec ts = brig_mono_after(timeout_ms);
    pthread_mutex_lock(&d->teardown_lock);
    while (d->teardown_pending > 0 &&
           pthread_cond_timedwait(&d->teardown_cond, &d->teardown_lock, &ts) != ETIMEDOUT)
        ;
    int left = d->teardown_pending;
    pthread_mutex_unlock(&d->teardown_lock);
    return left;
}

void brig_sandbox_teardown_stop(brigd *d)
{
    if (d->teardown_workers == 0)
        return;
    pthread_mutex_lock(&d->teardown_lock);
    d->teardown_stop = true;
    pthread_cond_broadcast(&d->teardown_cond);
    pthread_mutex_unlock(&d->teardown_lock);
    for (int i = 0; i < d->teardown_workers; i++)
        pthread_join(d->teardown[i], NULL); /* they empty the queue first */
    d->teardown_workers = 0;
}

/* Ends a sandbox that take_for_delete marked "deleting".  What the caller is
 * promised happens before the answer: SIGKILL to every process (and up to wait_ms
 * for them to die: a process in uninterruptible sleep dies only when it wakes, and
 * the teardown waits for that, not the caller), the final charge, the secrets
 * gone, the row deleted.  The rest is teardown_attempt(), queued: a create or a
 * delete should not wait ~20 ms for runc, the kernel and the file system. */
static void finish(brigd *d, brig_sandbox *sb, const char *reason, int wait_ms)
{
    pthread_mutex_lock(&d->lock);
    snprintf(sb->end_reason, sizeof(sb->end_reason), "%s", reason);
    pthread_mutex_unlock(&d->lock);
    d->rt->ops->kill(d->rt, sb->rt, wait_ms);
    int64_t now = brig_now_real_ms();
    brig_error *err = NULL;
    if (brig_billing_charge(d, sb->id, now, true, NULL, &err) < 0) {
        brig_err("sandbox %s: final charge: %s", sb->id, err->msg);
        brig_error_clear(&err);
    }
    brig_vault_delete_all(d->store, sb->id);
    brig_store_sandbox_set_state(d->store, sb->id, "deleted", reason, now, NULL);
    pthread_mutex_lock(&d->lock);
    sb->state = "deleted";
    unlink_locked(d, sb); /* the list's reference is now the teardown's */
    pthread_mutex_unlock(&d->lock);
    brig_info("sandbox %s: ended (%s)", sb->id, reason);
    teardown_enqueue(d, sb);
}

static brig_sandbox *take_for_delete(brigd *d, const brig_caller *c, const char *id)
{
    pthread_mutex_lock(&d->lock);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb && strcmp(sb->state, "running") == 0) {
        sb->state = "deleting"; /* listed (and shown) as such until its row says deleted */
    } else {
        sb = NULL;
    }
    pthread_mutex_unlock(&d->lock);
    return sb;
}

int brig_sandbox_delete(brigd *d, const brig_caller *c, const char *id, const char *reason,
                        brig_error **err)
{
    brig_sandbox *sb = take_for_delete(d, c, id);
    if (sb == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    finish(d, sb, reason, DELETE_KILL_WAIT_MS);
    return 0;
}

/* brigd's own stops (the janitor, the watch, --destroy-all) wait for nothing: the
 * janitor must never wait on a sandbox. */
int brig_sandbox_stop(brigd *d, const char *id, const char *reason)
{
    brig_sandbox *sb = take_for_delete(d, NULL, id);
    if (sb == NULL)
        return -1;
    brig_warn("sandbox %s: stopping (%s)", id, reason);
    finish(d, sb, reason, 0);
    return 0;
}

/* ---- the watch on inits ------------------------------------------------------------ */

/* Every running sandbox's init (its agent) is in one epoll set through the
 * runtime's exit fd, EPOLLONESHOT, keyed by a serial number rather than a pointer
 * (the sandbox may be gone when its event is read; its fd is closed, which drops
 * it from the set, when the handle is released).  An init that exits while its
 * sandbox is still "running" died on its own: a DELETE and brigd's own stops mark
 * it "deleting" before they kill it. */

/* Watches a sandbox that just became running (create, reconcile). */
static void watch(brigd *d, brig_sandbox *sb)
{
    int fd = d->watch_epfd >= 0 ? d->rt->ops->exit_fd(d->rt, sb->rt) : -1;
    if (fd < 0)
        return;
    pthread_mutex_lock(&d->lock);
    uint64_t key = sb->watch_id = ++d->watch_serial;
    pthread_mutex_unlock(&d->lock);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = key};
    if (epoll_ctl(d->watch_epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        brig_warn("sandbox %s: cannot watch its agent: %s", sb->id, strerror(errno));
}

static void agent_gone(brigd *d, uint64_t key)
{
    char id[BRIG_ID_MAX] = "";
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->watch_id == key && strcmp(sb->state, "running") == 0)
            snprintf(id, sizeof(id), "%s", sb->id);
    pthread_mutex_unlock(&d->lock);
    if (id[0])
        brig_sandbox_stop(d, id, "agent_lost");
}

static void *watcher(void *arg)
{
    brigd *d = arg;
    for (;;) {
        struct epoll_event ev[16];
        int n = epoll_wait(d->watch_epfd, ev, 16, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            brig_err("watch: %s", strerror(errno));
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 0) /* the wake-up eventfd: stop */
                return NULL;
            agent_gone(d, ev[i].data.u64);
        }
    }
}

int brig_sandbox_watch_start(brigd *d, brig_error **err)
{
    d->watch_epfd = epoll_create1(EPOLL_CLOEXEC);
    d->watch_wake = eventfd(0, EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (d->watch_epfd < 0 || d->watch_wake < 0 ||
        epoll_ctl(d->watch_epfd, EPOLL_CTL_ADD, d->watch_wake, &ev) < 0) {
        brig_error_sys(err, "watch on sandbox inits");
        goto fail;
    }
    int e = pthread_create(&d->watcher, NULL, watcher, d);
    if (e != 0) {
        brig_error_set(err, BRIG_E_INTERNAL, e, "start the watch on sandbox inits");
        goto fail;
    }
    d->watch_running = true;
    return 0;
fail:
    if (d->watch_epfd >= 0)
        close(d->watch_epfd);
    if (d->watch_wake >= 0)
        close(d->watch_wake);
    d->watch_epfd = d->watch_wake = -1;
    return -1;
}

void brig_sandbox_watch_stop(brigd *d)
{
    if (d->watch_running) {
        uint64_t one = 1;
        (void)!write(d->watch_wake, &one, sizeof(one));
        pthread_join(d->watcher, NULL);
        d->watch_running = false;
    }
    if (d->watch_epfd >= 0)
        close(d->watch_epfd);
    if (d->watch_wake >= 0)
        close(d->watch_wake);
    d->watch_epfd = d->watch_wake = -1;
}

/* ---- queries --------------------------------------------------------------------------- */

json_t *brig_sandbox_list(brigd *d, const brig_caller *c)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (brig_caller_sees(c, sb->account_id, sb->project_id))
            json_array_append_new(arr, sandbox_json_locked(d, sb));
    pthread_mutex_unlock(&d->lock);
    return arr;
}

json_t *brig_sandbox_json(brigd *d, const brig_sandbox *sb)
{
    pthread_mutex_lock(&d->lock);
    json_t *j = sandbox_json_locked(d, sb);
    pthread_mutex_unlock(&d->lock);
    return j;
}

/* The API's view of an ended sandbox's row (within the retention period), or NULL
 * when the caller may not see it. */
static json_t *ended_json(brigd *d, const brig_caller *c, const brig_sandbox_row *row)
{
    if (!brig_caller_sees(c, row->account_id, row->project_id))
        return NULL;
    if (row->deleted_at && row->deleted_at < brig_now_real_ms() - d->cfg.retention_ms)
        return NULL; /* past the retention period */
    char created[32], money[32];
    brig_format_time(row->created_at, created);
    brig_money_format(row->cost, money);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:I, s:s}", "id", row->id,
                     "project_id", row->project_id, "template", row->template, "tariff",
                     row->tariff, "state", row->state, "created_at", created, "deleted_at",
                     time_or_null(row->deleted_at), "reason",
                     row->reason[0] ? json_string(row->reason) : json_null(), "cost_micro_usd",
                     (json_int_t)row->cost, "cost", money);
}

int brig_sandbox_info(brigd *d, const brig_caller *c, const char *id, json_t **out,
                      brig_error **err)
{
    pthread_mutex_lock(&d->lock);
    brig_sandbox *sb = find_locked(d, c, id);
    json_t *j = sb ? sandbox_json_locked(d, sb) : NULL;
    pthread_mutex_unlock(&d->lock);
    if (j) {
        /* Money so far: what was charged, and the running total. */
        add_secret_names(d, id, j);
        *out = j;
        return 0;
    }
    brig_sandbox_row row;
    int found = brig_store_sandbox_get(d->store, id, &row, err);
    if (found < 0)
        return -1;
    bool ended = found && (strcmp(row.state, "deleted") == 0 || strcmp(row.state, "failed") == 0 ||
                           strcmp(row.state, "deleting") == 0);
    *out = ended ? ended_json(d, c, &row) : NULL;
    if (*out == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    return 0;
}

void brig_sandbox_explain_end(brigd *d, const brig_caller *c, const char *id, brig_error **err)
{
    if (*err == NULL || ((*err)->kind != BRIG_E_PROTOCOL && (*err)->kind != BRIG_E_INTERNAL))
        return;
    char reason[32] = "";
    pthread_mutex_lock(&d->lock);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb && strcmp(sb->state, "deleting") == 0)
        snprintf(reason, sizeof(reason), "%s", sb->end_reason[0] ? sb->end_reason : "deleted");
    bool live = sb && reason[0] == '\0';
    pthread_mutex_unlock(&d->lock);
    if (live)
        return;
    if (sb == NULL) { /* unlisted: ended, or never the caller's (then nothing is said) */
        brig_sandbox_row row;
        brig_error *qerr = NULL;
        int found = brig_store_sandbox_get(d->store, id, &row, &qerr);
        brig_error_clear(&qerr);
        if (found > 0 && strcmp(row.state, "deleted") == 0 &&
            (c == NULL || brig_caller_sees(c, row.account_id, row.project_id)))
            snprintf(reason, sizeof(reason), "%s", row.reason[0] ? row.reason : "deleted");
    }
    if (reason[0] == '\0')
        return;
    brig_error_clear(err);
    brig_error_set(err, BRIG_E_CONFLICT, 0, "sandbox %.40s ended while the request ran (%s)", id,
                   reason);
}

int brig_sandbox_set_timeout(brigd *d, const brig_caller *c, const char *id, int64_t ms,
                             json_t **out, brig_error **err)
{
    pthread_mutex_lock(&d->lock);
    brig_sandbox *sb = find_locked(d, c, id);
    if (sb == NULL || strcmp(sb->state, "running") != 0) {
        pthread_mutex_unlock(&d->lock);
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    }
    int64_t now = brig_now_real_ms(), until = now + ms;
    if (until - sb->created_at > d->cfg.lifetime_max_ms) {
        int64_t left = (sb->created_at + d->cfg.lifetime_max_ms - now) / 1000;
        pthread_mutex_unlock(&d->lock);
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a sandbox lives at most %lld s: this one can be extended by at "
                              "most %lld s from now",
                              (long long)(d->cfg.lifetime_max_ms / 1000),
                              (long long)(left > 0 ? left : 0));
    }
    sb->expires_at = until;
    sb->last_activity = now;
    pthread_mutex_unlock(&d->lock);
    brig_store_sandbox_set_expiry(d->store, id, until, NULL);
    return brig_sandbox_info(d, c, id, out, err);
}

void brig_sandbox_apply_policy(brigd *d, const char *project_id, const brig_egress *policy)
{
    if (d->net == NULL)
        return;
    /* Borrow every running sandbox of the project, then apply outside the lock. */
    brig_sandbox **list = NULL;
    size_t n = 0;
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->project_id, project_id) == 0 && sb->net &&
            strcmp(sb->state, "running") == 0) {
            sb->refs++;
            sb->active_ops++;
            d->ops_inflight++;
            list = brig_xrealloc(list, (n + 1) * sizeof(*list));
            list[n++] = sb;
        }
    }
    pthread_mutex_unlock(&d->lock);
    for (size_t i = 0; i < n; i++) {
        brig_error *err = NULL;
        if (brig_net_set_policy(d->net, list[i]->net, policy, &err) < 0) {
            brig_err("sandbox %s: apply egress policy: %s", list[i]->id, err->msg);
            brig_error_clear(&err);
        }
        brig_sandbox_put(d, list[i]);
    }
    free(list);
}

int brig_sandbox_network_log(brigd *d, const brig_caller *c, const char *id, json_t **out,
                             brig_error **err)
{
    brig_sandbox *sb = NULL;
    if (brig_sandbox_get(d, c, id, &sb, err) < 0)
        return -1;
    /* DNS names are the sandbox's own text (a query for <value>.evil.test): the
     * log is shown through its redactor like output. */
    brig_redactor *red = NULL;
    if (brig_sandbox_redactor(d, sb, &red, err) < 0) {
        brig_sandbox_put(d, sb);
        return -1;
    }
    *out = sb->net ? brig_net_log(d->net, sb->net) : json_array();
    brig_sandbox_put(d, sb);
    brig_redact_json(brig_redactor_dns(red), *out);
    brig_redactor_free(red);
    return 0;
}

/* ---- reconcile -------------------------------------------------------------------------- */

typedef struct reconcile_ctx {
    brigd *d;
    char **kept; /* ids re-attached */
    size_t n_kept;
} reconcile_ctx;

static void reattach_network(brigd *d, brig_sandbox *sb)
{
    if (d->net == NULL)
        return;
    json_t *ej = brig_project_egress(d, sb->project_id);
    brig_egress pol;
    brig_error *err = NULL;
    int fd = -1;
    if (ej && brig_egress_from_json(ej, &pol, &err) == 0) {
        fd = d->rt->ops->netns(d->rt, sb->rt, &err);
        if (fd >= 0 && brig_net_reattach(d->net, sb->id, fd, &pol, &sb->net, &err) < 0)
            sb->net = NULL;
        brig_egress_dispose(&pol);
    }
    if (fd >= 0)
        close(fd);
    json_decref(ej);
    if (err) {
        brig_err("sandbox %s: network after restart: %s", sb->id, err->msg);
        brig_error_clear(&err);
    }
}

static void reconcile_row(const brig_sandbox_row *row, void *arg)
{
    reconcile_ctx *c = arg;
    brigd *d = c->d;
    brig_error *err = NULL;
    brig_rt_sandbox *h = NULL;
    if (strcmp(row->state, "running") == 0 && d->rt->ops->attach(d->rt, row->id, &h, &err) == 0) {
        brig_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
        memcpy(sb->id, row->id, sizeof(sb->id));
        memcpy(sb->account_id, row->account_id, sizeof(sb->account_id));
        memcpy(sb->project_id, row->project_id, sizeof(sb->project_id));
        memcpy(sb->template, row->template, sizeof(sb->template));
        memcpy(sb->template_key, row->template_key, sizeof(sb->template_key));
        memcpy(sb->tariff, row->tariff, sizeof(sb->tariff));
        const brig_tariff *t = brig_config_tariff(&d->cfg, row->tariff);
        sb->vcpus = t ? t->vcpus : 1;
        sb->memory_mib = t ? t->memory_mib : 0;
        sb->disk_mib = t ? t->disk_mib : 0;
        sb->created_at = row->created_at;
        sb->price = row->price;
        sb->uid_base = row->uid_base;
        sb->idle_timeout_ms = row->idle_timeout_ms;
        sb->expires_at = row->expires_at;
        sb->last_activity = brig_now_real_ms();
        sb->env = row->env_json ? json_loads(row->env_json, 0, NULL) : NULL;
        sb->state = "running";
        sb->refs = 1;
        sb->rt = h;
        reattach_network(d, sb);
        pthread_mutex_lock(&d->lock);
        uid_mark_locked(d, row->uid_base, 1);
        sb->next = d->sandboxes;
        d->sandboxes = sb;
        d->n_sandboxes++;
        pthread_mutex_unlock(&d->lock);
        watch(d, sb);
        brig_admission_hold(&d->admission, (brig_capacity){sb->memory_mib, sb->disk_mib});
        c->kept = brig_xrealloc(c->kept, (c->n_kept + 1) * sizeof(char *));
        c->kept[c->n_kept++] = brig_xstrdup(row->id);
        brig_info("sandbox %s: re-attached", row->id);
        return;
    }
    const char *why = err ? err->msg : row->state;
    brig_warn("sandbox %s: not usable after restart (%s); cleaning up", row->id, why);
    brig_error_clear(&err);
    if (d->rt->ops->destroy(d->rt, row->id, NULL, &err) < 0) {
        brig_err("sandbox %s: cleanup: %s", row->id, err->msg);
        brig_error_clear(&err);
        pthread_mutex_lock(&d->lock);
        uid_mark_locked(d, row->uid_base, 1); /* not clean: keep its ids out of use */
        pthread_mutex_unlock(&d->lock);
        return; /* stays "deleting"/"creating" so the next start retries */
    }
    /* Charged for its life up to now: it may have run while brigd was down. */
    if (brig_billing_charge(d, row->id, brig_now_real_ms(), true, NULL, &err) < 0) {
        brig_err("sandbox %s: final charge: %s", row->id, err->msg);
        brig_error_clear(&err);
    }
    brig_vault_delete_all(d->store, row->id);
    brig_store_sandbox_set_state(d->store, row->id, "deleted", "lost_on_restart",
                                 brig_now_real_ms(), NULL);
}

/* A leftover whose cleanup failed: retried in the background like any teardown,
 * with its uid range (from its row, when there is one) kept out of use until it
 * succeeds.  It holds no capacity slot in this run. */
static void teardown_leftover(brigd *d, const char *id)
{
    brig_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", id);
    brig_error *err = NULL;
    brig_sandbox_row row;
    if (brig_store_sandbox_get(d->store, id, &row, &err) > 0)
        sb->uid_base = row.uid_base;
    brig_error_clear(&err);
    sb->state = "deleted";
    sb->refs = 1;
    sb->procs_gone = true;
    pthread_mutex_lock(&d->lock);
    uid_mark_locked(d, sb->uid_base, 1);
    pthread_mutex_unlock(&d->lock);
    teardown_enqueue(d, sb);
}

void brig_sandbox_reconcile(brigd *d)
{
    reconcile_ctx c = {.d = d};
    brig_error *err = NULL;
    if (brig_store_sandbox_each_live(d->store, reconcile_row, &c, &err) < 0) {
        brig_err("reconcile: %s", err->msg);
        brig_error_clear(&err);
    }
    /* Whatever the runtime holds that is neither kept nor known goes. */
    char **ids = NULL;
    size_t n = 0;
    if (d->rt->ops->list(d->rt, &ids, &n, &err) < 0) {
        brig_err("reconcile: %s", err->msg);
        brig_error_clear(&err);
    }
    for (size_t i = 0; i < n; i++) {
        int kept = 0;
        for (size_t k = 0; k < c.n_kept; k++)
            kept |= strcmp(c.kept[k], ids[i]) == 0;
        if (!kept) {
            brig_warn("reconcile: removing leftover sandbox %s", ids[i]);
            if (d->rt->ops->destroy(d->rt, ids[i], NULL, &err) < 0) {
                brig_err("reconcile: %s: %s", ids[i], err->msg);
                brig_error_clear(&err);
                teardown_leftover(d, ids[i]);
            }
        }
        free(ids[i]);
    }
    free(ids);
    if (d->net)
        brig_net_cleanup(d->net, c.kept, c.n_kept);
    for (size_t k = 0; k < c.n_kept; k++)
        free(c.kept[k]);
    free(c.kept);
}

void brig_sandbox_forget_all(brigd *d)
{
    pthread_mutex_lock(&d->lock);
    brig_sandbox *list = d->sandboxes;
    d->sandboxes = NULL;
    d->n_sandboxes = 0;
    pthread_mutex_unlock(&d->lock);
    while (list) {
        brig_sandbox *next = list->next;
        if (list->net)
            brig_net_forget(d->net, list->net);
        sandbox_free(d, list);
        list = next;
    }
}
