/*
 * agentproto.c - the agent protocol's requests: decoding with validation, encoding, and the
 * names of the operations and messages (see agentproto.h).  No system calls: everything here
 * is a function of the JSON or the struct it is given.
 */
#include "agentproto.h"

#include <arpa/inet.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "util.h"

#define bad(err, ...) brig_error_set((err), BRIG_E_INVALID, 0, __VA_ARGS__)

/* The member `key` of o, or NULL when missing or JSON null (optional request fields treat
 * null as absent). */
static json_t *field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

/* The value of a JSON string, or NULL when j is not a string or holds a NUL byte. */
static const char *cstring(json_t *j)
{
    if (!json_is_string(j))
        return NULL;
    const char *s = json_string_value(j);
    return strlen(s) == json_string_length(j) ? s : NULL;
}

int brig_agentproto_decode_hello(json_t *hello, int64_t *version, int64_t *min_version,
                                 brig_error **err)
{
    const char *proto = cstring(json_object_get(hello, "proto"));
    json_t *jv = json_object_get(hello, "version");
    json_t *jmin = field(hello, "min_version");
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
    json_t *j = field(req, key);
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
    json_t *j = field(req, key);
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
    if (field(req, key) == NULL)
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
    json_t *b = field(req, k64);
    if (b == NULL)
        return 0;
    if (field(req, key) != NULL)
        return bad(err, "give \"%s\" or \"%s\", not both", key, k64);
    const char *s = cstring(b);
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
    const char *p = cstring(json_object_get(req, key));
    if (p == NULL || p[0] != '/')
        return bad(err, "\"%s\" must be an absolute path without NUL", key);
    if (strlen(p) >= PATH_MAX)
        return bad(err, "\"%s\" is too long", key);
    *out = p;
    return 0;
}

/* ---- decoding: the operations ---- */

static int decode_none(json_t *req, brig_agent_req *out, brig_error **err)
{
    (void)req;
    (void)out;
    (void)err;
    return 0;
}

static int decode_pty(json_t *req, brig_exec_spec *s, brig_error **err)
{
    json_t *j = field(req, "pty");
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

static int decode_exec(json_t *req, brig_agent_req *out, brig_error **err)
{
    brig_exec_spec *s = &out->u.exec;
    json_t *jargv = field(req, "argv"), *jcmd = field(req, "cmd");
    if ((jargv == NULL) == (jcmd == NULL))
        return bad(err, "exec needs exactly one of \"argv\" and \"cmd\"");
    if (jargv != NULL) {
        if (!json_is_array(jargv) || json_array_size(jargv) == 0)
            return bad(err, "\"argv\" must be a non-empty array of strings");
        for (size_t i = 0; i < json_array_size(jargv); i++)
            if (cstring(json_array_get(jargv, i)) == NULL)
                return bad(err, "\"argv\" must hold strings without NUL");
        s->argv = jargv;
    } else if ((s->cmd = cstring(jcmd)) == NULL) {
        return bad(err, "\"cmd\" must be a string without NUL");
    }

    json_t *jcwd = field(req, "cwd");
    if (jcwd != NULL && abs_path(req, "cwd", &s->cwd, err) < 0)
        return -1;

    json_t *jenv = field(req, "env");
    if (jenv != NULL && !json_is_object(jenv))
        return bad(err, "\"env\" must be an object of strings");
    const char *name;
    size_t nlen;
    json_t *jval;
    json_object_keylen_foreach(jenv, name, nlen, jval)
    {
        if (name[0] == '\0' || strlen(name) != nlen || strchr(name, '=') != NULL)
            return bad(err, "env names must be non-empty, without '=' or NUL");
        if (cstring(jval) == NULL)
            return bad(err, "env value of %.64s must be a string without NUL", name);
    }
    s->env = jenv;

    int64_t timeout = 0, buffer = BRIG_BUFFER_DEFAULT;
    if (opt_int(req, "timeout_ms", 0, INT64_MAX, &timeout, err) < 0 ||
        opt_bool(req, "stdin", &s->want_stdin, err) < 0 ||
        opt_bool(req, "stdin_closed", &s->stdin_closed, err) < 0 ||
        opt_bool(req, "background", &s->background, err) < 0 ||
        opt_bool(req, "follow", &s->follow, err) < 0 || decode_pty(req, s, err) < 0 ||
        opt_int(req, "buffer_bytes", 1, BRIG_BUFFER_MAX, &buffer, err) < 0)
        return -1;
    s->timeout_ms = timeout;
    s->buffer_bytes = (uint32_t)buffer;

    json_t *juser = field(req, "user");
    if (juser != NULL) {
        s->user = cstring(juser);
        if (s->user == NULL || s->user[0] == '\0' || strlen(s->user) > 256 ||
            strchr(s->user, ':') != NULL || strchr(s->user, '\n') != NULL)
            return bad(err, "\"user\" must be a user name");
    }
    return 0;
}

static int decode_proc(json_t *req, brig_agent_req *out, brig_error **err)
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

static int decode_path_only(json_t *req, brig_agent_req *out, brig_error **err)
{
    return abs_path(req, "path", &out->u.fs.path, err);
}

/* The mode of write_file and mkdir: optional, permission bits only. */
static int opt_mode(json_t *req, uint32_t dflt, brig_fs_req *fs, brig_error **err)
{
    int64_t mode = dflt;
    if (opt_int(req, "mode", 0, INT64_MAX, &mode, err) < 0)
        return -1;
    fs->mode = (uint32_t)(mode & 07777);
    fs->mode_set = field(req, "mode") != NULL;
    return 0;
}

static int decode_write_file(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (abs_path(req, "path", &out->u.fs.path, err) < 0)
        return -1;
    return opt_mode(req, 0644, &out->u.fs, err);
}

static int decode_remove(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (abs_path(req, "path", &out->u.fs.path, err) < 0)
        return -1;
    return opt_bool(req, "recursive", &out->u.fs.recursive, err);
}

static int decode_move(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (abs_path(req, "from", &out->u.fs.from, err) < 0)
        return -1;
    return abs_path(req, "to", &out->u.fs.to, err);
}

static int decode_mkdir(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (abs_path(req, "path", &out->u.fs.path, err) < 0 || opt_mode(req, 0755, &out->u.fs, err) < 0)
        return -1;
    return opt_bool(req, "parents", &out->u.fs.parents, err);
}

/* A string member of o that ok() accepts, or NULL with *err. */
static const char *checked(json_t *o, const char *key, bool (*ok)(const char *), const char *what,
                           brig_error **err)
{
    const char *s = cstring(field(o, key));
    if (s == NULL || !ok(s))
        bad(err, "\"%s\" must be %s", key, what);
    return s && ok(s) ? s : NULL;
}

static bool is_seed(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (size_t i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool is_mac(const char *s)
{
    if (strlen(s) != 17)
        return false;
    for (size_t i = 0; i < 17; i++)
        if (i % 3 == 2 ? s[i] != ':'
                       : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool is_ipv4(const char *s)
{
    struct in_addr a;
    return strlen(s) < INET_ADDRSTRLEN && inet_pton(AF_INET, s, &a) == 1;
}

static int decode_guest_sync(json_t *req, brig_agent_req *out, brig_error **err)
{
    brig_guest_req *g = &out->u.guest;
    if (req_int(req, "realtime_ns", 1, INT64_MAX, &g->realtime_ns, err) < 0)
        return -1;
    if (field(req, "seed") &&
        (g->seed = checked(req, "seed", is_seed, "64 lowercase hex digits", err)) == NULL)
        return -1;
    json_t *net = field(req, "net");
    if (net == NULL)
        return 0;
    if (!json_is_object(net))
        return bad(err, "\"net\" must be an object {\"nic\", \"mac\", \"ip\", \"gw\"}");
    g->net = true;
    if ((g->nic = checked(net, "nic", is_mac, "a MAC address", err)) == NULL ||
        (g->mac = checked(net, "mac", is_mac, "a MAC address", err)) == NULL ||
        (g->ip = checked(net, "ip", is_ipv4, "an IPv4 address", err)) == NULL ||
        (g->gw = checked(net, "gw", is_ipv4, "an IPv4 address", err)) == NULL) {
        brig_error_prefix(err, "net");
        return -1;
    }
    return 0;
}

static int decode_fs_freeze(json_t *req, brig_agent_req *out, brig_error **err)
{
    if (field(req, "freeze") == NULL)
        return bad(err, "\"freeze\" is required");
    return opt_bool(req, "freeze", &out->u.freeze, err);
}

/* ---- encoding: the request objects brigd sends ---- */

/* Sets o's path field `key` to path: a string, or "<key>_b64" (base64 of the bytes) when
 * path is not UTF-8, which a JSON string cannot hold (raw_path decodes it). */
static void put_path(json_t *o, const char *key, const char *path)
{
    size_t n = strlen(path);
    if (brig_utf8_valid(path, n)) {
        json_object_set_new(o, key, json_stringn(path, n));
        return;
    }
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    _cleanup_free_ char *enc = brig_xmalloc(len);
    sodium_bin2base64(enc, len, (const unsigned char *)path, n, sodium_base64_VARIANT_ORIGINAL);
    char k64[32];
    snprintf(k64, sizeof(k64), "%s_b64", key);
    json_object_set_new(o, k64, json_string(enc));
}

static void encode_none(const brig_agent_req *q, json_t *o)
{
    (void)q;
    (void)o;
}

static void encode_exec(const brig_agent_req *q, json_t *o)
{
    const brig_exec_spec *s = &q->u.exec;
    json_object_set_new(o, "timeout_ms", json_integer(s->timeout_ms));
    if (s->argv)
        json_object_set(o, "argv", s->argv);
    else if (s->cmd)
        json_object_set_new(o, "cmd", json_string(s->cmd));
    if (s->cwd)
        put_path(o, "cwd", s->cwd);
    if (s->env)
        json_object_set(o, "env", s->env);
    if (s->user)
        json_object_set_new(o, "user", json_string(s->user));
    if (s->pty)
        json_object_set_new(o, "pty", json_pack("{s:i, s:i}", "cols", s->cols, "rows", s->rows));
    if (s->background)
        json_object_set_new(o, "background", json_true());
    if (s->follow)
        json_object_set_new(o, "follow", json_true());
    if (s->buffer_bytes)
        json_object_set_new(o, "buffer_bytes", json_integer(s->buffer_bytes));
    if (s->want_stdin)
        json_object_set_new(o, "stdin", json_true());
    if (s->stdin_closed)
        json_object_set_new(o, "stdin_closed", json_true());
}

static void encode_proc(const brig_agent_req *q, json_t *o)
{
    const brig_proc_req *p = &q->u.proc;
    if (q->op == BRIG_OP_PROC_LIST)
        return;
    json_object_set_new(o, "pid", json_integer(p->pid));
    switch (q->op) {
    case BRIG_OP_PROC_OUTPUT:
        json_object_set_new(o, "follow", json_boolean(p->follow));
        break;
    case BRIG_OP_PROC_SIGNAL:
        json_object_set_new(o, "signal", json_integer(p->signal));
        break;
    case BRIG_OP_PROC_WAIT:
        json_object_set_new(o, "timeout_ms", json_integer(p->timeout_ms));
        break;
    case BRIG_OP_PROC_RESIZE:
        json_object_set_new(o, "cols", json_integer(p->cols));
        json_object_set_new(o, "rows", json_integer(p->rows));
        break;
    default:
        break;
    }
}

/* Every file and file-system operation: the fields its op has. */
static void encode_fs(const brig_agent_req *q, json_t *o)
{
    const brig_fs_req *f = &q->u.fs;
    if (q->op == BRIG_OP_MOVE) {
        put_path(o, "from", f->from);
        put_path(o, "to", f->to);
        return;
    }
    put_path(o, "path", f->path);
    if ((q->op == BRIG_OP_WRITE_FILE || q->op == BRIG_OP_MKDIR) && f->mode_set)
        json_object_set_new(o, "mode", json_integer(f->mode));
    if (q->op == BRIG_OP_REMOVE)
        json_object_set_new(o, "recursive", json_boolean(f->recursive));
    if (q->op == BRIG_OP_MKDIR)
        json_object_set_new(o, "parents", json_boolean(f->parents));
}

static void encode_guest_sync(const brig_agent_req *q, json_t *o)
{
    const brig_guest_req *g = &q->u.guest;
    json_object_set_new(o, "realtime_ns", json_integer(g->realtime_ns));
    if (g->seed)
        json_object_set_new(o, "seed", json_string(g->seed));
    if (g->net)
        json_object_set_new(o, "net",
                            json_pack("{s:s, s:s, s:s, s:s}", "nic", g->nic, "mac", g->mac, "ip",
                                      g->ip, "gw", g->gw));
}

static void encode_fs_freeze(const brig_agent_req *q, json_t *o)
{
    json_object_set_new(o, "freeze", json_boolean(q->u.freeze));
}

/* ---- the table ---- */

static const struct {
    const char *name;
    int (*decode)(json_t *req, brig_agent_req *out, brig_error **err);
    void (*encode)(const brig_agent_req *q, json_t *o); /* the fields after "op" */
} ops[BRIG_OP__COUNT] = {
    [BRIG_OP_PING] = {"ping", decode_none, encode_none},
    [BRIG_OP_EXEC] = {"exec", decode_exec, encode_exec},
    [BRIG_OP_WRITE_FILE] = {"write_file", decode_write_file, encode_fs},
    [BRIG_OP_READ_FILE] = {"read_file", decode_path_only, encode_fs},
    [BRIG_OP_PROC_LIST] = {"proc_list", decode_proc, encode_proc},
    [BRIG_OP_PROC_GET] = {"proc_get", decode_proc, encode_proc},
    [BRIG_OP_PROC_OUTPUT] = {"proc_output", decode_proc, encode_proc},
    [BRIG_OP_PROC_STDIN] = {"proc_stdin", decode_proc, encode_proc},
    [BRIG_OP_PROC_STDIN_CLOSE] = {"proc_stdin_close", decode_proc, encode_proc},
    [BRIG_OP_PROC_SIGNAL] = {"proc_signal", decode_proc, encode_proc},
    [BRIG_OP_PROC_WAIT] = {"proc_wait", decode_proc, encode_proc},
    [BRIG_OP_PROC_RESIZE] = {"proc_resize", decode_proc, encode_proc},
    [BRIG_OP_STAT] = {"stat", decode_path_only, encode_fs},
    [BRIG_OP_LIST_DIR] = {"list_dir", decode_path_only, encode_fs},
    [BRIG_OP_REMOVE] = {"remove", decode_remove, encode_fs},
    [BRIG_OP_MOVE] = {"move", decode_move, encode_fs},
    [BRIG_OP_MKDIR] = {"mkdir", decode_mkdir, encode_fs},
    [BRIG_OP_TAR_EXTRACT] = {"tar_extract", decode_path_only, encode_fs},
    [BRIG_OP_TAR_CREATE] = {"tar_create", decode_path_only, encode_fs},
    [BRIG_OP_GUEST_SYNC] = {"guest_sync", decode_guest_sync, encode_guest_sync},
    [BRIG_OP_FS_FREEZE] = {"fs_freeze", decode_fs_freeze, encode_fs_freeze},
};

static const char *const replies[BRIG_REPLY__COUNT] = {
    [BRIG_REPLY_UNKNOWN] = "",
    [BRIG_REPLY_ERROR] = "error",
    [BRIG_REPLY_PONG] = "pong",
    [BRIG_REPLY_OK] = "ok",
    [BRIG_REPLY_STARTED] = "started",
    [BRIG_REPLY_EXIT] = "exit",
    [BRIG_REPLY_FILE] = "file",
    [BRIG_REPLY_TAR] = "tar",
    [BRIG_REPLY_PROCESSES] = "processes",
    [BRIG_REPLY_PROCESS] = "process",
    [BRIG_REPLY_OUTPUT] = "output",
    [BRIG_REPLY_DROPPED] = "dropped",
    [BRIG_REPLY_END] = "end",
    [BRIG_REPLY_ENTRY] = "entry",
    [BRIG_REPLY_ENTRIES] = "entries",
};

const char *brig_agentproto_op_name(brig_agent_op op)
{
    return (unsigned)op < BRIG_OP__COUNT ? ops[op].name : "?";
}

const char *brig_agentproto_reply_name(brig_agent_reply type)
{
    return (unsigned)type < BRIG_REPLY__COUNT ? replies[type] : "";
}

json_t *brig_agentproto_message(brig_agent_reply type)
{
    return json_pack("{s:s}", "type", brig_agentproto_reply_name(type));
}

brig_agent_reply brig_agentproto_reply_type(json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    for (size_t i = 1; t && i < BRIG_REPLY__COUNT; i++)
        if (strcmp(replies[i], t) == 0)
            return (brig_agent_reply)i;
    return BRIG_REPLY_UNKNOWN;
}

int brig_agentproto_decode(json_t *req, brig_agent_req *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    const char *op = cstring(json_object_get(req, "op"));
    if (op == NULL)
        return bad(err, "request needs a string \"op\"");
    size_t i = 0;
    while (i < BRIG_OP__COUNT && strcmp(ops[i].name, op) != 0)
        i++;
    if (i == BRIG_OP__COUNT)
        return bad(err, "unknown op \"%.64s\"", op);
    out->op = (brig_agent_op)i;
    return ops[i].decode(req, out, err);
}

json_t *brig_agentproto_encode(const brig_agent_req *q)
{
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(brig_agentproto_op_name(q->op)));
    if ((unsigned)q->op < BRIG_OP__COUNT)
        ops[q->op].encode(q, o);
    return o;
}
