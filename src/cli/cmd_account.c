/*
 * cmd_account.c - the account's money (docs/cli.md, docs/api.md "Accounts, money and limits"):
 * `brig account show` (balance, spend against the limits), `brig account usage [--days N]`
 * (spend per UTC day), `brig account ledger [--limit N] [--before SEQ]` (credits and charges,
 * newest first; an admin key) and `brig account ls` (every account; the operator key).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* GET path into *out with the client of key_file (NULL: the admin key's).  An exit code. */
static int get(const char *path, const char *key_file, json_t **out)
{
    brig_error *err = NULL;
    brig_client *c = key_file ? cli_client_with(true, key_file, &err) : cli_client(true, &err);
    if (c == NULL || brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, out, &err) < 0)
        return cli_fail(&err);
    return CLI_EXIT_OK;
}

/* A decimal option in [1, max] into *out (def when absent); a usage error otherwise. */
static int count_opt(const cli_args *a, int key, const char *name, long long def, long long max,
                     long long *out)
{
    const char *v = cli_opt_get(a, key);
    *out = def;
    if (v == NULL)
        return 0;
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 1 || n > max)
        return cli_usage_error(a->cmd, "--%s: a whole number from 1 to %lld, not '%s'", name, max,
                               v);
    *out = n;
    return 0;
}

/* Prints the answer as JSON (--json), else as a table of its array `field`. */
static int print_rows(const cli_args *a, json_t *v, const char *field, const char *const *keys,
                      const char *const *heads, size_t n)
{
    json_t *rows = json_object_get(v, field);
    int rc = CLI_EXIT_OK;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(v);
    } else if (!json_is_array(rows)) {
        brig_error *err = NULL;
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no '%s'", field);
        rc = cli_fail(&err);
    } else {
        cli_print_table(rows, keys, heads, n);
    }
    json_decref(v);
    return rc;
}

/* Field key of v when it is a string, else def. */
static const char *str(json_t *v, const char *key, const char *def)
{
    const char *s = json_string_value(json_object_get(v, key));
    return s ? s : def;
}

/* "$0.000600 of $5.000000" or "$0.000600 (no limit)". */
static void spent_line(json_t *acc, const char *label, const char *spent, const char *limit)
{
    const char *l = str(acc, limit, NULL);
    printf("%-12s%s%s%s\n", label, str(acc, spent, "-"), l ? " of " : " (no limit)", l ? l : "");
}

int brig_cmd_account_show(const cli_args *a)
{
    json_t *acc = NULL;
    int rc = get("/v1/account", NULL, &acc);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(acc);
    } else {
        printf("%-12s", "account");
        cli_print_clean(stdout, str(acc, "id", "-"));
        printf(" (");
        cli_print_clean(stdout, str(acc, "name", ""));
        printf(")\n%-12s%s\n", "balance", str(acc, "balance", "-"));
        spent_line(acc, "today", "usage_today", "daily_limit");
        spent_line(acc, "this month", "usage_month", "monthly_limit");
        printf("%-12s%lld of %lld\n", "sandboxes",
               (long long)json_integer_value(json_object_get(acc, "live_sandboxes")),
               (long long)json_integer_value(json_object_get(acc, "max_live_sandboxes")));
    }
    json_decref(acc);
    return CLI_EXIT_OK;
}

int brig_cmd_account_usage(const cli_args *a)
{
    static const char *const keys[] = {"date", "spent"};
    static const char *const heads[] = {"DATE", "SPENT"};
    long long days;
    if (count_opt(a, OPT_DAYS, "days", 30, 366, &days) != 0)
        return CLI_EXIT_USAGE;
    _cleanup_free_ char *path = brig_asprintf("/v1/account/usage?days=%lld", days);
    json_t *v = NULL;
    int rc = get(path, NULL, &v);
    return rc != CLI_EXIT_OK ? rc : print_rows(a, v, "days", keys, heads, BRIG_ARRAY_LEN(keys));
}

int brig_cmd_account_ledger(const cli_args *a)
{
    static const char *const keys[] = {"seq",        "at",      "kind", "amount",
                                       "sandbox_id", "seconds", "note"};
    static const char *const heads[] = {"SEQ",     "AT",      "KIND", "AMOUNT",
                                        "SANDBOX", "SECONDS", "NOTE"};
    long long limit, before = 0;
    if (count_opt(a, OPT_LIMIT, "limit", 100, 1000, &limit) != 0 ||
        (cli_opt_has(a, OPT_BEFORE) &&
         count_opt(a, OPT_BEFORE, "before", 0, INT64_MAX / 2, &before) != 0))
        return CLI_EXIT_USAGE;
    _cleanup_free_ char *path =
        brig_asprintf("/v1/account/ledger?limit=%lld&before=%lld", limit, before);
    json_t *v = NULL;
    int rc = get(path, NULL, &v);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *next = json_incref(json_object_get(v, "next_before"));
    rc = print_rows(a, v, "entries", keys, heads, BRIG_ARRAY_LEN(keys));
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
    int rc = get("/v1/accounts", "operator.key", &v);
    return rc != CLI_EXIT_OK ? rc : print_rows(a, v, "accounts", keys, heads, BRIG_ARRAY_LEN(keys));
}
