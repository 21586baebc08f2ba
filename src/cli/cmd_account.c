/*
 * cmd_account.c - accounts and their money (docs/cli.md, docs/api.md "Accounts, money and
 * limits").  An account's own key: `brig account show` (balance, spend against the limits),
 * `account usage [--days N]` (spend per UTC day), `account ledger [--limit N] [--before SEQ]`
 * (credits and charges, newest first; an admin key), `account limits [--daily USD]
 * [--monthly USD]` (show or set the spend limits; an admin key).  The operator's (without
 * BRIG_API_KEY the key comes from operator.key): `account ls`, `account show ACCOUNT`,
 * `account create [NAME]`, `account credit ACCOUNT USD`, `account configure ACCOUNT
 * [--max-live N] [--tariffs LIST]`.
 *
 * Amounts are given in dollars ("5", "$0.25", at most six decimals) and sent as integer
 * micro-dollars, never as a float.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

#define OPERATOR_KEY "operator.key"

/* A decimal option in [min, max] into *out (def when absent); a usage error otherwise. */
static int count_opt(const cli_args *a, int key, const char *name, long long def, long long min,
                     long long max, long long *out)
{
    const char *v = cli_opt_get(a, key);
    *out = def;
    if (v == NULL)
        return 0;
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min || n > max)
        return cli_usage_error(a->cmd, "--%s: a whole number from %lld to %lld, not '%s'", name,
                               min, max, v);
    *out = n;
    return 0;
}

/* Dollars ("5", "$0.25", "1.000001": at most six decimals, no sign) as micro-dollars into
 * *out; -1 when s is not such an amount.  brigd checks the range. */
static int parse_usd(const char *s, int64_t *out)
{
    int64_t whole = 0, frac = 0;
    int digits = 0, decimals = 0;
    const char *p = s + (*s == '$');
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (whole > 1000000000000LL) /* far beyond any limit: no overflow below */
            return -1;
        whole = whole * 10 + (*p - '0');
    }
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, decimals++) {
            if (decimals == 6)
                return -1;
            frac = frac * 10 + (*p - '0');
        }
    if (*p != '\0' || digits + decimals == 0)
        return -1;
    for (int i = decimals; i < 6; i++)
        frac *= 10;
    *out = whole * 1000000 + frac;
    return 0;
}

/* "$0.000600 of $5.000000" or "$0.000600 (no limit)". */
static void spent_line(json_t *acc, const char *label, const char *spent, const char *limit)
{
    const char *l = cli_str(acc, limit, NULL);
    printf("%-12s%s%s%s\n", label, cli_str(acc, spent, "-"), l ? " of " : " (no limit)",
           l ? l : "");
}

/* The account for people (--json: as brigd sent it); consumes acc. */
static int print_account(const cli_args *a, json_t *acc)
{
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(acc);
        json_decref(acc);
        return CLI_EXIT_OK;
    }
    printf("%-12s", "account");
    cli_print_clean(stdout, cli_str(acc, "id", "-"));
    printf(" (");
    cli_print_clean(stdout, cli_str(acc, "name", ""));
    printf(")\n%-12s%s\n", "balance", cli_str(acc, "balance", "-"));
    spent_line(acc, "today", "usage_today", "daily_limit");
    spent_line(acc, "this month", "usage_month", "monthly_limit");
    printf("%-12s%lld of %lld\n", "sandboxes",
           (long long)json_integer_value(json_object_get(acc, "live_sandboxes")),
           (long long)json_integer_value(json_object_get(acc, "max_live_sandboxes")));
    json_t *tariffs = json_object_get(acc, "tariffs");
    printf("%-12s", "tariffs");
    if (!json_is_array(tariffs))
        fputs("all", stdout);
    for (size_t i = 0; i < json_array_size(tariffs); i++) {
        fputs(i ? ", " : "", stdout);
        const char *t = json_string_value(json_array_get(tariffs, i));
        cli_print_clean(stdout, t ? t : "-");
    }
    putchar('\n');
    json_decref(acc);
    return CLI_EXIT_OK;
}

/* One account out of GET /v1/accounts (the operator's view), into *out. */
static int operator_account(const char *id, json_t **out)
{
    json_t *v = NULL;
    int rc = cli_call("GET", "/v1/accounts", NULL, OPERATOR_KEY, &v);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *list = json_object_get(v, "accounts");
    *out = NULL;
    for (size_t i = 0; i < json_array_size(list) && *out == NULL; i++)
        if (strcmp(cli_str(json_array_get(list, i), "id", ""), id) == 0)
            *out = json_incref(json_array_get(list, i));
    json_decref(v);
    if (*out != NULL)
        return CLI_EXIT_OK;
    fputs("brig: no account '", stderr);
    cli_print_clean(stderr, id);
    fputs("'\n", stderr);
    return CLI_EXIT_FAIL;
}

int brig_cmd_account_show(const cli_args *a)
{
    json_t *acc = NULL;
    int rc = a->npos == 1 ? operator_account(a->pos[0], &acc)
                          : cli_call("GET", "/v1/account", NULL, NULL, &acc);
    return rc != CLI_EXIT_OK ? rc : print_account(a, acc);
}

int brig_cmd_account_usage(const cli_args *a)
{
    static const char *const keys[] = {"date", "spent"};
    static const char *const heads[] = {"DATE", "SPENT"};
    long long days;
    if (count_opt(a, OPT_DAYS, "days", 30, 1, 366, &days) != 0)
        return CLI_EXIT_USAGE;
    _cleanup_free_ char *path = brig_asprintf("/v1/account/usage?days=%lld", days);
    json_t *v = NULL;
    int rc = cli_call("GET", path, NULL, NULL, &v);
    return rc != CLI_EXIT_OK ? rc : cli_print_rows(a, v, "days", keys, heads, BRIG_ARRAY_LEN(keys));
}

int brig_cmd_account_ledger(const cli_args *a)
{
    static const char *const keys[] = {"seq",        "at",      "kind", "amount",
                                       "sandbox_id", "seconds", "note"};
    static const char *const heads[] = {"SEQ",     "AT",      "KIND", "AMOUNT",
                                        "SANDBOX", "SECONDS", "NOTE"};
    long long limit, before = 0;
    if (count_opt(a, OPT_LIMIT, "limit", 100, 1, 1000, &limit) != 0 ||
        (cli_opt_has(a, OPT_BEFORE) &&
         count_opt(a, OPT_BEFORE, "before", 0, 1, INT64_MAX / 2, &before) != 0))
        return CLI_EXIT_USAGE;
    _cleanup_free_ char *path =
        brig_asprintf("/v1/account/ledger?limit=%lld&before=%lld", limit, before);
    json_t *v = NULL;
    int rc = cli_call("GET", path, NULL, NULL, &v);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *next = json_incref(json_object_get(v, "next_before"));
    rc = cli_print_rows(a, v, "entries", keys, heads, BRIG_ARRAY_LEN(keys));
    if (rc == CLI_EXIT_OK && !cli_opt_has(a, OPT_JSON) && json_is_integer(next))
        fprintf(stderr, "brig: more: --before %lld\n", (long long)json_integer_value(next));
    json_decref(next);
    return rc;
}

int brig_cmd_account_ls(const cli_args *a)
{
    static const char *const keys[] = {"id",          "name",           "balance",
                                       "usage_today", "live_sandboxes", "created_at"};
    static const char *const heads[] = {"ID", "NAME", "BALANCE", "TODAY", "LIVE", "CREATED"};
    json_t *v = NULL;
    int rc = cli_call("GET", "/v1/accounts", NULL, OPERATOR_KEY, &v);
    return rc != CLI_EXIT_OK ? rc
                             : cli_print_rows(a, v, "accounts", keys, heads, BRIG_ARRAY_LEN(keys));
}

/* "/v1/accounts/<id escaped><suffix>"; caller frees. */
static char *account_path(const char *id, const char *suffix)
{
    _cleanup_free_ char *esc = brig_client_escape(id);
    return brig_asprintf("/v1/accounts/%s%s", esc, suffix);
}

static int account_create(const cli_args *a)
{
    json_t *body = json_object();
    if (a->npos == 1)
        json_object_set_new(body, "name", json_string(a->pos[0]));
    json_t *acc = NULL;
    int rc = cli_call("POST", "/v1/accounts", body, OPERATOR_KEY, &acc);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(acc);
    } else {
        printf("%-12s", "account");
        cli_print_clean(stdout, cli_str(acc, "id", "-"));
        printf(" (");
        cli_print_clean(stdout, cli_str(acc, "name", ""));
        printf(")\n%-12s", "project");
        cli_print_clean(stdout, cli_str(acc, "default_project_id", "-"));
        printf(" (default)\n%-12s", "admin key");
        cli_print_clean(stdout, cli_str(acc, "api_key", "-"));
        printf("\n%-12s", "key id");
        cli_print_clean(stdout, cli_str(acc, "api_key_id", "-"));
        printf("\n%-12s%s\n", "balance", cli_str(acc, "balance", "-"));
        fputs("brig: the admin key is shown this once: keep it\n", stderr);
    }
    json_decref(acc);
    return CLI_EXIT_OK;
}

static int account_credit(const cli_args *a)
{
    int64_t micro;
    if (parse_usd(a->pos[1], &micro) < 0)
        return cli_usage_error(a->cmd, "USD: an amount of dollars such as 5 or 0.25, not '%s'",
                               a->pos[1]);
    json_t *body = json_pack("{s:I}", "amount_micro_usd", (json_int_t)micro);
    const char *note = cli_opt_get(a, OPT_NOTE);
    if (note != NULL)
        json_object_set_new(body, "note", json_string(note));
    _cleanup_free_ char *path = account_path(a->pos[0], "/credits");
    json_t *acc = NULL;
    int rc = cli_call("POST", path, body, OPERATOR_KEY, &acc);
    return rc != CLI_EXIT_OK ? rc : print_account(a, acc);
}

/* --tariffs: "all" (null: every tariff) or names separated by commas, into *out. */
static int tariffs_opt(const cli_args *a, const char *v, json_t **out)
{
    if (strcmp(v, "all") == 0) {
        *out = json_null();
        return 0;
    }
    *out = json_array();
    for (const char *p = v;; p++) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0) {
            json_decref(*out);
            return cli_usage_error(a->cmd, "--tariffs: names separated by commas, or all");
        }
        json_array_append_new(*out, json_stringn(p, n));
        if (comma == NULL)
            return 0;
        p = comma;
    }
}

static int account_configure(const cli_args *a)
{
    long long max_live;
    const char *tariffs = cli_opt_get(a, OPT_TARIFFS);
    if (count_opt(a, OPT_MAX_LIVE, "max-live", -1, 0, 1048576, &max_live) != 0)
        return CLI_EXIT_USAGE;
    if (max_live < 0 && tariffs == NULL)
        return cli_usage_error(a->cmd, "nothing to set: give --max-live or --tariffs");
    json_t *body = json_object(), *list = NULL;
    if (max_live >= 0)
        json_object_set_new(body, "max_live_sandboxes", json_integer(max_live));
    if (tariffs != NULL && tariffs_opt(a, tariffs, &list) != 0) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    if (list != NULL)
        json_object_set_new(body, "tariffs", list);
    _cleanup_free_ char *path = account_path(a->pos[0], "");
    json_t *acc = NULL;
    int rc = cli_call("PATCH", path, body, OPERATOR_KEY, &acc);
    return rc != CLI_EXIT_OK ? rc : print_account(a, acc);
}

/* --daily/--monthly into body's field: dollars, or "none" (null: no limit). */
static int limit_opt(const cli_args *a, int key, const char *name, const char *field, json_t *body)
{
    const char *v = cli_opt_get(a, key);
    int64_t micro;
    if (v == NULL)
        return 0;
    if (strcmp(v, "none") != 0 && parse_usd(v, &micro) < 0)
        return cli_usage_error(a->cmd, "--%s: an amount of dollars such as 5 or 0.25, or none",
                               name);
    json_object_set_new(body, field, strcmp(v, "none") == 0 ? json_null() : json_integer(micro));
    return 0;
}

static int account_limits(const cli_args *a)
{
    json_t *body = json_object(), *acc = NULL;
    if (limit_opt(a, OPT_DAILY, "daily", "daily_limit_micro_usd", body) != 0 ||
        limit_opt(a, OPT_MONTHLY, "monthly", "monthly_limit_micro_usd", body) != 0) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    int rc;
    if (json_object_size(body) == 0) {
        json_decref(body);
        rc = cli_call("GET", "/v1/account", NULL, NULL, &acc);
    } else {
        rc = cli_call("PATCH", "/v1/account", body, NULL, &acc);
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(acc);
    } else {
        spent_line(acc, "today", "usage_today", "daily_limit");
        spent_line(acc, "this month", "usage_month", "monthly_limit");
    }
    json_decref(acc);
    return CLI_EXIT_OK;
}

static const int opts_json[] = {OPT_JSON, 0};
static const int opts_credit[] = {OPT_NOTE, OPT_JSON, 0};
static const int opts_configure[] = {OPT_MAX_LIVE, OPT_TARIFFS, OPT_JSON, 0};
static const int opts_limits[] = {OPT_DAILY, OPT_MONTHLY, OPT_JSON, 0};

#define OPERATOR_DETAILS                                                                           \
    "An operator command: without BRIG_API_KEY the key comes from\n"                               \
    "$BRIG_STATE_DIR/operator.key.\n"

const cli_cmd cli_account_commands[] = {
    {"account create", account_create, "[--json] [NAME]",
     "create an account; prints its first admin key (shown once)", OPERATOR_DETAILS, opts_json, 0,
     1, CLI_REST_NONE},
    {"account credit", account_credit, "[--note TEXT] [--json] ACCOUNT USD",
     "add credit to an account (USD: dollars, e.g. 5 or 0.25)", OPERATOR_DETAILS, opts_credit, 2, 2,
     CLI_REST_NONE},
    {"account configure", account_configure, "[--max-live N] [--tariffs LIST|all] [--json] ACCOUNT",
     "set an account's concurrency limit and the tariffs it may use", OPERATOR_DETAILS,
     opts_configure, 1, 1, CLI_REST_NONE},
    {"account limits", account_limits, "[--daily USD|none] [--monthly USD|none] [--json]",
     "show or set the account's daily and monthly spend limits",
     "Without options it shows them; none removes a limit.  Setting them needs an admin key.\n",
     opts_limits, 0, 0, CLI_REST_NONE},
    {0},
};
