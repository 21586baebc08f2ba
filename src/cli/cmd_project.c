/*
 * cmd_project.c - an account's projects (docs/api.md "Projects, keys and secrets"):
 * `brig project ls`, `project create NAME` (an admin key) and `project show [ID]` (its egress
 * and isolation policies; default: the account's default project).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* The isolation policy's allowed modes joined with commas ("-" when absent); caller frees. */
static char *allowed_modes(json_t *project)
{
    json_t *allowed = json_object_get(json_object_get(project, "isolation"), "allowed");
    brig_buf b = {0};
    for (size_t i = 0; i < json_array_size(allowed); i++) {
        const char *m = json_string_value(json_array_get(allowed, i));
        brig_buf_printf(&b, "%s%s", i ? "," : "", m ? m : "-");
    }
    char *s = brig_xstrndup(b.len ? b.data : "-", b.len ? b.len : 1);
    brig_buf_dispose(&b);
    return s;
}

static int project_ls(const cli_args *a)
{
    static const char *const keys[] = {"id", "name", "egress_mode", "isolation_allowed",
                                       "created_at"};
    static const char *const heads[] = {"ID", "NAME", "EGRESS", "ISOLATION", "CREATED"};
    json_t *v = NULL;
    int rc = cli_call("GET", "/v1/projects", NULL, NULL, &v);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *rows = json_object_get(v, "projects");
    for (size_t i = 0; !cli_opt_has(a, OPT_JSON) && i < json_array_size(rows); i++) {
        json_t *p = json_array_get(rows, i);
        _cleanup_free_ char *modes = allowed_modes(p);
        json_object_set_new(p, "egress_mode",
                            json_string(cli_str(json_object_get(p, "egress"), "mode", "-")));
        json_object_set_new(p, "isolation_allowed", json_string(modes));
    }
    return cli_print_rows(a, v, "projects", keys, heads, BRIG_ARRAY_LEN(keys));
}

static int project_create(const cli_args *a)
{
    json_t *p = NULL;
    int rc = cli_call("POST", "/v1/projects", json_pack("{s:s}", "name", a->pos[0]), NULL, &p);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(p);
    } else {
        cli_print_clean(stdout, cli_str(p, "id", "-"));
        putchar('\n');
    }
    json_decref(p);
    return CLI_EXIT_OK;
}

static int project_show(const cli_args *a)
{
    _cleanup_free_ char *id = NULL;
    int rc = CLI_EXIT_OK;
    if (a->npos == 1)
        id = brig_xstrdup(a->pos[0]);
    else
        rc = cli_project_id(a, &id);
    if (rc != CLI_EXIT_OK)
        return rc;
    _cleanup_free_ char *path = cli_project_path(id, "");
    json_t *p = NULL;
    if ((rc = cli_call("GET", path, NULL, NULL, &p)) != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(p);
        json_decref(p);
        return CLI_EXIT_OK;
    }
    _cleanup_free_ char *modes = allowed_modes(p);
    printf("%-12s", "project");
    cli_print_clean(stdout, cli_str(p, "id", "-"));
    printf(" (");
    cli_print_clean(stdout, cli_str(p, "name", ""));
    printf(")\n%-12s", "account");
    cli_print_clean(stdout, cli_str(p, "account_id", "-"));
    printf("\n%-12s", "created");
    cli_print_clean(stdout, cli_str(p, "created_at", "-"));
    printf("\n%-12s", "isolation");
    cli_print_clean(stdout, modes);
    printf(" (default: ");
    cli_print_clean(stdout, cli_str(json_object_get(p, "isolation"), "default", "-"));
    printf(")\n");
    cli_print_egress(json_object_get(p, "egress"));
    json_decref(p);
    return CLI_EXIT_OK;
}

static const int opts_json[] = {OPT_JSON, 0};

const cli_cmd cli_project_commands[] = {
    {"project ls", project_ls, "[--json]", "list the account's projects", NULL, opts_json, 0, 0,
     CLI_REST_NONE},
    {"project create", project_create, "[--json] NAME",
     "create a project (an admin key) and print its id", NULL, opts_json, 1, 1, CLI_REST_NONE},
    {"project show", project_show, "[--json] [ID]",
     "a project and its egress and isolation policies",
     "Without ID: the account's default project.\n", opts_json, 0, 1, CLI_REST_NONE},
    {0},
};
