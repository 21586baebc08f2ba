/*
 * snapshots.c - an account's snapshots (see snapshots.h).
 *
 * A snapshot: its id, the sandbox frozen (pause.h: brig_sandbox_frozen_do), the driver's
 * copy of its layer, then its row.  A crash between the copy and the row leaves a layer
 * no row names: the copy is removed when the row cannot be written, and a snapshot is
 * only ever used through its row.
 */
#include "snapshots.h"

#include <string.h>

#include "account/billing.h"
#include "core/format.h"
#include "core/id.h"
#include "log.h"
#include "pause.h"
#include "registry.h"
#include "timeline.h"
#include "util.h"

static json_t *snapshot_json(const brig_snapshot_row *r)
{
    char at[32];
    brig_format_time(r->created_at, at);
    return json_pack("{s:s, s:o, s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "id", r->id, "name",
                     r->name[0] ? json_string(r->name) : json_null(), "project_id", r->project_id,
                     "source_id", r->source_id, "template", r->template, "disk_mib",
                     (json_int_t)r->disk_mib, "bytes", (json_int_t)r->bytes, "digest", r->digest,
                     "created_at", at);
}

typedef struct take {
    brigd *d;
    brig_sandbox *sb;
    brig_snapshot_row *row;
    bool durable, memory;
} take;

/* Under the pause lock (pause.h): a sandbox paused by a request stays paused, and a fork
 * with memory needs it running (its agent closes its connections first). */
static int take_layer(void *arg, brig_rt_sandbox *rt, brig_error **err)
{
    take *t = arg;
    brig_runtime *r = t->d->rt;
    brig_sandbox_view v;
    brig_registry_view_of(t->d, t->sb, &v);
    brig_sandbox_view_dispose(&v);
    if (t->memory && v.state != BRIG_SB_RUNNING)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "sandbox '%.40s' is %s: a fork with memory is of a running one",
                              t->row->source_id, brig_sb_state_name(v.state));
    return (t->memory ? r->ops->snapshot_memory : r->ops->snapshot_take)(
        r, rt, t->row->id, t->durable, t->row->digest, &t->row->bytes, err);
}

static int take_snapshot(brigd *d, const brig_caller *c, const char *sandbox_id, const char *name,
                         bool durable, bool memory, json_t **out, brig_error **err)
{
    brig_sandbox_view v;
    if (!brig_registry_view(d, c, sandbox_id, &v))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", sandbox_id);
    brig_sandbox_view_dispose(&v);
    brig_sandbox *sb = brig_registry_ref_id(d, sandbox_id);
    if (sb == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", sandbox_id);
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    brig_snapshot_row row = {
        .disk_mib = sp->disk_mib, .uid_base = sp->uid_base, .created_at = brig_now_real_ms()};
    brig_id_new("snp", row.id);
    snprintf(row.account_id, sizeof(row.account_id), "%s", sp->account_id);
    snprintf(row.project_id, sizeof(row.project_id), "%s", sp->project_id);
    snprintf(row.name, sizeof(row.name), "%s", name ? name : "");
    snprintf(row.source_id, sizeof(row.source_id), "%s", sp->id);
    snprintf(row.template, sizeof(row.template), "%s", sp->template);
    memcpy(row.template_key, sp->template_key, sizeof(row.template_key));
    take t = {d, sb, &row, durable, memory};
    int rc = brig_sandbox_frozen_do(d, sb, take_layer, &t, err);
    if (rc == 0 && brig_store_snapshot_insert(d->store, &row, err) < 0) {
        d->rt->ops->snapshot_remove(d->rt, row.id, NULL);
        rc = -1;
    }
    if (rc == 0) {
        brig_timeline_record(d, sb, c, "sandbox.snapshot",
                             json_pack("{s:s, s:I, s:s}", "snapshot_id", row.id, "bytes",
                                       (json_int_t)row.bytes, "digest", row.digest));
        brig_info("sandbox %s: snapshot %s (%lld bytes)", sandbox_id, row.id, (long long)row.bytes);
        *out = snapshot_json(&row);
    }
    brig_sandbox_unref(d, sb);
    return rc;
}

int brig_snapshot_take(brigd *d, const brig_caller *c, const char *sandbox_id, const char *name,
                       bool durable, json_t **out, brig_error **err)
{
    return take_snapshot(d, c, sandbox_id, name, durable, false, out, err);
}

int brig_snapshot_take_memory(brigd *d, const brig_caller *c, const char *sandbox_id, json_t **out,
                              brig_error **err)
{
    return take_snapshot(d, c, sandbox_id, "fork", false, true, out, err);
}

int brig_snapshot_lookup(brigd *d, const brig_caller *c, const char *id, brig_snapshot_row *out,
                         brig_error **err)
{
    int r = brig_store_snapshot_get(d->store, c->account_id, id, out, err);
    if (r < 0)
        return -1;
    if (r == 0 || !brig_caller_sees(c, out->account_id, out->project_id))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no snapshot '%.40s'", id);
    return 1;
}

int brig_snapshot_get(brigd *d, const brig_caller *c, const char *id, json_t **out,
                      brig_error **err)
{
    brig_snapshot_row row;
    if (brig_snapshot_lookup(d, c, id, &row, err) < 0)
        return -1;
    *out = snapshot_json(&row);
    return 0;
}

typedef struct list_ctx {
    const brig_caller *c;
    json_t *arr;
} list_ctx;

static void list_one(const brig_snapshot_row *r, void *arg)
{
    list_ctx *l = arg;
    if (brig_caller_sees(l->c, r->account_id, r->project_id))
        json_array_append_new(l->arr, snapshot_json(r));
}

int brig_snapshot_list(brigd *d, const brig_caller *c, json_t **out, brig_error **err)
{
    list_ctx l = {c, json_array()};
    if (brig_store_snapshot_each(d->store, c->account_id, NULL, list_one, &l, err) < 0) {
        json_decref(l.arr);
        return -1;
    }
    *out = json_pack("{s:o}", "snapshots", l.arr);
    return 0;
}

typedef struct live_ids {
    char **ids;
    size_t n;
} live_ids;

static void collect_id(const brig_snapshot_row *r, void *arg)
{
    live_ids *l = arg;
    l->ids = brig_xrealloc(l->ids, (l->n + 1) * sizeof(*l->ids));
    l->ids[l->n++] = brig_xstrdup(r->id);
}

static void bill_one(const brig_snapshot_row *r, void *arg)
{
    brigd *d = arg;
    brig_error *err = NULL;
    if (brig_billing_charge_snapshot(d, r->id, brig_now_real_ms(), false, NULL, &err) < 0) {
        brig_err("snapshot %s: charge: %s", r->id, err->msg);
        brig_error_clear(&err);
    }
}

void brig_snapshots_bill(brigd *d, int64_t now)
{
    if (d->cfg.snapshot_price_micro_usd_per_gib_s == 0 ||
        now - d->snapshots_billed_at < d->cfg.billing_interval_ms)
        return;
    d->snapshots_billed_at = now;
    brig_error *err = NULL;
    if (brig_store_snapshot_each(d->store, NULL, NULL, bill_one, d, &err) < 0) {
        brig_err("snapshots: billing: %s", err->msg);
        brig_error_clear(&err);
    }
}

void brig_snapshots_reconcile(brigd *d)
{
    live_ids live = {0};
    char **ids = NULL;
    size_t n = 0;
    brig_error *err = NULL;
    if (brig_store_snapshot_each(d->store, NULL, NULL, collect_id, &live, &err) < 0 ||
        d->rt->ops->snapshot_list(d->rt, &ids, &n, &err) < 0) {
        brig_err("reconcile: snapshots: %s", err->msg); /* keep everything */
        brig_error_clear(&err);
        n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t k = 0; k < live.n && !known; k++)
            known = strcmp(live.ids[k], ids[i]) == 0;
        if (!known) { /* taken when brigd died, or its row deleted but not its layer */
            brig_warn("reconcile: removing the layer of snapshot %s (no record of it)", ids[i]);
            d->rt->ops->snapshot_remove(d->rt, ids[i], NULL);
        }
        free(ids[i]);
    }
    free(ids);
    for (size_t k = 0; k < live.n; k++)
        free(live.ids[k]);
    free(live.ids);
}

int brig_snapshot_delete(brigd *d, const brig_caller *c, const char *id, brig_error **err)
{
    brig_snapshot_row row;
    if (brig_snapshot_lookup(d, c, id, &row, err) < 0)
        return -1;
    int64_t now = brig_now_real_ms();
    brig_error *cerr = NULL;
    if (brig_billing_charge_snapshot(d, row.id, now, true, NULL, &cerr) < 0) { /* its last */
        brig_err("snapshot %s: charge at delete: %s", row.id, cerr->msg);
        brig_error_clear(&cerr);
    }
    int r = brig_store_snapshot_delete(d->store, row.id, now, err);
    if (r < 0)
        return -1;
    if (r == 0) /* deleted meanwhile */
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no snapshot '%.40s'", id);
    return d->rt->ops->snapshot_remove(d->rt, row.id, err);
}
