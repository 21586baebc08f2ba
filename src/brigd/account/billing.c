/*
 * billing.c - the ledger and its arithmetic (see billing.h).
 */
#include "billing.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/metrics.h"
#include "log.h"
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

#define VOLUME_UNIT ((__int128)1024 * 3600) /* MiB per GiB x seconds per hour */

void brig_bill_volume(int64_t size_mib, int64_t seconds, int64_t rate, bool final, int64_t *rem,
                      int64_t *amount)
{
    __int128 owed = (__int128)(size_mib > 0 ? size_mib : 0) * (seconds > 0 ? seconds : 0) *
                        (rate > 0 ? rate : 0) +
                    (*rem > 0 ? *rem : 0);
    __int128 whole = owed / VOLUME_UNIT, left = owed % VOLUME_UNIT;
    if (final && left > 0) {
        whole++;
        left = 0;
    }
    *amount = whole > BRIG_MONEY_MAX ? BRIG_MONEY_MAX : (int64_t)whole;
    *rem = (int64_t)left;
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

int brig_billing_credit(brigd *d, const char *account_id, int64_t amount, const char *note,
                        brig_error **err)
{
    if (amount <= 0 || amount > BRIG_CREDIT_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a credit must be positive and at most %lld micro-dollars",
                              (long long)BRIG_CREDIT_MAX);
    int64_t balance = 0;
    int r = brig_store_ledger_credit(d->store, account_id, amount, note, brig_now_real_ms(),
                                     &balance, err);
    if (r == 1) {
        char have[32], most[32];
        brig_money_format(balance, have);
        brig_money_format(BRIG_MONEY_MAX, most);
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "the balance (%s) would exceed %s, the most an account may hold",
                              have, most);
    }
    return r;
}

typedef struct charge_ctx {
    int64_t now;
    bool final;
    int64_t amount; /* what the plan charged */
    int64_t price;  /* per second; -1: the sandbox's own */
} charge_ctx;

/* What a charge writes, from what it found (brig_charge_plan_fn).  Checked: the
 * balance stays within +-BRIG_MONEY_MAX (the charge is held at what it can still
 * go down by), the sandbox's cost at most BRIG_MONEY_MAX. */
static void plan_charge(const brig_charge_state *in, brig_charge *out, void *ctx)
{
    const charge_ctx *c = ctx;
    int64_t billed_s = in->billed_ms / 1000;
    int64_t secs = brig_bill_seconds(c->now - in->created_at, billed_s, c->final);
    int64_t price = c->price >= 0 ? c->price : in->price;
    int64_t bal = in->balance, amount = brig_money_times(secs, price);
    bal = bal > BRIG_MONEY_MAX ? BRIG_MONEY_MAX : bal < -BRIG_MONEY_MAX ? -BRIG_MONEY_MAX : bal;
    if (bal - amount < -BRIG_MONEY_MAX) /* both within the bound: no overflow */
        amount = bal + BRIG_MONEY_MAX;
    out->seconds = secs;
    out->amount = amount;
    ((charge_ctx *)ctx)->amount = amount;
    out->balance = bal - amount;
    if (!brig_money_add(in->cost, amount, &out->cost))
        out->cost = BRIG_MONEY_MAX;
    out->billed_ms = (billed_s + secs) * 1000;
}

int brig_billing_charge(brigd *d, const char *sandbox_id, int64_t now_ms, bool final,
                        int64_t *balance, brig_error **err)
{
    /* One store operation: the charge, the balance and how far the sandbox is
     * billed move together, or not at all. */
    return brig_billing_charge_paused(d, sandbox_id, now_ms, final, -1, balance, err);
}

int brig_billing_charge_paused(brigd *d, const char *sandbox_id, int64_t now_ms, bool final,
                               int64_t paused_price, int64_t *balance, brig_error **err)
{
    charge_ctx c = {now_ms, final, 0, paused_price};
    if (brig_store_ledger_charge(d->store, sandbox_id, now_ms, plan_charge, &c, balance, err) < 0)
        return -1;
    if (c.amount > 0) /* after its transaction: a rolled-back plan is not counted */
        brig_metric_add(BRIG_M_BILLING_CHARGED, NULL, (double)c.amount);
    return 0;
}

int64_t brig_billing_paused_price(brigd *d, int64_t disk_mib)
{
    int64_t rate = d->cfg.pause_price_micro_usd_per_gib_s;
    return rate > 0 && disk_mib > 0 ? brig_money_times(rate, disk_mib) / 1024 : 0;
}

typedef struct volume_ctx {
    int64_t now, rate;
    bool final;
    int64_t amount;
} volume_ctx;

/* A volume's charge (brig_volume_plan_fn): whole seconds since it was billed (the rest
 * rounded up at its end), checked like a sandbox's. */
static void plan_volume(const brig_volume_charge_state *in, brig_volume_charge *out, void *ctx)
{
    volume_ctx *c = ctx;
    int64_t ms = c->now - in->billed_at;
    int64_t secs = ms <= 0 ? 0 : c->final ? (ms + 999) / 1000 : ms / 1000;
    int64_t rem = in->rem, amount = 0;
    brig_bill_volume(in->size_mib, secs, c->rate, c->final, &rem, &amount);
    int64_t bal = in->balance;
    bal = bal > BRIG_MONEY_MAX ? BRIG_MONEY_MAX : bal < -BRIG_MONEY_MAX ? -BRIG_MONEY_MAX : bal;
    if (bal - amount < -BRIG_MONEY_MAX)
        amount = bal + BRIG_MONEY_MAX;
    out->seconds = secs;
    out->amount = c->amount = amount;
    out->balance = bal - amount;
    if (!brig_money_add(in->cost, amount, &out->cost))
        out->cost = BRIG_MONEY_MAX;
    out->billed_at = in->billed_at + secs * 1000;
    out->rem = rem;
}

int brig_billing_charge_volume(brigd *d, const char *volume_id, int64_t now_ms, bool final,
                               int64_t *balance, brig_error **err)
{
    volume_ctx c = {now_ms, d->cfg.volume_price_micro_usd_per_gib_hour, final, 0};
    if (brig_store_volume_charge(d->store, volume_id, now_ms, plan_volume, &c, balance, err) < 0)
        return -1;
    if (c.amount > 0)
        brig_metric_add(BRIG_M_BILLING_CHARGED, NULL, (double)c.amount);
    return 0;
}

int brig_billing_charge_snapshot(brigd *d, const char *snapshot_id, int64_t now_ms, bool final,
                                 int64_t *balance, brig_error **err)
{
    /* per GiB-second: the volumes' arithmetic is per GiB-hour */
    volume_ctx c = {now_ms, brig_money_times(d->cfg.snapshot_price_micro_usd_per_gib_s, 3600),
                    final, 0};
    if (brig_store_snapshot_charge(d->store, snapshot_id, now_ms, plan_volume, &c, balance, err) <
        0)
        return -1;
    if (c.amount > 0)
        brig_metric_add(BRIG_M_BILLING_CHARGED, NULL, (double)c.amount);
    return 0;
}

int brig_billing_spent(brigd *d, const char *account_id, int64_t from_ms, int64_t to_ms,
                       int64_t *out, brig_error **err)
{
    return brig_store_ledger_spent(d->store, account_id, from_ms, to_ms, out, err);
}

int brig_billing_admit(brigd *d, const char *account_id, int64_t now, int64_t *max_live,
                       brig_error **err)
{
    brig_account_row l;
    int found = brig_store_account_get(d->store, account_id, &l, err);
    if (found == 0)
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no account '%.40s'", account_id);
    if (found <= 0)
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

int brig_billing_ledger(brigd *d, const char *account_id, int64_t before, int limit, json_t **out,
                        brig_error **err)
{
    brig_ledger_row *rows = brig_xcalloc((size_t)limit, sizeof(*rows));
    int n = 0;
    if (brig_store_ledger_page(d->store, account_id, before, limit, rows, &n, err) < 0) {
        free(rows);
        return -1;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        char at[32];
        brig_format_time(rows[i].at, at);
        json_t *e = json_pack("{s:I, s:s, s:s, s:I, s:o}", "seq", (json_int_t)rows[i].seq, "at", at,
                              "kind", rows[i].kind, "amount_micro_usd", (json_int_t)rows[i].amount,
                              "amount", brig_money_json(rows[i].amount));
        json_object_set_new(e, "sandbox_id",
                            rows[i].sandbox_id[0] ? json_string(rows[i].sandbox_id) : json_null());
        json_object_set_new(e, "seconds",
                            rows[i].seconds >= 0 ? json_integer(rows[i].seconds) : json_null());
        json_object_set_new(e, "note", rows[i].note[0] ? json_string(rows[i].note) : json_null());
        json_object_set_new(e, "volume_id",
                            rows[i].volume_id[0] ? json_string(rows[i].volume_id) : json_null());
        json_object_set_new(e, "snapshot_id",
                            rows[i].snapshot_id[0] ? json_string(rows[i].snapshot_id)
                                                   : json_null());
        json_array_append_new(arr, e);
    }
    json_t *next = n == limit && n > 0 ? json_integer(rows[n - 1].seq) : json_null();
    free(rows);
    *out = json_pack("{s:o, s:o}", "entries", arr, "next_before", next);
    return 0;
}

int brig_billing_days(brigd *d, const char *account_id, int days, json_t **out, brig_error **err)
{
    json_t *arr = json_array();
    int64_t day = brig_day_start(brig_now_real_ms());
    for (int i = days - 1; i >= 0; i--) {
        int64_t from = day - (int64_t)i * 86400000, spent = 0;
        if (brig_billing_spent(d, account_id, from, from + 86400000, &spent, err) < 0) {
            json_decref(arr);
            return -1;
        }
        char date[32];
        brig_format_time(from, date);
        date[10] = '\0'; /* YYYY-MM-DD */
        json_array_append_new(arr, json_pack("{s:s, s:I, s:o}", "date", date, "spent_micro_usd",
                                             (json_int_t)spent, "spent", brig_money_json(spent)));
    }
    *out = json_pack("{s:o}", "days", arr);
    return 0;
}
