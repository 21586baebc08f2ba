/*
 * format.h - values as people read them in API answers and messages: times as
 * ISO 8601 UTC, money as dollars.  Pure; below every module that shows either.
 */
#ifndef BRIG_FORMAT_H
#define BRIG_FORMAT_H

#include <stdint.h>

#include <jansson.h>

/* "2026-12-01T10:00:00.123Z" for ms since the epoch (UTC). */
void brig_format_time(int64_t ms, char out[32]);

/* "$0.000600" for 600 micro-dollars ("-$1.000000" when negative). */
void brig_money_format(int64_t micro_usd, char out[32]);
/* The same as a JSON string (a new reference), for the people-readable field
 * beside a *_micro_usd one. */
json_t *brig_money_json(int64_t micro_usd);

#endif
