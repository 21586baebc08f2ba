/*
 * format.c - times and money for people (see format.h).
 */
#include "format.h"

#include <stdio.h>
#include <time.h>

void brig_format_time(int64_t ms, char out[32])
{
    char tmp[64];
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
    snprintf(out, 32, "%.31s", tmp);
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
