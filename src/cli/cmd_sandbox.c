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
    const char *snap = cli_opt_get(a, OPT_SNAPSHOT); /* brigd checks it, and with --template */
    if (snap != NULL)
        json_object_set_new(body, "snapshot", json_string(snap));
    const char *iso = cli_opt_get(a, OPT_ISOLATION); /* brigd checks it */
    if (iso != NULL)
        json_object_set_new(body, "isolation", json_string(iso));
    const char *on_idle = cli_opt_get(a, OPT_ON_IDLE); /* brigd checks it */
    if (on_idle != NULL)
        json_object_set_new(body, "on_idle", json_string(on_idle));
    if (cli_opt_has(a, OPT_SNAPSHOTS))
        json_object_set_new(body, "snapshots", json_true());
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

/* GET /v1/sandboxes?state=ended, every page (since: NULL for the whole retention period), into
 * *out as {"sandboxes": [...]}, the last ended first. */
static int ended_sandboxes(brig_client *c, const char *since, json_t **out, brig_error **err)
{
    _cleanup_free_ char *q = since ? brig_client_escape(since) : NULL;
    json_t *all = json_array();
    char before[64] = "";
    for (;;) {
        _cleanup_free_ char *path =
            brig_asprintf("/v1/sandboxes?state=ended&limit=1000%s%s%s%s", q ? "&since=" : "",
                          q ? q : "", before[0] ? "&before=" : "", before);
        json_t *page = NULL;
        if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, &page, err) < 0) {
            json_decref(all);
            return -1;
        }
        json_array_extend(all, json_object_get(page, "sandboxes"));
        const char *next = json_string_value(json_object_get(page, "next_before"));
        snprintf(before, sizeof(before), "%s", next ? next : "");
        json_decref(page);
        if (before[0] == '\0')
            break;
    }
    *out = json_pack("{s:o}", "sandboxes", all);
    return 0;
}

int brig_cmd_ls(const cli_args *a)
{
    static const char *const keys[] = {"id", "template", "state", "created_at"};
    static const char *const heads[] = {"ID", "TEMPLATE", "STATE", "CREATED"};
    static const char *const ended_keys[] = {"id",         "template",   "state", "created_at",
                                             "deleted_at", "end_reason", "cost"};
    static const char *const ended_heads[] = {"ID",    "TEMPLATE", "STATE", "CREATED",
                                              "ENDED", "REASON",   "COST"};
    bool ended = cli_opt_has(a, OPT_ENDED);
    if (cli_opt_has(a, OPT_SINCE) && !ended)
        return cli_usage_error(a->cmd, "--since goes with --ended");
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *list = NULL;
    if ((ended
             ? ended_sandboxes(c, cli_opt_get(a, OPT_SINCE), &list, &err)
             : brig_client_call(c, "GET", "/v1/sandboxes", NULL, CLI_TIMEOUT_MS, &list, &err)) < 0)
        return cli_fail(&err);
    json_t *rows = json_object_get(list, "sandboxes");
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(list);
    } else if (!json_is_array(rows)) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no sandbox list");
    } else if (ended) {
        cli_print_table(rows, ended_keys, ended_heads, BRIG_ARRAY_LEN(ended_keys));
    } else {
        cli_print_table(rows, keys, heads, BRIG_ARRAY_LEN(keys));
    }
    json_decref(list);
    return err ? cli_fail(&err) : CLI_EXIT_OK;
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
