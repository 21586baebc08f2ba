/*
 * cmd_metrics.c - `brig metrics [--json] ID`: a sandbox's usage over the last minute
 * (docs/metrics.md), also after it ended (its black box).
 */
#include <stdio.h>

#include "cli.h"
#include "util.h"

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* TIME CPU% MEM PEAK PIDS DISK NET-IN NET-OUT, sizes in MiB (network in KiB). */
static void print_samples(json_t *m)
{
    json_t *rows = json_object_get(m, "samples");
    printf("%-24s %6s %8s %8s %5s %8s %9s %9s\n", "TIME", "CPU%", "MEM MiB", "PEAK MiB", "PIDS",
           "DISK MiB", "NET-IN K", "NET-OUT K");
    size_t i;
    json_t *s;
    json_array_foreach(rows, i, s)
    {
        const char *at = json_string_value(json_object_get(s, "at"));
        cli_print_clean(stdout, at ? at : "-");
        printf(" %6.1f %8.1f %8.1f %5.0f %8.1f %9.1f %9.1f\n", num(s, "cpu_percent"),
               num(s, "memory_bytes") / 1048576, num(s, "memory_peak_bytes") / 1048576,
               num(s, "pids"), num(s, "disk_bytes") / 1048576, num(s, "net_bytes_in") / 1024,
               num(s, "net_bytes_out") / 1024);
    }
    const char *reason = json_string_value(json_object_get(m, "reason"));
    printf("%lld exec(s)", (long long)num(m, "execs"));
    if (reason) {
        printf("; ended: ");
        cli_print_clean(stdout, reason);
    }
    printf("\n");
}

int brig_cmd_metrics(const cli_args *a)
{
    json_t *m = NULL;
    int rc = cli_get_sandbox(a, "/metrics", &m);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON))
        cli_print_json(m);
    else
        print_samples(m);
    json_decref(m);
    return CLI_EXIT_OK;
}
