/*
 * cmd_pause.c - `brig pause ID` and `brig resume ID` (POST /v1/sandboxes/{id}/pause,
 * /resume; docs/snapshots.md): every process of the sandbox stops where it is, and goes
 * on later.  Both are idempotent; they print "ID paused" / "ID running".
 */
#include <stdio.h>

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
    int rc = cli_call("POST", path, NULL, NULL, &sb);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(sb);
    } else {
        cli_print_clean(stdout, cli_str(sb, "id", id));
        putchar(' ');
        cli_print_clean(stdout, cli_str(sb, "state", "?"));
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

static const int opts_pause[] = {OPT_JSON, 0};

const cli_cmd cli_pause_commands[] = {
    {"pause", pause_cmd, "[--json] ID",
     "pause a sandbox: every process stops where it is, its memory stays",
     "While paused, commands and file calls are refused (409 \"paused\"), its idle timeout\n"
     "stands still and it costs brigd's paused price.  Prints \"ID paused\".\n",
     opts_pause, 1, 1, CLI_REST_NONE},
    {"resume", resume_cmd, "[--json] ID", "resume a paused sandbox: its processes go on",
     "Prints \"ID running\".\n", opts_pause, 1, 1, CLI_REST_NONE},
    {0},
};
