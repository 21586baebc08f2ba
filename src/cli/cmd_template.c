/*
 * cmd_template.c - templates (list, build) and brigd's health check.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* A template's "built" field for the table: yes, no or '-'. */
static const char *built_cell(json_t *row)
{
    json_t *b = json_object_get(row, "built");
    return json_is_boolean(b) ? (json_is_true(b) ? "yes" : "no") : "-";
}

static const char *str_cell(json_t *row, const char *key)
{
    const char *s = json_string_value(json_object_get(row, key));
    return s != NULL && *s ? s : "-";
}

int brig_cmd_template_ls(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *list = NULL;
    if (brig_client_call(c, "GET", "/v1/templates", NULL, CLI_TIMEOUT_MS, &list, &err) < 0)
        return cli_fail(&err);
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(list);
        json_decref(list);
        return CLI_EXIT_OK;
    }
    json_t *rows = json_object_get(list, "templates");
    if (!json_is_array(rows)) {
        json_decref(list);
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no template list");
        return cli_fail(&err);
    }
    int wname = (int)strlen("NAME");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        int n = (int)strlen(str_cell(row, "name"));
        if (n > wname)
            wname = n;
    }
    printf("%-*s  %-5s  %s\n", wname, "NAME", "BUILT", "KEY");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        const char *name = str_cell(row, "name");
        cli_print_clean(stdout, name);
        printf("%*s  %-5s  ", wname - (int)strlen(name), "", built_cell(row));
        cli_print_clean(stdout, str_cell(row, "key"));
        putchar('\n');
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

int brig_cmd_template_build(const cli_args *a)
{
    const char *name = a->pos[0];
    if (*name == '\0')
        return cli_usage_error(a->cmd, "empty template name");
    brig_error *err = NULL;
    brig_client *c = cli_client_with(true, "operator.key", &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *esc = brig_client_escape(name);
    _cleanup_free_ char *path = brig_asprintf("/v1/templates/%s/build", esc);
    json_t *tpl = NULL;
    /* a build may take minutes: no client-side limit */
    if (brig_client_call(c, "POST", path, NULL, 0, &tpl, &err) < 0) {
        brig_error_prefix(&err, "build %s", name);
        return cli_fail(&err);
    }
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(tpl);
    } else {
        fputs("built ", stdout);
        cli_print_clean(stdout, str_cell(tpl, "name"));
        fputs(" (key ", stdout);
        cli_print_clean(stdout, str_cell(tpl, "key"));
        fputs(")\n", stdout);
    }
    json_decref(tpl);
    return CLI_EXIT_OK;
}

int brig_cmd_health(const cli_args *a)
{
    (void)a;
    brig_error *err = NULL;
    brig_client *c = cli_client(false, &err);
    json_t *h = NULL;
    if (brig_client_call(c, "GET", "/healthz", NULL, 10000, &h, &err) < 0)
        return cli_fail(&err);
    const char *status = json_string_value(json_object_get(h, "status"));
    printf("%s: %s\n", brig_client_url(c), status != NULL ? status : "?");
    int ok = status != NULL && strcmp(status, "ok") == 0;
    json_decref(h);
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
