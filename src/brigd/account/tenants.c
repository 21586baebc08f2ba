/*
 * tenants.c - accounts and projects (see tenants.h).
 */
#include "tenants.h"

#include <stdio.h>
#include <string.h>

#include "billing.h"
#include "core/format.h"
#include "core/id.h"
#include "keys.h"
#include "log.h"
#include "runtime/runtime.h"
#include "store/store.h"
#include "util.h"

static int valid_name(const char *n)
{
    size_t len = strlen(n);
    return len >= 1 && len <= 64;
}

int brig_account_create(brigd *d, const char *name, json_t **out, char **key, brig_error **err)
{
    if (!valid_name(name))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'name' must be 1 to 64 characters");
    char acc[BRIG_ID_MAX], prj[BRIG_ID_MAX], key_id[BRIG_ID_MAX], hash[65];
    brig_id_new("acc", acc);
    brig_id_new("prj", prj);
    brig_keys_mint(key_id, key, hash);
    brig_account_new a = {
        .id = acc,
        .name = name,
        .project_id = prj,
        .max_live = d->cfg.max_live_per_account,
        .key_id = key_id,
        .key_hash = hash,
        .created_at = brig_now_real_ms(),
    };
    /* The account, its default project and its admin key, together; then the
     * initial credit, as any credit. */
    if (brig_store_account_create(d->store, &a, err) < 0 ||
        (d->cfg.initial_credit_micro_usd > 0 &&
         brig_billing_credit(d, acc, d->cfg.initial_credit_micro_usd, "initial credit", err) < 0) ||
        brig_account_json(d, acc, 0, out, err) < 0) {
        free(*key);
        *key = NULL;
        return -1;
    }
    json_object_set_new(*out, "api_key", json_string(*key));
    json_object_set_new(*out, "api_key_id", json_string(key_id));
    brig_info("account %s created", acc);
    return 0;
}

static int load_account(brigd *d, const char *id, brig_account_row *a, brig_error **err)
{
    int found = brig_store_account_get(d->store, id, a, err);
    if (found == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", id);
    return found < 0 ? -1 : 0;
}

int brig_account_limits_get(brigd *d, const char *account_id, brig_account_limits *out,
                            brig_error **err)
{
    brig_account_row a;
    if (load_account(d, account_id, &a, err) < 0)
        return -1;
    out->balance = a.balance;
    out->daily_limit = a.daily_limit;
    out->monthly_limit = a.monthly_limit;
    out->max_live = a.max_live;
    return 0;
}

int brig_account_each(brigd *d, void (*fn)(const char *id, void *), void *ctx, brig_error **err)
{
    return brig_store_account_each(d->store, fn, ctx, err);
}

static json_t *money(int64_t v)
{
    return brig_money_json(v);
}

int brig_account_json(brigd *d, const char *account_id, int live, json_t **out, brig_error **err)
{
    brig_account_row a;
    if (load_account(d, account_id, &a, err) < 0)
        return -1;
    int64_t now = brig_now_real_ms(), today = 0, month = 0, abuse = 0;
    if (brig_billing_spent(d, account_id, brig_day_start(now), INT64_MAX, &today, err) < 0 ||
        brig_billing_spent(d, account_id, brig_month_start(now), INT64_MAX, &month, err) < 0 ||
        brig_store_sandbox_count_reason(d->store, account_id, "cpu_abuse", &abuse, err) < 0)
        return -1;
    char created[32];
    brig_format_time(a.created_at, created);
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:I, s:o, s:I, s:o, s:i, s:I}", "id", account_id,
                  "name", a.name, "created_at", created, "default_project_id", a.default_project_id,
                  "balance_micro_usd", (json_int_t)a.balance, "balance", money(a.balance),
                  "usage_today_micro_usd", (json_int_t)today, "usage_today", money(today),
                  "usage_month_micro_usd", (json_int_t)month, "usage_month", money(month),
                  "live_sandboxes", live, "max_live_sandboxes", (json_int_t)a.max_live);
    json_object_set_new(j, "cpu_abuse_stops", json_integer(abuse));
    bool daily = a.daily_limit >= 0, monthly = a.monthly_limit >= 0;
    json_object_set_new(j, "daily_limit_micro_usd",
                        daily ? json_integer(a.daily_limit) : json_null());
    json_object_set_new(j, "daily_limit", daily ? money(a.daily_limit) : json_null());
    json_object_set_new(j, "monthly_limit_micro_usd",
                        monthly ? json_integer(a.monthly_limit) : json_null());
    json_object_set_new(j, "monthly_limit", monthly ? money(a.monthly_limit) : json_null());
    json_t *tariffs = a.tariffs[0] ? json_loads(a.tariffs, 0, NULL) : NULL;
    json_object_set_new(j, "tariffs", json_is_array(tariffs) ? tariffs : json_null());
    if (tariffs && !json_is_array(tariffs))
        json_decref(tariffs);
    *out = j;
    return 0;
}

/* "small, medium" from a JSON array of names. */
static void names_text(json_t *names, char *out, size_t n)
{
    size_t i, len = 0;
    json_t *v;
    out[0] = '\0';
    json_array_foreach(names, i, v)
    {
        int w = snprintf(out + len, n - len, "%s%s", i ? ", " : "", json_string_value(v));
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
    }
}

int brig_account_tariff_allowed(brigd *d, const char *account_id, const char *tariff,
                                brig_error **err)
{
    brig_account_row a;
    if (load_account(d, account_id, &a, err) < 0)
        return -1;
    if (a.tariffs[0] == '\0')
        return 0; /* every tariff */
    json_t *names = json_loads(a.tariffs, 0, NULL);
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), tariff) == 0) {
            json_decref(names);
            return 0;
        }
    }
    char list[1024];
    names_text(names, list, sizeof(list));
    json_decref(names);
    return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                          "this account may not use tariff '%.32s' (its tariffs: %s; the "
                          "operator sets them)",
                          tariff, list);
}

/* The canonical list of tariff names (configured ones, each once, in the given
 * order) from what the operator sent; NULL with *err on bad input. */
static json_t *tariff_list(brigd *d, json_t *in, brig_error **err)
{
    if (!json_is_array(in)) {
        brig_error_set(err, BRIG_E_INVALID, 0,
                       "'tariffs' must be a list of tariff names, or null for all");
        return NULL;
    }
    if (json_array_size(in) == 0) {
        brig_error_set(err, BRIG_E_INVALID, 0,
                       "'tariffs' must name at least one tariff (null: all of them)");
        return NULL;
    }
    json_t *out = json_array();
    size_t i, k;
    json_t *v, *w;
    json_array_foreach(in, i, v)
    {
        const char *name = json_string_value(v);
        if (name == NULL) {
            json_decref(out);
            brig_error_set(err, BRIG_E_INVALID, 0,
                           "'tariffs' must be a list of tariff names, or null for all");
            return NULL;
        }
        if (brig_config_tariff(&d->cfg, name) == NULL) {
            json_decref(out);
            brig_error_set(err, BRIG_E_INVALID, 0, "no tariff named '%.32s' (see GET /v1/tariffs)",
                           name);
            return NULL;
        }
        bool dup = false;
        json_array_foreach(out, k, w) dup |= strcmp(json_string_value(w), name) == 0;
        if (!dup)
            json_array_append_new(out, json_string(name));
    }
    return out;
}

int brig_account_configure(brigd *d, const char *account_id, const brig_account_settings *s,
                           brig_error **err)
{
    if (s->set_max_live && (s->max_live < 0 || s->max_live > BRIG_MAX_LIVE_LIMIT))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'max_live_sandboxes' must be an integer in [0, %d]",
                              BRIG_MAX_LIVE_LIMIT);
    _cleanup_free_ char *tariffs = NULL;
    if (s->set_tariffs && s->tariffs) {
        json_t *list = tariff_list(d, s->tariffs, err);
        if (list == NULL)
            return -1;
        tariffs = json_dumps(list, JSON_COMPACT);
        json_decref(list);
    }
    brig_account_update u = {
        .set_max_live = s->set_max_live,
        .max_live = s->max_live,
        .set_tariffs = s->set_tariffs,
        .tariffs = tariffs,
    };
    int found = brig_store_account_update(d->store, account_id, &u, err);
    if (found == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", account_id);
    if (found < 0)
        return -1;
    brig_info("account %s: settings changed by the operator", account_id);
    return 0;
}

int brig_account_set_limits(brigd *d, const char *account_id, const brig_spend_limits *l,
                            brig_error **err)
{
    brig_account_update u = {
        .set_daily_limit = l->set_daily,
        .daily_limit = l->daily,
        .set_monthly_limit = l->set_monthly,
        .monthly_limit = l->monthly,
    };
    int found = brig_store_account_update(d->store, account_id, &u, err);
    if (found == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", account_id);
    return found < 0 ? -1 : 0;
}

/* ---- a project's isolation policy ----------------------------------------------- */

/* The modes a project allows (a bit per brig_isolation) and its default (-1: none, the
 * operator's then).  Stored as its JSON, {"allowed": [...], "default": ...}; "" (no
 * policy set) allows every mode. */
typedef struct iso_policy {
    unsigned allowed;
    int def;
} iso_policy;

#define ISO_ALL ((1u << BRIG_ISO_COUNT) - 1)

static json_t *policy_json(const iso_policy *p)
{
    json_t *allowed = json_array();
    for (int i = 0; i < BRIG_ISO_COUNT; i++)
        if (p->allowed & (1u << i))
            json_array_append_new(allowed, json_string(brig_isolation_name((brig_isolation)i)));
    return json_pack("{s:o, s:o}", "allowed", allowed, "default",
                     p->def < 0 ? json_null()
                                : json_string(brig_isolation_name((brig_isolation)p->def)));
}

/* From a PATCH's "isolation": null (no policy), or {"allowed": [modes], "default": mode}
 * (each optional: every mode; no default of its own). */
static int policy_from_json(json_t *in, iso_policy *out, brig_error **err)
{
    static const char *const usage =
        "'isolation' must be null or {\"allowed\": [modes], \"default\": mode}, the modes "
        "\"container\" and \"gvisor\"";
    *out = (iso_policy){ISO_ALL, -1};
    if (json_is_null(in))
        return 0;
    const char *key;
    json_t *v;
    if (!json_is_object(in))
        return brig_error_set(err, BRIG_E_INVALID, 0, "%s", usage);
    json_object_foreach(in, key, v)
    {
        if (strcmp(key, "allowed") != 0 && strcmp(key, "default") != 0)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'isolation' takes \"allowed\" and \"default\", not '%.32s'",
                                  key);
    }
    json_t *allowed = json_object_get(in, "allowed"), *def = json_object_get(in, "default");
    if (allowed && !json_is_null(allowed)) {
        if (!json_is_array(allowed) || json_array_size(allowed) == 0)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'isolation.allowed' must be a non-empty list of modes");
        out->allowed = 0;
        size_t i;
        json_array_foreach(allowed, i, v)
        {
            int iso = brig_isolation_parse(json_string_value(v));
            if (iso < 0)
                return brig_error_set(err, BRIG_E_INVALID, 0,
                                      "'isolation.allowed': no isolation mode '%.32s' (the modes: "
                                      "container, gvisor)",
                                      json_is_string(v) ? json_string_value(v) : "?");
            out->allowed |= 1u << iso;
        }
    }
    if (def && !json_is_null(def)) {
        out->def = brig_isolation_parse(json_string_value(def));
        if (out->def < 0)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'isolation.default' must be \"container\" or \"gvisor\"");
        if (!(out->allowed & (1u << out->def)))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'isolation.default' (%s) must be one of the allowed modes",
                                  brig_isolation_name((brig_isolation)out->def));
    }
    return 0;
}

/* The policy as stored; anything unreadable counts as none. */
static void policy_load(const char *text, iso_policy *out)
{
    json_t *j = text[0] ? json_loads(text, 0, NULL) : NULL;
    if (j == NULL || policy_from_json(j, out, NULL) < 0)
        *out = (iso_policy){ISO_ALL, -1};
    json_decref(j);
}

/* "container, gvisor" */
static void modes_text(unsigned mask, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < BRIG_ISO_COUNT; i++) {
        if (!(mask & (1u << i)))
            continue;
        int w = snprintf(out + len, n - len, "%s%s", len ? ", " : "",
                         brig_isolation_name((brig_isolation)i));
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
    }
}

int brig_project_isolation(brigd *d, const char *project_id, const char *requested,
                           brig_isolation *out, brig_error **err)
{
    int want = requested ? brig_isolation_parse(requested) : -1;
    if (requested && want < 0)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'isolation' must be \"container\" or \"gvisor\"");
    brig_project_row p;
    int found = brig_store_project_get(d->store, project_id, &p, err);
    if (found < 0)
        return -1;
    iso_policy pol = {ISO_ALL, -1};
    if (found)
        policy_load(p.isolation, &pol);
    free(p.egress);
    if (want < 0) { /* the project's default, else the operator's, else its first allowed */
        int op = brig_isolation_parse(d->cfg.isolation_default);
        want = pol.def;
        if (want < 0 && op >= 0 && (pol.allowed & (1u << op)))
            want = op;
        for (int i = 0; want < 0 && i < BRIG_ISO_COUNT; i++)
            if (pol.allowed & (1u << i))
                want = i;
    }
    if (!(pol.allowed & (1u << want))) {
        char list[64];
        modes_text(pol.allowed, list, sizeof(list));
        return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                              "isolation '%s' is not allowed in project %.40s: its allowed modes "
                              "are %s (an admin key sets them: PATCH /v1/projects/%.40s)",
                              brig_isolation_name((brig_isolation)want), project_id, list,
                              project_id);
    }
    *out = (brig_isolation)want;
    return 0;
}

/* ---- projects ------------------------------------------------------------------- */

static json_t *project_json(const brig_project_row *p)
{
    char created[32];
    brig_format_time(p->created_at, created);
    json_t *e = p->egress ? json_loads(p->egress, 0, NULL) : NULL;
    iso_policy pol;
    policy_load(p->isolation, &pol);
    return json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:s}", "id", p->id, "account_id",
                     p->account_id, "name", p->name, "egress", e ? e : json_object(), "created_at",
                     created, "isolation", policy_json(&pol), "on_idle",
                     strcmp(p->on_idle, "pause") == 0 ? "pause" : "delete");
}

int brig_project_create(brigd *d, const char *account_id, const char *name, json_t **out,
                        brig_error **err)
{
    if (!valid_name(name))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'name' must be 1 to 64 characters");
    char id[BRIG_ID_MAX];
    brig_id_new("prj", id);
    if (brig_store_project_insert(d->store, id, account_id, name, brig_now_real_ms(), err) < 0)
        return -1;
    brig_project_row p;
    int found = brig_store_project_get(d->store, id, &p, err);
    if (found < 1)
        return found < 0 ? -1 : brig_error_set(err, BRIG_E_INTERNAL, 0, "project vanished");
    *out = project_json(&p);
    free(p.egress);
    return 0;
}

int brig_project_get(brigd *d, const brig_caller *c, const char *id, json_t **out, brig_error **err)
{
    brig_project_row p;
    int found = brig_store_project_get(d->store, id, &p, err);
    if (found < 0)
        return -1;
    if (found == 0 || !brig_caller_sees(c, p.account_id, id)) {
        free(p.egress);
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no project '%.40s'", id);
    }
    *out = project_json(&p);
    free(p.egress);
    return 0;
}

static void add_project(const brig_project_row *p, void *ctx)
{
    json_array_append_new(ctx, project_json(p));
}

json_t *brig_project_list(brigd *d, const brig_caller *c, brig_error **err)
{
    json_t *arr = json_array();
    if (brig_caller_is(c, "admin")) {
        if (brig_store_project_each(d->store, c->account_id, add_project, arr, err) < 0) {
            json_decref(arr);
            return NULL;
        }
        return arr;
    }
    /* A sandbox key sees its own project only. */
    brig_project_row p;
    int found = brig_store_project_get(d->store, c->project_id, &p, err);
    if (found < 0) {
        json_decref(arr);
        return NULL;
    }
    if (found == 1 && strcmp(p.account_id, c->account_id) == 0)
        add_project(&p, arr);
    free(p.egress);
    return arr;
}

int brig_project_update(brigd *d, const brig_caller *c, const char *id, const char *name,
                        json_t *egress, json_t *isolation, json_t **out, brig_error **err)
{
    json_t *cur = NULL;
    if (brig_project_get(d, c, id, &cur, err) < 0)
        return -1;
    json_decref(cur);
    if (name && !valid_name(name))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'name' must be 1 to 64 characters");
    iso_policy pol;
    if (isolation && policy_from_json(isolation, &pol, err) < 0)
        return -1;
    json_t *canon = isolation ? policy_json(&pol) : NULL;
    char *e = egress ? json_dumps(egress, JSON_COMPACT) : NULL;
    char *i = canon ? json_dumps(canon, JSON_COMPACT) : NULL;
    int r = brig_store_project_update(d->store, id, name, e, i, err);
    free(e);
    free(i);
    json_decref(canon);
    if (r < 0)
        return -1;
    if (isolation)
        brig_info("project %s: isolation policy set", id);
    return brig_project_get(d, c, id, out, err);
}

/* ---- what an idle timeout does ------------------------------------------------ */

static int on_idle_parse(const char *word, bool *pause, brig_error **err)
{
    if (word && (strcmp(word, "pause") == 0 || strcmp(word, "delete") == 0)) {
        *pause = word[0] == 'p';
        return 0;
    }
    return brig_error_set(err, BRIG_E_INVALID, 0, "'on_idle' must be \"pause\" or \"delete\"");
}

int brig_project_on_idle(brigd *d, const char *project_id, const char *requested, bool *pause,
                         brig_error **err)
{
    if (requested)
        return on_idle_parse(requested, pause, err);
    brig_project_row p;
    int found = brig_store_project_get(d->store, project_id, &p, err);
    if (found < 0)
        return -1;
    *pause = found == 1 && strcmp(p.on_idle, "pause") == 0;
    if (found == 1)
        free(p.egress);
    return 0;
}

int brig_project_set_on_idle(brigd *d, const brig_caller *c, const char *id, json_t *on_idle,
                             brig_error **err)
{
    json_t *cur = NULL;
    bool pause;
    if (brig_project_get(d, c, id, &cur, err) < 0)
        return -1;
    json_decref(cur);
    if (on_idle_parse(json_string_value(on_idle), &pause, err) < 0 ||
        brig_store_project_set_on_idle(d->store, id, pause ? "pause" : "delete", err) < 0)
        return -1;
    brig_info("project %s: its sandboxes' idle timeout %s them", id, pause ? "pauses" : "deletes");
    return 0;
}

json_t *brig_project_egress(brigd *d, const char *project_id)
{
    brig_project_row p;
    if (brig_store_project_get(d->store, project_id, &p, NULL) < 1)
        return NULL;
    json_t *e = p.egress ? json_loads(p.egress, 0, NULL) : NULL;
    free(p.egress);
    return e;
}
