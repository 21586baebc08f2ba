/*
 * billing.h - money: integer micro-dollars everywhere, never floating point.
 *
 * An append-only ledger (the store's, store.h) records credits and charges;
 * each account's balance is derived from it and kept beside the account,
 * written in the same store operation as the ledger row.  A sandbox is charged per second of life
 * with a 60-second minimum: while it lives, every whole second that passed is charged in increments
 * (the sandbox row remembers how far it was billed, in the same transaction, so a restart never
 * charges a second twice nor loses one); when it ends, the rest is charged, rounded up to a whole
 * second, and at least 60 seconds in total.
 */
#ifndef BRIG_BILLING_H
#define BRIG_BILLING_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "core/format.h" /* brig_money_format, brig_money_json: money for people */
#include "core/money.h"
#include "server.h"

#define BRIG_MIN_BILLED_SECONDS 60

/* ---- pure arithmetic (unit-tested) -------------------------------------------- */

/* Seconds to charge now for a sandbox alive for alive_ms of which billed_s
 * seconds were already charged.  Incremental (final = false): whole seconds that
 * passed.  Final: the rest, rounded up, so the total is max(60, ceil(alive)). */
int64_t brig_bill_seconds(int64_t alive_ms, int64_t billed_s, bool final);

/* A volume's charge for `seconds` more of size_mib at rate micro-dollars per GiB-hour:
 * *amount whole micro-dollars, carrying what is below one in *rem (in 1/(1024 x 3600)
 * micro-dollar, in and out: a volume is never charged a rounding twice nor loses one);
 * final: the carry rounded up.  Held at BRIG_MONEY_MAX.  Pure. */
void brig_bill_volume(int64_t size_mib, int64_t seconds, int64_t rate, bool final, int64_t *rem,
                      int64_t *amount);

/* UTC midnight of the day / first day of the month containing ms, and the
 * start of the next one (for "resets at"). */
int64_t brig_day_start(int64_t ms);
int64_t brig_month_start(int64_t ms);
int64_t brig_next_day(int64_t ms);
int64_t brig_next_month(int64_t ms);

/* ---- ledger --------------------------------------------------------------------- */

/* Adds a credit: 0 < amount <= BRIG_CREDIT_MAX (else BRIG_E_INVALID), and the
 * balance stays <= BRIG_MONEY_MAX (else BRIG_E_CONFLICT, nothing changed). */
int brig_billing_credit(brigd *d, const char *account_id, int64_t amount, const char *note,
                        brig_error **err);

/* Charges a sandbox up to now (final at its end); returns the account's balance
 * afterwards in *balance (may be NULL).  Checked arithmetic: a charge is held
 * at what keeps the balance >= -BRIG_MONEY_MAX. */
int brig_billing_charge(brigd *d, const char *sandbox_id, int64_t now_ms, bool final,
                        int64_t *balance, brig_error **err);

/* The same for the time a sandbox was paused: at paused_price micro-dollars per second
 * (its paused storage, brig_billing_paused_price) instead of its tariff's. */
int brig_billing_charge_paused(brigd *d, const char *sandbox_id, int64_t now_ms, bool final,
                               int64_t paused_price, int64_t *balance, brig_error **err);
/* What a paused sandbox of disk_mib costs per second: pause_price_micro_usd_per_gib_s
 * times its disk in GiB (rounded down). */
int64_t brig_billing_paused_price(brigd *d, int64_t disk_mib);

/* Charges a volume up to now (final at its delete) at volume_price_micro_usd_per_gib_hour,
 * whole seconds of it (the rest at the next charge); *balance (may be NULL) afterwards.  A
 * rate of 0 charges nothing but moves the volume's billing on. */
int brig_billing_charge_volume(brigd *d, const char *volume_id, int64_t now_ms, bool final,
                               int64_t *balance, brig_error **err);

/* The same for a snapshot, by its data, at snapshot_price_micro_usd_per_gib_s. */
int brig_billing_charge_snapshot(brigd *d, const char *snapshot_id, int64_t now_ms, bool final,
                                 int64_t *balance, brig_error **err);

/* May account_id start one more sandbox at time now?  BRIG_E_PAYMENT when its
 * balance is used up, BRIG_E_LIMIT for a daily or monthly spend limit (saying
 * when it resets).  *max_live (may be NULL) gets its concurrency limit, which
 * the caller checks with brig_billing_live_check where it counts the account's
 * sandboxes. */
int brig_billing_admit(brigd *d, const char *account_id, int64_t now, int64_t *max_live,
                       brig_error **err);

/* The concurrency limit: BRIG_E_LIMIT when `live` (the account's sandboxes,
 * creates in flight included) already reaches max_live.  Pure. */
int brig_billing_live_check(int64_t live, int64_t max_live, brig_error **err);

/* The account's ledger, newest first: {"entries": [{"seq", "at", "kind", "amount_micro_usd",
 * "amount", "sandbox_id", "seconds", "note"}], "next_before"} with at most limit rows of seq <
 * before (0: from the newest); next_before is null on the last page. */
int brig_billing_ledger(brigd *d, const char *account_id, int64_t before, int limit, json_t **out,
                        brig_error **err);

/* What the account spent on each of the last `days` UTC days, oldest first, today last:
 * {"days": [{"date", "spent_micro_usd", "spent"}]}. */
int brig_billing_days(brigd *d, const char *account_id, int days, json_t **out, brig_error **err);

/* Sum of charges of an account in [from_ms, to_ms). */
int brig_billing_spent(brigd *d, const char *account_id, int64_t from_ms, int64_t to_ms,
                       int64_t *out, brig_error **err);

#endif
