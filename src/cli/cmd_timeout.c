/*
 * cmd_timeout.c - `brig timeout ID SECONDS`: a sandbox lives until now + SECONDS
 * (POST /v1/sandboxes/{id}/timeout); with --add, SECONDS beyond the end it has now (brig
 * reads its expires_at first).  brigd keeps the whole life within its maximum lifetime and
 * says by how much it can still be extended when asked for more.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "util.h"

/* "2026-12-01T10:00:00.123Z" as ms since the epoch into *ms; -1 when it is not that. */
static int parse_time(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    int frac = 0, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return -1;
    s += n;
    if (*s == '.' && sscanf(s, ".%3d%n", &frac, &n) == 1)
        s += n;
    if (strcmp(s, "Z") != 0)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *ms = (int64_t)timegm(&tm) * 1000 + frac;
    return 0;
}

/* The seconds the sandbox has left now, from its expires_at, into *left. */
static int time_left(const cli_args *a, double *left)
{
    json_t *sb = NULL;
    int rc = cli_get_sandbox(a, "", &sb);
    if (rc != CLI_EXIT_OK)
        return rc;
    int64_t at;
    if (parse_time(cli_str(sb, "expires_at", ""), &at) < 0) {
        fputs("brig: the sandbox has no expires_at (ended?): set a timeout without --add\n",
              stderr);
        json_decref(sb);
        return CLI_EXIT_FAIL;
    }
    json_decref(sb);
    int64_t now = brig_now_real_ms();
    *left = at > now ? (double)(at - now) / 1000 : 0;
    return CLI_EXIT_OK;
}

static int timeout_set(const cli_args *a)
{
    const char *id = a->pos[0], *secs = a->pos[1];
    char *end = NULL;
    double s = strtod(secs, &end);
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    if (*secs == '\0' || *end != '\0' || !isfinite(s) || s <= 0 || s > 1e9)
        return cli_usage_error(a->cmd, "SECONDS: a positive number, not '%s'", secs);
    double left = 0;
    int rc = cli_opt_has(a, OPT_ADD) ? time_left(a, &left) : CLI_EXIT_OK;
    if (rc != CLI_EXIT_OK)
        return rc;
    double t = left + s;
    json_t *body = t == floor(t) ? json_pack("{s:I}", "timeout", (json_int_t)t)
                                 : json_pack("{s:f}", "timeout", t);
    _cleanup_free_ char *path = cli_sandbox_path(id, "/timeout");
    json_t *sb = NULL;
    if ((rc = cli_call("POST", path, body, NULL, &sb)) != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(sb);
    } else {
        cli_print_clean(stdout, cli_str(sb, "id", id));
        printf(" expires at ");
        cli_print_clean(stdout, cli_str(sb, "expires_at", "-"));
        putchar('\n');
    }
    json_decref(sb);
    return CLI_EXIT_OK;
}

static const int opts_timeout[] = {OPT_ADD, OPT_JSON, 0};

const cli_cmd cli_timeout_commands[] = {
    {"timeout", timeout_set, "[--add] [--json] ID SECONDS",
     "set how long a sandbox lives: until now + SECONDS (--add: beyond its current end)",
     "Its whole life stays within brigd's maximum lifetime (max_lifetime); beyond, brigd\n"
     "refuses and says how much is left.  Prints the new expires_at.\n",
     opts_timeout, 2, 2, CLI_REST_NONE},
    {0},
};
