/*
 * cmd_project.c - an account's projects (docs/api.md "Projects, keys and secrets"):
 * `brig project ls`, `project create NAME`, `project show [ID]` (its egress and isolation
 * policies; default: the account's default project), `project rename ID NAME` and `project
 * isolation ID MODES|all` (the isolation policy), `project on-idle ID delete|pause`.  Changes
 * need an admin key.
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

static int print_project(const cli_args *a, json_t *p);

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
    return print_project(a, p);
}

/* A project for people (--json: as brigd sent it); consumes p. */
static int print_project(const cli_args *a, json_t *p)
{
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
    printf(")\n%-12s", "on idle");
    cli_print_clean(stdout, cli_str(p, "on_idle", "-"));
    putchar('\n');
    cli_print_egress(json_object_get(p, "egress"));
    json_decref(p);
    return CLI_EXIT_OK;
}

/* PATCH the project pos[0] with body (consumed) and show it as project show does. */
static int patch(const cli_args *a, json_t *body)
{
    _cleanup_free_ char *path = cli_project_path(a->pos[0], "");
    json_t *p = NULL;
    int rc = cli_call("PATCH", path, body, NULL, &p);
    if (rc != CLI_EXIT_OK)
        return rc;
    return print_project(a, p);
}

static int project_rename(const cli_args *a)
{
    return patch(a, json_pack("{s:s}", "name", a->pos[1]));
}

/* MODES: "all" (no policy: every mode, the operator's default) or modes separated by commas. */
static int project_isolation(const cli_args *a)
{
    const char *modes = a->pos[1], *def = cli_opt_get(a, OPT_DEFAULT);
    if (strcmp(modes, "all") == 0) {
        if (def != NULL)
            return cli_usage_error(a->cmd, "--default goes with a list of MODES, not all");
        return patch(a, json_pack("{s:n}", "isolation"));
    }
    json_t *allowed = json_array();
    for (const char *p = modes;;) {
        size_t n = strcspn(p, ",");
        if (n == 0) {
            json_decref(allowed);
            return cli_usage_error(a->cmd, "MODES: modes separated by commas, or all");
        }
        json_array_append_new(allowed, json_stringn(p, n));
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    json_t *pol = json_pack("{s:o}", "allowed", allowed); /* brigd checks the modes */
    json_object_set_new(pol, "default",
                        def && strcmp(def, "none") ? json_string(def) : json_null());
    return patch(a, json_pack("{s:o}", "isolation", pol));
}

/* What the project's new sandboxes' idle timeout does: delete or pause (brigd checks it). */
static int project_on_idle(const cli_args *a)
{
    return patch(a, json_pack("{s:s}", "on_idle", a->pos[1]));
}

static const int opts_json[] = {OPT_JSON, 0};
static const int opts_isolation[] = {OPT_DEFAULT, OPT_JSON, 0};

const cli_cmd cli_project_commands[] = {
    {"project ls", project_ls, "[--json]", "list the account's projects", NULL, opts_json, 0, 0,
     CLI_REST_NONE},
    {"project create", project_create, "[--json] NAME",
     "create a project (an admin key) and print its id", NULL, opts_json, 1, 1, CLI_REST_NONE},
    {"project show", project_show, "[--json] [ID]",
     "a project and its egress and isolation policies",
     "Without ID: the account's default project.\n", opts_json, 0, 1, CLI_REST_NONE},
    {"project rename", project_rename, "[--json] ID NAME", "rename a project (an admin key)", NULL,
     opts_json, 2, 2, CLI_REST_NONE},
    {"project isolation", project_isolation, "[--default MODE|none] [--json] ID MODES|all",
     "set which isolation modes the project's sandboxes may use (an admin key)",
     "MODES: container, gvisor or both (container,gvisor); --default: the mode of a create\n"
     "that names none (none: the operator's isolation_default if allowed, else the first).\n"
     "all removes the policy.  Running sandboxes keep their mode.\n",
     opts_isolation, 2, 2, CLI_REST_NONE},
    {"project on-idle", project_on_idle, "[--json] ID delete|pause",
     "what the idle timeout of the project's sandboxes does (an admin key)",
     "The default of the sandboxes created from then on (create --on-idle overrides it);\n"
     "pause keeps a sandbox paused up to brigd's paused_max_age (docs/snapshots.md).\n",
     opts_json, 2, 2, CLI_REST_NONE},
    {0},
};
