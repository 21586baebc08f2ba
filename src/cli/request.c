/*
 * request.c - what the account, project, key, secret and policy commands share (cli.h): one
 * JSON call whose failure is printed at once, and the project a command is about.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "util.h"

int cli_call(const char *method, const char *path, json_t *body, const char *key_file, json_t **out)
{
    brig_error *err = NULL;
    json_t *ignored = NULL;
    brig_client *c = key_file ? cli_client_with(true, key_file, &err) : cli_client(true, &err);
    int rc = c != NULL ? brig_client_call(c, method, path, body, CLI_TIMEOUT_MS,
                                          out ? out : &ignored, &err)
                       : -1;
    json_decref(body);
    json_decref(ignored);
    return rc < 0 ? cli_fail(&err) : CLI_EXIT_OK;
}

char *cli_project_path(const char *id, const char *suffix)
{
    _cleanup_free_ char *esc = brig_client_escape(id);
    return brig_asprintf("/v1/projects/%s%s", esc, suffix);
}

int cli_project_id(const cli_args *a, char **id)
{
    const char *given = cli_opt_get(a, OPT_PROJECT);
    if (given != NULL) {
        if (*given == '\0')
            return cli_usage_error(a->cmd, "empty project id");
        *id = brig_xstrdup(given);
        return CLI_EXIT_OK;
    }
    json_t *acc = NULL;
    int rc = cli_call("GET", "/v1/account", NULL, NULL, &acc);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *def = cli_str(acc, "default_project_id", NULL);
    if (def != NULL)
        *id = brig_xstrdup(def);
    json_decref(acc);
    if (def != NULL)
        return CLI_EXIT_OK;
    fputs("brig: brigd names no default project for this account: give --project ID\n", stderr);
    return CLI_EXIT_FAIL;
}

int cli_project_item_delete(const cli_args *a, const char *collection, const char *what)
{
    if (*a->pos[0] == '\0')
        return cli_usage_error(a->cmd, "empty %s", what);
    _cleanup_free_ char *project = NULL;
    int rc = cli_project_id(a, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    _cleanup_free_ char *esc = brig_client_escape(a->pos[0]);
    _cleanup_free_ char *suffix = brig_asprintf("/%s/%s", collection, esc);
    _cleanup_free_ char *path = cli_project_path(project, suffix);
    return cli_call("DELETE", path, NULL, NULL, NULL);
}

int cli_project_read(const cli_args *a, const char *suffix, const char *key, json_type type,
                     const char *what, char **path, json_t **out)
{
    _cleanup_free_ char *project = NULL;
    int rc = cli_project_id(a, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    *path = cli_project_path(project, suffix);
    json_t *p = NULL;
    if ((rc = cli_call("GET", *path, NULL, NULL, &p)) != CLI_EXIT_OK)
        return rc;
    *out = json_deep_copy(json_object_get(p, key));
    json_decref(p);
    if (*out != NULL && json_typeof(*out) == type)
        return CLI_EXIT_OK;
    json_decref(*out);
    *out = NULL;
    fprintf(stderr, "brig: malformed answer from brigd: %s\n", what);
    return CLI_EXIT_FAIL;
}
