/*
 * cmd_exec.c - running commands: exec (in an existing sandbox) and run (in a
 * sandbox made for it and deleted afterwards, whatever happens).
 *
 * By default the output streams: brig asks for NDJSON (Accept:
 * application/x-ndjson) and writes each stdout/stderr event to its own stdout/
 * stderr as it arrives.  Ctrl-C (SIGINT, SIGTERM, SIGHUP) aborts the transfer;
 * brigd kills a foreground command whose client went away.  `--json` asks for
 * the buffered answer instead, and a brigd that answers application/json to
 * the streaming request is shown the same way.
 *
 * Output is written byte-exact: brigd sends a chunk or stream that is not
 * valid UTF-8 base64-encoded and says so ("encoding", "<stream>_encoding"),
 * and JSON strings may hold NUL bytes ("\u0000"), so lengths come from jansson,
 * never strlen.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "cli.h"
#include "util.h"

/* shared helpers (cli.h) */

json_t *cli_pty_size(void)
{
    struct winsize ws;
    if ((ioctl(1, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0) &&
        (ioctl(0, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0))
        ws = (struct winsize){.ws_col = 80, .ws_row = 24};
    return json_pack("{s:i, s:i}", "cols", ws.ws_col, "rows", ws.ws_row ? ws.ws_row : 24);
}

/* the request */

/* The --env K=V options into b's "env": 0, or CLI_EXIT_USAGE (printed). */
static int add_env(const cli_args *a, json_t *b)
{
    json_t *env = NULL;
    for (int i = 0; i < a->nopts; i++) {
        if (a->opts[i].key != OPT_ENV)
            continue;
        const char *kv = a->opts[i].val;
        const char *eq = strchr(kv, '=');
        _cleanup_free_ char *name = eq ? brig_xstrndup(kv, (size_t)(eq - kv)) : brig_xstrdup(kv);
        const char *value = eq ? eq + 1 : getenv(name);
        if (*name == '\0') {
            json_decref(env);
            return cli_usage_error(a->cmd, "--env '%s': empty variable name", kv);
        }
        if (value == NULL) {
            json_decref(env);
            return cli_usage_error(a->cmd, "--env %s: %s is not set in this environment", name,
                                   name);
        }
        if (env == NULL)
            env = json_object();
        json_object_set_new(env, name, json_string(value));
    }
    if (env != NULL)
        json_object_set_new(b, "env", env);
    return 0;
}

/* One --grant NAME:SECONDS[:VAR] or NAME:exec[:VAR] (for this exec only): the credentials'
 * entry, into *name (caller frees) and *grant (caller owns); with VAR its value is brig's
 * own environment variable VAR (so it is never on a command line).  brigd checks the name
 * and the bounds.  0, or CLI_EXIT_USAGE (printed). */
static int parse_grant(const cli_args *a, const char *g, char **name, json_t **grant)
{
    const char *colon = strchr(g, ':');
    char *end = NULL;
    long long ttl = 0;
    bool once = colon != NULL && colon != g && strncmp(colon + 1, "exec", 4) == 0 &&
                (colon[5] == '\0' || colon[5] == ':');
    if (once)
        end = (char *)colon + 5;
    else if (colon != NULL && colon != g && colon[1] >= '0' && colon[1] <= '9')
        ttl = strtoll(colon + 1, &end, 10);
    if ((!once && ttl < 1) || (*end != '\0' && *end != ':'))
        return cli_usage_error(a->cmd,
                               "--grant takes NAME:SECONDS[:VAR] or NAME:exec[:VAR], not '%s'", g);
    json_t *v = NULL;
    if (*end == ':') {
        const char *value = getenv(end + 1);
        v = value ? json_string(value) : NULL; /* NULL: not UTF-8 */
        if (v == NULL)
            return cli_usage_error(a->cmd, "--grant %s: %s is not set here (or not UTF-8)", g,
                                   end + 1);
    }
    *grant = once ? json_pack("{s:b}", "exec_only", 1)
                  : json_pack("{s:I}", "ttl_seconds", (json_int_t)ttl);
    if (v != NULL)
        json_object_set_new(*grant, "value", v);
    *name = brig_xstrndup(g, (size_t)(colon - g));
    return 0;
}

/* The --grant options into b's "credentials" (docs/secrets.md): 0, or CLI_EXIT_USAGE. */
static int add_grants(const cli_args *a, json_t *b)
{
    json_t *creds = NULL;
    for (int i = 0; i < a->nopts; i++) {
        if (a->opts[i].key != OPT_GRANT)
            continue;
        _cleanup_free_ char *name = NULL;
        json_t *grant = NULL;
        if (parse_grant(a, a->opts[i].val, &name, &grant) != 0) {
            json_decref(creds);
            return CLI_EXIT_USAGE;
        }
        if (creds == NULL)
            creds = json_object();
        json_object_set_new(creds, name, grant);
    }
    if (creds != NULL)
        json_object_set_new(b, "credentials", creds);
    return 0;
}

/* Builds the exec request from the options and the remote command into *body
 * (caller owns) and the client's time limit into *timeout_ms.  Returns 0, or
 * CLI_EXIT_USAGE after printing a usage error. */
static int exec_request(const cli_args *a, json_t **body, long *timeout_ms)
{
    for (int i = 0; i < a->nrest; i++) {
        json_t *probe = json_string(a->rest[i]); /* NULL: not UTF-8, which JSON cannot carry */
        if (probe == NULL)
            return cli_usage_error(a->cmd, "argument %d of the command is not valid UTF-8", i + 1);
        json_decref(probe);
    }
    json_t *b = json_object();
    if (cli_opt_has(a, OPT_SHELL)) {
        brig_buf cmd = {0};
        for (int i = 0; i < a->nrest; i++) {
            if (i > 0)
                brig_buf_append(&cmd, " ", 1);
            brig_buf_append(&cmd, a->rest[i], strlen(a->rest[i]));
        }
        json_object_set_new(b, "cmd", json_stringn(cmd.data, cmd.len));
        brig_buf_dispose(&cmd);
    } else {
        json_t *argv = json_array();
        for (int i = 0; i < a->nrest; i++)
            json_array_append_new(argv, json_string(a->rest[i]));
        json_object_set_new(b, "argv", argv);
    }
    const char *cwd = cli_opt_get(a, OPT_CWD);
    if (cwd != NULL)
        json_object_set_new(b, "cwd", json_string(cwd));
    const char *user = cli_opt_get(a, OPT_USER);
    if (user != NULL) {
        if (*user == '\0') {
            json_decref(b);
            return cli_usage_error(a->cmd, "--user: empty user name");
        }
        json_object_set_new(b, "user", json_string(user));
    }
    if (cli_opt_has(a, OPT_PTY))
        json_object_set_new(b, "pty", cli_pty_size());

    if (add_env(a, b) != 0 || add_grants(a, b) != 0) {
        json_decref(b);
        return CLI_EXIT_USAGE;
    }

    *timeout_ms = CLI_EXEC_NO_LIMIT_MS;
    const char *t = cli_opt_get(a, OPT_TIMEOUT);
    if (t != NULL) {
        char *end = NULL;
        errno = 0;
        double secs = strtod(t, &end);
        if (end == t || *end != '\0' || errno != 0 || !isfinite(secs) || secs <= 0 || secs > 1e7) {
            json_decref(b);
            return cli_usage_error(a->cmd, "--timeout '%s': not a positive number of seconds", t);
        }
        if (secs == floor(secs))
            json_object_set_new(b, "timeout", json_integer((json_int_t)secs));
        else
            json_object_set_new(b, "timeout", json_real(secs));
        *timeout_ms = (long)(ceil(secs) + CLI_EXEC_MARGIN_S) * 1000;
    }
    *body = b;
    return 0;
}

/* Reads all of brig's stdin into body's "stdin" (base64 with "stdin_encoding"
 * when it is not UTF-8).  Fails when the request would grow past what brigd
 * accepts in one JSON body. */
static int add_stdin(json_t *body, brig_error **err)
{
    brig_buf in = {0};
    char buf[64 * 1024];
    for (;;) {
        ssize_t n = read(0, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            brig_buf_dispose(&in);
            return brig_error_sys(err, "--stdin: cannot read stdin");
        }
        if (n == 0)
            break;
        if (in.len + (size_t)n > CLI_JSON_BODY_MAX) {
            brig_buf_dispose(&in);
            return brig_error_set(err, BRIG_E_TOO_LARGE, 0,
                                  "--stdin: more than 1 MiB of input; use 'brig exec --background "
                                  "--stdin', which streams it");
        }
        brig_buf_append(&in, buf, (size_t)n);
    }
    json_t *text = json_stringn(in.len ? in.data : "", in.len); /* NULL: not UTF-8 */
    if (text != NULL) {
        json_object_set_new(body, "stdin", text);
    } else {
        char *b64 = brig_base64_encode(in.data, in.len);
        json_object_set_new(body, "stdin", json_string(b64));
        json_object_set_new(body, "stdin_encoding", json_string("base64"));
        free(b64);
    }
    brig_buf_dispose(&in);
    char *dump = json_dumps(body, JSON_COMPACT);
    size_t size = dump ? strlen(dump) : 0;
    free(dump);
    if (size > CLI_JSON_BODY_MAX)
        return brig_error_set(err, BRIG_E_TOO_LARGE, 0,
                              "--stdin: the input takes more than 1 MiB once encoded in the "
                              "request; use 'brig exec --background --stdin', which streams it");
    return 0;
}

/* results */

/* Shows a buffered exec result: the streams, what was cut, the timeout.
 * Returns the exit code for brig, CLI_EXIT_FAIL on errors. */
static int show_result(const cli_args *a, json_t *result)
{
    brig_error *err = NULL;
    if (!json_is_object(result)) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: not an object");
        return cli_fail(&err);
    }
    bool timed_out = json_is_true(json_object_get(result, "timed_out"));
    int code = timed_out ? CLI_EXIT_TIMEOUT : cli_exit_code(result);
    if (code < 0) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no exit_code");
        return cli_fail(&err);
    }
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(result);
        return code;
    }
    if (cli_write_text(json_object_get(result, "stdout"),
                       json_object_get(result, "stdout_encoding"), 1, "stdout", false, &err) < 0 ||
        cli_write_text(json_object_get(result, "stderr"),
                       json_object_get(result, "stderr_encoding"), 2, "stderr", false, &err) < 0)
        return cli_fail(&err);
    if (json_is_true(json_object_get(result, "stdout_truncated")))
        fputs("brig: the command's stdout was truncated by brigd\n", stderr);
    if (json_is_true(json_object_get(result, "stderr_truncated")))
        fputs("brig: the command's stderr was truncated by brigd\n", stderr);
    if (timed_out)
        fputs("brig: command timed out\n", stderr);
    return code;
}

/* What a streamed exec answered. */
typedef struct exec_stream {
    json_t *exit;  /* the exit event, or NULL (owned) */
    json_t *whole; /* a buffered result (brigd did not stream), or NULL (owned) */
} exec_stream;

static int on_exec_event(json_t *ev, void *ctx, brig_error **err)
{
    exec_stream *st = ctx;
    json_t *jtype = json_object_get(ev, "type");
    const char *type = json_string_value(jtype);
    if (jtype == NULL && json_is_object(ev) && st->whole == NULL) {
        st->whole = json_incref(ev); /* application/json: the whole result */
        return 0;
    }
    if (type == NULL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed event from brigd: no type");
    if (strcmp(type, "stdout") == 0)
        return cli_write_event(ev, 1, err);
    if (strcmp(type, "stderr") == 0)
        return cli_write_event(ev, 2, err);
    if (strcmp(type, "exit") == 0) {
        json_decref(st->exit);
        st->exit = json_incref(ev);
        return 0;
    }
    if (strcmp(type, "error") == 0) {
        const char *code = json_string_value(json_object_get(ev, "code"));
        const char *msg = json_string_value(json_object_get(ev, "message"));
        return brig_error_set(err, code ? brig_error_kind_from_code(code) : BRIG_E_INTERNAL, 0,
                              "%s (%s)", msg ? msg : "the command failed", code ? code : "error");
    }
    return 0; /* "start", and types brig does not know yet */
}

/* Runs the exec request `body` in sandbox id with its output streamed here.
 * Returns brig's exit code (the command's, or CLI_EXIT_FAIL after printing an
 * error), or -1 when cli_interrupted stopped it (nothing printed). */
static int exec_streamed(const cli_args *a, brig_client *c, const char *id, json_t *body,
                         long timeout_ms)
{
    _cleanup_free_ char *path = cli_sandbox_path(id, "/exec");
    exec_stream st = {0};
    brig_error *err = NULL;
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc = brig_client_stream(c, "POST", path, body, timeout_ms, on_exec_event, &st, &err);
    brig_client_set_interrupt(c, NULL);
    int code;
    if (cli_interrupted) {
        brig_error_clear(&err);
        code = -1;
    } else if (rc < 0 && err->errnum == EPIPE) {
        /* our reader went away (| head): so did we, and brigd kills the command */
        brig_error_clear(&err);
        code = 128 + SIGPIPE;
    } else if (rc < 0) {
        code = cli_fail(&err);
    } else if (st.whole != NULL) {
        code = show_result(a, st.whole);
    } else if (st.exit != NULL) {
        code = cli_exit_code(st.exit);
        if (json_is_true(json_object_get(st.exit, "timed_out"))) {
            fputs("brig: command timed out\n", stderr);
            code = CLI_EXIT_TIMEOUT;
        } else if (code < 0) {
            brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed exit event from brigd");
            code = cli_fail(&err);
        }
    } else {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0,
                       "the answer from brigd ended before the command exited");
        code = cli_fail(&err);
    }
    json_decref(st.exit);
    json_decref(st.whole);
    return code;
}

/* exec --background: starts the command, prints its pid (or the process with
 * --json), then with --stdin streams brig's stdin to it and closes it. */
static int exec_background(const cli_args *a, brig_client *c, const char *id, json_t *body)
{
    brig_error *err = NULL;
    json_object_set_new(body, "background", json_true());
    _cleanup_free_ char *path = cli_sandbox_path(id, "/exec");
    json_t *proc = NULL;
    if (brig_client_call(c, "POST", path, body, CLI_TIMEOUT_MS, &proc, &err) < 0)
        return cli_fail(&err);
    json_t *jpid = json_object_get(proc, "pid");
    if (!json_is_integer(jpid) || json_integer_value(jpid) <= 0) {
        json_decref(proc);
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no pid");
        return cli_fail(&err);
    }
    char pid[24];
    snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(jpid));
    if (cli_opt_has(a, OPT_JSON))
        cli_print_json(proc);
    else
        printf("%s\n", pid);
    json_decref(proc);
    fflush(stdout); /* a script reading the pid has it before the input is sent */
    if (!cli_opt_has(a, OPT_STDIN))
        return CLI_EXIT_OK;
    if (cli_feed_stdin(c, id, pid, true, &err) < 0)
        return cli_fail(&err);
    return CLI_EXIT_OK;
}

int brig_cmd_exec(const cli_args *a)
{
    const char *id = a->pos[0];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    if (cli_opt_has(a, OPT_BACKGROUND) && cli_opt_has(a, OPT_JSON) && cli_opt_has(a, OPT_STDIN))
        return cli_usage_error(a->cmd, "--background --stdin prints the pid only, not --json");
    json_t *body = NULL;
    long timeout_ms = 0;
    if (exec_request(a, &body, &timeout_ms) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL) {
        json_decref(body);
        return cli_fail(&err);
    }
    if (cli_opt_has(a, OPT_BACKGROUND)) {
        int code = exec_background(a, c, id, body);
        json_decref(body);
        return code;
    }
    if (cli_opt_has(a, OPT_STDIN) && add_stdin(body, &err) < 0) {
        json_decref(body);
        return cli_fail(&err);
    }
    int code;
    if (cli_opt_has(a, OPT_JSON)) {
        _cleanup_free_ char *path = cli_sandbox_path(id, "/exec");
        json_t *result = NULL;
        if (brig_client_call(c, "POST", path, body, timeout_ms, &result, &err) < 0)
            code = cli_fail(&err);
        else
            code = show_result(a, result);
        json_decref(result);
    } else {
        cli_catch_signals();
        code = exec_streamed(a, c, id, body, timeout_ms);
        if (code < 0) {
            fprintf(stderr, "brig: interrupted (%s)\n", strsignal(cli_interrupted));
            code = 128 + cli_interrupted;
        }
    }
    json_decref(body);
    return code;
}

/* run */

int brig_cmd_run(const cli_args *a)
{
    json_t *body = NULL;
    long timeout_ms = 0;
    if (exec_request(a, &body, &timeout_ms) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL || (cli_opt_has(a, OPT_STDIN) && add_stdin(body, &err) < 0)) {
        json_decref(body);
        return cli_fail(&err);
    }
    cli_catch_signals();

    /* 1. create: not interruptible, or we could lose the id of a sandbox that
     *    brigd made; a signal is acted on as soon as it returns. */
    json_t *create = json_object();
    const char *tpl = cli_opt_get(a, OPT_TEMPLATE);
    if (tpl != NULL)
        json_object_set_new(create, "template", json_string(tpl));
    const char *iso = cli_opt_get(a, OPT_ISOLATION); /* brigd checks it */
    if (iso != NULL)
        json_object_set_new(create, "isolation", json_string(iso));
    if (cli_add_volumes(a, create) != 0) {
        json_decref(create);
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    json_t *sbx = NULL;
    int rc = brig_client_call(c, "POST", "/v1/sandboxes", create, CLI_TIMEOUT_MS, &sbx, &err);
    json_decref(create);
    if (rc < 0) {
        json_decref(body);
        return cli_fail(&err);
    }
    const char *sid = json_string_value(json_object_get(sbx, "id"));
    if (sid == NULL || *sid == '\0') {
        json_decref(sbx);
        json_decref(body);
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no sandbox id");
        return cli_fail(&err);
    }
    _cleanup_free_ char *id = brig_xstrdup(sid);
    json_decref(sbx);

    /* 2. exec, streamed: a signal aborts the transfer. */
    int code = CLI_EXIT_FAIL;
    if (!cli_interrupted)
        code = exec_streamed(a, c, id, body, timeout_ms);
    json_decref(body);

    /* 3. delete, whatever happened above */
    _cleanup_free_ char *path = cli_sandbox_path(id, "");
    bool deleted =
        brig_client_call(c, "DELETE", path, NULL, CLI_DELETE_TIMEOUT_MS, NULL, &err) >= 0;
    if (!deleted) {
        brig_error_prefix(&err, "cannot delete sandbox %s", id);
        cli_fail(&err);
    }
    if (cli_interrupted) {
        fprintf(stderr, "brig: interrupted (%s)%s%s\n", strsignal(cli_interrupted),
                deleted ? "; deleted sandbox " : "", deleted ? id : "");
        return 128 + cli_interrupted;
    }
    return code;
}
