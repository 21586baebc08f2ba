/*
 * cmd_proc.c - a sandbox's processes (started with `exec --background` or by
 * `shell`): ps, logs, wait, kill and stdin.
 *
 * A process is named by its sandbox and its pid inside the sandbox.  Its output
 * is an NDJSON stream (see docs/api.md, Processes): brig writes its stdout and
 * stderr events to its own stdout and stderr, and the exit event decides brig's
 * exit code, as for exec.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

/* Bytes brig sends per stdin request at most (a pipe's read() gives less). */
#define STDIN_CHUNK (256 * 1024)

char *cli_process_path(const char *id, const char *pid, const char *suffix)
{
    _cleanup_free_ char *esc = brig_client_escape(pid);
    _cleanup_free_ char *tail = brig_asprintf("/processes/%s%s", esc, suffix);
    return cli_sandbox_path(id, tail);
}

int cli_check_pid(const cli_args *a, const char *pid)
{
    size_t n = strspn(pid, "0123456789");
    if (n == 0 || pid[n] != '\0' || n > 10 || strtol(pid, NULL, 10) <= 0)
        return cli_usage_error(a->cmd, "PID '%s': not a process id", pid);
    return 0;
}

/* Checks the ID and PID operands (pos[0], pos[1]). */
static int check_operands(const cli_args *a)
{
    if (cli_check_id(a, a->pos[0]) != 0 || cli_check_pid(a, a->pos[1]) != 0)
        return CLI_EXIT_USAGE;
    return 0;
}

/* ps */

/* The STARTED cell: brigd's timestamp string, or one made from milliseconds. */
static void format_time(json_t *v, char *buf, size_t size)
{
    if (json_is_string(v) && json_string_length(v) > 0) {
        snprintf(buf, size, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        json_int_t ms = json_integer_value(v);
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        char secs[32];
        if (gmtime_r(&t, &tm) != NULL && strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm))
            snprintf(buf, size, "%s.%03dZ", secs, (int)((ms % 1000 + 1000) % 1000));
        else
            snprintf(buf, size, "-");
    } else {
        snprintf(buf, size, "-");
    }
}

/* The STATE cell: running, exited(CODE) or killed(SIGNAL). */
static void format_state(json_t *p, char *buf, size_t size)
{
    json_t *sig = json_object_get(p, "signal");
    json_t *code = json_object_get(p, "exit_code");
    if (json_is_true(json_object_get(p, "running"))) {
        snprintf(buf, size, "running");
    } else if (json_is_integer(sig) && json_integer_value(sig) > 0) {
        int n = (int)json_integer_value(sig);
        const char *name = n < 65 ? sigabbrev_np(n) : NULL;
        if (name != NULL)
            snprintf(buf, size, "killed(%s)", name);
        else
            snprintf(buf, size, "killed(%d)", n);
    } else if (json_is_integer(code)) {
        snprintf(buf, size, "exited(%lld)", (long long)json_integer_value(code));
    } else {
        snprintf(buf, size, "-");
    }
}

/* The COMMAND cell: cmd, else argv joined with spaces.  Caller frees. */
static char *format_command(json_t *p)
{
    const char *cmd = json_string_value(json_object_get(p, "cmd"));
    if (cmd != NULL)
        return brig_xstrdup(cmd);
    json_t *argv = json_object_get(p, "argv");
    brig_buf b = {0};
    for (size_t i = 0; i < json_array_size(argv); i++) {
        const char *s = json_string_value(json_array_get(argv, i));
        if (i > 0)
            brig_buf_append(&b, " ", 1);
        brig_buf_append(&b, s ? s : "?", s ? strlen(s) : 1);
    }
    if (b.len == 0)
        return brig_xstrdup("-");
    return b.data;
}

int brig_cmd_ps(const cli_args *a)
{
    json_t *list = NULL;
    int rc = cli_get_sandbox(a, "/processes", &list);
    if (rc != CLI_EXIT_OK)
        return rc;
    brig_error *err = NULL;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(list);
        json_decref(list);
        return CLI_EXIT_OK;
    }
    json_t *rows = json_object_get(list, "processes");
    if (!json_is_array(rows)) {
        json_decref(list);
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no process list");
        return cli_fail(&err);
    }
    /* PID and STATE are short; STARTED is a fixed-width timestamp */
    printf("%-8s %-14s %-24s %s\n", "PID", "STATE", "STARTED", "COMMAND");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *p = json_array_get(rows, i);
        char pid[24], state[32], started[64];
        json_t *jpid = json_object_get(p, "pid");
        if (json_is_integer(jpid))
            snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(jpid));
        else
            snprintf(pid, sizeof(pid), "-");
        format_state(p, state, sizeof(state));
        format_time(json_object_get(p, "started_at"), started, sizeof(started));
        _cleanup_free_ char *cmd = format_command(p);
        printf("%-8s %-14s ", pid, state);
        cli_print_clean(stdout, started);
        printf("%*s", (int)(strlen(started) < 24 ? 25 - strlen(started) : 1), "");
        cli_print_clean(stdout, cmd);
        putchar('\n');
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

/* logs */

/* What an output stream said. */
typedef struct output_state {
    json_t *exit; /* the exit event (owned), or NULL */
    bool ended;   /* a snapshot's end event came */
    bool running; /* ... and said the process still runs */
} output_state;

static int on_output_event(json_t *ev, void *ctx, brig_error **err)
{
    output_state *st = ctx;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed event from brigd: no type");
    if (strcmp(type, "stdout") == 0)
        return cli_write_event(ev, 1, err);
    if (strcmp(type, "stderr") == 0)
        return cli_write_event(ev, 2, err);
    if (strcmp(type, "output") == 0) {
        json_int_t n = json_integer_value(json_object_get(ev, "dropped_bytes"));
        if (n > 0)
            fprintf(stderr, "brig: [%lld bytes of earlier output are no longer buffered]\n",
                    (long long)n);
    } else if (strcmp(type, "dropped") == 0) {
        fprintf(stderr, "brig: [%lld bytes of output dropped: brig read too slowly]\n",
                (long long)json_integer_value(json_object_get(ev, "bytes")));
    } else if (strcmp(type, "exit") == 0) {
        json_decref(st->exit);
        st->exit = json_incref(ev);
    } else if (strcmp(type, "end") == 0) {
        st->ended = true;
        st->running = json_is_true(json_object_get(ev, "running"));
    } else if (strcmp(type, "error") == 0) {
        const char *code = json_string_value(json_object_get(ev, "code"));
        const char *msg = json_string_value(json_object_get(ev, "message"));
        return brig_error_set(err, code ? brig_error_kind_from_code(code) : BRIG_E_INTERNAL, 0,
                              "%s (%s)", msg ? msg : "the output stream failed",
                              code ? code : "error");
    }
    return 0;
}

/* brig's exit code for a process that ended (a process object or exit event);
 * says so on stderr when it timed out.  CLI_EXIT_FAIL after an error. */
static int ended_code(json_t *p)
{
    int code = cli_exit_code(p);
    if (code < 0) {
        brig_error *err = NULL;
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no exit_code");
        return cli_fail(&err);
    }
    if (json_is_true(json_object_get(p, "timed_out")))
        fputs("brig: the process ran past its timeout and was killed\n", stderr);
    return code;
}

int brig_cmd_logs(const cli_args *a)
{
    if (check_operands(a) != 0)
        return CLI_EXIT_USAGE;
    const char *id = a->pos[0], *pid = a->pos[1];
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    bool follow = cli_opt_has(a, OPT_FOLLOW);
    _cleanup_free_ char *path = cli_process_path(id, pid, follow ? "/output" : "/output?follow=0");
    output_state st = {0};
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc = brig_client_stream(c, "GET", path, NULL, 0, on_output_event, &st, &err);
    brig_client_set_interrupt(c, NULL);
    int code;
    if (cli_interrupted) {
        brig_error_clear(&err);
        code = 128 + cli_interrupted; /* Ctrl-C is how one stops following */
    } else if (rc < 0 && err->errnum == EPIPE) {
        brig_error_clear(&err); /* our reader went away (| head) */
        code = 128 + SIGPIPE;
    } else if (rc < 0) {
        code = cli_fail(&err);
    } else if (st.exit != NULL) {
        code = ended_code(st.exit);
    } else if (st.ended && st.running) {
        code = CLI_EXIT_OK;
    } else if (st.ended) {
        /* a snapshot of a process that ended: its record has the exit code */
        json_t *p = NULL;
        _cleanup_free_ char *ppath = cli_process_path(id, pid, "");
        if (brig_client_call(c, "GET", ppath, NULL, CLI_TIMEOUT_MS, &p, &err) < 0)
            code = cli_fail(&err);
        else
            code = ended_code(p);
        json_decref(p);
    } else {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "the output stream from brigd ended early");
        code = cli_fail(&err);
    }
    json_decref(st.exit);
    return code;
}

/* wait */

int brig_cmd_wait(const cli_args *a)
{
    if (check_operands(a) != 0)
        return CLI_EXIT_USAGE;
    const char *id = a->pos[0], *pid = a->pos[1];
    json_t *body = json_object();
    long timeout_ms = 0;
    const char *t = cli_opt_get(a, OPT_WAIT_TIMEOUT);
    if (t != NULL) {
        char *end = NULL;
        errno = 0;
        double secs = strtod(t, &end);
        if (end == t || *end != '\0' || errno != 0 || !isfinite(secs) || secs < 0 || secs > 1e7) {
            json_decref(body);
            return cli_usage_error(a->cmd, "--timeout '%s': not a number of seconds", t);
        }
        if (secs == floor(secs))
            json_object_set_new(body, "timeout", json_integer((json_int_t)secs));
        else
            json_object_set_new(body, "timeout", json_real(secs));
        if (secs > 0)
            timeout_ms = (long)(ceil(secs) + CLI_EXEC_MARGIN_S) * 1000;
    }
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL) {
        json_decref(body);
        return cli_fail(&err);
    }
    _cleanup_free_ char *path = cli_process_path(id, pid, "/wait");
    json_t *p = NULL;
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc = brig_client_call(c, "POST", path, body, timeout_ms, &p, &err);
    brig_client_set_interrupt(c, NULL);
    json_decref(body);
    if (cli_interrupted) {
        brig_error_clear(&err);
        json_decref(p);
        return 128 + cli_interrupted;
    }
    if (rc < 0)
        return cli_fail(&err);
    int code;
    if (cli_opt_has(a, OPT_JSON))
        cli_print_json(p);
    if (json_is_true(json_object_get(p, "running"))) {
        fprintf(stderr, "brig: process %s is still running after %s s\n", pid, t ? t : "?");
        code = CLI_EXIT_TIMEOUT;
    } else {
        code = ended_code(p);
    }
    json_decref(p);
    return code;
}

/* kill */

/* Parses a signal given as a number (1-64) or a name with or without "SIG", in
 * any case, into the value brigd takes: the number, or "SIG<NAME>".  NULL when
 * it is not a signal.  Caller owns. */
static json_t *parse_signal(const char *s)
{
    size_t n = strspn(s, "0123456789");
    if (n > 0 && s[n] == '\0') {
        long v = strtol(s, NULL, 10);
        return n <= 2 && v >= 1 && v <= 64 ? json_integer(v) : NULL;
    }
    const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (int sig = 1; sig < 32; sig++) {
        const char *abbrev = sigabbrev_np(sig);
        if (abbrev != NULL && strcasecmp(name, abbrev) == 0) {
            _cleanup_free_ char *full = brig_asprintf("SIG%s", abbrev);
            return json_string(full);
        }
    }
    return NULL;
}

int brig_cmd_kill(const cli_args *a)
{
    if (check_operands(a) != 0)
        return CLI_EXIT_USAGE;
    const char *id = a->pos[0], *pid = a->pos[1];
    const char *s = cli_opt_get(a, OPT_SIGNAL);
    json_t *sig = parse_signal(s != NULL ? s : "TERM");
    if (sig == NULL)
        return cli_usage_error(a->cmd, "--signal '%s': not a signal name or number", s);
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL) {
        json_decref(sig);
        return cli_fail(&err);
    }
    json_t *body = json_pack("{s:o}", "signal", sig);
    _cleanup_free_ char *path = cli_process_path(id, pid, "/signal");
    int rc = brig_client_call(c, "POST", path, body, CLI_TIMEOUT_MS, NULL, &err);
    json_decref(body);
    return rc < 0 ? cli_fail(&err) : CLI_EXIT_OK;
}

/* stdin */

int cli_feed_stdin(brig_client *c, const char *id, const char *pid, bool close, brig_error **err)
{
    _cleanup_free_ char *path = cli_process_path(id, pid, "/stdin");
    _cleanup_free_ char *buf = brig_xmalloc(STDIN_CHUNK);
    for (;;) {
        ssize_t n = read(0, buf, STDIN_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return brig_error_sys(err, "cannot read stdin");
        if (n == 0)
            break;
        if (brig_client_post_bytes(c, path, buf, (size_t)n, CLI_TIMEOUT_MS, NULL, err) < 0) {
            brig_error_prefix(err, "process %s: stdin", pid);
            return -1;
        }
    }
    if (!close)
        return 0;
    _cleanup_free_ char *cpath = cli_process_path(id, pid, "/stdin/close");
    if (brig_client_call(c, "POST", cpath, NULL, CLI_TIMEOUT_MS, NULL, err) < 0) {
        brig_error_prefix(err, "process %s: closing stdin", pid);
        return -1;
    }
    return 0;
}

int brig_cmd_stdin(const cli_args *a)
{
    if (check_operands(a) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    if (cli_feed_stdin(c, a->pos[0], a->pos[1], cli_opt_has(a, OPT_CLOSE), &err) < 0)
        return cli_fail(&err);
    return CLI_EXIT_OK;
}
