/*
 * api_accounts.c - accounts, projects, keys and project secrets over REST.
 * Secrets never leave brigd: every answer carries their names only.
 */
#include <string.h>

#include "handlers.h"
#include "account/billing.h"
#include "account/keys.h"
#include "log.h"
#include "net/net.h"
#include "validate.h"
#include "sandbox/sandbox.h"
#include "account/tenants.h"
#include "vault/vault.h"

/* ---- accounts ------------------------------------------------------------------------ */

/* The account as JSON, with its live sandboxes counted by the sandbox layer. */
static int account_json(brig_req *r, const char *account_id, json_t **out, brig_error **err)
{
    return brig_account_json(r->d, account_id, brig_sandbox_count(r->d, account_id), out, err);
}

void api_account_create(brig_req *r)
{
    static const char *const fields[] = {"name", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name");
    brig_error *err = NULL;
    json_t *out = NULL;
    char *key = NULL;
    if (name && !json_is_string(name))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'name' must be a string");
    else
        brig_account_create(r->d, name ? json_string_value(name) : "account", &out, &key, &err);
    json_decref(body);
    free(key); /* it is in out, shown this once */
    brig_http_answer(r, err, 201, out);
}

void api_account_credit(brig_req *r)
{
    static const char *const fields[] = {"amount_micro_usd", "note", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *amount = json_object_get(body, "amount_micro_usd");
    json_t *note = json_object_get(body, "note");
    brig_error *err = NULL;
    json_t *out = NULL;
    if (!json_is_integer(amount) || json_integer_value(amount) <= 0 ||
        json_integer_value(amount) > BRIG_CREDIT_MAX)
        brig_error_set(&err, BRIG_E_INVALID, 0,
                       "'amount_micro_usd' must be an integer of micro-dollars in [1, %lld] "
                       "(at most $1000000 per credit)",
                       (long long)BRIG_CREDIT_MAX);
    else if (note && !json_is_string(note))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'note' must be a string");
    else if (brig_billing_credit(r->d, r->params[0], json_integer_value(amount),
                                 note ? json_string_value(note) : "credit", &err) == 0)
        account_json(r, r->params[0], &out, &err);
    json_decref(body);
    brig_http_answer(r, err, 200, out);
}

void api_account_get(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (account_json(r, r->caller.account_id, &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}

/* GET /v1/accounts (operator): every account, as GET /v1/account shows one. */
static void collect_id(const char *id, void *ctx)
{
    json_array_append_new(ctx, json_string(id));
}

void api_account_list(brig_req *r)
{
    brig_error *err = NULL;
    json_t *ids = json_array(), *list = json_array();
    if (brig_account_each(r->d, collect_id, ids, &err) == 0) {
        size_t i;
        json_t *id;
        json_array_foreach(ids, i, id)
        {
            json_t *a = NULL;
            if (account_json(r, json_string_value(id), &a, &err) < 0)
                break;
            json_array_append_new(list, a);
        }
    }
    json_decref(ids);
    if (err) {
        json_decref(list);
        brig_http_error(r, err);
    } else {
        brig_http_json(r, 200, json_pack("{s:o}", "accounts", list));
    }
}

/* GET /v1/account/ledger?before=SEQ&limit=N (admin): the ledger, newest first. */
void api_account_ledger(brig_req *r)
{
    int64_t before = api_query_int(r, "before", 0, INT64_MAX / 2);
    int64_t limit = api_query_int(r, "limit", 100, 1000);
    brig_error *err = NULL;
    json_t *out = NULL;
    if (before < 0 || limit < 1)
        brig_error_set(&err, BRIG_E_INVALID, 0,
                       "'before' must be a ledger seq and 'limit' an integer in [1, 1000]");
    else
        brig_billing_ledger(r->d, r->caller.account_id, before, (int)limit, &out, &err);
    brig_http_answer(r, err, 200, out);
}

/* GET /v1/account/usage?days=N: what the account spent on each of its last N UTC days. */
void api_account_usage(brig_req *r)
{
    int64_t days = api_query_int(r, "days", 30, 366);
    brig_error *err = NULL;
    json_t *out = NULL;
    if (days < 1)
        brig_error_set(&err, BRIG_E_INVALID, 0, "'days' must be an integer in [1, 366]");
    else
        brig_billing_days(r->d, r->caller.account_id, (int)days, &out, &err);
    brig_http_answer(r, err, 200, out);
}

/* A limit: an integer of micro-dollars in [0, BRIG_MONEY_MAX], or null for none. */
static int limit_field(json_t *body, const char *name, bool *set, json_t **v, brig_error **err)
{
    *v = json_object_get(body, name);
    *set = *v != NULL;
    if (*v && !json_is_null(*v) &&
        (!json_is_integer(*v) || json_integer_value(*v) < 0 ||
         json_integer_value(*v) > BRIG_MONEY_MAX))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'%s' must be an integer of micro-dollars in [0, %lld], or null "
                              "for none",
                              name, (long long)BRIG_MONEY_MAX);
    return 0;
}

void api_account_patch(brig_req *r)
{
    static const char *const fields[] = {"daily_limit_micro_usd", "monthly_limit_micro_usd", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    bool sd, sm;
    json_t *dv, *mv;
    brig_error *err = NULL;
    json_t *out = NULL;
    if (limit_field(body, "daily_limit_micro_usd", &sd, &dv, &err) == 0 &&
        limit_field(body, "monthly_limit_micro_usd", &sm, &mv, &err) == 0) {
        brig_spend_limits l = {
            .set_daily = sd,
            .daily = json_is_null(dv) ? -1 : json_integer_value(dv),
            .set_monthly = sm,
            .monthly = json_is_null(mv) ? -1 : json_integer_value(mv),
        };
        if (brig_account_set_limits(r->d, r->caller.account_id, &l, &err) == 0)
            account_json(r, r->caller.account_id, &out, &err);
    }
    json_decref(body);
    brig_http_answer(r, err, 200, out);
}

/* PATCH /v1/accounts/{id} (operator): the account's concurrency limit and the
 * tariffs it may use. */
void api_account_configure(brig_req *r)
{
    static const char *const fields[] = {"max_live_sandboxes", "tariffs", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *max_live = json_object_get(body, "max_live_sandboxes");
    json_t *tariffs = json_object_get(body, "tariffs");
    brig_account_settings s = {
        .set_max_live = max_live != NULL,
        .max_live = json_is_integer(max_live) ? json_integer_value(max_live) : -1,
        .set_tariffs = tariffs != NULL,
        .tariffs = json_is_null(tariffs) ? NULL : tariffs,
    };
    brig_error *err = NULL;
    json_t *out = NULL;
    if (brig_account_configure(r->d, r->params[0], &s, &err) == 0)
        account_json(r, r->params[0], &out, &err);
    json_decref(body);
    brig_http_answer(r, err, 200, out);
}

/* ---- projects -------------------------------------------------------------------------- */

void api_project_create(brig_req *r)
{
    static const char *const fields[] = {"name", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    const char *name = json_string_value(json_object_get(body, "name"));
    brig_error *err = NULL;
    json_t *out = NULL;
    if (name == NULL)
        brig_error_set(&err, BRIG_E_INVALID, 0, "'name' (a string) is required");
    else
        brig_project_create(r->d, r->caller.account_id, name, &out, &err);
    json_decref(body);
    brig_http_answer(r, err, 201, out);
}

void api_project_list(brig_req *r)
{
    brig_error *err = NULL;
    json_t *l = brig_project_list(r->d, &r->caller, &err);
    if (l == NULL)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, json_pack("{s:o}", "projects", l));
}

void api_project_get(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_project_get(r->d, &r->caller, r->params[0], &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}

void api_project_patch(brig_req *r)
{
    static const char *const fields[] = {"name", "egress", "isolation", "on_idle", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name"), *egress = json_object_get(body, "egress");
    json_t *isolation = json_object_get(body, "isolation"); /* checked by the update */
    brig_error *err = NULL;
    json_t *out = NULL, *canon = NULL;
    brig_egress pol = {0};
    bool have_pol = false;
    json_t *on_idle = json_object_get(body, "on_idle");
    if (name && !json_is_string(name)) {
        brig_error_set(&err, BRIG_E_INVALID, 0, "'name' must be a string");
    } else if (on_idle &&
               brig_project_set_on_idle(r->d, &r->caller, r->params[0], on_idle, &err) < 0) {
        /* err says why */
    } else if (egress && brig_egress_from_json(egress, &pol, &err) == 0) {
        have_pol = true;
        canon = brig_egress_to_json(&pol);
    }
    if (err == NULL &&
        brig_project_update(r->d, &r->caller, r->params[0], json_string_value(name), canon,
                            isolation, &out, &err) == 0 &&
        have_pol) {
        /* Running sandboxes of the project get the new policy now. */
        brig_sandbox_apply_policy(r->d, r->params[0], &pol);
        brig_timeline_project(r->d, &r->caller, r->params[0], "project.policy",
                              json_pack("{s:O}", "egress", canon));
        brig_info("project %s: egress policy set to %s", r->params[0],
                  json_string_value(json_object_get(canon, "mode")));
    }
    if (have_pol)
        brig_egress_dispose(&pol);
    json_decref(canon);
    json_decref(body);
    brig_http_answer(r, err, 200, out);
}

/* ---- keys ---------------------------------------------------------------------------------- */

void api_key_create(brig_req *r)
{
    static const char *const fields[] = {"scope", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    const char *scope = json_string_value(json_object_get(body, "scope"));
    brig_error *err = NULL;
    json_t *p = NULL;
    char key_id[BRIG_ID_MAX], *key = NULL;
    if (scope == NULL || (strcmp(scope, "sandbox") != 0 && strcmp(scope, "admin") != 0))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'scope' must be \"sandbox\" or \"admin\"");
    else if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        brig_keys_create(r->d, r->caller.account_id, r->params[0], scope, key_id, &key, &err);
    json_decref(p);
    if (err) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    /* scope points into body: answer before releasing it. */
    brig_http_json(r, 201,
                   json_pack("{s:s, s:s, s:s, s:s}", "id", key_id, "key", key, "scope", scope,
                             "project_id", r->params[0]));
    json_decref(body);
    free(key);
}

void api_key_list(brig_req *r)
{
    brig_error *err = NULL;
    json_t *p = NULL, *out = NULL;
    if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        out = brig_keys_list(r->d, r->params[0], &err);
    json_decref(p);
    brig_http_answer(r, err, 200, out);
}

void api_key_delete(brig_req *r)
{
    brig_error *err = NULL;
    json_t *p = NULL;
    if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        brig_keys_revoke(r->d, r->params[0], r->params[1], &err);
    json_decref(p);
    if (err)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}

/* ---- project secrets ------------------------------------------------------------------------ */

void api_secret_list(brig_req *r)
{
    brig_error *err = NULL;
    json_t *p = NULL;
    if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    json_decref(p);
    brig_http_json(r, 200,
                   json_pack("{s:o}", "names", brig_vault_names(r->d->store, r->params[0])));
}

void api_secret_put(brig_req *r)
{
    static const char *const fields[] = {"value", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "value");
    brig_error *err = NULL;
    json_t *p = NULL;
    if (!json_is_string(v))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'value' (a string) is required");
    else if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        brig_vault_put(r->d->vault, r->d->store, r->params[0], r->params[1], json_string_value(v),
                       json_string_length(v), &err);
    json_decref(p);
    brig_vault_wipe(body); /* the body held the plaintext */
    if (err)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}

void api_secret_delete(brig_req *r)
{
    brig_error *err = NULL;
    json_t *p = NULL;
    if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        brig_vault_delete(r->d->store, r->params[0], r->params[1], &err);
    json_decref(p);
    if (err)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}
