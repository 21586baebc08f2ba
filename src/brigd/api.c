/*
 * api.c - REST handlers.  Each validates its input completely before touching a
 * sandbox, answers errors as {"error":{"code","message"}} with the right status,
 * and never holds brigd's lock while talking to a sandbox.
 */
#include "api.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentc.h"
#include "request.h"
#include "log.h"
#include "sandbox.h"
#include "template.h"

/* ---- health ---------------------------------------------------------------- */

static void h_healthz(brig_req *r)
{
    pthread_mutex_lock(&r->d->lock);
    int n = r->d->n_sandboxes;
    pthread_mutex_unlock(&r->d->lock);
    brig_http_json(r, 200,
                   json_pack("{s:s, s:s, s:s, s:i}", "status", "ok", "version", BRIG_VERSION,
                             "runtime", r->d->rt->ops->name, "sandboxes", n));
}

/* ---- sandboxes ------------------------------------------------------------- */

static void h_sandbox_create(brig_req *r)
{
    static const char *const fields[] = {"template", NULL};
    json_t *body = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0 ||
        brig_request_only_fields(body, fields, &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    json_t *tmpl = json_object_get(body, "template");
    if (tmpl && !json_is_string(tmpl)) {
        json_decref(body);
        brig_http_fail(r, BRIG_E_INVALID, "'template' must be a string");
        return;
    }
    brig_sandbox_opts opts = {.template = json_string_value(tmpl)};
    json_t *out = NULL;
    int rc = brig_sandbox_create(r->d, r->key.account_id, &opts, &out, &err);
    json_decref(body);
    if (rc < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 201, out);
}

static void h_sandbox_list(brig_req *r)
{
    brig_http_json(r, 200,
                   json_pack("{s:o}", "sandboxes", brig_sandbox_list(r->d, r->key.account_id)));
}

static void h_sandbox_get(brig_req *r)
{
    brig_sandbox *sb = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_get(r->d, r->key.account_id, r->params[0], &sb, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    brig_http_json(r, 200, brig_sandbox_json(r->d, sb));
    brig_sandbox_put(r->d, sb);
}

static void h_sandbox_delete(brig_req *r)
{
    brig_error *err = NULL;
    if (brig_sandbox_delete(r->d, r->key.account_id, r->params[0], "deleted_by_api", &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}

/* ---- exec ------------------------------------------------------------------ */

/* Sets key to the text, or to base64 with "<key>_encoding":"base64" when the
 * bytes are not valid UTF-8 (JSON strings can only carry text). */
static void set_output(json_t *obj, const char *key, const brig_buf *b)
{
    json_t *s = json_stringn(b->data ? b->data : "", b->len);
    if (s) {
        json_object_set_new(obj, key, s);
        return;
    }
    size_t len = sodium_base64_ENCODED_LEN(b->len, sodium_base64_VARIANT_ORIGINAL);
    char *enc = brig_xmalloc(len);
    sodium_bin2base64(enc, len, (const unsigned char *)b->data, b->len,
                      sodium_base64_VARIANT_ORIGINAL);
    json_object_set_new(obj, key, json_string(enc));
    free(enc);
    char *ek = brig_asprintf("%s_encoding", key);
    json_object_set_new(obj, ek, json_string("base64"));
    free(ek);
}

static void h_exec(brig_req *r)
{
    json_t *body = NULL;
    brig_error *err = NULL;
    brig_exec_req req;
    brig_sandbox *sb = NULL;
    if (brig_http_body_json(r, &body, &err) < 0 ||
        brig_request_exec(body, r->d->cfg.exec_timeout_default_ms, r->d->cfg.exec_timeout_max_ms,
                          &req, &err) < 0 ||
        brig_sandbox_get(r->d, r->key.account_id, r->params[0], &sb, &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    brig_exec_result res;
    int fd = brig_sandbox_connect(r->d, sb, &err);
    int rc =
        fd < 0 ? -1 : brig_agentc_exec(fd, &req, (size_t)r->d->cfg.output_limit_bytes, &res, &err);
    if (fd >= 0)
        close(fd);
    brig_sandbox_put(r->d, sb);
    json_decref(body);
    if (rc < 0) {
        if (err->kind == BRIG_E_PROTOCOL)
            brig_error_prefix(&err, "sandbox %s", r->params[0]);
        brig_http_error(r, err);
        return;
    }
    json_t *out = json_pack("{s:i, s:b, s:I}", "exit_code", res.exit_code, "timed_out",
                            res.timed_out, "duration_ms", (json_int_t)res.duration_ms);
    json_object_set_new(out, "signal", res.signal ? json_integer(res.signal) : json_null());
    set_output(out, "stdout", &res.out);
    set_output(out, "stderr", &res.err);
    if (res.out_truncated)
        json_object_set_new(out, "stdout_truncated", json_true());
    if (res.err_truncated)
        json_object_set_new(out, "stderr_truncated", json_true());
    brig_exec_result_dispose(&res);
    brig_http_json(r, 200, out);
}

/* ---- files ----------------------------------------------------------------- */

typedef struct file_stream {
    brigd *d;
    brig_sandbox *sb;
    int fd;             /* agent connection */
    brig_error *err;    /* first failure while streaming an upload */
    brig_frame frame;   /* download: current frame */
    size_t off;         /* download: bytes of frame already sent */
    int64_t size, sent; /* download: announced size, bytes sent */
} file_stream;

static void file_stream_free(file_stream *fs)
{
    if (fs == NULL)
        return;
    if (fs->fd >= 0)
        close(fs->fd);
    brig_sandbox_put(fs->d, fs->sb);
    brig_error_clear(&fs->err);
    brig_frame_dispose(&fs->frame);
    free(fs);
}

static void req_stream_free(brig_req *r)
{
    file_stream_free(r->stream);
    r->stream = NULL;
}

/* The ?path= argument: absolute, no NUL, at most PATH_MAX. */
static const char *file_path(brig_req *r, brig_error **err)
{
    const char *path = NULL;
    size_t len = 0;
    if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, "path", 4, &path, &len) !=
            MHD_YES ||
        path == NULL || len == 0) {
        brig_error_set(err, BRIG_E_INVALID, 0, "the 'path' query argument is required");
        return NULL;
    }
    if (strlen(path) != len || path[0] != '/' || len >= PATH_MAX) {
        brig_error_set(err, BRIG_E_INVALID, 0, "'path' must be an absolute path");
        return NULL;
    }
    return path;
}

/* Starts a file stream: validated path, borrowed sandbox, agent connection. */
static file_stream *file_open(brig_req *r, const char **path, brig_error **err)
{
    *path = file_path(r, err);
    if (*path == NULL)
        return NULL;
    file_stream *fs = brig_xcalloc(1, sizeof(*fs));
    fs->d = r->d;
    fs->fd = -1;
    if (brig_sandbox_get(r->d, r->key.account_id, r->params[0], &fs->sb, err) < 0 ||
        (fs->fd = brig_sandbox_connect(r->d, fs->sb, err)) < 0) {
        file_stream_free(fs);
        return NULL;
    }
    return fs;
}

static void put_begin(brig_req *r)
{
    brig_error *err = NULL;
    const char *path;
    int mode = -1;
    const char *m = brig_http_query(r, "mode");
    if (m) {
        char *end = NULL;
        errno = 0;
        long v = strtol(m, &end, 8);
        if (errno || end == m || *end || v < 0 || v > 07777) {
            brig_http_fail(r, BRIG_E_INVALID, "'mode' must be octal permission bits (e.g. 0755)");
            return;
        }
        mode = (int)v;
    }
    file_stream *fs = file_open(r, &path, &err);
    if (fs == NULL) {
        brig_http_error(r, err);
        return;
    }
    r->stream = fs;
    r->stream_free = req_stream_free;
    if (brig_agentc_write_begin(fs->fd, path, mode, &err) < 0)
        fs->err = err;
}

static void put_body(brig_req *r, const char *data, size_t n)
{
    file_stream *fs = r->stream;
    if (fs->err == NULL)
        brig_agentc_write_chunk(fs->fd, data, n, &fs->err);
}

static void h_files_put(brig_req *r)
{
    file_stream *fs = r->stream;
    brig_error *err = NULL;
    if (fs->err) {
        err = fs->err;
        fs->err = NULL;
    } else if (brig_agentc_write_end(fs->fd, NULL, &err) == 0) {
        brig_http_empty(r, 204);
        return;
    }
    brig_http_error(r, err);
}

static ssize_t get_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    file_stream *fs = cls;
    while (fs->off >= fs->frame.hdr.len) {
        int r = brig_agentc_read_chunk(fs->fd, &fs->frame, &fs->err);
        if (r <= 0) {
            if (r == 0 && fs->sent == fs->size)
                return MHD_CONTENT_READER_END_OF_STREAM;
            brig_warn("download from %s: %s", fs->sb->id,
                      fs->err ? fs->err->msg : "file changed size while being read");
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        fs->off = 0;
    }
    size_t n = fs->frame.hdr.len - fs->off;
    if (n > max)
        n = max;
    if (fs->sent + (int64_t)n > fs->size)
        return MHD_CONTENT_READER_END_WITH_ERROR; /* grew while being read */
    memcpy(buf, fs->frame.payload + fs->off, n);
    fs->off += n;
    fs->sent += (int64_t)n;
    return (ssize_t)n;
}

static void get_free(void *cls)
{
    file_stream_free(cls);
}

static void h_files_get(brig_req *r)
{
    brig_error *err = NULL;
    const char *path;
    file_stream *fs = file_open(r, &path, &err);
    int mode = 0;
    if (fs == NULL || brig_agentc_read_begin(fs->fd, path, &fs->size, &mode, &err) < 0) {
        file_stream_free(fs);
        brig_http_error(r, err);
        return;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback((uint64_t)fs->size, 64 * 1024, get_reader, fs, get_free);
    MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
    char m[16];
    snprintf(m, sizeof(m), "%04o", mode & 07777);
    MHD_add_response_header(resp, "X-Brig-File-Mode", m);
    brig_http_response(r, 200, resp);
}

/* ---- templates ------------------------------------------------------------- */

static void h_template_list(brig_req *r)
{
    brig_http_json(r, 200, json_pack("{s:o}", "templates", brig_template_list(&r->d->cfg)));
}

static void h_template_build(brig_req *r)
{
    brig_error *err = NULL;
    brig_template t;
    if (brig_template_build(&r->d->cfg, r->params[0], &err) < 0 ||
        brig_template_lookup(&r->d->cfg, r->params[0], &t, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    brig_http_json(r, 200, brig_template_json(&t));
    brig_template_dispose(&t);
}

const brig_route brig_api_routes[] = {
    {"GET", "/healthz", h_healthz, ROUTE_PUBLIC, NULL, NULL},
    {"POST", "/v1/sandboxes", h_sandbox_create, 0, NULL, NULL},
    {"GET", "/v1/sandboxes", h_sandbox_list, 0, NULL, NULL},
    {"GET", "/v1/sandboxes/{id}", h_sandbox_get, 0, NULL, NULL},
    {"DELETE", "/v1/sandboxes/{id}", h_sandbox_delete, 0, NULL, NULL},
    {"POST", "/v1/sandboxes/{id}/exec", h_exec, 0, NULL, NULL},
    {"PUT", "/v1/sandboxes/{id}/files", h_files_put, ROUTE_STREAM_BODY, put_begin, put_body},
    {"GET", "/v1/sandboxes/{id}/files", h_files_get, 0, NULL, NULL},
    {"GET", "/v1/templates", h_template_list, 0, NULL, NULL},
    {"POST", "/v1/templates/{name}/build", h_template_build, ROUTE_ADMIN, NULL, NULL},
    {NULL, NULL, NULL, 0, NULL, NULL},
};
