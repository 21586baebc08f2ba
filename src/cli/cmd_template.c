/*
 * cmd_template.c - templates (list, build; an account's own: show, log, rm) and brigd's
 * health check.
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

/* A built-in template's name, or an account's template's name:tag. */
static const char *row_name(json_t *row)
{
    return json_object_get(row, "ref") ? str_cell(row, "ref") : str_cell(row, "name");
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
        int n = (int)strlen(row_name(row));
        if (n > wname)
            wname = n;
    }
    printf("%-*s  %-5s  %s\n", wname, "NAME", "BUILT", "KEY");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        const char *name = row_name(row);
        cli_print_clean(stdout, name);
        printf("%*s  %-5s  ", wname - (int)strlen(name), "", built_cell(row));
        cli_print_clean(stdout, str_cell(row, "key"));
        putchar('\n');
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

/* Prints a build's output to f; control characters but newline and tab show as '?'. */
static void print_text(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        fputc((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f ? '?' : *p, f);
}

/* A build's output as it comes goes to stderr: stdout is for the result. */
static void print_log(const char *s)
{
    print_text(stderr, s);
}

static int on_build_event(json_t *ev, void *ctx, brig_error **err)
{
    json_t **end = ctx;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed event from brigd: no type");
    if (strcmp(type, "log") == 0) {
        const char *data = json_string_value(json_object_get(ev, "data"));
        print_log(data ? data : "");
    } else if (strcmp(type, "dropped") == 0) {
        fprintf(stderr, "brig: [%lld bytes of the build's output are no longer kept]\n",
                (long long)json_integer_value(json_object_get(ev, "bytes")));
    } else if (strcmp(type, "end") == 0) {
        json_decref(*end);
        *end = json_incref(ev);
    }
    return 0;
}

/* Follows the build's output until it ends; its end event (owned) in *end. */
static int follow_build(brig_client *c, const char *name, const char *id, json_t **end,
                        brig_error **err)
{
    _cleanup_free_ char *esc = brig_client_escape(name);
    _cleanup_free_ char *eid = brig_client_escape(id);
    _cleanup_free_ char *path = brig_asprintf("/v1/templates/%s/builds/%s?follow=1", esc, eid);
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc = brig_client_stream(c, "GET", path, NULL, 0, on_build_event, end, err);
    brig_client_set_interrupt(c, NULL);
    if (rc >= 0 && *end == NULL)
        rc = brig_error_set(err, BRIG_E_PROTOCOL, 0, "the build's output stream ended early");
    return rc < 0 ? -1 : 0;
}

/* A user's build that ended: its end event's result, or *err with why it failed. */
static json_t *spec_outcome(json_t *end, brig_error **err)
{
    const char *state = json_string_value(json_object_get(end, "state"));
    json_t *result = json_object_get(end, "result");
    if (state != NULL && strcmp(state, "succeeded") == 0 && json_is_object(result))
        return json_incref(result);
    const char *why = json_string_value(json_object_get(end, "error"));
    json_t *tail = json_object_get(json_object_get(result, "build"), "output_tail");
    if (json_is_string(tail)) { /* the failed step's output was shown as it came */
        fputs("brig: the failed step's output ended with:\n", stderr);
        print_log(json_string_value(tail));
        fputc('\n', stderr);
    }
    brig_error_set(err, BRIG_E_INTERNAL, 0, "%s", why ? why : "the build failed");
    return NULL;
}

/* brig template build --file SPEC.json: an account's own template, built in a sandbox of
 * its parent (POST /v1/templates?wait=0): brigd answers at once, and we follow the build's
 * output (on stderr) until it ended, like the operator's builds. */
static int build_spec(const cli_args *a, const char *file)
{
    brig_error *err = NULL;
    json_error_t jerr;
    json_t *spec =
        strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &jerr) : json_load_file(file, 0, &jerr);
    if (spec == NULL) {
        brig_error_set(&err, BRIG_E_INVALID, 0, "%s: not a JSON spec: %s (line %d)", file,
                       jerr.text, jerr.line);
        return cli_fail(&err);
    }
    brig_client *c = cli_client(true, &err);
    json_t *t = NULL, *end = NULL;
    int st = c == NULL ? -1
                       : brig_client_call(c, "POST", "/v1/templates?wait=0", spec, CLI_TIMEOUT_MS,
                                          &t, &err);
    json_decref(spec);
    const char *id = json_string_value(json_object_get(t, "build_id"));
    const char *ref = json_string_value(json_object_get(t, "template"));
    if (st == 202 && (id == NULL || ref == NULL))
        st = brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no build_id");
    if (st == 202 && follow_build(c, ref, id, &end, &err) < 0 && cli_interrupted) {
        brig_error_clear(&err);
        fprintf(stderr, "brig: stopped following; the build goes on in brigd (");
        cli_print_clean(stderr, id);
        fprintf(stderr, ")\n");
        json_decref(t);
        return 128 + cli_interrupted;
    }
    if (st == 202 && err == NULL) {
        json_decref(t);
        t = spec_outcome(end, &err);
        st = t ? 201 : -1;
    }
    json_decref(end);
    if (st < 0) {
        json_decref(t);
        brig_error_prefix(&err, "build %s", file);
        return cli_fail(&err);
    }
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(t);
    } else {
        fputs(json_is_true(json_object_get(t, "cached")) ? "built before: " : "built ", stdout);
        cli_print_clean(stdout, str_cell(t, "ref"));
        fputs(" (key ", stdout);
        cli_print_clean(stdout, str_cell(t, "key"));
        fputs(")\n", stdout);
    }
    json_decref(t);
    return CLI_EXIT_OK;
}

int brig_cmd_template_build(const cli_args *a)
{
    const char *file = cli_opt_get(a, OPT_FILE);
    if (file != NULL && a->npos > 0)
        return cli_usage_error(a->cmd, "either NAME (the operator's rebuild) or --file SPEC");
    if (file != NULL)
        return build_spec(a, file);
    if (a->npos < 1)
        return cli_usage_error(a->cmd, "NAME or --file SPEC");
    const char *name = a->pos[0];
    if (*name == '\0')
        return cli_usage_error(a->cmd, "empty template name");
    brig_error *err = NULL;
    brig_client *c = cli_client_with(true, "operator.key", &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *esc = brig_client_escape(name);
    _cleanup_free_ char *path = brig_asprintf("/v1/templates/%s/build", esc);
    json_t *build = NULL, *end = NULL;
    /* brigd answers at once (202) and builds in the background; we follow it */
    if (brig_client_call(c, "POST", path, NULL, CLI_TIMEOUT_MS, &build, &err) < 0) {
        brig_error_prefix(&err, "build %s", name);
        return cli_fail(&err);
    }
    const char *id = json_string_value(json_object_get(build, "build_id"));
    int code = CLI_EXIT_OK;
    if (id == NULL) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no build_id");
    } else if (follow_build(c, name, id, &end, &err) < 0 && cli_interrupted) {
        brig_error_clear(&err);
        fprintf(stderr, "brig: stopped following; the build goes on in brigd (");
        cli_print_clean(stderr, id);
        fprintf(stderr, ")\n");
        code = 128 + cli_interrupted;
    }
    if (err == NULL && code == CLI_EXIT_OK) {
        const char *state = json_string_value(json_object_get(end, "state"));
        const char *why = json_string_value(json_object_get(end, "error"));
        if (state == NULL || strcmp(state, "succeeded") != 0)
            brig_error_set(&err, BRIG_E_INTERNAL, 0, "%s", why ? why : "the build failed");
    }
    if (err != NULL) {
        brig_error_prefix(&err, "build %s", name);
        code = cli_fail(&err);
    } else if (code == CLI_EXIT_OK && cli_opt_has(a, OPT_JSON)) {
        json_object_del(end, "type");
        cli_print_json(end);
    } else if (code == CLI_EXIT_OK) {
        fputs("built ", stdout);
        cli_print_clean(stdout, str_cell(end, "template"));
        fputs(" (key ", stdout);
        cli_print_clean(stdout, str_cell(end, "key"));
        fputs(")\n", stdout);
    }
    json_decref(build);
    json_decref(end);
    return code;
}

/* GET /v1/templates/<ref escaped><suffix> into *out (NULL and *err when it failed). */
static int get_template(brig_client *c, const char *ref, const char *suffix, json_t **out,
                        brig_error **err)
{
    _cleanup_free_ char *esc = brig_client_escape(ref);
    _cleanup_free_ char *path = brig_asprintf("/v1/templates/%s%s", esc, suffix);
    *out = NULL;
    return brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, out, err) < 0 ? -1 : 0;
}

/* One "label  value" line of show (the value cleaned). */
static void field_line(const char *label, const char *value)
{
    printf("%-12s", label);
    cli_print_clean(stdout, value);
    putchar('\n');
}

/* The layer's own bytes for people: "10.0 MiB (10485760 bytes of its own)". */
static void size_line(json_t *t)
{
    json_t *v = json_object_get(t, "size_bytes");
    if (!json_is_integer(v)) {
        field_line("size", "-");
        return;
    }
    long long n = (long long)json_integer_value(v);
    printf("%-12s%.1f MiB (%lld bytes of its own)\n", "size", (double)n / (1 << 20), n);
}

/* The layers under t, top first: each template it was built from, until a built-in one
 * (at most 16 deep).  A parent rebuilt since (another key) is said, and ends the walk. */
static void layers_lines(brig_client *c, json_t *t)
{
    printf("%-12s", "layers");
    cli_print_clean(stdout, row_name(t));
    fputs("  ", stdout);
    cli_print_clean(stdout, str_cell(t, "key"));
    putchar('\n');
    json_t *cur = json_incref(t);
    for (int depth = 0; depth < 16 && json_object_get(cur, "parent") != NULL; depth++) {
        const char *parent = str_cell(cur, "parent"), *pkey = str_cell(cur, "parent_key");
        brig_error *err = NULL;
        json_t *p = NULL;
        printf("%-12s", "");
        cli_print_clean(stdout, parent);
        printf("  ");
        cli_print_clean(stdout, pkey);
        if (get_template(c, parent, "", &p, &err) < 0) {
            printf(" (");
            cli_print_clean(stdout, err->msg);
            printf(")\n");
            brig_error_clear(&err);
            break;
        }
        bool same = strcmp(str_cell(p, "key"), pkey) == 0;
        if (!same) {
            printf(" (rebuilt since: now ");
            cli_print_clean(stdout, str_cell(p, "key"));
            putchar(')');
        } else if (json_object_get(p, "parent") == NULL) {
            fputs(" (built-in)", stdout);
        }
        putchar('\n');
        json_decref(cur);
        cur = p;
        if (!same)
            break;
    }
    json_decref(cur);
}

/* brig template show NAME[:TAG]: GET /v1/templates/{ref}, for people (--json: as it is). */
static int template_show(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    json_t *t = NULL;
    if (c == NULL || get_template(c, a->pos[0], "", &t, &err) < 0)
        return cli_fail(&err);
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(t);
        json_decref(t);
        return CLI_EXIT_OK;
    }
    field_line("template", row_name(t));
    field_line("key", str_cell(t, "key"));
    if (json_object_get(t, "parent") == NULL) { /* a built-in one: its record is all */
        field_line("built", built_cell(t));
        json_decref(t);
        return CLI_EXIT_OK;
    }
    field_line("from", str_cell(t, "parent"));
    size_line(t);
    json_t *ms = json_object_get(t, "build_ms");
    printf("%-12s%.1f s\n", "build time", (double)json_integer_value(ms) / 1000);
    field_line("built at", str_cell(t, "built_at"));
    field_line("built by", str_cell(t, "built_by"));
    layers_lines(c, t);
    printf("%-12s", "spec");
    _cleanup_free_ char *spec =
        json_dumps(json_object_get(t, "spec"), JSON_INDENT(2) | JSON_SORT_KEYS);
    print_text(stdout, spec ? spec : "-");
    putchar('\n');
    json_decref(t);
    return CLI_EXIT_OK;
}

/* brig template log NAME[:TAG]: the stored steps (GET .../log) as the live log showed them. */
static int template_log(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    json_t *log = NULL;
    if (c == NULL || get_template(c, a->pos[0], "/log", &log, &err) < 0)
        return cli_fail(&err);
    json_t *steps = json_object_get(log, "steps");
    if (cli_opt_has(a, OPT_JSON) || !json_is_array(steps)) {
        cli_print_json(log);
        json_decref(log);
        return CLI_EXIT_OK;
    }
    size_t i;
    json_t *st;
    json_array_foreach(steps, i, st)
    {
        long long n = (long long)json_integer_value(json_object_get(st, "step"));
        printf("==> step %lld (", n);
        cli_print_clean(stdout, str_cell(st, "kind"));
        fputs("): ", stdout);
        cli_print_clean(stdout, str_cell(st, "command"));
        putchar('\n');
        const char *out = cli_str(st, "output", "");
        print_text(stdout, out);
        printf("%s==> step %lld: %s %lld (%lld ms)\n",
               *out && out[strlen(out) - 1] != '\n' ? "\n" : "", n,
               json_is_true(json_object_get(st, "timed_out")) ? "timed out, exit code"
                                                              : "exit code",
               (long long)json_integer_value(json_object_get(st, "exit_code")),
               (long long)json_integer_value(json_object_get(st, "duration_ms")));
    }
    json_decref(log);
    return CLI_EXIT_OK;
}

/* brig template rm NAME[:TAG]...: DELETE each; every failure is told, exit 1 if any. */
static int template_rm(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    int code = CLI_EXIT_OK;
    for (int i = 0; i < a->npos; i++) {
        _cleanup_free_ char *esc = brig_client_escape(a->pos[i]);
        _cleanup_free_ char *path = brig_asprintf("/v1/templates/%s", esc);
        if (brig_client_call(c, "DELETE", path, NULL, CLI_DELETE_TIMEOUT_MS, NULL, &err) < 0) {
            brig_error_prefix(&err, "%s", a->pos[i]);
            code = cli_fail(&err);
        }
    }
    return code;
}

static const int opts_json[] = {OPT_JSON, 0};
static const int opts_none[] = {0};

const cli_cmd cli_template_commands[] = {
    {"template show", template_show, "[--json] NAME[:TAG]",
     "a template: spec, size, layers, build time, who built it",
     "An account's own template (tag latest when none is given): its spec (files by their\n"
     "SHA-256), the bytes its layer holds, the templates it was built on, how long the\n"
     "build took, when and by which key.  A built-in one: its key.  --json: brigd's answer.\n",
     opts_json, 1, 1, CLI_REST_NONE},
    {"template log", template_log, "[--json] NAME[:TAG]",
     "the kept log of an account's template's build",
     "Each step as the build's live log showed it, with the last 4 KiB of its output.\n", opts_json,
     1, 1, CLI_REST_NONE},
    {"template rm", template_rm, "NAME[:TAG] [NAME[:TAG]...]", "delete an account's templates",
     "Refused (exit 1) while sandboxes of a template run.\n", opts_none, 1, -1, CLI_REST_NONE},
    {0},
};

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
