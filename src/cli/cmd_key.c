/*
 * cmd_key.c - a project's API keys (docs/api.md "Projects, keys and secrets"; an admin key):
 * `brig key create [--scope sandbox|admin]` prints the new key, which brigd shows this once,
 * `brig key ls` (ids, scopes and times: brigd keeps only the keys' hashes and shows neither),
 * and `brig key revoke KEY_ID`.  All act on --project, default the account's default project.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

static int key_create(const cli_args *a)
{
    const char *scope = cli_opt_get(a, OPT_SCOPE);
    if (scope == NULL)
        scope = "sandbox";
    if (strcmp(scope, "sandbox") != 0 && strcmp(scope, "admin") != 0)
        return cli_usage_error(a->cmd, "--scope: sandbox or admin, not '%s'", scope);
    _cleanup_free_ char *project = NULL;
    int rc = cli_project_id(a, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    _cleanup_free_ char *path = cli_project_path(project, "/keys");
    json_t *k = NULL;
    rc = cli_call("POST", path, json_pack("{s:s}", "scope", scope), NULL, &k);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(k);
    } else {
        /* stdout: the key alone, for KEY=$(brig key create) */
        cli_print_clean(stdout, cli_str(k, "key", "-"));
        putchar('\n');
        fputs("brig: key ", stderr);
        cli_print_clean(stderr, cli_str(k, "id", "-"));
        fprintf(stderr, " (scope %s) of project ", scope);
        cli_print_clean(stderr, project);
        fputs(": shown this once; revoke it with brig key revoke\n", stderr);
    }
    json_decref(k);
    return CLI_EXIT_OK;
}

static int key_ls(const cli_args *a)
{
    static const char *const keys[] = {"id", "scope", "created_at", "revoked_at"};
    static const char *const heads[] = {"ID", "SCOPE", "CREATED", "REVOKED"};
    _cleanup_free_ char *project = NULL;
    int rc = cli_project_id(a, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    _cleanup_free_ char *path = cli_project_path(project, "/keys");
    json_t *v = NULL;
    if ((rc = cli_call("GET", path, NULL, NULL, &v)) != CLI_EXIT_OK)
        return rc;
    return cli_print_rows(a, v, "keys", keys, heads, BRIG_ARRAY_LEN(keys));
}

static int key_revoke(const cli_args *a)
{
    return cli_project_item_delete(a, "keys", "key id");
}

static const int opts_create[] = {OPT_PROJECT, OPT_SCOPE, OPT_JSON, 0};
static const int opts_revoke[] = {OPT_PROJECT, 0};
static const int opts_ls[] = {OPT_PROJECT, OPT_JSON, 0};

const cli_cmd cli_key_commands[] = {
    {"key create", key_create, "[--project ID] [--scope sandbox|admin] [--json]",
     "create an API key and print it (shown once; an admin key)",
     "--scope sandbox (the default) may create and use the project's sandboxes only;\n"
     "admin may do everything in the account.  The key goes to stdout, its id to stderr.\n",
     opts_create, 0, 0, CLI_REST_NONE},
    {"key ls", key_ls, "[--project ID] [--json]",
     "list a project's API keys: ids, scopes, when made and revoked (an admin key)", NULL, opts_ls,
     0, 0, CLI_REST_NONE},
    {"key revoke", key_revoke, "[--project ID] KEY_ID",
     "revoke an API key: it stops working at once (an admin key)", NULL, opts_revoke, 1, 1,
     CLI_REST_NONE},
    {0},
};
