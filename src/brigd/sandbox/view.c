/*
 * view.c - the API's views of sandboxes (see view.h).  It renders copies (the
 * registry's views, store rows) and never holds the registry's lock.
 */
#include "view.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "account/billing.h"
#include "core/format.h"
#include "ends.h"
#include "secrets.h"
#include "util.h"
#include "vault/redact.h"
#include "vault/vault.h"
#include "volmounts.h"

static json_t *time_or_null(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    char buf[32];
    brig_format_time(ms, buf);
    return json_string(buf);
}

/* The API's view of a live sandbox; takes v's env names. */
static json_t *live_json(brigd *d, brig_sandbox_view *v)
{
    const brig_sandbox_spec *sp = &v->spec;
    char created[32];
    brig_format_time(sp->created_at, created);
    int64_t idle_at = sp->idle_timeout_ms ? v->last_activity + sp->idle_timeout_ms : 0;
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:o, s:o, s:o}", "id", sp->id, "project_id",
        sp->project_id, "template", sp->template, "tariff", sp->tariff, "state",
        brig_sb_state_name(v->state), "created_at", created, "env", v->env_names, "idle_timeout",
        (json_int_t)(sp->idle_timeout_ms / 1000), "price_micro_usd_per_second",
        (json_int_t)sp->price, "price_per_second", brig_money_json(sp->price), "expires_at",
        time_or_null(v->expires_at), "idle_expires_at", time_or_null(idle_at));
    json_object_set_new(j, "isolation", json_string(brig_isolation_name(sp->isolation)));
    /* microvm: "tcg" says its VM is emulated (slow: microvm_accel, docs/operations.md) */
    const char *accel = d->rt->ops->accel ? d->rt->ops->accel(d->rt, sp->isolation) : NULL;
    if (accel)
        json_object_set_new(j, "accel", json_string(accel));
    if (sp->egress_none) /* its own, narrower than its project's policy */
        json_object_set_new(j, "egress", json_string("none"));
    json_object_set_new(j, "on_idle", json_string(sp->pause_on_idle ? "pause" : "delete"));
    if (v->state == BRIG_SB_PAUSED) { /* its idle timeout stands still meanwhile */
        json_object_set_new(j, "paused_at", time_or_null(v->paused_at));
        json_object_set_new(j, "idle_expires_at", json_null());
    }
    v->env_names = NULL;    /* the JSON's now */
    if (v->end_reason[0]) { /* deleting: why, already */
        json_object_set_new(j, "reason", json_string(v->end_reason));
        json_object_set_new(j, "end_reason", json_string(brig_end_code(v->end_reason, false)));
    }
    return j;
}

json_t *brig_sandbox_json(brigd *d, const brig_sandbox *sb)
{
    brig_sandbox_view v;
    brig_registry_view_of(d, sb, &v);
    json_t *j = live_json(d, &v);
    json_object_set_new(j, "volumes", brig_volmounts_of(d, v.spec.id));
    return j;
}

json_t *brig_sandbox_list(brigd *d, const brig_caller *c)
{
    size_t n = 0;
    brig_sandbox_view *v = brig_registry_views(d, c, &n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, live_json(d, &v[i]));
    free(v);
    return arr;
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
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:I, s:s}", "id", row->id, "project_id",
                  row->project_id, "template", row->template, "tariff", row->tariff, "state",
                  row->state, "created_at", created, "deleted_at", time_or_null(row->deleted_at),
                  "reason", row->reason[0] ? json_string(row->reason) : json_null(),
                  "cost_micro_usd", (json_int_t)row->cost, "cost", money);
    json_object_set_new(j, "isolation",
                        json_string(row->isolation[0] ? row->isolation : "container"));
    const char *code = brig_end_code(row->reason, strcmp(row->state, "failed") == 0);
    json_object_set_new(j, "end_reason", code ? json_string(code) : json_null());
    return j;
}

int brig_sandbox_list_ended(brigd *d, const brig_caller *c, int64_t since, const char *before,
                            int limit, json_t **out, brig_error **err)
{
    int64_t kept = brig_now_real_ms() - d->cfg.retention_ms;
    brig_ended_query q = {.account_id = c->account_id,
                          .project_id = strcmp(c->scope, "admin") == 0 ? NULL : c->project_id,
                          .since = since > kept ? since : kept};
    brig_sandbox_row cursor;
    if (before != NULL) {
        int found = brig_store_sandbox_get(d->store, before, &cursor, err);
        if (found < 0)
            return -1;
        int state = found ? brig_sb_state_parse(cursor.state) : -1;
        if ((state != BRIG_SB_DELETED && state != BRIG_SB_FAILED) ||
            !brig_caller_sees(c, cursor.account_id, cursor.project_id))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'before' must be one of your ended sandboxes (a page's "
                                  "next_before), not '%.40s'",
                                  before);
        q.before_at = cursor.deleted_at;
        q.before_id = cursor.id;
    }
    brig_sandbox_row *rows = brig_xcalloc((size_t)limit, sizeof(*rows));
    int n = 0;
    if (brig_store_sandbox_ended(d->store, &q, rows, limit, &n, err) < 0) {
        free(rows);
        return -1;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *j = ended_json(d, c, &rows[i]);
        if (j)
            json_array_append_new(arr, j);
    }
    json_t *next = n == limit ? json_string(rows[n - 1].id) : json_null();
    free(rows);
    *out = json_pack("{s:o, s:o}", "sandboxes", arr, "next_before", next);
    return 0;
}

int brig_sandbox_info(brigd *d, const brig_caller *c, const char *id, json_t **out,
                      brig_error **err)
{
    brig_sandbox_view v;
    if (brig_registry_view(d, c, id, &v)) {
        *out = live_json(d, &v);
        json_object_set_new(*out, "secrets", brig_vault_names(d->store, id));
        json_object_set_new(*out, "volumes", brig_volmounts_of(d, id));
        return 0;
    }
    brig_sandbox_row row;
    int found = brig_store_sandbox_get(d->store, id, &row, err);
    if (found < 0)
        return -1;
    int state = found ? brig_sb_state_parse(row.state) : -1;
    bool ended = state == BRIG_SB_DELETED || state == BRIG_SB_FAILED || state == BRIG_SB_DELETING;
    *out = ended ? ended_json(d, c, &row) : NULL;
    if (*out == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    return 0;
}

void brig_sandbox_explain_end(brigd *d, const brig_caller *c, const char *id, brig_error **err)
{
    if (*err == NULL || ((*err)->kind != BRIG_E_PROTOCOL && (*err)->kind != BRIG_E_INTERNAL))
        return;
    char reason[BRIG_REASON_MAX] = "";
    brig_sandbox_view v;
    bool listed = brig_registry_view(d, c, id, &v);
    if (listed) {
        brig_sandbox_view_dispose(&v);
        if (v.state != BRIG_SB_DELETING)
            return; /* live: the failure is its own */
        snprintf(reason, sizeof(reason), "%s", v.end_reason[0] ? v.end_reason : "deleted");
    } else { /* unlisted: ended, or never the caller's (then nothing is said) */
        brig_sandbox_row row;
        brig_error *qerr = NULL;
        int found = brig_store_sandbox_get(d->store, id, &row, &qerr);
        brig_error_clear(&qerr);
        if (found > 0 && brig_sb_state_parse(row.state) == BRIG_SB_DELETED &&
            (c == NULL || brig_caller_sees(c, row.account_id, row.project_id)))
            snprintf(reason, sizeof(reason), "%s", row.reason[0] ? row.reason : "deleted");
    }
    if (reason[0] == '\0')
        return;
    brig_error_clear(err);
    brig_error_set(err, BRIG_E_CONFLICT, 0, "sandbox %.40s ended while the request ran (%s)", id,
                   reason);
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
    brig_net_sandbox *net = brig_sandbox_net(sb);
    *out = net ? brig_net_log(d->net, net) : json_array();
    brig_sandbox_put(d, sb);
    brig_redact_json(brig_redactor_dns(red), *out);
    brig_redactor_free(red);
    return 0;
}
