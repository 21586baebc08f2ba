/*
 * cmd_netlog.c - `brig netlog ID`: a sandbox's network log (GET /v1/sandboxes/{id}/network-log,
 * docs/network.md): its DNS queries and the packets its egress policy dropped, oldest first.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* Item i of array a when it is a string, else "?". */
static const char *str_at(json_t *a, size_t i)
{
    const char *s = json_string_value(json_array_get(a, i));
    return s ? s : "?";
}

/* Adds the table's "verdict" and "detail" cells to one record. */
static void describe(json_t *r)
{
    const char *kind = cli_str(r, "kind", "");
    json_t *proto = json_object_get(r, "proto");
    char pbuf[16];
    const char *p = cli_str(r, "proto", NULL);
    if (p == NULL && json_is_integer(proto))
        snprintf(pbuf, sizeof(pbuf), "%lld", (long long)json_integer_value(proto));
    if (p == NULL)
        p = json_is_integer(proto) ? pbuf : "-";
    brig_buf d = {0};
    if (strcmp(kind, "dns") == 0) {
        json_object_set_new(
            r, "verdict",
            json_string(json_is_true(json_object_get(r, "allowed")) ? "allowed" : "refused"));
        brig_buf_printf(&d, "%s %s %s -> %s", cli_str(r, "name", "-"), cli_str(r, "type", "-"), p,
                        cli_str(r, "rcode", "-"));
        json_t *answer = json_object_get(r, "answer");
        for (size_t i = 0; i < json_array_size(answer); i++)
            brig_buf_printf(&d, "%s%s", i ? ", " : " ", str_at(answer, i));
    } else {
        json_object_set_new(r, "verdict", json_string(cli_str(r, "reason", "-")));
        brig_buf_printf(&d, "%s %s %s -> %s", cli_str(r, "direction", "-"), p,
                        cli_str(r, "src", "-"), cli_str(r, "dst", "-"));
        json_t *port = json_object_get(r, "dport");
        if (json_is_integer(port))
            brig_buf_printf(&d, ":%lld", (long long)json_integer_value(port));
    }
    json_object_set_new(r, "detail", json_stringn(d.data ? d.data : "", d.len));
    brig_buf_dispose(&d);
}

static int netlog(const cli_args *a)
{
    static const char *const keys[] = {"time", "kind", "verdict", "detail"};
    static const char *const heads[] = {"TIME", "KIND", "VERDICT", "DETAIL"};
    json_t *v = NULL;
    int rc = cli_get_sandbox(a, "/network-log", &v);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *rows = json_object_get(v, "entries");
    for (size_t i = 0; !cli_opt_has(a, OPT_JSON) && i < json_array_size(rows); i++)
        describe(json_array_get(rows, i));
    return cli_print_rows(a, v, "entries", keys, heads, BRIG_ARRAY_LEN(keys));
}

static const int opts_json[] = {OPT_JSON, 0};

const cli_cmd cli_netlog_commands[] = {
    {"netlog", netlog, "[--json] ID",
     "a sandbox's network log: its DNS queries and the packets its policy dropped",
     "Oldest first, the last 1000 records.  DETAIL is NAME TYPE PROTO -> RCODE [ANSWER]\n"
     "for a query, DIRECTION PROTO SRC -> DST[:PORT] for a dropped packet, whose VERDICT is\n"
     "why (policy, limit, host, spoofed, inbound).\n",
     opts_json, 1, 1, CLI_REST_NONE},
    {0},
};
