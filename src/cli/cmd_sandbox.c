/*
 * cmd_sandbox.c - sandbox lifecycle commands: create, ls, inspect, rm.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

char *cli_sandbox_path(const char *id, const char *suffix)
{
    _cleanup_free_ char *esc = brig_client_escape(id);
    return brig_asprintf("/v1/sandboxes/%s%s", esc, suffix);
}

int cli_get_sandbox(const cli_args *a, const char *suffix, json_t **out)
{
    const char *id = a->pos[0];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *path = cli_sandbox_path(id, suffix);
    if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, out, &err) < 0)
        return cli_fail(&err);
    return CLI_EXIT_OK;
}

int cli_check_id(const cli_args *a, const char *id)
{
    if (*id == '\0')
        return cli_usage_error(a->cmd, "empty sandbox id");
    return 0;
}

void cli_print_clean(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}

int brig_cmd_create(const cli_args *a)
{
    json_t *body = json_object();
    if (cli_add_volumes(a, body) != 0) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL) {
        json_decref(body);
        return cli_fail(&err);
    }
    const char *tpl = cli_opt_get(a, OPT_TEMPLATE);
    if (tpl != NULL)
        json_object_set_new(body, "template", json_string(tpl));
    const char *iso = cli_opt_get(a, OPT_ISOLATION); /* brigd checks it */
    if (iso != NULL)
        json_object_set_new(body, "isolation", json_string(iso));
    json_t *sbx = NULL;
    int rc = brig_client_call(c, "POST", "/v1/sandboxes", body, CLI_TIMEOUT_MS, &sbx, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail(&err);
    const char *id = json_string_value(json_object_get(sbx, "id"));
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(sbx);
    } else if (id != NULL) {
        cli_print_clean(stdout, id);
        putchar('\n');
    } else {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no sandbox id");
        rc = -1;
    }
    json_decref(sbx);
    return rc < 0 ? cli_fail(&err) : CLI_EXIT_OK;
}

/* A cell of the sandbox table: field `key` of row when it is a string. */
static const char *cell(json_t *row, const char *key)
{
    const char *s = json_string_value(json_object_get(row, key));
    return s != NULL && *s ? s : "-";
}

int brig_cmd_ls(const cli_args *a)
{
    static const char *const keys[] = {"id", "template", "state", "created_at"};
    static const char *const heads[] = {"ID", "TEMPLATE", "STATE", "CREATED"};
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *list = NULL;
    if (brig_client_call(c, "GET", "/v1/sandboxes", NULL, CLI_TIMEOUT_MS, &list, &err) < 0)
        return cli_fail(&err);
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(list);
        json_decref(list);
        return CLI_EXIT_OK;
    }
    json_t *rows = json_object_get(list, "sandboxes");
    if (!json_is_array(rows)) {
        json_decref(list);
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no sandbox list");
        return cli_fail(&err);
    }
    size_t width[BRIG_ARRAY_LEN(keys)];
    for (size_t k = 0; k < BRIG_ARRAY_LEN(keys); k++)
        width[k] = strlen(heads[k]);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        for (size_t k = 0; k < BRIG_ARRAY_LEN(keys); k++) {
            size_t n = strlen(cell(row, keys[k]));
            if (n > width[k])
                width[k] = n;
        }
    }
    for (size_t k = 0; k < BRIG_ARRAY_LEN(keys); k++)
        printf("%-*s%s", k + 1 < BRIG_ARRAY_LEN(keys) ? (int)width[k] : 0, heads[k],
               k + 1 < BRIG_ARRAY_LEN(keys) ? "  " : "\n");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        for (size_t k = 0; k < BRIG_ARRAY_LEN(keys); k++) {
            const char *s = cell(row, keys[k]);
            cli_print_clean(stdout, s);
            if (k + 1 < BRIG_ARRAY_LEN(keys))
                printf("%*s", (int)(width[k] - strlen(s) + 2), "");
        }
        putchar('\n');
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

int brig_cmd_inspect(const cli_args *a)
{
    json_t *sbx = NULL;
    int rc = cli_get_sandbox(a, "", &sbx);
    if (rc != CLI_EXIT_OK)
        return rc;
    cli_print_json(sbx);
    json_decref(sbx);
    return CLI_EXIT_OK;
}

int brig_cmd_rm(const cli_args *a)
{
    for (int i = 0; i < a->npos; i++)
        if (cli_check_id(a, a->pos[i]) != 0)
            return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < a->npos; i++) {
        _cleanup_free_ char *path = cli_sandbox_path(a->pos[i], "");
        if (brig_client_call(c, "DELETE", path, NULL, CLI_DELETE_TIMEOUT_MS, NULL, &err) < 0) {
            brig_error_prefix(&err, "%s", a->pos[i]);
            rc = cli_fail(&err);
        }
    }
    return rc;
}
