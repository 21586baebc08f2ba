/*
 * cmd_exec.c - running commands: exec (in an existing sandbox) and run (in a
 * sandbox made for it and deleted afterwards, whatever happens).
 *
 * The result's streams are written byte-exact: brigd sends a stream that is not
 * valid UTF-8 base64-encoded and says so in "<stream>_encoding", and JSON
 * strings may hold NUL bytes ("\u0000"), so lengths come from jansson, never
 * strlen.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cli.h"
#include "util.h"

/* Builds the exec request from the options and the remote command into *body
 * (caller owns) and the client's time limit into *timeout_ms.  Returns 0, or
 * CLI_EXIT_USAGE after printing a usage error. */
static int exec_request(const cli_args *a, json_t **body, long *timeout_ms)
{
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
            json_decref(b);
            return cli_usage_error(a->cmd, "--env '%s': empty variable name", kv);
        }
        if (value == NULL) {
            json_decref(env);
            json_decref(b);
            return cli_usage_error(a->cmd, "--env %s: %s is not set in this environment", name,
                                   name);
        }
        if (env == NULL)
            env = json_object();
        json_object_set_new(env, name, json_string(value));
    }
    if (env != NULL)
        json_object_set_new(b, "env", env);

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

/* Writes result[name] to fd, decoding it when result[name + "_encoding"] is
 * "base64".  A missing stream is empty. */
static int write_stream(json_t *result, const char *name, int fd, brig_error **err)
{
    json_t *v = json_object_get(result, name);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: %s", name);
    _cleanup_free_ char *enc_key = brig_asprintf("%s_encoding", name);
    json_t *enc = json_object_get(result, enc_key);
    const char *encoding = json_string_value(enc);
    int rc;
    if (enc == NULL || json_is_null(enc) || (encoding != NULL && strcmp(encoding, "utf-8") == 0)) {
        rc = cli_write(fd, json_string_value(v), json_string_length(v));
    } else if (encoding != NULL && strcmp(encoding, "base64") == 0) {
        brig_buf raw = {0};
        if (brig_base64_decode(json_string_value(v), json_string_length(v), &raw, err) < 0) {
            brig_buf_dispose(&raw);
            brig_error_prefix(err, "malformed %s from brigd", name);
            return -1;
        }
        rc = cli_write(fd, raw.data, raw.len);
        brig_buf_dispose(&raw);
    } else {
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "%s: unknown encoding from brigd", name);
    }
    if (rc < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "cannot write the command's %s", name);
    return 0;
}

/* Maps the result to brig's exit code: the command's exit code (0-255; a
 * negative code -N, a death by signal N, becomes 128+N), 124 when it timed out. */
static int result_exit_code(json_t *result, brig_error **err)
{
    if (json_is_true(json_object_get(result, "timed_out")))
        return CLI_EXIT_TIMEOUT;
    json_t *v = json_object_get(result, "exit_code");
    double num = json_number_value(v); /* 0 when not a number */
    if (!json_is_number(v) || num != floor(num) || num < -1e9 || num > 1e9)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no exit_code");
    long code = (long)num;
    if (code >= 0 && code <= 255)
        return (int)code;
    if (code < 0 && code >= -127)
        return 128 + (int)-code;
    return 255;
}

/* Shows an exec result: the streams, what was cut, the timeout.  Returns the
 * exit code for brig (see result_exit_code), CLI_EXIT_FAIL on errors. */
static int show_result(const cli_args *a, json_t *result)
{
    brig_error *err = NULL;
    if (!json_is_object(result)) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: not an object");
        return cli_fail(&err);
    }
    int code = result_exit_code(result, &err);
    if (code < 0)
        return cli_fail(&err);
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(result);
        return code;
    }
    if (write_stream(result, "stdout", 1, &err) < 0 || write_stream(result, "stderr", 2, &err) < 0)
        return cli_fail(&err);
    if (json_is_true(json_object_get(result, "stdout_truncated")))
        fputs("brig: the command's stdout was truncated by brigd\n", stderr);
    if (json_is_true(json_object_get(result, "stderr_truncated")))
        fputs("brig: the command's stderr was truncated by brigd\n", stderr);
    if (code == CLI_EXIT_TIMEOUT && json_is_true(json_object_get(result, "timed_out")))
        fputs("brig: command timed out\n", stderr);
    return code;
}

int brig_cmd_exec(const cli_args *a)
{
    const char *id = a->pos[0];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
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
    _cleanup_free_ char *path = cli_sandbox_path(id, "/exec");
    json_t *result = NULL;
    int rc = brig_client_call(c, "POST", path, body, timeout_ms, &result, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail(&err);
    int code = show_result(a, result);
    json_decref(result);
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
    if (c == NULL) {
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

    /* 2. exec: a signal aborts the transfer (curl's progress callback). */
    int code = CLI_EXIT_FAIL;
    json_t *result = NULL;
    if (!cli_interrupted) {
        _cleanup_free_ char *path = cli_sandbox_path(id, "/exec");
        brig_client_set_interrupt(c, &cli_interrupted);
        rc = brig_client_call(c, "POST", path, body, timeout_ms, &result, &err);
        brig_client_set_interrupt(c, NULL);
        if (rc >= 0)
            code = show_result(a, result);
        else if (!cli_interrupted)
            code = cli_fail(&err);
        brig_error_clear(&err);
    }
    json_decref(result);
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
