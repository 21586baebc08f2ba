/*
 * validate.c - validation of API request bodies (see validate.h).
 */
#include "validate.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

#include "sandbox/injection.h"

int brig_request_only_fields(json_t *obj, const char *const *allowed, brig_error **err)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], k) == 0;
        if (!ok)
            return brig_error_set(err, BRIG_E_INVALID, 0, "unknown field '%.64s'", k);
    }
    return 0;
}

static int valid_env_name(const char *k)
{
    return *k != '\0' && strchr(k, '=') == NULL;
}

/* The fields beyond the skeleton's: stdin, user, pty, background, buffer_bytes. */
static int parse_exec_extras(json_t *body, brig_exec_req *req, brig_error **err)
{
    json_t *in = json_object_get(body, "stdin"), *enc = json_object_get(body, "stdin_encoding");
    if (enc && (!json_is_string(enc) || (strcmp(json_string_value(enc), "base64") != 0 &&
                                         strcmp(json_string_value(enc), "utf-8") != 0)))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'stdin_encoding' must be \"utf-8\" or \"base64\"");
    if (in) {
        if (!json_is_string(in))
            return brig_error_set(err, BRIG_E_INVALID, 0, "'stdin' must be a string");
        const char *s = json_string_value(in);
        size_t n = json_string_length(in);
        req->has_stdin = true;
        if (enc && strcmp(json_string_value(enc), "base64") == 0) {
            req->stdin_data = brig_xmalloc(n + 1);
            if (sodium_base642bin(req->stdin_data, n + 1, s, n, " \n\r", &req->stdin_len, NULL,
                                  sodium_base64_VARIANT_ORIGINAL) != 0) {
                brig_exec_req_dispose(req);
                return brig_error_set(err, BRIG_E_INVALID, 0, "'stdin' is not valid base64");
            }
        } else {
            req->stdin_data = brig_xmalloc(n + 1);
            memcpy(req->stdin_data, s, n);
            req->stdin_len = n;
        }
    } else if (enc) {
        return brig_error_set(err, BRIG_E_INVALID, 0, "'stdin_encoding' without 'stdin'");
    }
    json_t *user = json_object_get(body, "user");
    if (user) {
        const char *u = json_string_value(user);
        size_t n = json_string_length(user);
        if (u == NULL || n == 0 || n > 32 || strchr(u, '/') || strchr(u, ':'))
            goto bad_user;
        req->user = u;
    }
    json_t *pty = json_object_get(body, "pty");
    if (pty && !json_is_null(pty)) {
        json_t *c = json_object_get(pty, "cols"), *r = json_object_get(pty, "rows");
        if (!json_is_object(pty) || !json_is_integer(c) || !json_is_integer(r) ||
            json_integer_value(c) < 1 || json_integer_value(c) > 1000 ||
            json_integer_value(r) < 1 || json_integer_value(r) > 1000 || json_object_size(pty) != 2)
            goto bad_pty;
        req->pty_cols = (int)json_integer_value(c);
        req->pty_rows = (int)json_integer_value(r);
    }
    json_t *bg = json_object_get(body, "background");
    if (bg) {
        if (!json_is_boolean(bg))
            goto bad_bg;
        req->background = json_is_true(bg);
        /* Background commands run until they exit unless a timeout is asked for. */
        if (req->background && json_object_get(body, "timeout") == NULL)
            req->timeout_ms = 0;
    }
    json_t *bb = json_object_get(body, "buffer_bytes");
    if (bb) {
        if (!json_is_integer(bb) || json_integer_value(bb) < 4096 ||
            json_integer_value(bb) > (64 << 20))
            goto bad_bb;
        req->buffer_bytes = json_integer_value(bb);
    }
    return 0;
bad_user:
    brig_exec_req_dispose(req);
    return brig_error_set(err, BRIG_E_INVALID, 0, "'user' must be an account name");
bad_pty:
    brig_exec_req_dispose(req);
    return brig_error_set(err, BRIG_E_INVALID, 0,
                          "'pty' must be {\"cols\": 1..1000, \"rows\": 1..1000}");
bad_bg:
    brig_exec_req_dispose(req);
    return brig_error_set(err, BRIG_E_INVALID, 0, "'background' must be true or false");
bad_bb:
    brig_exec_req_dispose(req);
    return brig_error_set(err, BRIG_E_INVALID, 0,
                          "'buffer_bytes' must be an integer in [4096, 67108864]");
}

int brig_request_env(json_t *env, brig_error **err)
{
    if (!json_is_object(env))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'env' must be an object of strings");
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        if (!json_is_string(v))
            return brig_error_set(err, BRIG_E_INVALID, 0, "env '%.64s' must be a string", k);
        if (!valid_env_name(k))
            return brig_error_set(err, BRIG_E_INVALID, 0, "invalid env name '%.64s'", k);
    }
    return 0;
}

int brig_request_exec(json_t *body, int64_t default_ms, int64_t max_ms, brig_exec_req *req,
                      brig_error **err)
{
    static const char *const fields[] = {
        "cmd",  "argv", "cwd",        "env",          "timeout",     "stdin", "stdin_encoding",
        "user", "pty",  "background", "buffer_bytes", "credentials", NULL};
    if (brig_request_only_fields(body, fields, err) < 0 ||
        brig_injection_credentials_check(json_object_get(body, "credentials"),
                                         json_is_true(json_object_get(body, "background")),
                                         err) < 0)
        return -1;
    memset(req, 0, sizeof(*req));
    json_t *cmd = json_object_get(body, "cmd"), *argv = json_object_get(body, "argv");
    if ((cmd == NULL) == (argv == NULL))
        return brig_error_set(err, BRIG_E_INVALID, 0, "give exactly one of 'cmd' or 'argv'");
    if (cmd) {
        if (!json_is_string(cmd) || json_string_length(cmd) == 0)
            return brig_error_set(err, BRIG_E_INVALID, 0, "'cmd' must be a non-empty string");
        req->cmd = json_string_value(cmd);
    } else {
        if (!json_is_array(argv) || json_array_size(argv) == 0)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'argv' must be a non-empty array of strings");
        size_t i;
        json_t *a;
        json_array_foreach(argv, i, a) if (!json_is_string(a)) return brig_error_set(
            err, BRIG_E_INVALID, 0, "'argv' must be a non-empty array of strings");
        if (json_string_length(json_array_get(argv, 0)) == 0)
            return brig_error_set(err, BRIG_E_INVALID, 0, "argv[0] must not be empty");
        req->argv = argv;
    }
    json_t *cwd = json_object_get(body, "cwd");
    if (cwd) {
        if (!json_is_string(cwd) || json_string_value(cwd)[0] != '/')
            return brig_error_set(err, BRIG_E_INVALID, 0, "'cwd' must be an absolute path");
        req->cwd = json_string_value(cwd);
    }
    json_t *env = json_object_get(body, "env");
    if (env) {
        if (brig_request_env(env, err) < 0)
            return -1;
        req->env = env;
    }
    req->timeout_ms = default_ms;
    json_t *to = json_object_get(body, "timeout");
    if (to) {
        double s = json_number_value(to);
        if (!json_is_number(to) || !isfinite(s) || s < 0 || s * 1000 > (double)max_ms)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'timeout' must be a number of seconds in [0, %lld] (0: none)",
                                  (long long)(max_ms / 1000));
        req->timeout_ms = (int64_t)ceil(s * 1000);
    }
    return parse_exec_extras(body, req, err);
}
