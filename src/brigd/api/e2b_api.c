/*
 * e2b_api.c - E2B's control plane (docs/e2b.md): create, connect, get, list, set timeout and
 * kill, on brig's own sandbox calls; the answers in E2B's shapes, the errors as
 * {"code":<status>,"message"} (the SDK reads the body's code), and every option brig does
 * not have refused by name.
 *
 * A sandbox's access token, metadata and creator are e2b_rec.c's.
 */
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b.h"
#include "sandbox/pause.h"
#include "sandbox/registry.h"
#include "validate.h"

void e2b_fail(brig_req *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = brig_vasprintf(fmt, ap);
    va_end(ap);
    brig_http_json(r, status, json_pack("{s:i, s:s}", "code", (int)status, "message", msg));
    free(msg);
}

bool e2b_enabled(brig_req *r)
{
    if (strcmp(r->d->cfg.e2b_api, "on") == 0)
        return true;
    e2b_fail(r, 404, "E2B's API is off on this server (e2b_api)");
    return false;
}

void e2b_api_begin(brig_req *r)
{
    e2b_enabled(r);
}

/* ---- the answers' shapes ---------------------------------------------------------------- */

static const brig_tariff *tariff_of(brigd *d, const char *name)
{
    for (int i = 0; name && i < d->cfg.n_tariffs; i++)
        if (strcmp(d->cfg.tariffs[i].name, name) == 0)
            return &d->cfg.tariffs[i];
    return NULL;
}

/* E2B's Sandbox (create, connect): what the SDK needs to reach envd. */
static json_t *sandbox_json(const char *id, const char *tmpl, const char *token)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "sandboxID", id, "templateID", tmpl,
                     "clientID", "brig", "envdVersion", E2B_ENVD_VERSION, "envdAccessToken", token,
                     "domain");
}

static bool is_paused(json_t *v)
{
    const char *state = json_string_value(json_object_get(v, "state"));
    return state && strcmp(state, "paused") == 0;
}

/* E2B's ListedSandbox of brig's view of a live sandbox. */
static json_t *listed_json(brigd *d, json_t *v)
{
    const char *id = json_string_value(json_object_get(v, "id"));
    const brig_tariff *t = tariff_of(d, json_string_value(json_object_get(v, "tariff")));
    json_t *end = json_object_get(v, "expires_at");
    json_t *o = json_pack(
        "{s:s, s:O, s:s, s:O, s:O, s:s, s:I, s:I, s:I, s:s, s:o}", "sandboxID", id, "templateID",
        json_object_get(v, "template"), "clientID", "brig", "startedAt",
        json_object_get(v, "created_at"), "endAt", json_is_string(end) ? end : json_null(), "state",
        is_paused(v) ? "paused" : "running", "cpuCount",
        (json_int_t)(t ? (t->vcpus < 1 ? 1 : t->vcpus + 0.999) : 1), "memoryMB",
        (json_int_t)(t ? t->memory_mib : 0), "diskSizeMB", (json_int_t)(t ? t->disk_mib : 0),
        "envdVersion", E2B_ENVD_VERSION, "metadata", e2b_record_metadata(d, id));
    return o;
}

/* brig's error as E2B's: a missing sandbox's 404 carries code 404 (kill() then says false). */
static void fail_with(brig_req *r, brig_error *err)
{
    brig_http_error(r, err); /* ROUTE_E2B: {"code":<status>,"message"} */
}

/* ---- create ----------------------------------------------------------------------------- */

/* Whether v says nothing: absent, null, {} or []. */
static bool unset(json_t *v)
{
    return v == NULL || json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

/* allow_internet_access and network -> a sandbox with no egress of its own, or its project's
 * policy.  A sandbox's own policy can only be narrower than its project's: "none" is the one
 * brig has (allow_internet_access: false, or network.denyOut: ["0.0.0.0/0"] alone); any
 * other network option is refused by name. */
static int network_opts(json_t *body, brig_sandbox_opts *o, brig_error **err)
{
    json_t *inet = json_object_get(body, "allow_internet_access");
    if (inet && !json_is_null(inet) && !json_is_boolean(inet))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'allow_internet_access' must be a boolean");
    o->egress_none = json_is_false(inet);
    json_t *net = json_object_get(body, "network"), *v;
    if (unset(net))
        return 0;
    if (!json_is_object(net))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'network' must be an object");
    const char *k;
    json_object_foreach(net, k, v)
    {
        if (strcmp(k, "denyOut") == 0 && json_array_size(v) == 1 &&
            strcmp(json_string_value(json_array_get(v, 0)) ?: "", "0.0.0.0/0") == 0)
            o->egress_none = true;
        else if (strcmp(k, "allowOut") == 0 && !unset(v))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'network.allowOut': a sandbox's own allowlist is not "
                                  "supported by brig; its project's egress policy decides "
                                  "(docs/network.md)");
        else if (strcmp(k, "denyOut") == 0 && !unset(v))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'network.denyOut': brig denies all traffic (\"0.0.0.0/0\") "
                                  "or none of its project's policy; a list of its own is not "
                                  "supported");
        else if (strcmp(k, "allowOut") != 0 && strcmp(k, "denyOut") != 0 && !unset(v))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'network.%.40s' is not supported by brig's E2B API "
                                  "(docs/e2b.md)",
                                  k);
    }
    return 0;
}

/* An option brig does not have: a 400 that names it (never a silent no-op). */
static int refuse_options(json_t *body, brig_error **err)
{
    static const char *const absent[] = {"mcp", "volumeMounts", "iam", NULL};
    for (int i = 0; absent[i]; i++) {
        json_t *v = json_object_get(body, absent[i]);
        if (!unset(v))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'%s' is not supported by brig's E2B API (docs/e2b.md)",
                                  absent[i]);
    }
    if (json_is_true(json_object_get(body, "autoPause")) ||
        json_is_true(json_object_get(body, "autoResume")))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'autoPause'/'autoResume': brig does not pause sandboxes on timeout");
    return 0;
}

static int check_strings(json_t *obj, const char *name, brig_error **err)
{
    const char *k;
    json_t *v;
    if (obj == NULL || json_is_null(obj))
        return 0;
    if (!json_is_object(obj))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'%s' must be an object of strings", name);
    json_object_foreach(obj, k, v) if (!json_is_string(v)) return brig_error_set(
        err, BRIG_E_INVALID, 0, "'%s.%s' must be a string", name, k);
    return 0;
}

/* E2B's timeout (seconds) -> brig's lifetime; idleness never ends it first. */
static int timeout_opt(brig_req *r, json_t *body, brig_sandbox_opts *o, brig_error **err)
{
    json_t *t = json_object_get(body, "timeout");
    json_int_t s = t ? json_integer_value(t) : 300;
    if ((t && !json_is_integer(t)) || s < 1 || s * 1000 > r->d->cfg.lifetime_max_ms)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'timeout' must be whole seconds in [1, %lld] (lifetime_max)",
                              (long long)(r->d->cfg.lifetime_max_ms / 1000));
    o->max_lifetime_ms = s * 1000;
    o->idle_timeout_ms = r->d->cfg.idle_timeout_max_ms;
    return 0;
}

void e2b_sandbox_create(brig_req *r)
{
    json_t *body = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0) {
        fail_with(r, err);
        return;
    }
    json_t *tmpl = json_object_get(body, "templateID"), *env = json_object_get(body, "envVars");
    json_t *meta = json_object_get(body, "metadata");
    brig_sandbox_opts o = {.template = tmpl ? json_string_value(tmpl) : "base"};
    if (env && !json_is_null(env) && json_object_size(env) > 0)
        o.env = env;
    json_t *out = NULL;
    if ((tmpl && !json_is_string(tmpl) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'templateID' must be a template's name") < 0) ||
        refuse_options(body, &err) < 0 || network_opts(body, &o, &err) < 0 ||
        check_strings(env, "envVars", &err) < 0 || (o.env && brig_request_env(o.env, &err) < 0) ||
        check_strings(meta, "metadata", &err) < 0 || timeout_opt(r, body, &o, &err) < 0 ||
        brig_sandbox_create(r->d, &r->caller, &o, &out, &err) < 0) {
        json_decref(body);
        fail_with(r, err);
        return;
    }
    e2b_records_prune(r->d);
    const char *id = json_string_value(json_object_get(out, "id"));
    char token[E2B_TOKEN_LEN + 1];
    e2b_record_make(r->d, id, true, &r->caller, json_is_object(meta) ? meta : NULL, token);
    brig_http_json(r, 201,
                   sandbox_json(id, json_string_value(json_object_get(out, "template")), token));
    sodium_memzero(token, sizeof(token));
    json_decref(out);
    json_decref(body);
}

/* ---- one sandbox -------------------------------------------------------------------------- */

/* brig's view of a running sandbox (or a paused one, when paused_ok) the caller may see;
 * replies 404 otherwise. */
static json_t *live_view(brig_req *r, bool paused_ok)
{
    json_t *v = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_info(r->d, &r->caller, r->params[0], &v, &err) < 0) {
        fail_with(r, err);
        return NULL;
    }
    const char *state = json_string_value(json_object_get(v, "state"));
    if (state == NULL || (strcmp(state, "running") != 0 && !(paused_ok && is_paused(v)))) {
        json_decref(v);
        e2b_fail(r, 404, "sandbox '%.40s' is not running", r->params[0]);
        return NULL;
    }
    return v;
}

void e2b_sandbox_get(brig_req *r)
{
    json_t *v = live_view(r, true);
    if (v == NULL)
        return;
    json_t *o = listed_json(r->d, v);
    char token[E2B_TOKEN_LEN + 1];
    brig_caller owner;
    if (e2b_record_get(r->d, r->params[0], token, &owner))
        json_object_set_new(o, "envdAccessToken", json_string(token));
    json_object_set_new(o, "domain", json_null());
    const char *egress = json_string_value(json_object_get(v, "egress"));
    json_object_set_new(o, "allowInternetAccess", json_boolean(!egress || strcmp(egress, "none")));
    sodium_memzero(token, sizeof(token));
    json_decref(v);
    brig_http_json(r, 200, o);
}

void e2b_sandbox_kill(brig_req *r)
{
    brig_error *err = NULL;
    if (brig_sandbox_delete(r->d, &r->caller, r->params[0], "deleted_by_api", &err) < 0) {
        fail_with(r, err);
        return;
    }
    e2b_records_prune(r->d);
    brig_http_empty(r, 204);
}

/* {"timeout": seconds} (required for /timeout, optional for connect): now + timeout. */
static int set_timeout(brig_req *r, json_t *body, bool required)
{
    json_t *t = json_object_get(body, "timeout"), *out = NULL;
    brig_error *err = NULL;
    if (t == NULL && !required)
        return 0;
    json_int_t s = json_integer_value(t);
    if (!json_is_integer(t) || s < 1 || s * 1000 > r->d->cfg.lifetime_max_ms)
        brig_error_set(&err, BRIG_E_INVALID, 0,
                       "'timeout' must be whole seconds in [1, %lld] (lifetime_max)",
                       (long long)(r->d->cfg.lifetime_max_ms / 1000));
    else
        brig_sandbox_set_timeout(r->d, &r->caller, r->params[0], s * 1000, &out, &err);
    json_decref(out);
    if (err) {
        fail_with(r, err);
        return -1;
    }
    return 0;
}

void e2b_sandbox_timeout(brig_req *r)
{
    json_t *body = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0) {
        fail_with(r, err);
        return;
    }
    if (set_timeout(r, body, true) == 0)
        brig_http_empty(r, 204);
    json_decref(body);
}

/* Resumes the paused sandbox of the request: 0, or -1 answered. */
static int resume(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_resume(r->d, &r->caller, r->params[0], &out, &err) < 0) {
        fail_with(r, err);
        return -1;
    }
    json_decref(out);
    return 0;
}

/* connect (a paused sandbox is resumed: 201) and the older /resume (only a paused one). */
static void connect_or_resume(brig_req *r, bool resume_only)
{
    json_t *body = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0) {
        fail_with(r, err);
        return;
    }
    json_t *v = NULL;
    if (json_object_get(body, "memory")) {
        e2b_fail(r, 400, "'memory' is not supported by brig's E2B API: a sandbox keeps its tariff");
    } else if ((v = live_view(r, true)) != NULL) {
        bool paused = is_paused(v);
        if (resume_only && !paused) {
            e2b_fail(r, 409, "sandbox '%.40s' is not paused", r->params[0]);
        } else if ((!paused || resume(r) == 0) && set_timeout(r, body, false) == 0) {
            char token[E2B_TOKEN_LEN + 1];
            e2b_record_make(r->d, r->params[0], false, &r->caller, NULL, token);
            brig_http_json(r, paused ? 201 : 200,
                           sandbox_json(r->params[0],
                                        json_string_value(json_object_get(v, "template")), token));
            sodium_memzero(token, sizeof(token));
        }
    }
    json_decref(v);
    json_decref(body);
}

void e2b_sandbox_connect(brig_req *r)
{
    connect_or_resume(r, false);
}

void e2b_sandbox_resume(brig_req *r)
{
    connect_or_resume(r, true);
}

/* pause: 204, or 409 when it is paused already (the SDK's pause() then says false).  brig
 * keeps a paused sandbox's memory resident: "memory": false (drop it) is refused. */
void e2b_sandbox_pause(brig_req *r)
{
    json_t *body = NULL, *v = NULL, *out = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0) {
        fail_with(r, err);
        return;
    }
    json_t *mem = json_object_get(body, "memory");
    if (mem && !json_is_true(mem))
        e2b_fail(r, 400,
                 "'memory': brig keeps a paused sandbox's memory; a pause without it "
                 "is not supported");
    else if ((v = live_view(r, true)) != NULL && is_paused(v))
        e2b_fail(r, 409, "sandbox '%.40s' is already paused", r->params[0]);
    else if (v && brig_sandbox_pause(r->d, &r->caller, r->params[0], NULL, &out, &err) < 0)
        fail_with(r, err);
    else if (v)
        brig_http_empty(r, 204);
    json_decref(out);
    json_decref(v);
    json_decref(body);
}

void e2b_unsupported(brig_req *r)
{
    e2b_fail(r, 501, "%s %s is not supported by brig's E2B API (docs/e2b.md)", r->method,
             r->route->pattern);
}

/* ---- list ----------------------------------------------------------------------------- */

/* Percent-decodes s in place ('+' too: a form's space). */
static void unescape(char *s, bool plus)
{
    char *w = s;
    for (char *p = s; *p; p++) {
        unsigned v;
        if (*p == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &v) == 1) {
            *w++ = (char)v;
            p += 2;
        } else {
            *w++ = plus && *p == '+' ? ' ' : *p;
        }
    }
    *w = '\0';
}

/* The metadata filter: "k=v&k2=v2" with each key and value percent-encoded twice more. */
static json_t *metadata_filter(const char *q)
{
    json_t *f = json_object();
    char *s = brig_xstrdup(q), *save = NULL;
    for (char *kv = strtok_r(s, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        char *v = eq ? eq + 1 : (char *)"";
        if (eq)
            *eq = '\0';
        unescape(kv, true);
        unescape(kv, false);
        unescape(v, true);
        unescape(v, false);
        json_object_set_new(f, kv, json_string(v));
    }
    free(s);
    return f;
}

static bool matches(json_t *meta, json_t *filter)
{
    const char *k;
    json_t *v;
    json_object_foreach(filter, k, v)
    {
        json_t *m = json_object_get(meta, k);
        if (!json_is_string(m) || !json_equal(m, v))
            return false;
    }
    return true;
}

static int by_id(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "sandboxID")),
                  json_string_value(json_object_get(*(json_t *const *)b, "sandboxID")));
}

/* The running sandboxes the caller sees that pass the filters, by id. */
static json_t *listed(brig_req *r, json_t *filter, const char *tmpl, bool running, bool paused)
{
    json_t *all = brig_sandbox_list(r->d, &r->caller), *v, *out = json_array();
    size_t i;
    json_array_foreach(all, i, v)
    {
        const char *state = json_string_value(json_object_get(v, "state"));
        bool want = state && ((running && strcmp(state, "running") == 0) ||
                              (paused && strcmp(state, "paused") == 0));
        if (!want || (tmpl && *tmpl &&
                      strcmp(tmpl, json_string_value(json_object_get(v, "template")) ?: "") != 0))
            continue;
        json_t *o = listed_json(r->d, v);
        if (filter == NULL || matches(json_object_get(o, "metadata"), filter))
            json_array_append_new(out, o);
        else
            json_decref(o);
    }
    json_decref(all);
    size_t n = json_array_size(out);
    json_t **items = brig_xcalloc(n ? n : 1, sizeof(*items));
    for (i = 0; i < n; i++)
        items[i] = json_incref(json_array_get(out, i));
    qsort(items, n, sizeof(*items), by_id);
    json_array_clear(out);
    for (i = 0; i < n; i++)
        json_array_append_new(out, items[i]);
    free(items);
    return out;
}

/* GET /sandboxes and /v2/sandboxes: ?metadata=&state=&template=&limit=&nextToken= (a page
 * starts after the id nextToken names; X-Next-Token says where the next one starts). */
void e2b_sandbox_list(brig_req *r)
{
    const char *meta = brig_http_query(r, "metadata"), *state = brig_http_query(r, "state");
    const char *next = brig_http_query(r, "nextToken"), *order = brig_http_query(r, "order");
    int64_t limit = api_query_int(r, "limit", 1000, 1000);
    if (limit < 1) {
        e2b_fail(r, 400, "'limit' must be an integer in [1, 1000]");
        return;
    }
    if (brig_http_query(r, "startedAfter") || (order && strcmp(order, "asc") != 0)) {
        e2b_fail(r, 400, "'startedAfter' and 'order' are not supported by brig's E2B API");
        return;
    }
    e2b_records_prune(r->d);
    json_t *filter = meta && *meta ? metadata_filter(meta) : NULL;
    bool any = state == NULL || *state == '\0';
    json_t *all = listed(r, filter, brig_http_query(r, "template"),
                         any || strstr(state, "running") != NULL,
                         any || strstr(state, "paused") != NULL),
           *page = json_array();
    json_decref(filter);
    size_t i;
    json_t *o;
    const char *last = NULL;
    bool more = false;
    json_array_foreach(all, i, o)
    {
        const char *id = json_string_value(json_object_get(o, "sandboxID"));
        if (next && *next && strcmp(id, next) <= 0)
            continue;
        if ((int64_t)json_array_size(page) == limit) {
            more = true;
            break;
        }
        json_array_append(page, o);
        last = id;
    }
    char *token = more && last ? brig_xstrdup(last) : NULL;
    json_decref(all);
    brig_http_json(r, 200, page);
    if (token)
        MHD_add_response_header(r->resp, "X-Next-Token", token);
    free(token);
}
