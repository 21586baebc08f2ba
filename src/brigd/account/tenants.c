/*
 * tenants.c - accounts and projects (see tenants.h).
 */
#include "tenants.h"

#include <stdio.h>
#include <string.h>

#include "billing.h"
#include "core/id.h"
#include "log.h"
#include "sandbox/sandbox.h"
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
    char acc[BRIG_ID_MAX], prj[BRIG_ID_MAX], key_id[BRIG_ID_MAX];
    brig_id_new("acc", acc);
    brig_id_new("prj", prj);
    int64_t now = brig_now_real_ms();
    if (brig_store_begin(d->store, err) < 0)
        return -1;
    if (brig_store_run(d->store, err, NULL,
                       "INSERT INTO accounts(id, name, created_at, default_project_id,"
                       " max_live_sandboxes) VALUES (?,?,?,?,?)",
                       "ssisi", acc, name, now, prj, d->cfg.max_live_per_account) < 0 ||
        brig_store_run(d->store, err, NULL,
                       "INSERT INTO projects(id, account_id, name, created_at) VALUES (?,?,?,?)",
                       "sssi", prj, acc, "default", now) < 0 ||
        brig_auth_key_create(d, acc, prj, "admin", key_id, key, err) < 0) {
        brig_store_rollback(d->store);
        return -1;
    }
    if (brig_store_commit(d->store, err) < 0) {
        free(*key);
        *key = NULL;
        return -1;
    }
    if (d->cfg.initial_credit_micro_usd > 0 &&
        brig_billing_credit(d, acc, d->cfg.initial_credit_micro_usd, "initial credit", err) < 0) {
        free(*key);
        *key = NULL;
        return -1;
    }
    if (brig_account_json(d, acc, out, err) < 0) {
        free(*key);
        *key = NULL;
        return -1;
    }
    json_object_set_new(*out, "api_key", json_string(*key));
    json_object_set_new(*out, "api_key_id", json_string(key_id));
    brig_info("account %s created", acc);
    return 0;
}

typedef struct acc_row {
    int found;
    char name[80], project[BRIG_ID_MAX];
    int64_t balance, daily, monthly, max_live, created_at;
    bool has_daily, has_monthly;
    char tariffs[1024]; /* JSON array of names, written by brig_account_configure; "": all */
} acc_row;

static int read_account(brig_row *row, void *ctx)
{
    acc_row *a = ctx;
    a->found = 1;
    snprintf(a->name, sizeof(a->name), "%s", brig_row_text(row, 0) ? brig_row_text(row, 0) : "");
    snprintf(a->project, sizeof(a->project), "%s",
             brig_row_text(row, 1) ? brig_row_text(row, 1) : "");
    a->balance = brig_row_int(row, 2);
    a->has_daily = !brig_row_is_null(row, 3);
    a->daily = brig_row_int(row, 3);
    a->has_monthly = !brig_row_is_null(row, 4);
    a->monthly = brig_row_int(row, 4);
    a->max_live = brig_row_int(row, 5);
    a->created_at = brig_row_int(row, 6);
    const char *t = brig_row_text(row, 7);
    snprintf(a->tariffs, sizeof(a->tariffs), "%s", t ? t : "");
    return 1;
}

static int load_account(brigd *d, const char *id, acc_row *a, brig_error **err)
{
    memset(a, 0, sizeof(*a));
    if (brig_store_query(
            d->store, err, read_account, a,
            "SELECT name, default_project_id, balance_micro_usd, daily_limit_micro_usd,"
            " monthly_limit_micro_usd, max_live_sandboxes, created_at, tariffs FROM accounts"
            " WHERE id = ?",
            "s", id) < 0)
        return -1;
    if (!a->found)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", id);
    return 0;
}

int brig_account_limits_get(brigd *d, const char *account_id, brig_account_limits *out,
                            brig_error **err)
{
    acc_row a;
    if (load_account(d, account_id, &a, err) < 0)
        return -1;
    out->balance = a.balance;
    out->daily_limit = a.has_daily ? a.daily : -1;
    out->monthly_limit = a.has_monthly ? a.monthly : -1;
    out->max_live = a.max_live;
    return 0;
}

static json_t *money(int64_t v)
{
    return brig_money_json(v);
}

static int read_count(brig_row *row, void *ctx)
{
    *(int64_t *)ctx = brig_row_int(row, 0);
    return 1;
}

int brig_account_json(brigd *d, const char *account_id, json_t **out, brig_error **err)
{
    acc_row a;
    if (load_account(d, account_id, &a, err) < 0)
        return -1;
    int64_t now = brig_now_real_ms(), today = 0, month = 0;
    if (brig_billing_spent(d, account_id, brig_day_start(now), INT64_MAX, &today, err) < 0 ||
        brig_billing_spent(d, account_id, brig_month_start(now), INT64_MAX, &month, err) < 0)
        return -1;
    int live = brig_sandbox_count(d, account_id);
    int64_t abuse = 0;
    if (brig_store_query(d->store, err, read_count, &abuse,
                         "SELECT count(*) FROM sandboxes WHERE account_id = ?"
                         " AND reason = 'cpu_abuse'",
                         "s", account_id) < 0)
        return -1;
    char created[32];
    brig_format_time(a.created_at, created);
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:I, s:o, s:I, s:o, s:i, s:I}", "id", account_id,
                  "name", a.name, "created_at", created, "default_project_id", a.project,
                  "balance_micro_usd", (json_int_t)a.balance, "balance", money(a.balance),
                  "usage_today_micro_usd", (json_int_t)today, "usage_today", money(today),
                  "usage_month_micro_usd", (json_int_t)month, "usage_month", money(month),
                  "live_sandboxes", live, "max_live_sandboxes", (json_int_t)a.max_live);
    json_object_set_new(j, "cpu_abuse_stops", json_integer(abuse));
    json_object_set_new(j, "daily_limit_micro_usd",
                        a.has_daily ? json_integer(a.daily) : json_null());
    json_object_set_new(j, "daily_limit", a.has_daily ? money(a.daily) : json_null());
    json_object_set_new(j, "monthly_limit_micro_usd",
                        a.has_monthly ? json_integer(a.monthly) : json_null());
    json_object_set_new(j, "monthly_limit", a.has_monthly ? money(a.monthly) : json_null());
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
    acc_row a;
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
    if (brig_store_begin(d->store, err) < 0)
        return -1;
    int64_t found = 0;
    if (brig_store_query(d->store, err, read_count, &found,
                         "SELECT count(*) FROM accounts WHERE id = ?", "s", account_id) < 0)
        goto fail;
    if (found == 0) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", account_id);
        goto fail;
    }
    if ((s->set_max_live &&
         brig_store_run(d->store, err, NULL,
                        "UPDATE accounts SET max_live_sandboxes = ? WHERE id = ?", "is",
                        s->max_live, account_id) < 0) ||
        (s->set_tariffs &&
         brig_store_run(d->store, err, NULL, "UPDATE accounts SET tariffs = ? WHERE id = ?", "ss",
                        tariffs, account_id) < 0))
        goto fail;
    if (brig_store_commit(d->store, err) < 0)
        return -1;
    brig_info("account %s: settings changed by the operator", account_id);
    return 0;
fail:
    brig_store_rollback(d->store);
    return -1;
}

/* ---- projects ------------------------------------------------------------------- */

typedef struct prj_list {
    json_t *arr;
} prj_list;

static int read_project(brig_row *row, void *ctx)
{
    prj_list *l = ctx;
    char created[32];
    brig_format_time(brig_row_int(row, 4), created);
    const char *egress = brig_row_text(row, 3);
    json_t *e = egress ? json_loads(egress, 0, NULL) : NULL;
    json_array_append_new(
        l->arr, json_pack("{s:s, s:s, s:s, s:o, s:s}", "id", brig_row_text(row, 0), "account_id",
                          brig_row_text(row, 1), "name", brig_row_text(row, 2), "egress",
                          e ? e : json_object(), "created_at", created));
    return 0;
}

#define PROJECT_COLS "SELECT id, account_id, name, egress, created_at FROM projects"

int brig_project_create(brigd *d, const char *account_id, const char *name, json_t **out,
                        brig_error **err)
{
    if (!valid_name(name))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'name' must be 1 to 64 characters");
    char id[BRIG_ID_MAX];
    brig_id_new("prj", id);
    if (brig_store_run(d->store, err, NULL,
                       "INSERT INTO projects(id, account_id, name, created_at) VALUES (?,?,?,?)",
                       "sssi", id, account_id, name, brig_now_real_ms()) < 0)
        return -1;
    prj_list l = {json_array()};
    int n =
        brig_store_query(d->store, err, read_project, &l, PROJECT_COLS " WHERE id = ?", "s", id);
    if (n < 1) {
        json_decref(l.arr);
        return n < 0 ? -1 : brig_error_set(err, BRIG_E_INTERNAL, 0, "project vanished");
    }
    *out = json_incref(json_array_get(l.arr, 0));
    json_decref(l.arr);
    return 0;
}

int brig_project_get(brigd *d, const brig_caller *c, const char *id, json_t **out, brig_error **err)
{
    prj_list l = {json_array()};
    if (brig_store_query(d->store, err, read_project, &l, PROJECT_COLS " WHERE id = ?", "s", id) <
        0) {
        json_decref(l.arr);
        return -1;
    }
    json_t *p = json_array_get(l.arr, 0);
    if (p == NULL ||
        !brig_caller_sees(c, json_string_value(json_object_get(p, "account_id")), id)) {
        json_decref(l.arr);
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no project '%.40s'", id);
    }
    *out = json_incref(p);
    json_decref(l.arr);
    return 0;
}

json_t *brig_project_list(brigd *d, const brig_caller *c, brig_error **err)
{
    prj_list l = {json_array()};
    int r = brig_caller_is(c, "admin")
                ? brig_store_query(d->store, err, read_project, &l,
                                   PROJECT_COLS " WHERE account_id = ? ORDER BY created_at", "s",
                                   c->account_id)
                : brig_store_query(d->store, err, read_project, &l,
                                   PROJECT_COLS " WHERE id = ? AND account_id = ?", "ss",
                                   c->project_id, c->account_id);
    if (r < 0) {
        json_decref(l.arr);
        return NULL;
    }
    return l.arr;
}

int brig_project_update(brigd *d, const brig_caller *c, const char *id, const char *name,
                        json_t *egress, json_t **out, brig_error **err)
{
    json_t *cur = NULL;
    if (brig_project_get(d, c, id, &cur, err) < 0)
        return -1;
    json_decref(cur);
    if (name && !valid_name(name))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'name' must be 1 to 64 characters");
    char *e = egress ? json_dumps(egress, JSON_COMPACT) : NULL;
    int r =
        brig_store_run(d->store, err, NULL,
                       "UPDATE projects SET name = coalesce(?, name), egress = coalesce(?, egress)"
                       " WHERE id = ?",
                       "sss", name, e, id);
    free(e);
    if (r < 0)
        return -1;
    return brig_project_get(d, c, id, out, err);
}

static int read_text(brig_row *row, void *ctx)
{
    const char *t = brig_row_text(row, 0);
    *(json_t **)ctx = t ? json_loads(t, 0, NULL) : NULL;
    return 1;
}

json_t *brig_project_egress(brigd *d, const char *project_id)
{
    json_t *e = NULL;
    if (brig_store_query(d->store, NULL, read_text, &e, "SELECT egress FROM projects WHERE id = ?",
                         "s", project_id) < 0)
        return NULL;
    return e;
}
