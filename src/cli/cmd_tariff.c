/*
 * cmd_tariff.c - `brig tariff ls`: what a sandbox of each tariff may use and costs
 * (GET /v1/tariffs, docs/api.md "Tariffs").
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* "512 MiB" for field key of row, into field out. */
static void mib_cell(json_t *row, const char *key, const char *out)
{
    json_t *v = json_object_get(row, key);
    json_object_set_new(row, out,
                        json_is_integer(v)
                            ? json_sprintf("%lld MiB", (long long)json_integer_value(v))
                            : json_string("-"));
}

static int tariff_ls(const cli_args *a)
{
    static const char *const keys[] = {"name",      "vcpus", "memory", "disk", "price_per_second",
                                       "is_default"};
    static const char *const heads[] = {"NAME", "VCPUS", "MEMORY", "DISK", "PRICE/S", "DEFAULT"};
    json_t *v = NULL;
    int rc = cli_call("GET", "/v1/tariffs", NULL, NULL, &v);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *rows = json_object_get(v, "tariffs");
    const char *def = cli_str(v, "default", "");
    for (size_t i = 0; !cli_opt_has(a, OPT_JSON) && i < json_array_size(rows); i++) {
        json_t *t = json_array_get(rows, i);
        mib_cell(t, "memory_mib", "memory");
        mib_cell(t, "disk_mib", "disk");
        json_object_set_new(t, "is_default",
                            json_string(strcmp(cli_str(t, "name", ""), def) == 0 ? "yes" : "no"));
    }
    return cli_print_rows(a, v, "tariffs", keys, heads, BRIG_ARRAY_LEN(keys));
}

static const int opts_json[] = {OPT_JSON, 0};

const cli_cmd cli_tariff_commands[] = {
    {"tariff ls", tariff_ls, "[--json]",
     "list the tariffs: what a sandbox may use and what it costs per second", NULL, opts_json, 0, 0,
     CLI_REST_NONE},
    {0},
};
