/*
 * cmd_volume.c - volumes (docs/volumes.md): volume create, ls, rm, inspect, and the
 * --volume NAME:/PATH[:ro] option of create and run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

int cli_add_volumes(const cli_args *a, json_t *body)
{
    json_t *vols = NULL;
    for (int i = 0; i < a->nopts; i++) {
        if (a->opts[i].key != OPT_VOLUME)
            continue;
        const char *v = a->opts[i].val;
        const char *colon = strchr(v, ':');
        if (colon == NULL || colon == v || colon[1] != '/') {
            json_decref(vols);
            return cli_usage_error(a->cmd, "--volume takes NAME:/PATH[:ro], not '%s'", v);
        }
        _cleanup_free_ char *path = brig_xstrdup(colon + 1);
        size_t n = strlen(path);
        bool ro = n > 3 && strcmp(path + n - 3, ":ro") == 0;
        if (ro || (n > 3 && strcmp(path + n - 3, ":rw") == 0))
            path[n - 3] = '\0';
        if (vols == NULL)
            vols = json_array();
        json_array_append_new(vols, json_pack("{s:s%, s:s, s:b}", "name", v, (size_t)(colon - v),
                                              "path", path, "read_only", ro));
    }
    if (vols)
        json_object_set_new(body, "volumes", vols); /* brigd checks the rest */
    return 0;
}

/* "/v1/volumes/<name escaped>"; caller frees. */
static char *volume_path(const char *name)
{
    _cleanup_free_ char *esc = brig_client_escape(name);
    return brig_asprintf("/v1/volumes/%s", esc);
}

int brig_cmd_volume_create(const cli_args *a)
{
    const char *size = cli_opt_get(a, OPT_SIZE);
    char *end = NULL;
    long long mib = size ? strtoll(size, &end, 10) : 0;
    if (size == NULL || *size == '\0' || *end != '\0' || mib <= 0)
        return cli_usage_error(a->cmd, "--size MIB (a positive number of MiB) is required");
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *body = json_pack("{s:s, s:I}", "name", a->pos[0], "size_mib", (json_int_t)mib);
    const char *prj = cli_opt_get(a, OPT_PROJECT);
    if (prj)
        json_object_set_new(body, "project", json_string(prj));
    json_t *v = NULL;
    int rc = brig_client_call(c, "POST", "/v1/volumes", body, CLI_TIMEOUT_MS, &v, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail(&err);
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(v);
    } else {
        const char *id = json_string_value(json_object_get(v, "id"));
        cli_print_clean(stdout, id ? id : "?");
        putchar('\n');
    }
    json_decref(v);
    return CLI_EXIT_OK;
}

/* "sbx_…(rw)" per user of a volume, for the table; caller frees. */
static char *users_cell(json_t *users)
{
    brig_buf b = {0};
    size_t i;
    json_t *u;
    json_array_foreach(users, i, u)
    {
        const char *id = json_string_value(json_object_get(u, "sandbox_id"));
        char *one = brig_asprintf("%s%s(%s)", i ? "," : "", id ? id : "?",
                                  json_is_true(json_object_get(u, "read_only")) ? "ro" : "rw");
        brig_buf_append(&b, one, strlen(one));
        free(one);
    }
    brig_buf_append(&b, "", 1);
    char *s = brig_xstrdup(b.len > 1 ? b.data : "-");
    brig_buf_dispose(&b);
    return s;
}

int brig_cmd_volume_ls(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *list = NULL;
    if (brig_client_call(c, "GET", "/v1/volumes", NULL, CLI_TIMEOUT_MS, &list, &err) < 0)
        return cli_fail(&err);
    json_t *rows = json_object_get(list, "volumes");
    if (cli_opt_has(a, OPT_JSON) || !json_is_array(rows)) {
        cli_print_json(list);
        json_decref(list);
        return CLI_EXIT_OK;
    }
    printf("%-32s  %-30s  %8s  %s\n", "NAME", "ID", "SIZE_MIB", "MOUNTED_BY");
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        const char *id = json_string_value(json_object_get(v, "id"));
        printf("%-32s  %-30s  %8lld  ", name ? name : "?", id ? id : "?",
               (long long)json_integer_value(json_object_get(v, "size_mib")));
        _cleanup_free_ char *users = users_cell(json_object_get(v, "mounted_by"));
        cli_print_clean(stdout, users);
        putchar('\n');
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

int brig_cmd_volume_inspect(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *path = volume_path(a->pos[0]);
    json_t *v = NULL;
    if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, &v, &err) < 0)
        return cli_fail(&err);
    cli_print_json(v);
    json_decref(v);
    return CLI_EXIT_OK;
}

int brig_cmd_volume_rm(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < a->npos; i++) {
        _cleanup_free_ char *path = volume_path(a->pos[i]);
        if (brig_client_call(c, "DELETE", path, NULL, CLI_DELETE_TIMEOUT_MS, NULL, &err) < 0) {
            brig_error_prefix(&err, "%s", a->pos[i]);
            rc = cli_fail(&err);
        }
    }
    return rc;
}
