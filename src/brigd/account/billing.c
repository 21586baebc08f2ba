/*
 * billing.c - the ledger and its arithmetic (see billing.h).
 */
#include "billing.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "sandbox/sandbox.h"
#include "tenants.h"
#include "store/store.h"
#include "util.h"

int64_t brig_bill_seconds(int64_t alive_ms, int64_t billed_s, bool final)
{
    if (alive_ms < 0)
        alive_ms = 0;
    int64_t total = final ? (alive_ms + 999) / 1000 : alive_ms / 1000;
    if (final && total < BRIG_MIN_BILLED_SECONDS)
        total = BRIG_MIN_BILLED_SECONDS;
    return total > billed_s ? total - billed_s : 0;
}

void brig_money_format(int64_t micro_usd, char out[32])
{
    const char *sign = micro_usd < 0 ? "-" : "";
    uint64_t v = micro_usd < 0 ? (uint64_t)0 - (uint64_t)micro_usd : (uint64_t)micro_usd;
    snprintf(out, 32, "%s$%llu.%06llu", sign, (unsigned long long)(v / 1000000),
             (unsigned long long)(v % 1000000));
}

json_t *brig_money_json(int64_t micro_usd)
{
    char buf[32];
    brig_money_format(micro_usd, buf);
    return json_string(buf);
}

static int64_t utc(int y, int mon, int d)
{
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mon, .tm_mday = d};
    return (int64_t)timegm(&tm) * 1000;
}

static void split(int64_t ms, struct tm *tm)
{
    time_t s = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    gmtime_r(&s, tm);
}

int64_t brig_day_start(int64_t ms)
{
    struct tm tm;
    split(ms, &tm);
    return utc(tm.tm_year + 1900, tm.tm_mon, tm.tm_mday);
}

int64_t brig_month_start(int64_t ms)
{
    struct tm tm;
    split(ms, &tm);
    return utc(tm.tm_year + 1900, tm.tm_mon, 1);
}

int64_t brig_next_day(int64_t ms)
{
    struct tm tm;
    split(ms, &tm);
    return utc(tm.tm_year + 1900, tm.tm_mon, tm.tm_mday + 1); /* timegm normalises */
}

int64_t brig_next_month(int64_t ms)
{
    struct tm tm;
    split(ms, &tm);
    return utc(tm.tm_year + 1900, tm.tm_mon + 1, 1);
}

typedef struct balance_row {
    int64_t balance;
    bool found;
} balance_row;

static int read_balance(brig_row *row, void *ctx)
{
    balance_row *b = ctx;
    b->balance = brig_row_int(row, 0);
    b->found = true;
    return 1;
}

int brig_billing_credit(brigd *d, const char *account_id, int64_t amount, const char *note,
                        brig_error **err)
{
    if (amount <= 0 || amount > BRIG_CREDIT_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a credit must be positive and at most %lld micro-dollars",
                              (long long)BRIG_CREDIT_MAX);
    if (brig_store_begin(d->store, err) < 0)
        return -1;
    /* The new balance is computed here, checked, and written whole: SQLite
     * would turn an integer sum that overflows into a float. */
    balance_row b = {0};
    int64_t nb = 0;
    char have[32], most[32];
    if (brig_store_query(d->store, err, read_balance, &b,
                         "SELECT balance_micro_usd FROM accounts WHERE id = ?", "s",
                         account_id) < 0)
        goto fail;
    if (!b.found) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", account_id);
        goto fail;
    }
    if (!brig_money_add(b.balance, amount, &nb)) {
        brig_money_format(b.balance, have);
        brig_money_format(BRIG_MONEY_MAX, most);
        brig_error_set(err, BRIG_E_CONFLICT, 0,
                       "the balance (%s) would exceed %s, the most an account may hold", have,
                       most);
        goto fail;
    }
    if (brig_store_run(d->store, err, NULL,
                       "UPDATE accounts SET balance_micro_usd = ? WHERE id = ?", "is", nb,
                       account_id) < 0 ||
        brig_store_run(d->store, err, NULL,
                       "INSERT INTO ledger(account_id, at, kind, amount_micro_usd, note)"
                       " VALUES (?,?,'credit',?,?)",
                       "siis", account_id, brig_now_real_ms(), amount, note) < 0)
        goto fail;
    return brig_store_commit(d->store, err);
fail:
    brig_store_rollback(d->store);
    return -1;
}

typedef struct charge_row {
    char account[64];
    int64_t created_at, billed_ms, price, cost;
    int found;
} charge_row;

static int read_charge_row(brig_row *row, void *ctx)
{
    charge_row *c = ctx;
    const char *a = brig_row_text(row, 0);
    snprintf(c->account, sizeof(c->account), "%s", a ? a : "");
    c->created_at = brig_row_int(row, 1);
    c->billed_ms = brig_row_int(row, 2);
    c->price = brig_row_int(row, 3);
    c->cost = brig_row_int(row, 4);
    c->found = 1;
    return 1;
}

static int read_int(brig_row *row, void *ctx)
{
    *(int64_t *)ctx = brig_row_int(row, 0);
    return 1;
}

int brig_billing_charge(brigd *d, const char *sandbox_id, int64_t now_ms, bool final,
                        int64_t *balance, brig_error **err)
{
    /* One transaction: the charge, the balance and how far the sandbox is billed
     * move together, or not at all. */
    if (brig_store_begin(d->store, err) < 0)
        return -1;
    charge_row c = {0};
    if (brig_store_query(d->store, err, read_charge_row, &c,
                         "SELECT account_id, created_at, billed_ms, price_micro_usd,"
                         " cost_micro_usd FROM sandboxes WHERE id = ?",
                         "s", sandbox_id) < 0)
        goto fail;
    if (!c.found) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", sandbox_id);
        goto fail;
    }
    int64_t billed_s = c.billed_ms / 1000;
    int64_t secs = brig_bill_seconds(now_ms - c.created_at, billed_s, final);
    balance_row b = {0};
    if (brig_store_query(d->store, err, read_balance, &b,
                         "SELECT balance_micro_usd FROM accounts WHERE id = ?", "s", c.account) < 0)
        goto fail;
    /* Checked: the balance stays within +-BRIG_MONEY_MAX (the charge is held
     * at what it can still go down by), the sandbox's cost below BRIG_MONEY_MAX. */
    int64_t bal = b.balance, amount = brig_money_times(secs, c.price), cost;
    bal = bal > BRIG_MONEY_MAX ? BRIG_MONEY_MAX : bal < -BRIG_MONEY_MAX ? -BRIG_MONEY_MAX : bal;
    if (bal - amount < -BRIG_MONEY_MAX) /* both within the bound: no overflow */
        amount = bal + BRIG_MONEY_MAX;
    int64_t nb = bal - amount;
    if (!brig_money_add(c.cost, amount, &cost))
        cost = BRIG_MONEY_MAX;
    if (secs > 0) {
        if (brig_store_run(d->store, err, NULL,
                           "INSERT INTO ledger(account_id, at, kind, amount_micro_usd,"
                           " sandbox_id, seconds) VALUES (?,?,'charge',?,?,?)",
                           "siisi", c.account, now_ms, amount, sandbox_id, secs) < 0 ||
            brig_store_run(d->store, err, NULL,
                           "UPDATE accounts SET balance_micro_usd = ? WHERE id = ?", "is", nb,
                           c.account) < 0 ||
            brig_store_run(d->store, err, NULL,
                           "UPDATE sandboxes SET billed_ms = ?, cost_micro_usd = ? WHERE id = ?",
                           "iis", (billed_s + secs) * 1000, cost, sandbox_id) < 0)
            goto fail;
    }
    if (balance &&
        brig_store_query(d->store, err, read_int, balance,
                         "SELECT balance_micro_usd FROM accounts WHERE id = ?", "s", c.account) < 0)
        goto fail;
    return brig_store_commit(d->store, err);
fail:
    brig_store_rollback(d->store);
    return -1;
}

int brig_billing_spent(brigd *d, const char *account_id, int64_t from_ms, int64_t to_ms,
                       int64_t *out, brig_error **err)
{
    *out = 0;
    return brig_store_query(d->store, err, read_int, out,
                            "SELECT coalesce(sum(amount_micro_usd), 0) FROM ledger"
                            " WHERE account_id = ? AND kind = 'charge' AND at >= ? AND at < ?",
                            "sii", account_id, from_ms, to_ms) < 0
               ? -1
               : 0;
}

int brig_billing_admit(brigd *d, const char *account_id, int64_t now, int64_t *max_live,
                       brig_error **err)
{
    brig_account_limits l;
    if (brig_account_limits_get(d, account_id, &l, err) < 0)
        return -1;
    if (max_live)
        *max_live = l.max_live;
    char a[32], b[32], when[32];
    if (l.balance <= 0) {
        brig_money_format(l.balance, a);
        return brig_error_set(err, BRIG_E_PAYMENT, 0,
                              "the account's balance is %s: add credit to create sandboxes", a);
    }
    int64_t spent = 0;
    if (l.daily_limit >= 0) {
        if (brig_billing_spent(d, account_id, brig_day_start(now), INT64_MAX, &spent, err) < 0)
            return -1;
        if (spent >= l.daily_limit) {
            brig_money_format(l.daily_limit, a);
            brig_money_format(spent, b);
            brig_format_time(brig_next_day(now), when);
            return brig_error_set(err, BRIG_E_LIMIT, 0,
                                  "daily spend limit of %s reached (%s spent today); it resets "
                                  "at %s",
                                  a, b, when);
        }
    }
    if (l.monthly_limit >= 0) {
        if (brig_billing_spent(d, account_id, brig_month_start(now), INT64_MAX, &spent, err) < 0)
            return -1;
        if (spent >= l.monthly_limit) {
            brig_money_format(l.monthly_limit, a);
            brig_money_format(spent, b);
            brig_format_time(brig_next_month(now), when);
            return brig_error_set(err, BRIG_E_LIMIT, 0,
                                  "monthly spend limit of %s reached (%s spent this month); it "
                                  "resets at %s",
                                  a, b, when);
        }
    }
    return 0;
}

int brig_billing_live_check(int64_t live, int64_t max_live, brig_error **err)
{
    if (live >= max_live)
        return brig_error_set(err, BRIG_E_LIMIT, 0,
                              "concurrency limit reached: the account may have %lld live "
                              "sandboxes; delete one first",
                              (long long)max_live);
    return 0;
}
