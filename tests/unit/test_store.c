/*
 * test_store.c - the store's operations, each round-tripped on a fresh SQLite
 * database in a temporary directory: what is written reads back, "no such row"
 * is 0 and not an error, multi-statement operations are all or nothing, and the
 * data outlives a close and a reopen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/money.h"
#include "store/store.h"

typedef struct fixture {
    char dir[64];
    char db[128];
    brig_store *st;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    strcpy(f->dir, "/tmp/brig-store-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->db, sizeof(f->db), "%s/brig.db", f->dir);
    if (brig_store_open(&f->st, f->db, NULL) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    brig_store_close(f->st);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void make_account(fixture *f, const char *id, const char *project, const char *key_id,
                         const char *hash)
{
    brig_account_new a = {.id = id,
                          .name = "acme",
                          .project_id = project,
                          .max_live = 7,
                          .key_id = key_id,
                          .key_hash = hash,
                          .created_at = 1000};
    assert_int_equal(brig_store_account_create(f->st, &a, NULL), 0);
}

static void test_accounts(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    brig_account_row a;
    assert_int_equal(brig_store_account_get(f->st, "acc_1", &a, NULL), 1);
    assert_string_equal(a.name, "acme");
    assert_string_equal(a.default_project_id, "prj_1");
    assert_int_equal(a.created_at, 1000);
    assert_int_equal(a.balance, 0);
    assert_int_equal(a.daily_limit, -1);
    assert_int_equal(a.monthly_limit, -1);
    assert_int_equal(a.max_live, 7);
    assert_string_equal(a.tariffs, "");
    assert_int_equal(brig_store_account_get(f->st, "acc_none", &a, NULL), 0);

    brig_account_update u = {.set_max_live = true,
                             .max_live = 3,
                             .set_tariffs = true,
                             .tariffs = "[\"small\"]",
                             .set_daily_limit = true,
                             .daily_limit = 500};
    assert_int_equal(brig_store_account_update(f->st, "acc_1", &u, NULL), 1);
    assert_int_equal(brig_store_account_get(f->st, "acc_1", &a, NULL), 1);
    assert_int_equal(a.max_live, 3);
    assert_string_equal(a.tariffs, "[\"small\"]");
    assert_int_equal(a.daily_limit, 500);
    assert_int_equal(a.monthly_limit, -1);
    /* Only what is set changes; -1 is "none" again, NULL tariffs "all". */
    brig_account_update v = {.set_daily_limit = true,
                             .daily_limit = -1,
                             .set_monthly_limit = true,
                             .monthly_limit = 0,
                             .set_tariffs = true};
    assert_int_equal(brig_store_account_update(f->st, "acc_1", &v, NULL), 1);
    assert_int_equal(brig_store_account_get(f->st, "acc_1", &a, NULL), 1);
    assert_int_equal(a.daily_limit, -1);
    assert_int_equal(a.monthly_limit, 0);
    assert_int_equal(a.max_live, 3);
    assert_string_equal(a.tariffs, "");
    assert_int_equal(brig_store_account_update(f->st, "acc_none", &u, NULL), 0);

    /* All or none: a second account with the same key hash leaves nothing. */
    brig_error *err = NULL;
    brig_account_new dup = {.id = "acc_2",
                            .name = "b",
                            .project_id = "prj_2",
                            .key_id = "key_2",
                            .key_hash = "h1",
                            .created_at = 1};
    assert_int_equal(brig_store_account_create(f->st, &dup, &err), -1);
    assert_int_equal(err->kind, BRIG_E_INTERNAL);
    brig_error_clear(&err);
    assert_int_equal(brig_store_account_get(f->st, "acc_2", &a, NULL), 0);
    brig_project_row p;
    assert_int_equal(brig_store_project_get(f->st, "prj_2", &p, NULL), 0);
}

static void collect_project(const brig_project_row *p, void *ctx)
{
    char *names = ctx;
    strcat(names, p->name);
    strcat(names, ",");
}

static void test_projects(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    assert_int_equal(brig_store_project_insert(f->st, "prj_b", "acc_1", "beta", 2000, NULL), 0);
    brig_project_row p;
    assert_int_equal(brig_store_project_get(f->st, "prj_b", &p, NULL), 1);
    assert_string_equal(p.id, "prj_b");
    assert_string_equal(p.account_id, "acc_1");
    assert_string_equal(p.name, "beta");
    assert_string_equal(p.egress, "{\"mode\":\"open\"}");
    assert_int_equal(p.created_at, 2000);
    assert_string_equal(p.isolation, ""); /* no policy of its own */
    free(p.egress);

    assert_int_equal(
        brig_store_project_update(f->st, "prj_b", NULL, "{\"mode\":\"deny\"}", NULL, NULL), 0);
    assert_int_equal(brig_store_project_get(f->st, "prj_b", &p, NULL), 1);
    assert_string_equal(p.name, "beta");
    assert_string_equal(p.egress, "{\"mode\":\"deny\"}");
    free(p.egress);
    assert_int_equal(brig_store_project_update(f->st, "prj_b", "gamma", NULL,
                                               "{\"allowed\":[\"gvisor\"]}", NULL),
                     0);
    assert_int_equal(brig_store_project_get(f->st, "prj_b", &p, NULL), 1);
    assert_string_equal(p.name, "gamma");
    assert_string_equal(p.egress, "{\"mode\":\"deny\"}");
    assert_string_equal(p.isolation, "{\"allowed\":[\"gvisor\"]}");
    free(p.egress);
    assert_int_equal(brig_store_project_update(f->st, "prj_b", NULL, NULL, NULL, NULL), 0);
    assert_int_equal(brig_store_project_get(f->st, "prj_b", &p, NULL), 1);
    assert_string_equal(p.isolation, "{\"allowed\":[\"gvisor\"]}"); /* NULL: as it was */
    free(p.egress);

    char names[256] = "";
    assert_int_equal(brig_store_project_each(f->st, "acc_1", collect_project, names, NULL), 0);
    assert_string_equal(names, "default,gamma,"); /* oldest first */
    names[0] = '\0';
    assert_int_equal(brig_store_project_each(f->st, "acc_none", collect_project, names, NULL), 0);
    assert_string_equal(names, "");
    assert_int_equal(brig_store_project_get(f->st, "prj_none", &p, NULL), 0);
}

static void test_keys(void **state)
{
    fixture *f = *state;
    int64_t api = -1, op = -1;
    assert_int_equal(brig_store_key_counts(f->st, &api, &op, NULL), 0);
    assert_int_equal(api, 0);
    assert_int_equal(op, 0);
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    brig_key_row k = {.id = "key_2",
                      .account_id = "acc_1",
                      .project_id = "prj_1",
                      .scope = "sandbox",
                      .hash = "h2"};
    assert_int_equal(brig_store_key_insert(f->st, &k, 3000, NULL), 0);
    assert_int_equal(brig_store_operator_key_insert(f->st, "key_op", "hop", 3000, NULL), 0);
    assert_int_equal(brig_store_key_counts(f->st, &api, &op, NULL), 0);
    assert_int_equal(api, 2);
    assert_int_equal(op, 1);

    brig_key_row got;
    assert_int_equal(brig_store_key_lookup(f->st, "h1", &got, NULL), 1);
    assert_string_equal(got.id, "key_1");
    assert_string_equal(got.scope, "admin"); /* the account's first key */
    assert_string_equal(got.project_id, "prj_1");
    assert_int_equal(brig_store_key_lookup(f->st, "h2", &got, NULL), 1);
    assert_string_equal(got.id, "key_2");
    assert_string_equal(got.account_id, "acc_1");
    assert_string_equal(got.scope, "sandbox");
    assert_int_equal(brig_store_key_lookup(f->st, "hop", &got, NULL), 1);
    assert_string_equal(got.id, "key_op");
    assert_string_equal(got.scope, "operator");
    assert_string_equal(got.account_id, "");
    assert_int_equal(brig_store_key_lookup(f->st, "nope", &got, NULL), 0);

    /* Revoked only in its own project, and only once. */
    assert_int_equal(brig_store_key_revoke(f->st, "prj_other", "key_2", 4000, NULL), 0);
    assert_int_equal(brig_store_key_revoke(f->st, "prj_1", "key_2", 4000, NULL), 1);
    assert_int_equal(brig_store_key_revoke(f->st, "prj_1", "key_2", 4000, NULL), 0);
    assert_int_equal(brig_store_key_lookup(f->st, "h2", &got, NULL), 0);
    assert_int_equal(brig_store_key_counts(f->st, &api, &op, NULL), 0);
    assert_int_equal(api, 1);
}

static void add_sandbox(fixture *f, const char *id, int64_t created_at, int64_t price)
{
    brig_sandbox_row row = {.created_at = created_at,
                            .uid_base = 100000,
                            .price = price,
                            .idle_timeout_ms = 60000,
                            .expires_at = 9000};
    snprintf(row.id, sizeof(row.id), "%s", id);
    snprintf(row.account_id, sizeof(row.account_id), "acc_1");
    snprintf(row.project_id, sizeof(row.project_id), "prj_1");
    snprintf(row.template, sizeof(row.template), "base");
    snprintf(row.template_key, sizeof(row.template_key), "0123456789abcdef");
    snprintf(row.state, sizeof(row.state), "running");
    snprintf(row.tariff, sizeof(row.tariff), "small");
    snprintf(row.isolation, sizeof(row.isolation), "%s", created_at == 2000 ? "gvisor" : "");
    row.env_json = "{\"A\":\"1\"}";
    assert_int_equal(brig_store_sandbox_insert(f->st, &row, NULL), 0);
}

/* A plan that charges `seconds` at the sandbox's price. */
static void plan_fixed(const brig_charge_state *in, brig_charge *out, void *ctx)
{
    int64_t secs = *(int64_t *)ctx;
    out->seconds = secs;
    out->amount = secs * in->price;
    out->balance = in->balance - out->amount;
    out->cost = in->cost + out->amount;
    out->billed_ms = in->billed_ms + secs * 1000;
}

static void test_ledger(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    int64_t bal = 0;
    assert_int_equal(brig_store_ledger_credit(f->st, "acc_1", 5000, "x", 100, &bal, NULL), 0);
    assert_int_equal(bal, 5000);
    brig_error *err = NULL;
    assert_int_equal(brig_store_ledger_credit(f->st, "acc_none", 1, "x", 100, &bal, &err), -1);
    assert_int_equal(err->kind, BRIG_E_NOT_FOUND);
    brig_error_clear(&err);
    /* Past the bound: 1, nothing written, the balance as it is. */
    assert_int_equal(brig_store_ledger_credit(f->st, "acc_1", BRIG_MONEY_MAX, "x", 100, &bal, NULL),
                     1);
    assert_int_equal(bal, 5000);

    add_sandbox(f, "sbx_1", 1000, 10);
    int64_t secs = 0;
    assert_int_equal(brig_store_ledger_charge(f->st, "sbx_1", 2000, plan_fixed, &secs, &bal, NULL),
                     0);
    assert_int_equal(bal, 5000); /* nothing to charge: nothing written */
    secs = 30;
    assert_int_equal(brig_store_ledger_charge(f->st, "sbx_1", 31000, plan_fixed, &secs, &bal, NULL),
                     0);
    assert_int_equal(bal, 4700);
    secs = 5;
    assert_int_equal(brig_store_ledger_charge(f->st, "sbx_1", 36000, plan_fixed, &secs, NULL, NULL),
                     0);
    assert_int_equal(brig_store_ledger_charge(f->st, "sbx_none", 1, plan_fixed, &secs, &bal, &err),
                     -1);
    assert_int_equal(err->kind, BRIG_E_NOT_FOUND);
    brig_error_clear(&err);

    brig_account_row a;
    assert_int_equal(brig_store_account_get(f->st, "acc_1", &a, NULL), 1);
    assert_int_equal(a.balance, 4650);
    brig_sandbox_row row;
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_1", &row, NULL), 1);
    assert_int_equal(row.cost, 350);

    /* Charges only, in [from, to). */
    int64_t spent = -1;
    assert_int_equal(brig_store_ledger_spent(f->st, "acc_1", 0, INT64_MAX, &spent, NULL), 0);
    assert_int_equal(spent, 350);
    assert_int_equal(brig_store_ledger_spent(f->st, "acc_1", 31000, 36000, &spent, NULL), 0);
    assert_int_equal(spent, 300);
    assert_int_equal(brig_store_ledger_spent(f->st, "acc_1", 36001, INT64_MAX, &spent, NULL), 0);
    assert_int_equal(spent, 0);
}

typedef struct seen {
    char names[256];
    size_t bytes;
    int stop_after;
} seen;

static int collect_secret(const brig_secret_row *s, void *ctx)
{
    seen *v = ctx;
    strcat(v->names, s->name);
    strcat(v->names, ",");
    v->bytes += s->nonce_len + s->box_len;
    return --v->stop_after == 0;
}

static void put_secret(fixture *f, const char *owner, const char *name, const char *box)
{
    brig_secret_row s = {owner, name, "nonce", 5, box, strlen(box)};
    assert_int_equal(brig_store_secret_put(f->st, &s, 1, NULL), 0);
}

static void test_secrets(void **state)
{
    fixture *f = *state;
    put_secret(f, "prj_1", "B", "bbbb");
    put_secret(f, "prj_1", "A", "aa");
    put_secret(f, "prj_1", "A", "aaaaaa"); /* replaces */
    put_secret(f, "sbx_1", "C", "c");
    seen v = {.stop_after = -1};
    assert_int_equal(brig_store_secret_each(f->st, "prj_1", collect_secret, &v, NULL), 0);
    assert_string_equal(v.names, "A,B,"); /* by name */
    assert_int_equal(v.bytes, 5 + 6 + 5 + 4);
    seen first = {.stop_after = 1};
    assert_int_equal(brig_store_secret_each(f->st, "prj_1", collect_secret, &first, NULL), 0);
    assert_string_equal(first.names, "A,");

    int64_t n = -1, bytes = -1;
    assert_int_equal(brig_store_secret_totals(f->st, "prj_1", &n, &bytes, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(bytes, 10);
    assert_int_equal(brig_store_secret_totals(f->st, "nobody", &n, &bytes, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(bytes, 0);

    assert_int_equal(brig_store_secret_delete(f->st, "prj_1", "A", NULL), 1);
    assert_int_equal(brig_store_secret_delete(f->st, "prj_1", "A", NULL), 0);
    assert_int_equal(brig_store_secret_delete_all(f->st, "prj_1", NULL), 0);
    assert_int_equal(brig_store_secret_totals(f->st, "prj_1", &n, &bytes, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(brig_store_secret_totals(f->st, "sbx_1", &n, &bytes, NULL), 0);
    assert_int_equal(n, 1); /* another owner's stay */
}

static void collect_live(const brig_sandbox_row *row, void *ctx)
{
    strcat(ctx, row->id);
    strcat(ctx, row->env_json ? row->env_json : "-");
    strcat(ctx, row->isolation);
    strcat(ctx, row->reason);
    strcat(ctx, ",");
}

static void test_sandboxes(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    add_sandbox(f, "sbx_2", 2000, 1);
    add_sandbox(f, "sbx_1", 1000, 1);
    brig_sandbox_row row;
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_1", &row, NULL), 1);
    assert_string_equal(row.account_id, "acc_1");
    assert_string_equal(row.project_id, "prj_1");
    assert_string_equal(row.template, "base");
    assert_string_equal(row.template_key, "0123456789abcdef");
    assert_string_equal(row.state, "running");
    assert_string_equal(row.tariff, "small");
    assert_int_equal(row.created_at, 1000);
    assert_int_equal(row.uid_base, 100000);
    assert_int_equal(row.price, 1);
    assert_int_equal(row.idle_timeout_ms, 60000);
    assert_int_equal(row.expires_at, 9000);
    assert_string_equal(row.isolation, "container"); /* inserted without one */
    assert_null(row.env_json);
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_2", &row, NULL), 1);
    assert_string_equal(row.isolation, "gvisor");
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_1", &row, NULL), 1);
    assert_string_equal(row.reason, "");
    assert_int_equal(row.deleted_at, 0);
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_none", &row, NULL), 0);

    assert_int_equal(brig_store_sandbox_set_expiry(f->st, "sbx_1", 12345, NULL), 0);
    assert_int_equal(
        brig_store_sandbox_set_state(f->st, "sbx_1", "deleting", "idle_timeout", 5, NULL), 0);
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_1", &row, NULL), 1);
    assert_int_equal(row.expires_at, 12345);
    assert_string_equal(row.state, "deleting");
    assert_int_equal(row.deleted_at, 0); /* not final: not stamped */

    char live[256] = "";
    assert_int_equal(brig_store_sandbox_each_live(f->st, collect_live, live, NULL), 0);
    assert_string_equal(live, "sbx_1{\"A\":\"1\"}containeridle_timeout,sbx_2{\"A\":\"1\"}gvisor,");

    assert_int_equal(brig_store_sandbox_set_state(f->st, "sbx_1", "deleted", "cpu_abuse", 7, NULL),
                     0);
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_1", &row, NULL), 1);
    assert_string_equal(row.reason, "cpu_abuse");
    assert_int_equal(row.deleted_at, 7);
    /* A later state without a reason keeps the reason. */
    assert_int_equal(brig_store_sandbox_set_state(f->st, "sbx_1", "failed", NULL, 8, NULL), 0);
    assert_int_equal(brig_store_sandbox_get(f->st, "sbx_1", &row, NULL), 1);
    assert_string_equal(row.reason, "cpu_abuse");
    live[0] = '\0';
    assert_int_equal(brig_store_sandbox_each_live(f->st, collect_live, live, NULL), 0);
    assert_string_equal(live, "sbx_2{\"A\":\"1\"}gvisor,");
    int64_t n = -1;
    assert_int_equal(brig_store_sandbox_count_reason(f->st, "acc_1", "cpu_abuse", &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(brig_store_sandbox_count_reason(f->st, "acc_1", "idle", &n, NULL), 0);
    assert_int_equal(n, 0);
}

/* Black boxes: one per sandbox (a second put replaces it), pruned by when it ended. */
static void test_blackboxes(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    add_sandbox(f, "sbx_1", 1000, 1);
    add_sandbox(f, "sbx_2", 2000, 1);
    char *data = NULL;
    int64_t at = -1;
    assert_int_equal(brig_store_blackbox_get(f->st, "sbx_1", &data, &at, NULL), 0);
    assert_null(data);
    assert_int_equal(brig_store_blackbox_put(f->st, "sbx_1", 5000, "{\"v\":0}", NULL), 0);
    assert_int_equal(brig_store_blackbox_put(f->st, "sbx_1", 6000, "{\"v\":1}", NULL), 0);
    assert_int_equal(brig_store_blackbox_put(f->st, "sbx_2", 9000, "[]", NULL), 0);
    assert_int_equal(brig_store_blackbox_get(f->st, "sbx_1", &data, &at, NULL), 1);
    assert_string_equal(data, "{\"v\":1}");
    assert_int_equal(at, 6000);
    free(data);
    /* Only a sandbox the store knows has one. */
    assert_int_equal(brig_store_blackbox_put(f->st, "sbx_none", 1, "[]", NULL), -1);
    int64_t pruned = -1;
    assert_int_equal(brig_store_blackbox_prune(f->st, 9000, &pruned, NULL), 0);
    assert_int_equal(pruned, 1);
    assert_int_equal(brig_store_blackbox_get(f->st, "sbx_1", &data, &at, NULL), 0);
    assert_int_equal(brig_store_blackbox_get(f->st, "sbx_2", &data, &at, NULL), 1);
    assert_string_equal(data, "[]");
    free(data);
}

/* The ids of a listing of ended sandboxes, "a,b,". */
static void ended_ids(fixture *f, const brig_ended_query *q, int max, char *out, size_t size)
{
    brig_sandbox_row rows[8];
    int n = -1;
    assert_int_equal(brig_store_sandbox_ended(f->st, q, rows, max, &n, NULL), 0);
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s,", rows[i].id);
}

static void test_ended_sandboxes(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    const char *ids[] = {"sbx_a", "sbx_b", "sbx_c", "sbx_d", "sbx_live"};
    for (int i = 0; i < 5; i++)
        add_sandbox(f, ids[i], 1000 + i, 1);
    /* b and c end in the same millisecond: the id orders them, descending */
    assert_int_equal(brig_store_sandbox_set_state(f->st, "sbx_a", "deleted", "x", 10, NULL), 0);
    assert_int_equal(brig_store_sandbox_set_state(f->st, "sbx_b", "deleted", "x", 20, NULL), 0);
    assert_int_equal(brig_store_sandbox_set_state(f->st, "sbx_c", "failed", "x", 20, NULL), 0);
    assert_int_equal(brig_store_sandbox_set_state(f->st, "sbx_d", "deleting", "x", 30, NULL), 0);
    char got[128];
    brig_ended_query q = {.account_id = "acc_1"};
    ended_ids(f, &q, 8, got, sizeof(got));
    assert_string_equal(got, "sbx_c,sbx_b,sbx_a,"); /* deleting and live ones are not ended */
    ended_ids(f, &q, 2, got, sizeof(got));
    assert_string_equal(got, "sbx_c,sbx_b,");
    q.before_at = 20, q.before_id = "sbx_c"; /* the next page after c: b (same ms), then a */
    ended_ids(f, &q, 8, got, sizeof(got));
    assert_string_equal(got, "sbx_b,sbx_a,");
    q.before_id = "sbx_b";
    ended_ids(f, &q, 8, got, sizeof(got));
    assert_string_equal(got, "sbx_a,");
    q = (brig_ended_query){.account_id = "acc_1", .since = 20};
    ended_ids(f, &q, 8, got, sizeof(got));
    assert_string_equal(got, "sbx_c,sbx_b,");
    q = (brig_ended_query){.account_id = "acc_1", .project_id = "prj_other"};
    ended_ids(f, &q, 8, got, sizeof(got));
    assert_string_equal(got, "");
    q = (brig_ended_query){.account_id = "acc_other"};
    ended_ids(f, &q, 8, got, sizeof(got));
    assert_string_equal(got, "");
}

static void add_volume(fixture *f, const char *id, const char *project, const char *name,
                       int expect)
{
    brig_volume_row v = {.size_mib = 1024, .created_at = 1000};
    snprintf(v.id, sizeof(v.id), "%s", id);
    snprintf(v.account_id, sizeof(v.account_id), "acc_1");
    snprintf(v.project_id, sizeof(v.project_id), "%s", project);
    snprintf(v.name, sizeof(v.name), "%s", name);
    assert_int_equal(brig_store_volume_insert(f->st, &v, NULL), expect);
}

static void count_volume(const brig_volume_row *v, void *ctx)
{
    strcat(ctx, v->name);
    strcat(ctx, ",");
}

/* A plan that charges 7 micro-dollars for `seconds` and carries 3 of a remainder. */
static void plan_volume(const brig_volume_charge_state *in, brig_volume_charge *out, void *ctx)
{
    int64_t secs = *(int64_t *)ctx;
    assert_int_equal(in->size_mib, 1024);
    out->seconds = secs;
    out->amount = secs ? 7 : 0;
    out->balance = in->balance - out->amount;
    out->cost = in->cost + out->amount;
    out->billed_at = in->billed_at + secs * 1000;
    out->rem = in->rem + 3;
}

static void count_mount(const brig_volume_mount_row *m, void *ctx)
{
    char *s = ctx;
    strcat(s, m->sandbox_id);
    strcat(s, m->read_only ? ":ro:" : ":rw:");
    strcat(s, m->path);
    strcat(s, ",");
}

static void test_volumes(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    assert_int_equal(brig_store_project_insert(f->st, "prj_2", "acc_1", "two", 1, NULL), 0);
    add_volume(f, "vol_1", "prj_1", "data", 1);
    add_volume(f, "vol_2", "prj_1", "data", 0); /* the project has one of that name */
    add_volume(f, "vol_3", "prj_2", "data", 1); /* another project's name */
    brig_volume_row v;
    assert_int_equal(brig_store_volume_get(f->st, "prj_1", "data", &v, NULL), 1);
    assert_string_equal(v.id, "vol_1");
    assert_int_equal(v.size_mib, 1024);
    assert_int_equal(brig_store_volume_get(f->st, "prj_1", "vol_1", &v, NULL), 1); /* by id */
    assert_int_equal(brig_store_volume_get(f->st, "prj_2", "vol_1", &v, NULL), 0);
    char names[256] = "";
    assert_int_equal(brig_store_volume_each(f->st, "acc_1", NULL, count_volume, names, NULL), 0);
    assert_string_equal(names, "data,data,");
    names[0] = '\0';
    assert_int_equal(brig_store_volume_each(f->st, NULL, "prj_2", count_volume, names, NULL), 0);
    assert_string_equal(names, "data,");
    names[0] = '\0';
    assert_int_equal(brig_store_volume_each(f->st, "acc_none", NULL, count_volume, names, NULL), 0);
    assert_string_equal(names, "");

    /* A charge: the ledger row only when there is an amount; billed_at and rem always. */
    int64_t bal = 0, secs = 0;
    assert_int_equal(brig_store_ledger_credit(f->st, "acc_1", 100, "x", 1, &bal, NULL), 0);
    assert_int_equal(brig_store_volume_charge(f->st, "vol_1", 1500, plan_volume, &secs, &bal, NULL),
                     0);
    assert_int_equal(bal, 100);
    secs = 4;
    assert_int_equal(brig_store_volume_charge(f->st, "vol_1", 5000, plan_volume, &secs, &bal, NULL),
                     0);
    assert_int_equal(bal, 93);
    brig_ledger_row rows[4];
    int n = 0;
    assert_int_equal(brig_store_ledger_page(f->st, "acc_1", 0, 4, rows, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].kind, "charge");
    assert_string_equal(rows[0].volume_id, "vol_1");
    assert_string_equal(rows[0].sandbox_id, "");
    assert_int_equal(rows[0].seconds, 4);
    assert_int_equal(rows[0].amount, 7);
    assert_string_equal(rows[1].volume_id, ""); /* the credit */
    assert_int_equal(brig_store_volume_get(f->st, "prj_1", "data", &v, NULL), 1);
    assert_int_equal(v.cost, 7);
    brig_error *err = NULL;
    assert_int_equal(brig_store_volume_charge(f->st, "vol_none", 1, plan_volume, &secs, &bal, &err),
                     -1);
    assert_int_equal(err->kind, BRIG_E_NOT_FOUND);
    brig_error_clear(&err);

    /* Mounts: recorded per sandbox, forgotten together. */
    add_sandbox(f, "sbx_1", 1000, 10);
    add_sandbox(f, "sbx_2", 1000, 10);
    brig_volume_mount_row m = {.sandbox_id = "sbx_1", .volume_id = "vol_1", .path = "/data"};
    assert_int_equal(brig_store_volume_mount_insert(f->st, &m, NULL), 0);
    brig_volume_mount_row m2 = {
        .sandbox_id = "sbx_2", .volume_id = "vol_3", .path = "/r", .read_only = true};
    assert_int_equal(brig_store_volume_mount_insert(f->st, &m2, NULL), 0);
    char mounts[256] = "";
    assert_int_equal(brig_store_volume_mount_each(f->st, count_mount, mounts, NULL), 0);
    assert_string_equal(mounts, "sbx_1:rw:/data,sbx_2:ro:/r,");
    assert_int_equal(brig_store_volume_mount_delete(f->st, "sbx_1", NULL), 0);
    mounts[0] = '\0';
    assert_int_equal(brig_store_volume_mount_each(f->st, count_mount, mounts, NULL), 0);
    assert_string_equal(mounts, "sbx_2:ro:/r,");

    /* Deleted: gone from the views, its name free again, its row kept. */
    assert_int_equal(brig_store_volume_delete(f->st, "vol_1", 9000, NULL), 1);
    assert_int_equal(brig_store_volume_delete(f->st, "vol_1", 9000, NULL), 0);
    assert_int_equal(brig_store_volume_get(f->st, "prj_1", "data", &v, NULL), 0);
    assert_int_equal(brig_store_volume_get(f->st, "prj_1", "vol_1", &v, NULL), 0);
    add_volume(f, "vol_4", "prj_1", "data", 1);
    secs = 1;
    assert_int_equal(
        brig_store_volume_charge(f->st, "vol_1", 10000, plan_volume, &secs, &bal, NULL),
        0); /* a deleted one's final charge */
}

static void test_reopen_and_backends(void **state)
{
    fixture *f = *state;
    make_account(f, "acc_1", "prj_1", "key_1", "h1");
    brig_store_close(f->st);
    f->st = NULL;
    assert_int_equal(brig_store_open(&f->st, f->db, NULL), 0);
    brig_account_row a;
    assert_int_equal(brig_store_account_get(f->st, "acc_1", &a, NULL), 1);
    assert_int_equal(a.max_live, 7);

    brig_store *other = NULL;
    brig_error *err = NULL;
    assert_int_equal(brig_store_open(&other, "postgres://localhost/brig", &err), -1);
    assert_int_equal(err->kind, BRIG_E_INVALID);
    assert_non_null(strstr(err->msg, "no backend"));
    brig_error_clear(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accounts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_projects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sandboxes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blackboxes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ended_sandboxes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_volumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_and_backends, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
