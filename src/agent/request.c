/*
 * request.c - parsing and validation of every request (see request.h).  No system calls:
 * everything here is a function of the JSON it is given.
 */
#include "request.h"

#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "util.h"

#define bad(err, ...) brig_error_set((err), BRIG_E_INVALID, 0, __VA_ARGS__)

json_t *brig_agent_field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

const char *brig_agent_cstring(json_t *j)
{
    if (!json_is_string(j))
        return NULL;
    const char *s = json_string_value(j);
    return strlen(s) == json_string_length(j) ? s : NULL;
}

int brig_agent_parse_hello(json_t *hello, int64_t *version, int64_t *min_version, brig_error **err)
{
    const char *proto = brig_agent_cstring(json_object_get(hello, "proto"));
    json_t *jv = json_object_get(hello, "version");
    json_t *jmin = brig_agent_field(hello, "min_version");
    if (proto == NULL || strcmp(proto, BRIG_PROTO_NAME) != 0 || !json_is_integer(jv) ||
        (jmin != NULL && !json_is_integer(jmin)))
        return brig_error_set(err, BRIG_E_PROTOCOL, 0,
                              "HELLO needs proto \"" BRIG_PROTO_NAME "\" and integer versions");
    *version = json_integer_value(jv);
    *min_version = jmin ? json_integer_value(jmin) : *version;
    return 0;
}

/* ---- field helpers: absent (or null) fields keep the default already in *out ---- */

static int opt_bool(json_t *req, const char *key, bool *out, brig_error **err)
{
    json_t *j = brig_agent_field(req, key);
    if (j == NULL)
        return 0;
    if (!json_is_boolean(j))
        return bad(err, "\"%s\" must be a boolean", key);
    *out = json_is_true(j);
    return 0;
}

static int opt_int(json_t *req, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   brig_error **err)
{
    json_t *j = brig_agent_field(req, key);
    if (j == NULL)
        return 0;
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return bad(err, "\"%s\" must be an integer in %lld..%lld", key, (long long)lo,
                   (long long)hi);
    *out = json_integer_value(j);
    return 0;
}

static int req_int(json_t *req, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   brig_error **err)
{
    if (brig_agent_field(req, key) == NULL)
        return bad(err, "\"%s\" is required", key);
    return opt_int(req, key, lo, hi, out, err);
}

/* A path may come as "<key>_b64" instead of "<key>": base64 of bytes that are not UTF-8,
 * which a JSON string cannot hold.  It is decoded into the request object as "<key>" (a
 * string jansson did not check), which the parsed struct then borrows like any other. */
static int raw_path(json_t *req, const char *key, brig_error **err)
{
    char k64[32];
    snprintf(k64, sizeof(k64), "%s_b64", key);
    json_t *b = brig_agent_field(req, k64);
    if (b == NULL)
        return 0;
    if (brig_agent_field(req, key) != NULL)
        return bad(err, "give \"%s\" or \"%s\", not both", key, k64);
    const char *s = brig_agent_cstring(b);
    unsigned char buf[PATH_MAX + 3];
    size_t len = 0;
    if (s == NULL || sodium_base642bin(buf, sizeof(buf), s, strlen(s), NULL, &len, NULL,
                                       sodium_base64_VARIANT_ORIGINAL) != 0)
        return bad(err, "\"%s\" must be the base64 of a path shorter than PATH_MAX", k64);
    json_object_set_new(req, key, json_stringn_nocheck((const char *)buf, len));
    return 0;
}

/* An absolute path without NUL, shorter than PATH_MAX (see raw_path for its other form). */
static int abs_path(json_t *req, const char *key, const char **out, brig_error **err)
{
    if (raw_path(req, key, err) < 0)
        return -1;
    const char *p = brig_agent_cstring(json_object_get(req, key));
    if (p == NULL || p[0] != '/')
        return bad(err, "\"%s\" must be an absolute path without NUL", key);
    if (strlen(p) >= PATH_MAX)
        return bad(err, "\"%s\" is too long", key);
    *out = p;
    return 0;
}

/* ---- the operations ---- */

static int parse_none(json_t *req, brig_agent_req *out, brig_error **err)
{
    (void)req;
    (void)out;
    (void)err;
    return 0;
}

static int parse_pty(json_t *req, brig_exec_spec *s, brig_error **err)
{
    json_t *j = brig_agent_field(req, "pty");
    if (j == NULL)
        return 0;
    if (!json_is_object(j))
        return bad(err, "\"pty\" must be an object {\"cols\", \"rows\"}");
    int64_t cols = 0, rows = 0;
    if (req_int(j, "cols", 1, BRIG_PTY_MAX, &cols, err) < 0 ||
        req_int(j, "rows", 1, BRIG_PTY_MAX, &rows, err) < 0) {
        brig_error_prefix(err, "pty");
        return -1;
    }
    s->pty = true;
    s->cols = (uint16_t)cols;
    s->rows = (uint16_t)rows;
    return 0;
}

static int parse_exec(json_t *req, brig_agent_req *out, brig_error **err)
{
    brig_exec_spec *s = &out->u.exec;
    json_t *jargv = brig_agent_field(req, "argv"), *jcmd = brig_agent_field(req, "cmd");
    if ((jargv == NULL) == (jcmd == NULL))
        return bad(err, "exec needs exactly one of \"argv\" and \"cmd\"");
    if (jargv != NULL) {
        if (!json_is_array(jargv) || json_array_size(jargv) == 0)
            return bad(err, "\"argv\" must be a non-empty array of strings");
        for (size_t i = 0; i < json_array_size(jargv); i++)
            if (brig_agent_cstring(json_array_get(jargv, i)) == NULL)
                return bad(err, "\"argv\" must hold strings without NUL");
        s->argv = jargv;
    } else if ((s->cmd = brig_agent_cstring(jcmd)) == NULL) {
        return bad(err, "\"cmd\" must be a string without NUL");
    }

    json_t *jcwd = brig_agent_field(req, "cwd");
    if (jcwd != NULL && abs_path(req, "cwd", &s->cwd, err) < 0)
        return -1;

    json_t *jenv = brig_agent_field(req, "env");
    if (jenv != NULL && !json_is_object(jenv))
        return bad(err, "\"env\" must be an object of strings");
    const char *name;
    size_t nlen;
    json_t *jval;
    json_object_keylen_foreach(jenv, name, nlen, jval)
    {
        if (name[0] == '\0' || strlen(name) != nlen || strchr(name, '=') != NULL)
            return bad(err, "env names must be non-empty, without '=' or NUL");
        if (brig_agent_cstring(jval) == NULL)
            return bad(err, "env value of %.64s must be a string without NUL", name);
    }
    s->env = jenv;

    int64_t timeout = 0, buffer = BRIG_BUFFER_DEFAULT;
    if (opt_int(req, "timeout_ms", 0, INT64_MAX, &timeout, err) < 0 ||
        opt_bool(req, "stdin", &s->want_stdin, err) < 0 ||
        opt_bool(req, "stdin_closed", &s->stdin_closed, err) < 0 ||
        opt_bool(req, "background", &s->background, err) < 0 || parse_pty(req, s, err) < 0 ||
        opt_int(req, "buffer_bytes", 1, BRIG_BUFFER_MAX, &buffer, err) < 0)
        return -1;
    s->timeout_ms = timeout;
    s->buffer_bytes = (uint32_t)buffer;

    json_t *juser = brig_agent_field(req, "user");
    if (juser != NULL) {
        s->user = brig_agent_cstring(juser);
        if (s->user == NULL || s->user[0] == '\0' || strlen(s->user) > 256 ||
            strchr(s->user, ':') != NULL || strchr(s->user, '\n') != NULL)
            return bad(err, "\"user\" must be a user name");
    }
    return 0;
}

static int parse_proc(json_t *req, brig_agent_req *out, brig_error **err)
{
    brig_proc_req *p = &out->u.proc;
    memset(p, 0, sizeof(*p));
    p->op = (int32_t)out->op;
    if (out->op == BRIG_OP_PROC_LIST)
        return 0;
    int64_t pid = 0, sig = 0, cols = 0, rows = 0, timeout = 0;
    bool follow = false;
    if (req_int(req, "pid", 1, INT32_MAX, &pid, err) < 0)
        return -1;
    p->pid = (int32_t)pid;
    switch (out->op) {
    case BRIG_OP_PROC_OUTPUT:
        if (opt_bool(req, "follow", &follow, err) < 0)
            return -1;
        p->follow = follow;
        break;
    case BRIG_OP_PROC_SIGNAL:
        if (req_int(req, "signal", 1, 64, &sig, err) < 0)
            return -1;
        p->signal = (int32_t)sig;
        break;
    case BRIG_OP_PROC_WAIT:
        if (opt_int(req, "timeout_ms", 0, INT64_MAX, &timeout, err) < 0)
            return -1;
        p->timeout_ms = timeout;
        break;
    case BRIG_OP_PROC_RESIZE:
        if (req_int(req, "cols", 1, BRIG_PTY_MAX, &cols, err) < 0 ||
            req_int(req, "rows", 1, BRIG_PTY_MAX, &rows, err) < 0)
            return -1;
        p->cols = (uint16_t)cols;
        p->rows = (uint16_t)rows;
        break;
    default:
        break;
    }
    return 0;
}

static int parse_path_only(json_t *req, brig_agent_req *out, brig_error **err)
{
    return abs_path(req, "path", &out->u.fs.path, err);
}

static int parse_write_file(json_t *req, brig_agent_req *out, brig_error **err)
{
    int64_t mode = 0644;
    if (abs_path(req, "path", &out->u.fs.path, err) < 0 ||
        opt_int(req, "mode", 0, INT64_MAX, &mode, err) < 0)
        return -1;
    out->u.fs.mode = (uint32_t)(mode & 07777);
    return 0;
}

static int parse_remove(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (abs_path(req, "path", &out->u.fs.path, err) < 0)
        return -1;
    return opt_bool(req, "recursive", &out->u.fs.recursive, err);
}

static int parse_move(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (abs_path(req, "from", &out->u.fs.from, err) < 0)
        return -1;
    return abs_path(req, "to", &out->u.fs.to, err);
}

static int parse_mkdir(json_t *req, brig_agent_req *out, brig_error **err)
{
    int64_t mode = 0755;
    if (abs_path(req, "path", &out->u.fs.path, err) < 0 ||
        opt_int(req, "mode", 0, INT64_MAX, &mode, err) < 0 ||
        opt_bool(req, "parents", &out->u.fs.parents, err) < 0)
        return -1;
    out->u.fs.mode = (uint32_t)(mode & 07777);
    return 0;
}

static const struct {
    const char *name;
    int (*parse)(json_t *req, brig_agent_req *out, brig_error **err);
} ops[BRIG_OP__COUNT] = {
    [BRIG_OP_PING] = {"ping", parse_none},
    [BRIG_OP_EXEC] = {"exec", parse_exec},
    [BRIG_OP_WRITE_FILE] = {"write_file", parse_write_file},
    [BRIG_OP_READ_FILE] = {"read_file", parse_path_only},
    [BRIG_OP_PROC_LIST] = {"proc_list", parse_proc},
    [BRIG_OP_PROC_GET] = {"proc_get", parse_proc},
    [BRIG_OP_PROC_OUTPUT] = {"proc_output", parse_proc},
    [BRIG_OP_PROC_STDIN] = {"proc_stdin", parse_proc},
    [BRIG_OP_PROC_STDIN_CLOSE] = {"proc_stdin_close", parse_proc},
    [BRIG_OP_PROC_SIGNAL] = {"proc_signal", parse_proc},
    [BRIG_OP_PROC_WAIT] = {"proc_wait", parse_proc},
    [BRIG_OP_PROC_RESIZE] = {"proc_resize", parse_proc},
    [BRIG_OP_STAT] = {"stat", parse_path_only},
    [BRIG_OP_LIST_DIR] = {"list_dir", parse_path_only},
    [BRIG_OP_REMOVE] = {"remove", parse_remove},
    [BRIG_OP_MOVE] = {"move", parse_move},
    [BRIG_OP_MKDIR] = {"mkdir", parse_mkdir},
    [BRIG_OP_TAR_EXTRACT] = {"tar_extract", parse_path_only},
    [BRIG_OP_TAR_CREATE] = {"tar_create", parse_path_only},
};

const char *brig_agent_op_name(brig_agent_op op)
{
    return op < BRIG_OP__COUNT ? ops[op].name : "?";
}

int brig_agent_parse_request(json_t *req, brig_agent_req *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    const char *op = brig_agent_cstring(json_object_get(req, "op"));
    if (op == NULL)
        return bad(err, "request needs a string \"op\"");
    size_t i = 0;
    while (i < BRIG_OP__COUNT && strcmp(ops[i].name, op) != 0)
        i++;
    if (i == BRIG_OP__COUNT)
        return bad(err, "unknown op \"%.64s\"", op);
    out->op = (brig_agent_op)i;
    return ops[i].parse(req, out, err);
}
