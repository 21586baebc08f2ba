/*
 * e2b_fs.c - envd's filesystem service (Stat, MakeDir, ListDir, Move, Remove) and its /files
 * downloads and uploads (multipart, one part per file, or a raw body), on brig's agent.  A
 * relative path is the calling user's home's.  The agent works as root: what is written or
 * made is then given to the calling user, as envd's own would be (docs/e2b.md).  A raw
 * upload may be gzip-compressed (Content-Encoding: gzip, the SDK's {gzip: true}): it is
 * inflated as it streams in.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/format.h"
#include "e2b.h"
#include "handlers.h"
#include "vault/redact.h"

#define LIST_DEPTH_MAX 16

char *e2b_abs_path(brig_req *r, const char *p, brig_error **err)
{
    if (p == NULL || *p == '\0' || strlen(p) >= PATH_MAX) {
        brig_error_set(err, BRIG_E_INVALID, 0, "a path is required");
        return NULL;
    }
    if (*p == '/')
        return brig_xstrdup(p);
    char user[64];
    e2b_call_user(r, user, sizeof(user));
    if (strcmp(user, "root") == 0)
        return brig_asprintf("/root/%s", p);
    return brig_asprintf("/home/%s/%s", user, p);
}

static const char *file_type(const char *t)
{
    return !t                          ? NULL
           : strcmp(t, "file") == 0    ? "FILE_TYPE_FILE"
           : strcmp(t, "dir") == 0     ? "FILE_TYPE_DIRECTORY"
           : strcmp(t, "symlink") == 0 ? "FILE_TYPE_SYMLINK"
                                       : NULL;
}

/* The agent's entry of path as envd's EntryInfo (NULL for a kind envd does not show). */
static json_t *entry_info(json_t *e, const char *path)
{
    const char *type = file_type(json_string_value(json_object_get(e, "type")));
    if (type == NULL)
        return NULL;
    int mode = (int)json_integer_value(json_object_get(e, "mode"));
    char perms[11] = "----------", at[32], size[24];
    static const char rwx[] = "rwxrwxrwx";
    perms[0] = type[10] == 'D' ? 'd' : type[10] == 'S' ? 'l' : '-';
    for (int i = 0; i < 9; i++)
        if (mode & (0400 >> i))
            perms[i + 1] = rwx[i];
    brig_format_time(json_integer_value(json_object_get(e, "mtime")), at);
    snprintf(size, sizeof(size), "%lld", (long long)json_integer_value(json_object_get(e, "size")));
    json_t *o =
        json_pack("{s:O, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "name",
                  json_object_get(e, "name"), "type", type, "path", path, "size", size, "mode",
                  mode & 07777, "permissions", perms, "owner", "", "group", "", "modifiedTime", at);
    json_t *target = json_object_get(e, "target");
    if (json_is_string(target))
        json_object_set(o, "symlinkTarget", target);
    return o;
}

/* One unary filesystem call: its message, its path field resolved, the agent opened. */
typedef struct fs_call {
    api_call c;
    json_t *m;
    char *path;
    brig_redactor *red;
} fs_call;

static int fs_open(brig_req *r, fs_call *f, const char *field)
{
    memset(f, 0, sizeof(*f));
    brig_error *err = NULL;
    f->m = e2b_rpc_message(r, false);
    if (f->m == NULL)
        return -1;
    f->path = e2b_abs_path(r, json_string_value(json_object_get(f->m, field)), &err);
    if (f->path == NULL) {
        brig_http_error(r, err);
        json_decref(f->m);
        return -1;
    }
    if (api_call_open(r, &f->c, API_CALL_MS) < 0) {
        free(f->path);
        json_decref(f->m);
        return -1;
    }
    if (brig_sandbox_redactor(r->d, f->c.sb, &f->red, &f->c.err) < 0) {
        api_call_answer(r, &f->c, -1, 0, NULL);
        free(f->path);
        json_decref(f->m);
        return -1;
    }
    return 0;
}

/* Gives path to the calling user, as envd's own writes would be (the agent writes as root):
 * the sandbox's chown, run as root. */
static int give_to_user(brig_req *r, brig_sandbox *sb, const char *path, brig_error **err)
{
    char user[64], owner[80];
    e2b_call_user(r, user, sizeof(user));
    if (strcmp(user, "root") == 0)
        return 0;
    snprintf(owner, sizeof(owner), "%s:", user);
    int fd = brig_sandbox_connect(r->d, sb, err);
    if (fd < 0)
        return -1;
    brig_exec_req req = {.argv = json_pack("[s,s,s,s]", "chown", owner, "--", path),
                         .timeout_ms = API_CALL_MS};
    brig_exec_result res;
    int rc = brig_agentc_exec(fd, &req, 4096, NULL, &res, err);
    close(fd);
    json_decref(req.argv);
    if (rc == 0) {
        if (res.exit_code != 0)
            rc = brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot give '%s' to %s: %.*s", path, user,
                                (int)(res.err.len > 200 ? 200 : res.err.len),
                                res.err.data ? res.err.data : "");
        brig_exec_result_dispose(&res);
    }
    return rc;
}

/* A fresh agent connection for the call's next operation (one request per connection). */
static int fs_next(brig_req *r, fs_call *f)
{
    close(f->c.fd);
    f->c.fd = brig_sandbox_connect(r->d, f->c.sb, &f->c.err);
    if (f->c.fd < 0)
        return -1;
    brig_agentc_set_timeout(f->c.fd, API_CALL_MS);
    return 0;
}

/* Answers {"entry": the entry of path} (or f's error), and ends the call. */
static void fs_answer_entry(brig_req *r, fs_call *f, int rc, const char *path, bool again)
{
    json_t *e = NULL, *out = NULL;
    if (rc == 0 && again)
        rc = fs_next(r, f);
    if (rc == 0)
        rc = brig_agentc_stat(f->c.fd, path, &e, &f->c.err);
    if (rc == 0) {
        json_t *info = entry_info(e, path);
        out = json_pack("{s:o}", "entry", info ? info : json_object());
        brig_redact_json(f->red, out);
    }
    json_decref(e);
    api_call_answer(r, &f->c, rc, 200, out);
    brig_redactor_free(f->red);
    free(f->path);
    json_decref(f->m);
}

void e2b_fs_stat(brig_req *r)
{
    fs_call f;
    if (fs_open(r, &f, "path") == 0)
        fs_answer_entry(r, &f, 0, f.path, false);
}

void e2b_fs_make_dir(brig_req *r)
{
    fs_call f;
    if (fs_open(r, &f, "path") < 0)
        return;
    json_t *e = NULL;
    int rc = 0;
    if (brig_agentc_stat(f.c.fd, f.path, &e, &f.c.err) == 0) /* envd: already_exists */
        rc = brig_error_set(&f.c.err, BRIG_E_CONFLICT, 0, "'%s' exists", f.path);
    else if (f.c.err->kind == BRIG_E_NOT_FOUND) {
        brig_error_clear(&f.c.err);
        rc = fs_next(r, &f) < 0 ? -1 : brig_agentc_mkdir(f.c.fd, f.path, 0755, true, &f.c.err);
        if (rc == 0)
            rc = give_to_user(r, f.c.sb, f.path, &f.c.err);
        if (rc == 0) /* the audit timeline's, as brig's own API records it */
            brig_timeline_record(r->d, f.c.sb, &r->caller, "file.mkdir",
                                 json_pack("{s:s}", "path", f.path));
    } else {
        rc = -1;
    }
    json_decref(e);
    fs_answer_entry(r, &f, rc, f.path, true);
}

void e2b_fs_remove(brig_req *r)
{
    fs_call f;
    if (fs_open(r, &f, "path") < 0)
        return;
    int rc = brig_agentc_remove(f.c.fd, f.path, true, &f.c.err);
    if (rc == 0)
        brig_timeline_record(r->d, f.c.sb, &r->caller, "file.delete",
                             json_pack("{s:s, s:b}", "path", f.path, "recursive", 1));
    api_call_answer(r, &f.c, rc, 200, rc < 0 ? NULL : json_object());
    brig_redactor_free(f.red);
    free(f.path);
    json_decref(f.m);
}

void e2b_fs_move(brig_req *r)
{
    fs_call f;
    if (fs_open(r, &f, "source") < 0)
        return;
    brig_error *err = NULL;
    char *to = e2b_abs_path(r, json_string_value(json_object_get(f.m, "destination")), &err);
    int rc = to ? brig_agentc_move(f.c.fd, f.path, to, &f.c.err) : -1;
    if (to == NULL)
        f.c.err = err;
    else if (rc == 0)
        brig_timeline_record(r->d, f.c.sb, &r->caller, "file.move",
                             json_pack("{s:s, s:s}", "from", f.path, "to", to));
    fs_answer_entry(r, &f, rc, to ? to : f.path, true);
    free(to);
}

/* Appends the entries of dir, and of its directories down to depth levels, to out; each
 * listing on a connection of its own (*used: f's is taken). */
static int list_into(brig_req *r, fs_call *f, const char *dir, int depth, json_t *out, bool *used)
{
    json_t *entries = NULL, *e;
    if ((*used && fs_next(r, f) < 0) || brig_agentc_list_dir(f->c.fd, dir, &entries, &f->c.err) < 0)
        return -1;
    *used = true;
    size_t i;
    int rc = 0;
    json_array_foreach(entries, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        char *path = brig_asprintf("%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
        json_t *info = entry_info(e, path);
        bool is_dir = info && strcmp(json_string_value(json_object_get(info, "type")),
                                     "FILE_TYPE_DIRECTORY") == 0;
        if (info)
            json_array_append_new(out, info);
        if (is_dir && depth > 1 && rc == 0)
            rc = list_into(r, f, path, depth - 1, out, used);
        free(path);
    }
    json_decref(entries);
    return rc;
}

void e2b_fs_list_dir(brig_req *r)
{
    fs_call f;
    if (fs_open(r, &f, "path") < 0)
        return;
    json_t *d = json_object_get(f.m, "depth");
    json_int_t depth = d ? json_integer_value(d) : 1;
    json_t *entries = json_array(), *out = NULL;
    int rc;
    if ((d && !json_is_integer(d)) || depth < 1 || depth > LIST_DEPTH_MAX)
        rc = brig_error_set(&f.c.err, BRIG_E_INVALID, 0, "'depth' must be in [1, %d]",
                            LIST_DEPTH_MAX);
    else
        rc = list_into(r, &f, f.path, (int)depth, entries, &(bool){false});
    if (rc == 0) {
        out = json_pack("{s:O}", "entries", entries);
        brig_redact_json(f.red, out);
    }
    json_decref(entries);
    api_call_answer(r, &f.c, rc, 200, out);
    brig_redactor_free(f.red);
    free(f.path);
    json_decref(f.m);
}

/* ---- /files ------------------------------------------------------------------------------- */

void e2b_files_get(brig_req *r)
{
    brig_error *err = NULL;
    char *path = e2b_abs_path(r, brig_http_query(r, "path"), &err);
    if (path == NULL) {
        brig_http_error(r, err);
        return;
    }
    api_file_download(r, path);
    free(path);
}

/* An upload: a raw body to ?path, or multipart parts, each to its own file. */
typedef struct e2b_upload {
    brig_sandbox *sb;
    int fd;                       /* the agent connection of the file being written, or -1 */
    char *path;                   /* that file */
    struct MHD_PostProcessor *pp; /* multipart; NULL: a raw body */
    z_stream *z;                  /* a gzip body's inflater; NULL: not compressed */
    bool z_end;                   /* the gzip stream ended (its trailer checked) */
    char *part;                   /* the current part's file name */
    uint64_t part_bytes;          /* of it, received */
    json_t *written;              /* [{"name","type","path"}] */
    brig_error *err;              /* the first failure; the rest of the body is dropped */
    brigd *d;
    brig_req *r;
} e2b_upload;

static void file_end(e2b_upload *u)
{
    if (u->fd < 0)
        return;
    int64_t size = 0;
    if (u->err == NULL && brig_agentc_write_end(u->fd, &size, &u->err) == 0 &&
        give_to_user(u->r, u->sb, u->path, &u->err) == 0) {
        brig_timeline_record(u->d, u->sb, &u->r->caller, "file.write",
                             json_pack("{s:s, s:I}", "path", u->path, "size", (json_int_t)size));
        const char *slash = strrchr(u->path, '/');
        json_array_append_new(u->written, json_pack("{s:s, s:s, s:s}", "name", slash + 1, "type",
                                                    "file", "path", u->path));
    }
    close(u->fd);
    u->fd = -1;
}

/* Starts writing the file dest (its directory made first). */
static void file_begin(e2b_upload *u, const char *dest)
{
    file_end(u);
    free(u->path);
    u->path = e2b_abs_path(u->r, dest, &u->err);
    if (u->path == NULL)
        return;
    u->fd = brig_sandbox_connect(u->d, u->sb, &u->err);
    if (u->fd < 0)
        return;
    brig_agentc_set_timeout(u->fd, API_CALL_MS);
    char *dir = brig_xstrdup(u->path);
    *strrchr(dir, '/') = '\0';
    brig_error *ignored = NULL; /* it may exist: the write says what is wrong */
    if (*dir)
        brig_agentc_mkdir(u->fd, dir, 0755, true, &ignored);
    brig_error_clear(&ignored);
    free(dir);
    close(u->fd);
    u->fd = brig_sandbox_connect(u->d, u->sb, &u->err);
    if (u->fd >= 0 && brig_agentc_write_begin(u->fd, u->path, -1, &u->err) < 0) {
        close(u->fd);
        u->fd = -1;
    }
}

static void file_data(e2b_upload *u, const char *data, size_t n)
{
    if (u->err == NULL && u->fd >= 0 && n)
        brig_agentc_write_chunk(u->fd, data, n, &u->err);
}

/* A gzip body's next bytes, inflated into the file (several gzip members follow on). */
static void gzip_data(e2b_upload *u, const char *data, size_t n)
{
    unsigned char out[64 * 1024];
    u->z->next_in = (unsigned char *)data;
    u->z->avail_in = (uInt)n;
    while (u->err == NULL && u->z->avail_in > 0) {
        if (u->z_end) {
            inflateReset(u->z);
            u->z_end = false;
        }
        u->z->next_out = out;
        u->z->avail_out = sizeof(out);
        int rc = inflate(u->z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
            brig_error_set(&u->err, BRIG_E_INVALID, 0, "the gzip body is not valid: %s",
                           u->z->msg ? u->z->msg : "inflate failed");
            return;
        }
        file_data(u, (const char *)out, sizeof(out) - u->z->avail_out);
        u->z_end = rc == Z_STREAM_END;
        if (rc == Z_BUF_ERROR && u->z->avail_out > 0)
            break;
    }
}

/* Content-Encoding: none, or gzip for a raw body (an inflater made); otherwise refused. */
static void encoding(e2b_upload *u, const char *enc, bool multipart)
{
    if (enc == NULL || *enc == '\0' || strcasecmp(enc, "identity") == 0)
        return;
    if (strcasecmp(enc, "gzip") != 0 || multipart) {
        brig_error_set(&u->err, BRIG_E_INVALID, 0,
                       "Content-Encoding '%.32s'%s is not supported by brig's envd: gzip, on a "
                       "raw (application/octet-stream) upload, is",
                       enc, multipart ? " on a multipart upload" : "");
        return;
    }
    u->z = brig_xcalloc(1, sizeof(*u->z));
    if (inflateInit2(u->z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip's header and trailer */
        free(u->z);
        u->z = NULL;
        brig_error_set(&u->err, BRIG_E_INTERNAL, 0, "no memory for an inflater");
    }
}

static enum MHD_Result part_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size)
{
    (void)kind, (void)content_type, (void)transfer_encoding;
    e2b_upload *u = cls;
    if (u->err || strcmp(key, "file") != 0)
        return MHD_YES;
    /* The library may announce a part before its first bytes, both at offset 0. */
    if (off == 0 &&
        (u->part == NULL || u->part_bytes > 0 || !filename || strcmp(u->part, filename) != 0)) {
        const char *q = brig_http_query(u->r, "path");
        free(u->part);
        u->part = brig_xstrdup(filename ? filename : "");
        u->part_bytes = 0;
        file_begin(u, q && *q ? q : filename);
    }
    u->part_bytes += size;
    file_data(u, data, size);
    return MHD_YES;
}

static void upload_free(brig_req *r)
{
    e2b_upload *u = r->stream;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    if (u->z) {
        inflateEnd(u->z);
        free(u->z);
    }
    if (u->fd >= 0)
        close(u->fd);
    if (u->sb)
        brig_sandbox_put(u->d, u->sb);
    json_decref(u->written);
    brig_error_clear(&u->err);
    free(u->path);
    free(u->part);
    free(u);
    r->stream = NULL;
}

void e2b_files_post_begin(brig_req *r)
{
    e2b_envd_begin(r);
    if (r->resp)
        return;
    e2b_upload *u = brig_xcalloc(1, sizeof(*u));
    u->fd = -1;
    u->d = r->d;
    u->r = r;
    u->written = json_array();
    r->stream = u;
    r->stream_free = upload_free;
    const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
    if (brig_sandbox_get(r->d, &r->caller, r->params[0], &u->sb, &u->err) < 0)
        return;
    bool multipart = ct && strncasecmp(ct, "multipart/form-data", 19) == 0;
    encoding(u, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding"),
             multipart);
    if (u->err) {
        return;
    } else if (multipart) {
        u->pp = MHD_create_post_processor(r->conn, 64 * 1024, part_cb, u);
        if (u->pp == NULL)
            brig_error_set(&u->err, BRIG_E_INVALID, 0, "a multipart body without its boundary");
    } else {
        file_begin(u, brig_http_query(r, "path"));
    }
}

void e2b_files_post_body(brig_req *r, const char *data, size_t n)
{
    e2b_upload *u = r->stream;
    if (u == NULL || u->err)
        return;
    if (u->z)
        gzip_data(u, data, n);
    else if (u->pp == NULL)
        file_data(u, data, n);
    else if (MHD_post_process(u->pp, data, n) != MHD_YES && u->err == NULL)
        brig_error_set(&u->err, BRIG_E_INVALID, 0, "the multipart body is malformed");
}

void e2b_files_post(brig_req *r)
{
    e2b_upload *u = r->stream;
    if (u->pp) {
        MHD_destroy_post_processor(u->pp); /* the last part's rest */
        u->pp = NULL;
    }
    if (u->z && !u->z_end && u->err == NULL)
        brig_error_set(&u->err, BRIG_E_INVALID, 0, "the gzip body is truncated");
    file_end(u);
    if (u->err) {
        brig_http_error(r, u->err);
        u->err = NULL;
    } else if (json_array_size(u->written) == 0) {
        e2b_fail(r, 400, "the upload held no file");
    } else {
        brig_http_json(r, 200, json_incref(u->written));
    }
}
