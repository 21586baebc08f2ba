/*
 * request.c - validation of API request bodies (see request.h).
 */
#include "request.h"

#include <math.h>
#include <string.h>

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

int brig_request_exec(json_t *body, int64_t default_ms, int64_t max_ms, brig_exec_req *req,
                      brig_error **err)
{
    static const char *const fields[] = {"cmd", "argv", "cwd", "env", "timeout", NULL};
    if (brig_request_only_fields(body, fields, err) < 0)
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
    return 0;
}
