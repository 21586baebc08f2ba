/*
 * cmd_audit.c - the audit timeline (docs/audit.md): `brig timeline ID [--follow]`,
 * `brig audit export [--since TIME]` (JSON Lines on stdout, every page) and
 * `brig audit verify` (exit 1 when a chain is broken).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util.h"

#define TIMELINE_PAGE 1000
#define EXPORT_PAGE   10000

typedef struct printer {
    bool json;
    int64_t last; /* the newest seq printed */
    int64_t n;    /* events printed in this page */
} printer;

/* One event: its JSON line, or "TIME KIND ACTOR DATA". */
static int print_event(json_t *ev, void *ctx, brig_error **err)
{
    (void)err;
    printer *p = ctx;
    p->last = json_integer_value(json_object_get(ev, "seq"));
    p->n++;
    char *text = json_dumps(p->json ? ev : json_object_get(ev, "data"), JSON_COMPACT);
    if (p->json)
        printf("%s\n", text ? text : "{}");
    else
        printf("%s  %-20s %-26s %s\n", json_string_value(json_object_get(ev, "at")),
               json_string_value(json_object_get(ev, "kind")),
               json_string_value(json_object_get(ev, "actor")), text ? text : "{}");
    free(text);
    fflush(stdout);
    return 0;
}

/* The stream's end: Ctrl-C stops following; a reader gone is no failure. */
static int stream_end(int rc, brig_error **err)
{
    if (cli_interrupted) {
        brig_error_clear(err);
        return 128 + cli_interrupted;
    }
    if (rc < 0 && (*err)->errnum == EPIPE) {
        brig_error_clear(err);
        return 128 + SIGPIPE;
    }
    return rc < 0 ? cli_fail(err) : CLI_EXIT_OK;
}

int brig_cmd_timeline(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    printer p = {.json = cli_opt_has(a, OPT_JSON)};
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc;
    if (cli_opt_has(a, OPT_FOLLOW)) {
        _cleanup_free_ char *path = cli_sandbox_path(a->pos[0], "/timeline?follow=1");
        rc = brig_client_stream(c, "GET", path, NULL, 0, print_event, &p, &err);
        return stream_end(rc, &err);
    }
    do { /* page by page */
        _cleanup_free_ char *q =
            brig_asprintf("/timeline?limit=%d&after=%lld", TIMELINE_PAGE, (long long)p.last);
        _cleanup_free_ char *path = cli_sandbox_path(a->pos[0], q);
        json_t *page = NULL;
        if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, &page, &err) < 0)
            return stream_end(-1, &err);
        size_t i;
        json_t *ev;
        json_array_foreach(json_object_get(page, "events"), i, ev) print_event(ev, &p, &err);
        rc = json_is_null(json_object_get(page, "next_after")) ? 0 : 1;
        json_decref(page);
    } while (rc == 1 && !cli_interrupted);
    return stream_end(0, &err);
}

int brig_cmd_audit_export(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    const char *since = cli_opt_get(a, OPT_SINCE);
    _cleanup_free_ char *esc = brig_client_escape(since ? since : "0");
    printer p = {.json = true};
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc;
    do { /* a page holds EXPORT_PAGE events: a full one may have a next */
        p.n = 0;
        _cleanup_free_ char *path = brig_asprintf("/v1/audit?since=%s&after=%lld&limit=%d", esc,
                                                  (long long)p.last, EXPORT_PAGE);
        rc = brig_client_stream(c, "GET", path, NULL, 0, print_event, &p, &err);
    } while (rc >= 0 && p.n == EXPORT_PAGE && !cli_interrupted);
    return stream_end(rc < 0 ? -1 : 0, &err);
}

int brig_cmd_audit_verify(const cli_args *a)
{
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *v = NULL;
    if (brig_client_call(c, "GET", "/v1/audit/verify", NULL, CLI_TIMEOUT_MS, &v, &err) < 0)
        return cli_fail(&err);
    bool ok = json_is_true(json_object_get(v, "ok"));
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(v);
    } else if (ok) {
        printf("ok: %lld records in %lld chains\n",
               (long long)json_integer_value(json_object_get(v, "records")),
               (long long)json_integer_value(json_object_get(v, "accounts")));
    } else {
        json_t *b = json_object_get(v, "broken");
        printf("broken: account %s, record %lld: %s\n",
               json_string_value(json_object_get(b, "account_id")),
               (long long)json_integer_value(json_object_get(b, "n")),
               json_string_value(json_object_get(b, "problem")));
    }
    json_decref(v);
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
