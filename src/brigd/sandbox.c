/*
 * sandbox.c - sandbox lifecycle (see sandbox.h).
 *
 * Order of a create, so that a crash at any point is cleaned up by reconcile:
 * store row (creating) -> list entry -> runtime create -> store row (running).
 * Order of a delete: unlist (no new borrowers) -> runtime destroy (kills every
 * process; in-flight requests see their agent connection close) -> store row
 * (deleted) -> the handle is freed by the last borrower.
 */
#include "sandbox.h"

#include <string.h>
#include <time.h>

#include "log.h"
#include "template.h"
#include "util.h"

void brig_format_time(int64_t ms, char out[32])
{
    char tmp[64];
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
    snprintf(out, 32, "%.31s", tmp);
}

/* The API's view of a sandbox; needs d->lock (for state). */
static json_t *sandbox_json_locked(const brig_sandbox *sb)
{
    char created[32];
    brig_format_time(sb->created_at, created);
    json_t *env_names = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(sb->env, k, v) json_array_append_new(env_names, json_string(k));
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "id", sb->id, "template", sb->template,
                     "tariff", sb->tariff, "state", sb->state, "created_at", created, "env",
                     env_names);
}

json_t *brig_sandbox_json(brigd *d, const brig_sandbox *sb)
{
    pthread_mutex_lock(&d->lock);
    json_t *j = sandbox_json_locked(sb);
    pthread_mutex_unlock(&d->lock);
    return j;
}

json_t *brig_sandbox_command_env(const brig_sandbox *sb, json_t *request_env)
{
    if (json_object_size(sb->env) == 0 && json_object_size(request_env) == 0)
        return NULL;
    json_t *env = sb->env ? json_copy(sb->env) : json_object();
    if (request_env)
        json_object_update(env, request_env);
    return env;
}

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

/* Drops one reference; frees the sandbox with the last one. Needs d->lock. */
static brig_sandbox *unref_locked(brig_sandbox *sb)
{
    return --sb->refs == 0 ? sb : NULL;
}

#define UID_RANGE 65536

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
    free(sb);
}

void brig_sandbox_put(brigd *d, brig_sandbox *sb)
{
    if (sb == NULL)
        return;
    pthread_mutex_lock(&d->lock);
    brig_sandbox *dead = unref_locked(sb);
    pthread_mutex_unlock(&d->lock);
    if (dead)
        sandbox_free(d, dead);
}

int brig_sandbox_create(brigd *d, const char *account_id, const brig_sandbox_opts *opts,
                        json_t **out, brig_error **err)
{
    const char *tname = opts->template ? opts->template : d->cfg.default_template;
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
    const char *tariff_name = opts->tariff ? opts->tariff : d->cfg.default_tariff;
    const brig_tariff *tariff = brig_config_tariff(&d->cfg, tariff_name);
    if (tariff == NULL) {
        brig_template_dispose(&t);
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "no tariff named '%.32s' (see GET /v1/tariffs)", tariff_name);
    }
    brig_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    brig_id_new("sbx", sb->id);
    snprintf(sb->tariff, sizeof(sb->tariff), "%s", tariff->name);
    sb->env = opts->env && json_object_size(opts->env) ? json_deep_copy(opts->env) : NULL;
    snprintf(sb->account_id, sizeof(sb->account_id), "%s", account_id);
    snprintf(sb->template, sizeof(sb->template), "%s", t.name);
    memcpy(sb->template_key, t.key, sizeof(sb->template_key));
    sb->created_at = brig_now_real_ms();
    sb->state = "creating";
    sb->refs = 2; /* the list's and ours */
    pthread_mutex_lock(&d->lock);
    sb->uid_base = uid_take_locked(d);
    pthread_mutex_unlock(&d->lock);
    if (sb->uid_base == 0) {
        brig_template_dispose(&t);
        json_decref(sb->env);
        free(sb);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "all %lld user-id ranges are in use: too many live sandboxes",
                              (long long)d->cfg.uid_ranges);
    }

    brig_sandbox_row row = {0};
    memcpy(row.id, sb->id, sizeof(row.id));
    memcpy(row.account_id, sb->account_id, sizeof(row.account_id));
    memcpy(row.template, sb->template, sizeof(row.template));
    memcpy(row.template_key, sb->template_key, sizeof(row.template_key));
    snprintf(row.state, sizeof(row.state), "creating");
    row.created_at = sb->created_at;
    row.uid_base = sb->uid_base;
    memcpy(row.tariff, sb->tariff, sizeof(row.tariff));
    row.env_json = sb->env ? json_dumps(sb->env, JSON_COMPACT) : NULL;
    int ins = brig_store_sandbox_insert(d->store, &row, err);
    free(row.env_json);
    if (ins < 0) {
        brig_template_dispose(&t);
        pthread_mutex_lock(&d->lock);
        uid_mark_locked(d, sb->uid_base, 0);
        pthread_mutex_unlock(&d->lock);
        json_decref(sb->env);
        free(sb);
        return -1;
    }
    pthread_mutex_lock(&d->lock);
    sb->next = d->sandboxes;
    d->sandboxes = sb;
    d->n_sandboxes++;
    pthread_mutex_unlock(&d->lock);

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
    int64_t t0 = brig_now_mono_ms();
    brig_rt_sandbox *h = NULL;
    int r = d->rt->ops->create(d->rt, &spec, &h, err);
    brig_template_dispose(&t);

    pthread_mutex_lock(&d->lock);
    if (r == 0) {
        sb->rt = h;
        sb->state = "running";
    } else {
        unlink_locked(d, sb);
        sb->refs = 0;
        uid_mark_locked(d, sb->uid_base, 0); /* create cleaned up after itself */
    }
    pthread_mutex_unlock(&d->lock);

    if (r < 0) {
        brig_store_sandbox_set_state(d->store, sb->id, "failed",
                                     err && *err ? (*err)->msg : "create failed",
                                     brig_now_real_ms(), NULL);
        brig_warn("sandbox %s: create failed: %s", sb->id, err && *err ? (*err)->msg : "?");
        json_decref(sb->env);
        free(sb);
        return -1;
    }
    brig_store_sandbox_set_state(d->store, sb->id, "running", NULL, brig_now_real_ms(), NULL);
    brig_info("sandbox %s: running (%s, %lld ms)", sb->id, sb->template,
              (long long)(brig_now_mono_ms() - t0));
    *out = brig_sandbox_json(d, sb);
    brig_sandbox_put(d, sb);
    return 0;
}

int brig_sandbox_get(brigd *d, const char *account_id, const char *id, brig_sandbox **out,
                     brig_error **err)
{
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->id, id) == 0 && strcmp(sb->account_id, account_id) == 0 &&
            strcmp(sb->state, "running") == 0) {
            sb->refs++;
            pthread_mutex_unlock(&d->lock);
            *out = sb;
            return 0;
        }
    }
    pthread_mutex_unlock(&d->lock);
    /* Same answer for "never existed" and "someone else's": ids leak nothing. */
    return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
}

int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err)
{
    return d->rt->ops->connect(d->rt, sb->rt, err);
}

int brig_sandbox_delete(brigd *d, const char *account_id, const char *id, const char *reason,
                        brig_error **err)
{
    brig_sandbox *sb = NULL;
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *s = d->sandboxes; s; s = s->next) {
        if (strcmp(s->id, id) == 0 && strcmp(s->account_id, account_id) == 0 &&
            strcmp(s->state, "running") == 0) {
            sb = s;
            break;
        }
    }
    if (sb) {
        sb->state = "deleting";
        unlink_locked(d, sb); /* the list's reference is now ours */
    }
    pthread_mutex_unlock(&d->lock);
    if (sb == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);

    brig_store_sandbox_set_state(d->store, sb->id, "deleting", reason, brig_now_real_ms(), NULL);
    int64_t t0 = brig_now_mono_ms();
    brig_error *derr = NULL;
    int r = d->rt->ops->destroy(d->rt, sb->id, sb->rt, &derr);
    if (r < 0) {
        /* Left in "deleting": the next start's reconcile retries the cleanup. */
        brig_err("sandbox %s: destroy: %s", sb->id, derr->msg);
        brig_error_clear(&derr);
    } else {
        brig_store_sandbox_set_state(d->store, sb->id, "deleted", reason, brig_now_real_ms(), NULL);
        brig_info("sandbox %s: deleted (%s, %lld ms)", sb->id, reason,
                  (long long)(brig_now_mono_ms() - t0));
    }
    pthread_mutex_lock(&d->lock);
    sb->state = "deleted";
    if (r == 0) /* a range whose processes may live on stays taken */
        uid_mark_locked(d, sb->uid_base, 0);
    brig_sandbox *dead = unref_locked(sb);
    pthread_mutex_unlock(&d->lock);
    if (dead)
        sandbox_free(d, dead);
    return 0;
}

json_t *brig_sandbox_list(brigd *d, const char *account_id)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->account_id, account_id) == 0)
            json_array_append_new(arr, sandbox_json_locked(sb));
    pthread_mutex_unlock(&d->lock);
    return arr;
}

/* ---- reconcile ------------------------------------------------------------- */

typedef struct reconcile_ctx {
    brigd *d;
    char **kept; /* ids re-attached */
    size_t n_kept;
} reconcile_ctx;

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
        memcpy(sb->template, row->template, sizeof(sb->template));
        memcpy(sb->template_key, row->template_key, sizeof(sb->template_key));
        sb->created_at = row->created_at;
        sb->uid_base = row->uid_base;
        memcpy(sb->tariff, row->tariff, sizeof(sb->tariff));
        sb->env = row->env_json ? json_loads(row->env_json, 0, NULL) : NULL;
        sb->state = "running";
        sb->refs = 1;
        sb->rt = h;
        pthread_mutex_lock(&d->lock);
        uid_mark_locked(d, row->uid_base, 1);
        sb->next = d->sandboxes;
        d->sandboxes = sb;
        d->n_sandboxes++;
        pthread_mutex_unlock(&d->lock);
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
    brig_store_sandbox_set_state(d->store, row->id, "deleted", "lost_on_restart",
                                 brig_now_real_ms(), NULL);
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
            }
        }
        free(ids[i]);
    }
    free(ids);
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
        sandbox_free(d, list);
        list = next;
    }
}
