/*
 * timeline.c - sandboxes' audit timelines (see timeline.h).
 */
#include "timeline.h"

#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "log.h"
#include "net/net.h"
#include "secrets.h"

/* The audit writer's resolver: a network log record's sandbox, while it is listed and
 * its secrets still open (after that its DNS names could not be redacted: dropped). */
static bool resolve(void *ctx, const char *sandbox_id, char *account, char *project,
                    brig_redactor **red)
{
    brigd *d = ctx;
    brig_sandbox *sb = brig_registry_ref_id(d, sandbox_id);
    if (sb == NULL)
        return false;
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    snprintf(account, BRIG_ID_MAX, "%s", sp->account_id);
    snprintf(project, BRIG_ID_MAX, "%s", sp->project_id);
    brig_error *err = NULL;
    int r = brig_sandbox_redactor(d, sb, red, &err);
    brig_error_clear(&err);
    brig_sandbox_unref(d, sb);
    return r == 0;
}

/* net/'s hook, on the proxy thread: a copy queued, nothing else. */
static void net_hook(void *ctx, const char *sandbox_id, const json_t *rec)
{
    brigd *d = ctx;
    const char *kind = json_string_value(json_object_get(rec, "kind"));
    const char *verdict = json_string_value(json_object_get(rec, "verdict"));
    char proxy[32]; /* the egress proxy's: proxy.injected, .refused, .granted, .expired */
    snprintf(proxy, sizeof(proxy), "proxy.%s", verdict ? verdict : "?");
    json_t *data = json_deep_copy(rec);
    json_object_del(data, "kind");
    json_object_del(data, "time");
    brig_audit_event ev = {.kind = !kind                        ? "net.denied"
                                   : strcmp(kind, "dns") == 0   ? "dns"
                                   : strcmp(kind, "proxy") == 0 ? proxy
                                                                : "net.denied",
                           .sandbox_id = sandbox_id,
                           .data = data};
    brig_audit_record(d->audit, &ev);
}

void brig_timeline_init(brigd *d)
{
    if (d->audit == NULL)
        return;
    brig_audit_set_resolver(d->audit, resolve, d);
    brig_net_set_log_hook(d->net, net_hook, d);
}

void brig_timeline_record(brigd *d, brig_sandbox *sb, const brig_caller *c, const char *kind,
                          json_t *data)
{
    brig_redactor *red = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_redactor(d, sb, &red, &err) < 0) {
        /* What could not be redacted is not recorded: the kind stays. */
        brig_warn("sandbox %s: audit %s without its fields: %s", brig_sandbox_id(sb), kind,
                  err->msg);
        brig_error_clear(&err);
        json_decref(data);
        data = json_pack("{s:b}", "unredactable", 1);
    }
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    brig_audit_event ev = {.kind = kind,
                           .account_id = sp->account_id,
                           .project_id = sp->project_id,
                           .sandbox_id = sp->id,
                           .actor = c ? c->key_id : NULL,
                           .data = data,
                           .red = red};
    brig_audit_record(d->audit, &ev);
    brig_redactor_free(red);
}

void brig_timeline_project(brigd *d, const brig_caller *c, const char *project_id, const char *kind,
                           json_t *data)
{
    brig_audit_event ev = {.kind = kind,
                           .account_id = c->account_id,
                           .project_id = project_id,
                           .actor = c->key_id,
                           .data = data};
    brig_audit_record(d->audit, &ev);
}

/* ---- reading ------------------------------------------------------------------------- */

static int collect(const brig_audit_row *row, void *ctx)
{
    json_array_append_new(ctx, brig_audit_row_json(row));
    return 0;
}

int brig_timeline_read(brigd *d, const brig_caller *c, const char *id, int64_t after, int64_t limit,
                       json_t **events, bool *ended, brig_error **err)
{
    brig_sandbox_row row;
    int found = brig_store_sandbox_get(d->store, id, &row, err);
    if (found < 0)
        return -1;
    if (!found ||
        (!brig_caller_is(c, "operator") && !brig_caller_sees(c, row.account_id, row.project_id)))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    *ended = row.deleted_at != 0;
    brig_audit_sync(d->audit);
    brig_audit_query q = {.account_id = row.account_id,
                          .sandbox_id = id,
                          .project_id = row.project_id,
                          .from = row.created_at,
                          .to = row.deleted_at,
                          .after = after,
                          .limit = limit};
    *events = json_array();
    if (brig_store_audit_each(d->store, &q, collect, *events, err) < 0) {
        json_decref(*events);
        *events = NULL;
        return -1;
    }
    return 0;
}

int brig_timeline_export(brigd *d, const brig_caller *c, const char *account_id, int64_t since,
                         int64_t after, int64_t limit, json_t **events, brig_error **err)
{
    bool op = brig_caller_is(c, "operator");
    if (!op && account_id && strcmp(account_id, c->account_id) != 0)
        return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                              "an admin key exports its own account's events only");
    brig_audit_sync(d->audit);
    brig_audit_query q = {.account_id = op ? account_id : c->account_id,
                          .after = after,
                          .since = since,
                          .limit = limit};
    *events = json_array();
    if (brig_store_audit_each(d->store, &q, collect, *events, err) < 0) {
        json_decref(*events);
        *events = NULL;
        return -1;
    }
    return 0;
}

int brig_timeline_verify(brigd *d, const brig_caller *c, json_t **out, brig_error **err)
{
    return brig_audit_verify(d->audit, brig_caller_is(c, "operator") ? NULL : c->account_id, out,
                             err);
}

int64_t brig_timeline_wait(brigd *d, int64_t seen, int64_t timeout_ms)
{
    return d->audit ? brig_audit_wait(d->audit, seen, timeout_ms) : -1;
}
