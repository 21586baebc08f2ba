/*
 * cmd_inject.c - a project's credential injection rules (docs/secrets.md; an admin key):
 * `brig inject show`, `inject set HOST NAME=VALUE...` (the rule for HOST, replaced whole),
 * `inject remove HOST`, for --project (default: the account's default project).
 *
 * brigd takes the whole list in one PUT, so set and remove read it, change it and send it
 * back: two admins editing the rules at the same moment may lose one's change.  A VALUE
 * names secrets as {{secret:NAME}}; quote it for the shell.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* The project's rules (a copy) into *rules, and their path into *path. */
static int load(const cli_args *a, char **path, json_t **rules)
{
    return cli_project_read(a, "/injections", "rules", JSON_ARRAY, "no rules", path, rules);
}

/* Sends rules (consumed) and prints what brigd kept. */
static int store(const char *path, json_t *rules)
{
    json_t *p = NULL;
    int rc = cli_call("PUT", path, json_pack("{s:o}", "rules", rules), NULL, &p);
    if (rc == CLI_EXIT_OK)
        cli_print_json(json_object_get(p, "rules"));
    json_decref(p);
    return rc;
}

/* Index of HOST's rule in rules, or -1. */
static long find(json_t *rules, const char *host)
{
    for (size_t i = 0; i < json_array_size(rules); i++)
        if (strcmp(cli_str(json_array_get(rules, i), "host", ""), host) == 0)
            return (long)i;
    return -1;
}

static int inject_show(const cli_args *a)
{
    _cleanup_free_ char *path = NULL;
    json_t *rules = NULL;
    int rc = load(a, &path, &rules);
    if (rc == CLI_EXIT_OK)
        cli_print_json(rules);
    json_decref(rules);
    return rc;
}

static int inject_set(const cli_args *a)
{
    json_t *headers = json_object();
    for (int i = 1; i < a->npos; i++) {
        const char *eq = strchr(a->pos[i], '=');
        if (eq == NULL || eq == a->pos[i]) {
            json_decref(headers);
            return cli_usage_error(a->cmd, "'%s' is not NAME=VALUE", a->pos[i]);
        }
        _cleanup_free_ char *name = brig_asprintf("%.*s", (int)(eq - a->pos[i]), a->pos[i]);
        json_object_set_new(headers, name, json_string(eq + 1));
    }
    _cleanup_free_ char *path = NULL;
    json_t *rules = NULL;
    int rc = load(a, &path, &rules);
    if (rc != CLI_EXIT_OK) {
        json_decref(headers);
        return rc;
    }
    json_t *rule = json_pack("{s:s s:o}", "host", a->pos[0], "headers", headers);
    long at = find(rules, a->pos[0]);
    if (at >= 0)
        json_array_set_new(rules, (size_t)at, rule);
    else
        json_array_append_new(rules, rule);
    return store(path, rules);
}

static int inject_remove(const cli_args *a)
{
    _cleanup_free_ char *path = NULL;
    json_t *rules = NULL;
    int rc = load(a, &path, &rules);
    if (rc != CLI_EXIT_OK)
        return rc;
    long at = find(rules, a->pos[0]);
    if (at < 0) {
        fputs("brig: no rule for ", stderr);
        cli_print_clean(stderr, a->pos[0]);
        fputs(": nothing changed\n", stderr);
        json_decref(rules);
        return CLI_EXIT_FAIL;
    }
    json_array_remove(rules, (size_t)at);
    return store(path, rules);
}

static const int opts_project[] = {OPT_PROJECT, OPT_JSON, 0};

const cli_cmd cli_inject_commands[] = {
    {"inject show", inject_show, "[--project ID]", "a project's credential injection rules (JSON)",
     NULL, opts_project, 0, 0, CLI_REST_NONE},
    {"inject set", inject_set, "[--project ID] HOST NAME=VALUE...",
     "set the injection rule for HOST: the headers its requests get (an admin key)",
     "HOST: api.example.com, or *.example.com for the names below it.  A VALUE names\n"
     "secrets of the sandbox as {{secret:NAME}}: 'Authorization=Bearer {{secret:KEY}}'.\n"
     "The rule replaces HOST's earlier one; running sandboxes get it at once.\n",
     opts_project, 2, -1, CLI_REST_NONE},
    {"inject remove", inject_remove, "[--project ID] HOST", "remove HOST's injection rule", NULL,
     opts_project, 1, 1, CLI_REST_NONE},
    {0},
};
