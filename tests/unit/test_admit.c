/*
 * test_admit.c - admission against money and limits with an injected clock, on
 * a real SQLite store in a temporary directory: a daily limit reached today
 * refuses, the same spend tomorrow does not; months likewise; balance and
 * concurrency; credits and charges stay bounded integers.  The test seeds and
 * inspects the database through a connection of its own (sql_exec, sql_int):
 * brigd itself has no SQL outside its store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "account/billing.h"
#include "server.h"
#include "store/store.h"
#include "account/tenants.h"

#define DAY (INT64_C(86400000))
/* 2026-12-15T10:00:00Z, and 2026-12-31T23:00:00Z */
#define MID_DEC INT64_C(1797328800000)
#define NYE     INT64_C(1798758000000)

typedef struct fixture {
    char dir[64];
    char db[128];
    brigd d;
} fixture;

/* Runs SQL (sqlite3_mprintf's format: %lld for an int64) on the test's own
 * connection to the store's database. */
static void sql_exec(fixture *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *q = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", q, msg);
    sqlite3_close(db);
    sqlite3_free(q);
}

static int one_int(void *ctx, int n, char **vals, char **cols)
{
    (void)cols;
    if (n > 0 && vals[0])
        *(int64_t *)ctx = strtoll(vals[0], NULL, 10);
    return 0;
}

/* The first column of the first row of a query. */
static int64_t sql_int(fixture *f, const char *q)
{
    sqlite3 *db = NULL;
    int64_t v = -1;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(db, q, one_int, &v, &msg) != SQLITE_OK)
        fail_msg("%s: %s", q, msg);
    sqlite3_close(db);
    return v;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    strcpy(f->dir, "/tmp/brig-admit-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->db, sizeof(f->db), "%s/brig.db", f->dir);
    if (brig_store_open(&f->d.store, f->db, NULL) < 0)
        return -1;
    sql_exec(f, "INSERT INTO accounts(id, name, created_at, balance_micro_usd,"
                " max_live_sandboxes) VALUES ('acc_t', 't', 0, 5000, 2)");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    brig_store_close(f->d.store);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void charge_at(fixture *f, int64_t at, int64_t amount)
{
    sql_exec(f,
             "INSERT INTO ledger(account_id, at, kind, amount_micro_usd)"
             " VALUES ('acc_t', %lld, 'charge', %lld)",
             (long long)at, (long long)amount);
}

/* -1 when admitted, else the kind of the refusal. */
static int admit(fixture *f, int64_t now, int64_t live, char **msg)
{
    brig_error *err = NULL;
    int64_t max_live = 0;
    int r = brig_billing_admit(&f->d, "acc_t", now, &max_live, &err);
    if (r == 0)
        r = brig_billing_live_check(live, max_live, &err);
    if (r == 0)
        return -1;
    int k = (int)err->kind;
    if (msg)
        *msg = strdup(err->msg);
    brig_error_clear(&err);
    return k;
}

static void test_daily_limit_resets_next_day(void **state)
{
    fixture *f = *state;
    brig_spend_limits l = {.set_daily = true, .daily = 1000};
    assert_int_equal(brig_account_set_limits(&f->d, "acc_t", &l, NULL), 0);
    charge_at(f, MID_DEC - 3600000, 600);
    assert_int_equal(admit(f, MID_DEC, 0, NULL), -1); /* 600 of 1000 */
    charge_at(f, MID_DEC - 60000, 400);
    char *msg = NULL;
    assert_int_equal(admit(f, MID_DEC, 0, &msg), BRIG_E_LIMIT);
    assert_non_null(strstr(msg, "daily spend limit of $0.001000"));
    assert_non_null(strstr(msg, "resets at 2026-12-16T00:00:00.000Z"));
    free(msg);
    /* The next UTC day starts from zero. */
    assert_int_equal(admit(f, MID_DEC + DAY, 0, NULL), -1);
    /* ...but only from midnight on. */
    assert_int_equal(admit(f, MID_DEC + 13 * 3600000 + 59 * 60000, 0, NULL), BRIG_E_LIMIT);
}

static void test_monthly_limit_resets_next_month(void **state)
{
    fixture *f = *state;
    brig_spend_limits l = {.set_monthly = true, .monthly = 2000};
    assert_int_equal(brig_account_set_limits(&f->d, "acc_t", &l, NULL), 0);
    charge_at(f, MID_DEC - 10 * DAY, 1500); /* Dec 5th */
    charge_at(f, NYE - 3600000, 500);       /* Dec 31st */
    char *msg = NULL;
    assert_int_equal(admit(f, NYE, 0, &msg), BRIG_E_LIMIT);
    assert_non_null(strstr(msg, "monthly spend limit"));
    assert_non_null(strstr(msg, "resets at 2027-01-01T00:00:00.000Z"));
    free(msg);
    assert_int_equal(admit(f, NYE + 3600000, 0, NULL), -1); /* 2027-01-01T00:00Z */
}

static void test_balance_and_concurrency(void **state)
{
    fixture *f = *state;
    assert_int_equal(admit(f, MID_DEC, 1, NULL), -1);
    assert_int_equal(admit(f, MID_DEC, 2, NULL), BRIG_E_LIMIT); /* max_live_sandboxes = 2 */
    sql_exec(f, "UPDATE accounts SET balance_micro_usd = 0 WHERE id = 'acc_t'");
    char *msg = NULL;
    assert_int_equal(admit(f, MID_DEC, 0, &msg), BRIG_E_PAYMENT);
    assert_non_null(strstr(msg, "$0.000000"));
    free(msg);
    brig_error *err = NULL;
    assert_int_equal(brig_billing_admit(&f->d, "acc_nobody", MID_DEC, NULL, &err), -1);
    assert_int_equal(err->kind, BRIG_E_NOT_FOUND);
    brig_error_clear(&err);
}

static int64_t balance(fixture *f)
{
    brig_account_limits l;
    assert_int_equal(brig_account_limits_get(&f->d, "acc_t", &l, NULL), 0);
    return l.balance;
}

static int64_t ledger_rows(fixture *f)
{
    return sql_int(f, "SELECT count(*) FROM ledger WHERE account_id = 'acc_t'");
}

static void test_credits_are_bounded(void **state)
{
    fixture *f = *state;
    brig_error *err = NULL;
    int64_t rows = ledger_rows(f);
    int64_t bad[] = {0, -1, BRIG_CREDIT_MAX + 1, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(brig_billing_credit(&f->d, "acc_t", bad[i], "x", &err), -1);
        assert_int_equal(err->kind, BRIG_E_INVALID);
        brig_error_clear(&err);
    }
    assert_int_equal(balance(f), 5000);
    assert_int_equal(brig_billing_credit(&f->d, "acc_t", BRIG_CREDIT_MAX, "x", &err), 0);
    assert_int_equal(balance(f), 5000 + BRIG_CREDIT_MAX);
    /* Near the most an account may hold: a credit past it changes nothing. */
    sql_exec(f, "UPDATE accounts SET balance_micro_usd = %lld", (long long)(BRIG_MONEY_MAX - 10));
    assert_int_equal(brig_billing_credit(&f->d, "acc_t", 11, "x", &err), -1);
    assert_int_equal(err->kind, BRIG_E_CONFLICT);
    assert_non_null(strstr(err->msg, "$1000000000.000000"));
    brig_error_clear(&err);
    assert_int_equal(balance(f), BRIG_MONEY_MAX - 10);
    assert_int_equal(brig_billing_credit(&f->d, "acc_t", 10, "x", &err), 0);
    assert_int_equal(balance(f), BRIG_MONEY_MAX);
    assert_int_equal(ledger_rows(f), rows + 2);
    assert_int_equal(brig_billing_credit(&f->d, "acc_nobody", 10, "x", &err), -1);
    assert_int_equal(err->kind, BRIG_E_NOT_FOUND);
    brig_error_clear(&err);
}

static void test_a_huge_charge_is_held_at_the_bound(void **state)
{
    fixture *f = *state;
    /* A year-old sandbox at the highest configurable price: secs x price
     * overflows int64. */
    sql_exec(f,
             "INSERT INTO sandboxes(id, account_id, template, template_key, state,"
             " created_at, price_micro_usd) VALUES ('sbx_t', 'acc_t', 'base', 'k',"
             " 'running', %lld, %lld)",
             (long long)(MID_DEC - 365 * DAY), (long long)1 << 40);
    brig_error *err = NULL;
    int64_t after = 0;
    assert_int_equal(brig_billing_charge(&f->d, "sbx_t", MID_DEC, false, &after, &err), 0);
    assert_int_equal(after, 5000 - BRIG_MONEY_MAX); /* the charge held at BRIG_MONEY_MAX */
    assert_int_equal(balance(f), 5000 - BRIG_MONEY_MAX);
    /* Still an integer, and no further down. */
    assert_int_equal(brig_billing_charge(&f->d, "sbx_t", MID_DEC + DAY, true, &after, &err), 0);
    assert_int_equal(after, -BRIG_MONEY_MAX);
    assert_int_equal(sql_int(f, "SELECT cost_micro_usd FROM sandboxes WHERE id = 'sbx_t'"
                                " AND typeof(cost_micro_usd) = 'integer'"),
                     BRIG_MONEY_MAX);
    assert_int_equal(sql_int(f, "SELECT count(*) FROM accounts WHERE"
                                " typeof(balance_micro_usd) != 'integer'"),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_daily_limit_resets_next_day, setup, teardown),
        cmocka_unit_test_setup_teardown(test_monthly_limit_resets_next_month, setup, teardown),
        cmocka_unit_test_setup_teardown(test_balance_and_concurrency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_credits_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_huge_charge_is_held_at_the_bound, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
