/*
 * routes.c - the route table, and the REST handlers of health and sandboxes (the others are
 * in api_exec.c, api_files.c, api_templates.c, api_usertpl.c, api_accounts.c, api_audit.c,
 * api_metrics.c, api_volumes.c and ui.c, the dashboard's files; what they all use in handler.c).
 * Each validates its input completely before touching a sandbox, answers errors as
 * {"error":{"code","message"}} with the right status, and never holds brigd's lock while
 * talking to a sandbox.
 */
#include "routes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "handlers.h"
#include "e2b.h"
#include "account/billing.h"
#include "core/format.h"
#include "validate.h"
#include "log.h"
#include "sandbox/pool.h"
#include "sandbox/sandbox.h"

/* ---- health ---------------------------------------------------------------- */

static json_t *budget_json(int64_t capacity)
{
    return capacity > 0 ? json_integer((json_int_t)capacity) : json_null();
}

static void h_healthz(brig_req *r)
{
    int n = brig_registry_size(r->d);
    int64_t used = 0, queued = 0;
    brig_capacity in_use;
    brig_admission_stats(&r->d->admission, &used, &in_use, &queued);
    bool networked = brig_net_enabled(r->d->net);
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:o, s:I, s:o, s:I, s:b, s:o}", "status", "ok",
        "version", BRIG_VERSION, "runtime", r->d->rt->ops->name, "sandboxes", n, "capacity",
        (json_int_t)r->d->cfg.max_sandboxes, "slots_used", (json_int_t)used, "memory_mib_used",
        (json_int_t)in_use.mem_mib, "memory_mib_capacity",
        budget_json(r->d->admission.mem_capacity), "disk_mib_used", (json_int_t)in_use.disk_mib,
        "disk_mib_capacity", budget_json(r->d->admission.disk_capacity), "queued",
        (json_int_t)queued, "network", networked, "warm_pool", brig_pool_stats(r->d));
    brig_http_json(r, 200, j);
}

/* ---- sandboxes ------------------------------------------------------------- */

/* Seconds in a JSON number -> ms, within (0, max_ms]. */
static int seconds_field(json_t *body, const char *name, int64_t max_ms, int64_t *out,
                         brig_error **err)
{
    json_t *v = json_object_get(body, name);
    *out = 0;
    if (v == NULL)
        return 0;
    double s = json_number_value(v);
    if (!json_is_number(v) || !(s > 0) || s * 1000 > (double)max_ms)
        return brig_error_set(err, BRIG_E_INVALID, 0, "'%s' must be seconds in (0, %lld]", name,
                              (long long)(max_ms / 1000));
    *out = (int64_t)(s * 1000);
    return 0;
}

static void h_sandbox_create(brig_req *r)
{
    static const char *const fields[] = {
        "template",     "tariff",       "env",       "secrets",   "secret_refs",
        "idle_timeout", "max_lifetime", "project",   "isolation", "volumes",
        "snapshot",     "on_idle",      "snapshots", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *tmpl = json_object_get(body, "template"), *tariff = json_object_get(body, "tariff");
    json_t *iso = json_object_get(body, "isolation");
    json_t *env = json_object_get(body, "env"), *secrets = json_object_get(body, "secrets");
    json_t *refs = json_object_get(body, "secret_refs"), *prj = json_object_get(body, "project");
    json_t *snap = json_object_get(body, "snapshot"), *on_idle = json_object_get(body, "on_idle");
    json_t *snaps = json_object_get(body, "snapshots"); /* gvisor: its writes on the host */
    brig_sandbox_opts opts = {.template = json_string_value(tmpl),
                              .tariff = json_string_value(tariff),
                              .project_id = json_string_value(prj),
                              .isolation = json_string_value(iso),
                              .env = env,
                              .secrets = secrets,
                              .secret_refs = refs,
                              .snapshot = json_string_value(snap),
                              .on_idle = json_string_value(on_idle),
                              .host_layer = json_is_true(snaps)};
    json_t *vols = json_object_get(body, "volumes");
    brig_volset vs;
    if (vols)
        opts.volumes = &vs;
    brig_error *err = NULL;
    if ((vols && brig_volset_parse(vols, &vs, &err) < 0) ||
        (tmpl && !json_is_string(tmpl) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'template' must be a string") < 0) ||
        (tariff && !json_is_string(tariff) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'tariff' must be a string") < 0) ||
        (iso && !json_is_string(iso) &&
         brig_error_set(&err, BRIG_E_INVALID, 0,
                        "'isolation' must be \"container\" or \"gvisor\"") < 0) ||
        (on_idle && !json_is_string(on_idle) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'on_idle' must be \"pause\" or \"delete\"") <
             0) ||
        (snap && !json_is_string(snap) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'snapshot' must be a snapshot id") < 0) ||
        (snaps && !json_is_boolean(snaps) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'snapshots' must be true or false") < 0) ||
        (prj && !json_is_string(prj) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'project' must be a project id") < 0) ||
        (env && brig_request_env(env, &err) < 0) ||
        (secrets && !json_is_object(secrets) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'secrets' must be an object of strings") < 0) ||
        (refs && !json_is_array(refs) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'secret_refs' must be an array of names") < 0) ||
        seconds_field(body, "idle_timeout", r->d->cfg.idle_timeout_max_ms, &opts.idle_timeout_ms,
                      &err) < 0 ||
        seconds_field(body, "max_lifetime", r->d->cfg.lifetime_max_ms, &opts.max_lifetime_ms,
                      &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    json_t *out = NULL;
    int rc = brig_sandbox_create(r->d, &r->caller, &opts, &out, &err);
    json_decref(body);
    if (rc < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 201, out);
}

extern const char brig_openapi_json[];
extern const unsigned long brig_openapi_json_len;

static void h_openapi(brig_req *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        brig_openapi_json_len, (void *)brig_openapi_json, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    brig_http_response(r, 200, resp);
}

static void h_tariffs(brig_req *r)
{
    json_t *arr = json_array();
    for (int i = 0; i < r->d->cfg.n_tariffs; i++) {
        const brig_tariff *t = &r->d->cfg.tariffs[i];
        json_array_append_new(arr, json_pack("{s:s, s:f, s:I, s:I, s:I, s:o}", "name", t->name,
                                             "vcpus", t->vcpus, "memory_mib",
                                             (json_int_t)t->memory_mib, "disk_mib",
                                             (json_int_t)t->disk_mib, "price_micro_usd_per_second",
                                             (json_int_t)t->price_micro_usd, "price_per_second",
                                             brig_money_json(t->price_micro_usd)));
    }
    brig_http_json(r, 200,
                   json_pack("{s:o, s:s}", "tariffs", arr, "default", r->d->cfg.default_tariff));
}

/* GET /v1/sandboxes: the live ones; ?state=ended&since=TIME&before=ID&limit=N: the ended ones
 * (within the retention period), the last ended first, a page at a time. */
static void h_sandbox_list(brig_req *r)
{
    const char *state = brig_http_query(r, "state");
    const char *before = brig_http_query(r, "before");
    bool ended = state && strcmp(state, "ended") == 0;
    if (state && !ended && strcmp(state, "live") != 0) {
        brig_http_fail(r, BRIG_E_INVALID, "'state' must be \"live\" or \"ended\"");
        return;
    }
    if (!ended) {
        if (brig_http_query(r, "since") || before || brig_http_query(r, "limit"))
            brig_http_fail(r, BRIG_E_INVALID, "'since', 'before' and 'limit' go with state=ended");
        else
            brig_http_json(r, 200,
                           json_pack("{s:o}", "sandboxes", brig_sandbox_list(r->d, &r->caller)));
        return;
    }
    int64_t since = api_query_time(r, "since"), limit = api_query_int(r, "limit", 100, 1000);
    brig_error *err = NULL;
    json_t *out = NULL;
    if (since < 0 || limit < 1)
        brig_error_set(&err, BRIG_E_INVALID, 0,
                       "'since' must be a time (ISO 8601, or ms since the epoch) and 'limit' an "
                       "integer in [1, 1000]");
    else
        brig_sandbox_list_ended(r->d, &r->caller, since, before && *before ? before : NULL,
                                (int)limit, &out, &err);
    brig_http_answer(r, err, 200, out);
}

static void h_sandbox_get(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_info(r->d, &r->caller, r->params[0], &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}

static void h_sandbox_delete(brig_req *r)
{
    brig_error *err = NULL;
    if (brig_sandbox_delete(r->d, &r->caller, r->params[0], "deleted_by_api", &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}

static void h_sandbox_timeout(brig_req *r)
{
    static const char *const fields[] = {"timeout", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    int64_t ms = 0;
    brig_error *err = NULL;
    json_t *out = NULL;
    if (seconds_field(body, "timeout", r->d->cfg.lifetime_max_ms, &ms, &err) < 0 ||
        (ms == 0 &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'timeout' (seconds) is required") < 0) ||
        brig_sandbox_set_timeout(r->d, &r->caller, r->params[0], ms, &out, &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    json_decref(body);
    brig_http_json(r, 200, out);
}

/* POST /v1/sandboxes/{id}/pause (optionally {"memory": "resident" | "checkpoint"}) and
 * /resume (no body, or {}); idempotent. */
static void h_sandbox_pause_resume(brig_req *r, bool pause)
{
    static const char *const pause_fields[] = {"memory", NULL}, *const none[] = {NULL};
    json_t *body = api_body(r, pause ? pause_fields : none);
    if (body == NULL)
        return;
    json_t *mem = json_object_get(body, "memory");
    const char *memory = json_string_value(mem);
    if (mem && (memory == NULL ||
                (strcmp(memory, "resident") != 0 && strcmp(memory, "checkpoint") != 0))) {
        json_decref(body);
        brig_http_fail(r, BRIG_E_INVALID, "'memory' must be \"resident\" or \"checkpoint\"");
        return;
    }
    json_t *out = NULL;
    brig_error *err = NULL;
    if (pause)
        brig_sandbox_pause(r->d, &r->caller, r->params[0], memory, &out, &err);
    else
        brig_sandbox_resume(r->d, &r->caller, r->params[0], &out, &err);
    json_decref(body);
    brig_http_answer(r, err, 200, out);
}

static void h_sandbox_pause(brig_req *r)
{
    h_sandbox_pause_resume(r, true);
}

static void h_sandbox_resume(brig_req *r)
{
    h_sandbox_pause_resume(r, false);
}

static void h_network_log(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_network_log(r->d, &r->caller, r->params[0], &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, json_pack("{s:o}", "entries", out));
}

void brig_api_explain(brig_req *r, brig_error **err)
{
    brig_sandbox_explain_end(r->d, &r->caller, r->params[0], err);
}

const brig_route brig_api_routes[] = {
    {"GET", "/healthz", h_healthz, ROUTE_PUBLIC, NULL, NULL},
    {"GET", "/openapi.json", h_openapi, ROUTE_PUBLIC, NULL, NULL},
    {"GET", "/", api_ui_redirect, ROUTE_PUBLIC, NULL, NULL},
    {"GET", "/ui", api_ui_redirect, ROUTE_PUBLIC, NULL, NULL},
    {"GET", "/ui/", api_ui_index, ROUTE_PUBLIC, NULL, NULL},
    {"GET", "/ui/{file}", api_ui_file, ROUTE_PUBLIC, NULL, NULL},
    {"POST", "/v1/sandboxes", h_sandbox_create, 0, NULL, NULL},
    {"GET", "/v1/sandboxes", h_sandbox_list, 0, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}", h_sandbox_get, 0, NULL, NULL},
    {"DELETE", "/v1/sandboxes/{id}", h_sandbox_delete, 0, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/timeout", h_sandbox_timeout, 0, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/pause", h_sandbox_pause, 0, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/resume", h_sandbox_resume, 0, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}/network-log", h_network_log, 0, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}/timeline", api_timeline, 0, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}/metrics", api_sandbox_metrics, 0, NULL, NULL},
    {"GET", "/metrics", api_metrics, ROUTE_ADMIN | ROUTE_OPERATOR_TOO, NULL, NULL},
    {"GET", "/v1/audit", api_audit_export, ROUTE_ADMIN | ROUTE_OPERATOR_TOO, NULL, NULL},
    {"GET", "/v1/audit/verify", api_audit_verify, ROUTE_ADMIN | ROUTE_OPERATOR_TOO, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/exec", api_exec, ROUTE_AGENT, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}/processes", api_proc_list, ROUTE_AGENT, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}/processes/{pid}", api_proc_get, ROUTE_AGENT, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}/processes/{pid}/output", api_proc_output, ROUTE_AGENT, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/stdin", api_upload_end,
     ROUTE_STREAM_BODY | ROUTE_AGENT, api_proc_stdin_begin, api_upload_body},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/stdin/close", api_proc_stdin_close, ROUTE_AGENT,
     NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/signal", api_proc_signal, ROUTE_AGENT, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/wait", api_proc_wait, ROUTE_AGENT, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/resize", api_proc_resize, ROUTE_AGENT, NULL, NULL},
    {"PUT", "/v1/sandboxes/{id}/files", api_upload_end, ROUTE_STREAM_BODY | ROUTE_AGENT,
     api_files_put_begin, api_upload_body},
    {"GET", "/v1/sandboxes/{id}/files", api_files_get, ROUTE_AGENT, NULL, NULL},
    {"DELETE", "/v1/sandboxes/{id}/files", api_files_delete, ROUTE_AGENT, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/files/move", api_files_move, ROUTE_AGENT, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/files/mkdir", api_files_mkdir, ROUTE_AGENT, NULL, NULL},
    {"PUT", "/v1/sandboxes/{id}/files/tar", api_upload_end, ROUTE_STREAM_BODY | ROUTE_AGENT,
     api_tar_put_begin, api_upload_body},
    {"GET", "/v1/sandboxes/{id}/files/tar", api_tar_get, ROUTE_AGENT, NULL, NULL},
    {"GET", "/v1/templates", api_template_list, 0, NULL, NULL},
    {"POST", "/v1/templates", api_utpl_build, 0, NULL, NULL},
    {"GET", "/v1/templates/{name}", api_utpl_get, 0, NULL, NULL},
    {"GET", "/v1/templates/{name}/log", api_utpl_log, 0, NULL, NULL},
    {"DELETE", "/v1/templates/{name}", api_utpl_delete, 0, NULL, NULL},
    {"GET", "/v1/tariffs", h_tariffs, 0, NULL, NULL},
    {"POST", "/v1/templates/{name}/build", api_template_build, ROUTE_OPERATOR, NULL, NULL},
    {"GET", "/v1/templates/{name}/builds/{id}", api_template_build_get, ROUTE_OPERATOR_TOO, NULL,
     NULL},
    {"POST", "/v1/accounts", api_account_create, ROUTE_OPERATOR, NULL, NULL},
    {"PATCH", "/v1/accounts/{id}", api_account_configure, ROUTE_OPERATOR, NULL, NULL},
    {"POST", "/v1/accounts/{id}/credits", api_account_credit, ROUTE_OPERATOR, NULL, NULL},
    {"GET", "/v1/accounts", api_account_list, ROUTE_OPERATOR, NULL, NULL},
    {"GET", "/v1/account", api_account_get, 0, NULL, NULL},
    {"GET", "/v1/account/ledger", api_account_ledger, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/account/usage", api_account_usage, 0, NULL, NULL},
    {"PATCH", "/v1/account", api_account_patch, ROUTE_ADMIN, NULL, NULL},
    {"POST", "/v1/projects", api_project_create, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/projects", api_project_list, 0, NULL, NULL},
    {"GET", "/v1/projects/{id}", api_project_get, 0, NULL, NULL},
    {"PATCH", "/v1/projects/{id}", api_project_patch, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/projects/{id}/keys", api_key_list, ROUTE_ADMIN, NULL, NULL},
    {"POST", "/v1/projects/{id}/keys", api_key_create, ROUTE_ADMIN, NULL, NULL},
    {"DELETE", "/v1/projects/{id}/keys/{key}", api_key_delete, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/projects/{id}/secrets", api_secret_list, ROUTE_ADMIN, NULL, NULL},
    {"PUT", "/v1/projects/{id}/secrets/{name}", api_secret_put, ROUTE_ADMIN, NULL, NULL},
    {"DELETE", "/v1/projects/{id}/secrets/{name}", api_secret_delete, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/projects/{id}/injections", api_injections_get, ROUTE_ADMIN, NULL, NULL},
    {"PUT", "/v1/projects/{id}/injections", api_injections_put, ROUTE_ADMIN, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/snapshot", api_snapshot_take, 0, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/fork", api_sandbox_fork, 0, NULL, NULL},
    {"GET", "/v1/snapshots", api_snapshot_list, 0, NULL, NULL},
    {"GET", "/v1/snapshots/{id}", api_snapshot_get, 0, NULL, NULL},
    {"DELETE", "/v1/snapshots/{id}", api_snapshot_delete, 0, NULL, NULL},
    {"POST", "/v1/volumes", api_volume_create, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/volumes", api_volume_list, 0, NULL, NULL},
    {"GET", "/v1/volumes/{name}", api_volume_get, 0, NULL, NULL},
    {"DELETE", "/v1/volumes/{name}", api_volume_delete, ROUTE_ADMIN, NULL, NULL},
/* E2B's API (docs/e2b.md): its control plane, then envd by E2b-Sandbox-Id. */
#define E2B ROUTE_E2B, e2b_api_begin, NULL
    {"POST", "/sandboxes", e2b_sandbox_create, E2B},
    {"POST", "/v2/sandboxes", e2b_sandbox_create, E2B},
    {"GET", "/sandboxes", e2b_sandbox_list, E2B},
    {"GET", "/v2/sandboxes", e2b_sandbox_list, E2B},
    {"GET", "/sandboxes/{id}", e2b_sandbox_get, E2B},
    {"DELETE", "/sandboxes/{id}", e2b_sandbox_kill, E2B},
    {"POST", "/sandboxes/{id}/timeout", e2b_sandbox_timeout, E2B},
    {"POST", "/sandboxes/{id}/connect", e2b_sandbox_connect, E2B},
    {"POST", "/v2/sandboxes/{id}/connect", e2b_sandbox_connect, E2B},
    {"POST", "/sandboxes/{id}/pause", e2b_sandbox_pause, E2B},
    {"POST", "/sandboxes/{id}/resume", e2b_sandbox_resume, E2B},
    {"POST", "/sandboxes/{id}/refreshes", e2b_unsupported, E2B},
    {"GET", "/sandboxes/{id}/metrics", e2b_unsupported, E2B},
    {"PUT", "/sandboxes/{id}/network", e2b_unsupported, E2B},
    {"GET", "/v2/sandboxes/{id}/logs", e2b_unsupported, E2B},
    {"GET", "/sandboxes/{id}/logs", e2b_unsupported, E2B},
#undef E2B
#define ENVD ROUTE_PUBLIC | ROUTE_E2B, e2b_envd_begin, NULL
#define RPC  ROUTE_PUBLIC | ROUTE_CONNECT, e2b_envd_begin, NULL
    {"GET", "/health", e2b_health, ENVD},
    {"GET", "/files", e2b_files_get, ENVD},
    {"POST", "/files", e2b_files_post, ROUTE_PUBLIC | ROUTE_E2B | ROUTE_STREAM_BODY,
     e2b_files_post_begin, e2b_files_post_body},
    {"POST", "/process.Process/Start", e2b_proc_start, RPC},
    {"POST", "/process.Process/Connect", e2b_proc_connect, RPC},
    {"POST", "/process.Process/List", e2b_proc_list, RPC},
    {"POST", "/process.Process/SendSignal", e2b_proc_signal, RPC},
    {"POST", "/process.Process/SendInput", e2b_proc_input, RPC},
    {"POST", "/process.Process/CloseStdin", e2b_proc_close_stdin, RPC},
    {"POST", "/process.Process/Update", e2b_proc_update, RPC},
    {"POST", "/process.Process/StreamInput", e2b_rpc_unimplemented, RPC},
    {"POST", "/filesystem.Filesystem/Stat", e2b_fs_stat, RPC},
    {"POST", "/filesystem.Filesystem/MakeDir", e2b_fs_make_dir, RPC},
    {"POST", "/filesystem.Filesystem/ListDir", e2b_fs_list_dir, RPC},
    {"POST", "/filesystem.Filesystem/Move", e2b_fs_move, RPC},
    {"POST", "/filesystem.Filesystem/Remove", e2b_fs_remove, RPC},
    {"POST", "/filesystem.Filesystem/WatchDir", e2b_fs_watch_dir, RPC},
    {"POST", "/filesystem.Filesystem/CreateWatcher", e2b_fs_create_watcher, RPC},
    {"POST", "/filesystem.Filesystem/GetWatcherEvents", e2b_fs_get_watcher_events, RPC},
    {"POST", "/filesystem.Filesystem/RemoveWatcher", e2b_fs_remove_watcher, RPC},
#undef ENVD
#undef RPC
    {NULL, NULL, NULL, 0, NULL, NULL},
};
