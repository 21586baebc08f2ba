/*
 * cmd_pause.c - `brig pause ID` and `brig resume ID` (POST /v1/sandboxes/{id}/pause,
 * /resume; docs/snapshots.md): every process of the sandbox stops where it is, and goes
 * on later; `pause --checkpoint` writes a gVisor sandbox's memory to disk instead.  Both are
 * idempotent; they print "ID paused" / "ID running".  Also snapshots and fork: `brig snapshot ID
 * [NAME]`, `brig snapshots`, `brig snapshot-rm SNAPSHOT`, `brig fork ID [COUNT]`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

static int pause_or_resume(const cli_args *a, const char *verb)
{
    const char *id = a->pos[0];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    _cleanup_free_ char *tail = brig_asprintf("/%s", verb);
    _cleanup_free_ char *path = cli_sandbox_path(id, tail);
    json_t *sb = NULL;
    json_t *body =
        cli_opt_has(a, OPT_CHECKPOINT) ? json_pack("{s:s}", "memory", "checkpoint") : NULL;
    int rc = cli_call("POST", path, body, NULL, &sb);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(sb);
    } else {
        cli_print_clean(stdout, cli_str(sb, "id", id));
        putchar(' ');
        cli_print_clean(stdout, cli_str(sb, "state", "?"));
        if (strcmp(cli_str(sb, "memory", ""), "checkpoint") == 0)
            fputs(" (memory checkpointed to disk)", stdout);
        putchar('\n');
    }
    json_decref(sb);
    return CLI_EXIT_OK;
}

static int pause_cmd(const cli_args *a)
{
    return pause_or_resume(a, "pause");
}

static int resume_cmd(const cli_args *a)
{
    return pause_or_resume(a, "resume");
}

static int snapshot_cmd(const cli_args *a)
{
    const char *id = a->pos[0];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    _cleanup_free_ char *path = cli_sandbox_path(id, "/snapshot");
    json_t *body = a->npos > 1 ? json_pack("{s:s}", "name", a->pos[1]) : NULL;
    json_t *snap = NULL;
    int rc = cli_call("POST", path, body, NULL, &snap);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(snap);
    } else {
        cli_print_clean(stdout, cli_str(snap, "id", "?"));
        printf(" %lld bytes\n", (long long)json_integer_value(json_object_get(snap, "bytes")));
    }
    json_decref(snap);
    return CLI_EXIT_OK;
}

static int snapshots_cmd(const cli_args *a)
{
    json_t *list = NULL;
    int rc = cli_call("GET", "/v1/snapshots", NULL, NULL, &list);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(list);
    } else {
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(list, "snapshots"), i, s)
        {
            const char *f[] = {"id", "name", "source_id", "template", "created_at"};
            for (size_t k = 0; k < BRIG_ARRAY_LEN(f); k++) {
                if (k)
                    putchar(' ');
                cli_print_clean(stdout, cli_str(s, f[k], "-"));
            }
            putchar('\n');
        }
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

static int snapshot_rm_cmd(const cli_args *a)
{
    _cleanup_free_ char *path = brig_asprintf("/v1/snapshots/%s", a->pos[0]);
    if (strspn(a->pos[0], "abcdefghijklmnopqrstuvwxyz234567_") != strlen(a->pos[0]))
        return cli_usage_error(a->cmd, "SNAPSHOT: a snapshot id (snp_...), not '%s'", a->pos[0]);
    return cli_call("DELETE", path, NULL, NULL, NULL);
}

static int fork_cmd(const cli_args *a)
{
    const char *id = a->pos[0];
    char *end = NULL;
    long n = a->npos > 1 ? strtol(a->pos[1], &end, 10) : 1;
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    if ((end && *end) || n < 1 || n > 16)
        return cli_usage_error(a->cmd, "COUNT: 1 to 16, not '%s'", a->pos[1]);
    _cleanup_free_ char *path = cli_sandbox_path(id, "/fork");
    json_t *out = NULL;
    json_t *body = json_pack("{s:i}", "count", (int)n);
    if (cli_opt_has(a, OPT_MEMORY))
        json_object_set_new(body, "memory", json_true());
    int rc = cli_call("POST", path, body, NULL, &out);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(out);
    } else {
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(out, "sandboxes"), i, s)
        {
            cli_print_clean(stdout, cli_str(s, "id", "?"));
            putchar('\n');
        }
        json_t *e = json_object_get(out, "error");
        if (json_is_object(e)) {
            fprintf(stderr, "brig: %lld not made: ",
                    (long long)json_integer_value(json_object_get(out, "refused")));
            cli_print_clean(stderr, cli_str(e, "message", "?"));
            fputc('\n', stderr);
        }
    }
    rc = json_is_object(json_object_get(out, "error")) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    json_decref(out);
    return rc;
}

static const int opts_pause[] = {OPT_JSON, 0};
static const int opts_pause_mem[] = {OPT_CHECKPOINT, OPT_JSON, 0};
static const int opts_fork[] = {OPT_MEMORY, OPT_JSON, 0};
static const int opts_none[] = {0};

const cli_cmd cli_pause_commands[] = {
    {"pause", pause_cmd, "[--json] [--checkpoint] ID",
     "pause a sandbox: every process stops where it is, its memory stays",
     "While paused, commands and file calls are refused (409 \"paused\"), its idle timeout\n"
     "stands still and it costs brigd's paused price.  Prints \"ID paused\".\n"
     "--checkpoint (gvisor only): its memory goes to disk and is freed on the host; resume\n"
     "restores it (connections to it end; docs/snapshots.md).\n",
     opts_pause_mem, 1, 1, CLI_REST_NONE},
    {"resume", resume_cmd, "[--json] ID", "resume a paused sandbox: its processes go on",
     "Prints \"ID running\".\n", opts_pause, 1, 1, CLI_REST_NONE},
    {"snapshot", snapshot_cmd, "[--json] ID [NAME]",
     "take a snapshot of a sandbox's file system (it goes on)",
     "Crash-consistent: its processes stand still while it is copied.  Prints\n"
     "\"SNAPSHOT_ID N bytes\".  New sandboxes start from it: brig create --snapshot\n"
     "SNAPSHOT_ID (docs/snapshots.md).\n",
     opts_pause, 1, 2, CLI_REST_NONE},
    {"snapshots", snapshots_cmd, "[--json]", "list the snapshots",
     "One a line: id, name, source sandbox, template, created.\n", opts_pause, 0, 0, CLI_REST_NONE},
    {"snapshot-rm", snapshot_rm_cmd, "SNAPSHOT", "delete a snapshot", NULL, opts_none, 1, 1,
     CLI_REST_NONE},
    {"fork", fork_cmd, "[--memory] [--json] ID [COUNT]",
     "COUNT (1..16, default 1) new sandboxes from a sandbox's file system now",
     "Prints their ids, one a line.  When a limit stopped some, says why on stderr and\n"
     "exits 1.  --memory: a running gVisor sandbox created with \"snapshots\": true goes\n"
     "on in each child, its processes too (docs/snapshots.md).\n",
     opts_fork, 1, 2, CLI_REST_NONE},
    {0},
};
