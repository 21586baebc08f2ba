/*
 * volumes.c - making, listing, deleting and billing volumes (see volumes.h).
 *
 * A create checks everything before it makes anything: the caller (an admin key), the
 * name and size, the project, the account's balance and spend limits, its volumes'
 * total (volume_mib_per_account), then takes the size from the host's disk budget (the
 * admission's, which sandboxes' disks share), makes the file system (the runtime's) and
 * writes the row last: a crash in between leaves bytes without a row, which the next
 * start removes.  A delete marks the row deleted, then removes the bytes (the next start
 * removes what a crash left).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "account/billing.h"
#include "account/tenants.h"
#include "core/format.h"
#include "log.h"
#include "timeline.h"
#include "util.h"
#include "volumes.h"

/* Creates one at a time: the account's total is checked and taken together. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static json_t *volume_json(brigd *d, const brig_volume_row *v)
{
    char created[32];
    brig_format_time(v->created_at, created);
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:o, s:I, s:o}", "id", v->id, "name", v->name,
                     "project_id", v->project_id, "size_mib", (json_int_t)v->size_mib, "created_at",
                     created, "cost_micro_usd", (json_int_t)v->cost, "cost",
                     brig_money_json(v->cost), "price_micro_usd_per_gib_hour",
                     (json_int_t)d->cfg.volume_price_micro_usd_per_gib_hour, "mounted_by",
                     brig_volmounts_users(d, v->id));
}

/* The project a request is about: project, or the caller's (NULL); BRIG_E_NOT_FOUND
 * for one the caller may not see (a sandbox key sees its own only). */
static int project_of(brigd *d, const brig_caller *c, const char *project, const char **out,
                      brig_error **err)
{
    *out = c->project_id;
    if (project == NULL || strcmp(project, c->project_id) == 0)
        return 0;
    json_t *p = NULL;
    if (!brig_caller_is(c, "admin") || brig_project_get(d, c, project, &p, err) < 0) {
        brig_error_clear(err);
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no project '%.40s'", project);
    }
    json_decref(p);
    *out = project;
    return 0;
}

static int lookup(brigd *d, const brig_caller *c, const char *name, const char *project,
                  brig_volume_row *v, brig_error **err)
{
    const char *prj = NULL;
    if (project_of(d, c, project, &prj, err) < 0)
        return -1;
    int found = brig_store_volume_get(d->store, prj, name, v, err);
    if (found == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no volume '%.40s' in project %s", name,
                              prj);
    return found < 0 ? -1 : 0;
}

/* ---- create ------------------------------------------------------------------------------ */

typedef struct total_ctx {
    int64_t mib;
} total_ctx;

static void add_size(const brig_volume_row *v, void *arg)
{
    ((total_ctx *)arg)->mib += v->size_mib;
}

/* What a create may not pass, in order: the caller, the name and size, the project, no
 * volume of that name yet, money, the account's volumes together. */
static int create_checks(brigd *d, const brig_caller *c, const char *name, int64_t size_mib,
                         const char *project, const char **prj, brig_error **err)
{
    if (!brig_caller_is(c, "admin"))
        return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                              "a sandbox-scoped key cannot create volumes (an admin key can)");
    if (!brig_volume_name_ok(name))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'name' must be 1 to 32 of a-z, 0-9, '-' and '_', a letter or "
                              "digit first (not 'vol_…')");
    if (size_mib < BRIG_VOLUME_MIN_MIB || size_mib > d->cfg.volume_max_mib)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'size_mib' must be an integer in [%d, %lld] (volume_max_mib)",
                              BRIG_VOLUME_MIN_MIB, (long long)d->cfg.volume_max_mib);
    if (project_of(d, c, project, prj, err) < 0)
        return -1;
    brig_volume_row v;
    int found = brig_store_volume_get(d->store, *prj, name, &v, err);
    if (found != 0)
        return found < 0 ? -1
                         : brig_error_set(err, BRIG_E_CONFLICT, 0,
                                          "project %s has a volume named '%s' already", *prj, name);
    if (brig_billing_admit(d, c->account_id, brig_now_real_ms(), NULL, err) < 0)
        return -1;
    total_ctx t = {0};
    if (brig_store_volume_each(d->store, c->account_id, NULL, add_size, &t, err) < 0)
        return -1;
    if (t.mib + size_mib > d->cfg.volume_mib_per_account)
        return brig_error_set(err, BRIG_E_LIMIT, 0,
                              "the account's volumes hold %lld MiB of the %lld MiB it may have "
                              "(volume_mib_per_account): %lld MiB more do not fit",
                              (long long)t.mib, (long long)d->cfg.volume_mib_per_account,
                              (long long)size_mib);
    return 0;
}

/* The disk, the bytes, the row: each undone when a later one fails. */
static int create_locked(brigd *d, const brig_caller *c, const char *name, int64_t size_mib,
                         const char *project, brig_volume_row *v, brig_error **err)
{
    const char *prj = NULL;
    if (create_checks(d, c, name, size_mib, project, &prj, err) < 0 ||
        brig_admission_take_disk(&d->admission, size_mib, err) < 0)
        return -1;
    memset(v, 0, sizeof(*v));
    brig_id_new("vol", v->id);
    snprintf(v->account_id, sizeof(v->account_id), "%s", c->account_id);
    snprintf(v->project_id, sizeof(v->project_id), "%s", prj);
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->size_mib = size_mib;
    v->created_at = brig_now_real_ms();
    int r = d->rt->ops->volume_make(d->rt, v->id, size_mib, err);
    if (r == 0) {
        r = brig_store_volume_insert(d->store, v, err);
        if (r == 0)
            brig_error_set(err, BRIG_E_CONFLICT, 0, "project %s has a volume named '%s' already",
                           prj, name);
        r = r == 1 ? 0 : -1;
        if (r < 0)
            d->rt->ops->volume_remove(d->rt, v->id, NULL);
    }
    if (r < 0)
        brig_admission_release_disk(&d->admission, size_mib);
    return r;
}

int brig_volume_create(brigd *d, const brig_caller *c, const char *name, int64_t size_mib,
                       const char *project, json_t **out, brig_error **err)
{
    brig_volume_row v;
    pthread_mutex_lock(&create_lock);
    int r = create_locked(d, c, name, size_mib, project, &v, err);
    pthread_mutex_unlock(&create_lock);
    if (r < 0)
        return -1;
    brig_info("volume %s: created (%s, %lld MiB, project %s)", v.id, v.name, (long long)v.size_mib,
              v.project_id);
    brig_timeline_project(d, c, v.project_id, "volume.created",
                          json_pack("{s:s, s:s, s:I}", "volume_id", v.id, "name", v.name,
                                    "size_mib", (json_int_t)v.size_mib));
    *out = volume_json(d, &v);
    return 0;
}

/* ---- list, get, delete --------------------------------------------------------------------- */

typedef struct list_ctx {
    brigd *d;
    json_t *arr;
} list_ctx;

static void add_json(const brig_volume_row *v, void *arg)
{
    list_ctx *l = arg;
    json_array_append_new(l->arr, volume_json(l->d, v));
}

int brig_volume_list(brigd *d, const brig_caller *c, const char *project, json_t **out,
                     brig_error **err)
{
    const char *prj = NULL;
    if (project_of(d, c, project, &prj, err) < 0)
        return -1;
    if (project == NULL && brig_caller_is(c, "admin"))
        prj = NULL; /* every project of the account */
    list_ctx l = {d, json_array()};
    if (brig_store_volume_each(d->store, c->account_id, prj, add_json, &l, err) < 0) {
        json_decref(l.arr);
        return -1;
    }
    *out = l.arr;
    return 0;
}

int brig_volume_get(brigd *d, const brig_caller *c, const char *name, const char *project,
                    json_t **out, brig_error **err)
{
    brig_volume_row v;
    if (lookup(d, c, name, project, &v, err) < 0)
        return -1;
    *out = volume_json(d, &v);
    return 0;
}

/* A delete, while no sandbox mounts the volume (brig_volmounts_exclusive). */
static int delete_locked(brigd *d, void *arg, brig_error **err)
{
    const brig_volume_row *v = arg;
    int64_t now = brig_now_real_ms();
    brig_error *e = NULL;
    if (brig_billing_charge_volume(d, v->id, now, true, NULL, &e) < 0) {
        brig_err("volume %s: final charge: %s", v->id, e->msg);
        brig_error_clear(&e);
    }
    int found = brig_store_volume_delete(d->store, v->id, now, err);
    if (found <= 0)
        return found < 0 ? -1
                         : brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no volume '%.40s'", v->name);
    brig_admission_release_disk(&d->admission, v->size_mib);
    if (d->rt->ops->volume_remove(d->rt, v->id, &e) < 0) { /* the next start tries again */
        brig_err("volume %s: remove: %s", v->id, e->msg);
        brig_error_clear(&e);
    }
    return 0;
}

int brig_volume_delete(brigd *d, const brig_caller *c, const char *name, const char *project,
                       brig_error **err)
{
    if (!brig_caller_is(c, "admin"))
        return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                              "a sandbox-scoped key cannot delete volumes (an admin key can)");
    brig_volume_row v;
    if (lookup(d, c, name, project, &v, err) < 0 ||
        brig_volmounts_exclusive(d, v.id, v.name, delete_locked, &v, err) < 0)
        return -1;
    brig_info("volume %s: deleted (%s)", v.id, v.name);
    brig_timeline_project(d, c, v.project_id, "volume.deleted",
                          json_pack("{s:s, s:s}", "volume_id", v.id, "name", v.name));
    return 0;
}

/* ---- start-up, billing ------------------------------------------------------------------------
 */

typedef struct ids_ctx {
    brigd *d;
    char **ids;
    size_t n;
} ids_ctx;

/* At start: its disk held; when volumes cost nothing now, that time is not charged later. */
static void start_one(const brig_volume_row *v, void *arg)
{
    ids_ctx *x = arg;
    brigd *d = x->d;
    brig_admission_hold_disk(&d->admission, v->size_mib);
    if (d->cfg.volume_price_micro_usd_per_gib_hour == 0)
        brig_billing_charge_volume(d, v->id, brig_now_real_ms(), false, NULL, NULL);
}

static void add_id_only(const brig_volume_row *v, void *arg)
{
    ids_ctx *x = arg;
    x->ids = brig_xrealloc(x->ids, (x->n + 1) * sizeof(char *));
    x->ids[x->n++] = brig_xstrdup(v->id);
}

static void free_ids(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

void brig_volumes_start(brigd *d)
{
    brig_volmounts_load(d);
    ids_ctx x = {d, NULL, 0};
    brig_error *err = NULL;
    if (brig_store_volume_each(d->store, NULL, NULL, start_one, &x, &err) < 0) {
        brig_err("volumes: %s", err->msg);
        brig_error_clear(&err);
    }
}

static bool listed(char **ids, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ids[i], id) == 0)
            return true;
    return false;
}

void brig_volumes_reconcile(brigd *d)
{
    char **held = NULL, **kept = NULL;
    size_t n_held = 0, n_kept = 0;
    brig_volmounts_sweep(d, &held, &n_held); /* mounted by sandboxes still there */
    ids_ctx x = {d, NULL, 0};
    brig_error *err = NULL;
    if (brig_store_volume_each(d->store, NULL, NULL, add_id_only, &x, &err) < 0 ||
        d->rt->ops->volume_list(d->rt, &kept, &n_kept, &err) < 0) {
        brig_err("volumes: reconcile: %s", err->msg);
        brig_error_clear(&err);
    }
    for (size_t i = 0; i < n_kept; i++) {
        const char *id = kept[i];
        int r = 0;
        if (!listed(x.ids, x.n, id)) { /* a create or a delete cut short */
            brig_warn("volume %s: no such volume in the store: removing its leftovers", id);
            r = d->rt->ops->volume_remove(d->rt, id, &err);
        } else if (!listed(held, n_held, id)) {
            r = d->rt->ops->volume_unmount(d->rt, id, &err);
        }
        if (r < 0) {
            brig_err("volume %s: %s", id, err->msg);
            brig_error_clear(&err);
        }
    }
    free_ids(kept, n_kept);
    free_ids(held, n_held);
    free_ids(x.ids, x.n);
}

void brig_volumes_stop(brigd *d)
{
    brig_volmounts_free(d);
}

static void bill_one(const brig_volume_row *v, void *arg)
{
    ids_ctx *x = arg;
    brig_error *err = NULL;
    if (brig_billing_charge_volume(x->d, v->id, brig_now_real_ms(), false, NULL, &err) < 0) {
        brig_err("volume %s: charge: %s", v->id, err->msg);
        brig_error_clear(&err);
    }
}

void brig_volumes_bill(brigd *d, int64_t now)
{
    if (d->cfg.volume_price_micro_usd_per_gib_hour == 0 ||
        now - d->volumes_billed_at < d->cfg.billing_interval_ms)
        return;
    d->volumes_billed_at = now;
    ids_ctx x = {d, NULL, 0};
    brig_error *err = NULL;
    if (brig_store_volume_each(d->store, NULL, NULL, bill_one, &x, &err) < 0) {
        brig_err("volumes: billing: %s", err->msg);
        brig_error_clear(&err);
    }
}
