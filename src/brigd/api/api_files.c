/*
 * api_files.c - files: streamed uploads and downloads (single files, tar
 * archives, and a process's stdin, which is an upload too) and the
 * file-system operations (list, stat, remove, move, mkdir).
 *
 * Paths: a query argument is percent-decoded into raw bytes, so any name can be
 * addressed; one that is not UTF-8 travels to the agent as "path_b64"
 * (agentproto.c encodes it), and entries with such names carry "name_b64".
 *
 * What comes out of a sandbox with secrets passes its redactor (redact.h):
 * listings and stat like output, downloads (files and tar streams) with masks
 * of the match's own length, so sizes, Content-Length and tar headers stay
 * right; the answer says so in "X-Brig-Redaction: mask" (docs/secrets.md).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>
#include <unistd.h>

#include "handlers.h"
#include "log.h"
#include "vault/redact.h"

/* ---- paths and modes -------------------------------------------------------- */

/* A query argument that must be an absolute path without NUL bytes. */
static const char *query_path(brig_req *r, const char *name, brig_error **err)
{
    const char *path = NULL;
    size_t len = 0;
    if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name), &path,
                                      &len) != MHD_YES ||
        path == NULL || len == 0) {
        brig_error_set(err, BRIG_E_INVALID, 0, "the '%s' query argument is required", name);
        return NULL;
    }
    if (strlen(path) != len || path[0] != '/' || len >= PATH_MAX) {
        brig_error_set(err, BRIG_E_INVALID, 0, "'%s' must be an absolute path", name);
        return NULL;
    }
    return path;
}

static int body_path(json_t *body, const char *name, const char **out, brig_error **err)
{
    json_t *v = json_object_get(body, name);
    const char *p = json_string_value(v);
    if (p == NULL || p[0] != '/' || json_string_length(v) >= PATH_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0, "'%s' must be an absolute path", name);
    *out = p;
    return 0;
}

/* Octal permission bits: "0755", "755" or (JSON) an integer. */
static int parse_mode(json_t *v, const char *s, int *mode)
{
    if (v && json_is_integer(v)) {
        json_int_t m = json_integer_value(v);
        if (m < 0 || m > 07777)
            return -1;
        *mode = (int)m;
        return 0;
    }
    if (v)
        s = json_string_value(v);
    if (s == NULL || *s == '\0')
        return -1;
    char *end = NULL;
    errno = 0;
    long m = strtol(s, &end, 8);
    if (errno || *end || m < 0 || m > 07777)
        return -1;
    *mode = (int)m;
    return 0;
}

static bool query_flag(brig_req *r, const char *name)
{
    const char *v = brig_http_query(r, name);
    return v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

/* An agent entry as the API shows it: mode as octal text, mtime as ISO 8601. */
static json_t *entry_json(json_t *e)
{
    json_t *o = json_deep_copy(e);
    char mode[16];
    snprintf(mode, sizeof(mode), "%04o",
             (int)(json_integer_value(json_object_get(e, "mode")) & 07777));
    json_object_set_new(o, "mode", json_string(mode));
    json_object_set_new(o, "mtime", api_time(json_object_get(e, "mtime")));
    return o;
}

/* Opens the agent of the request's sandbox and its redactor (*red: NULL when it
 * has no secrets); replies with the error itself on failure. */
static int open_redacted(brig_req *r, brig_sandbox **sb, brig_redactor **red)
{
    int fd = api_open_agent(r, sb);
    if (fd < 0)
        return -1;
    brig_error *err = NULL;
    if (brig_sandbox_redactor(r->d, *sb, red, &err) < 0) {
        /* What could not be redacted does not go out. */
        close(fd);
        brig_sandbox_put(r->d, *sb);
        brig_http_error(r, err);
        return -1;
    }
    return fd;
}

static void stat_path(brig_req *r, const char *path)
{
    brig_sandbox *sb = NULL;
    brig_redactor *red = NULL;
    int fd = open_redacted(r, &sb, &red);
    if (fd < 0)
        return;
    brig_agentc_set_timeout(fd, API_CALL_MS);
    json_t *entry = NULL;
    brig_error *err = NULL;
    int rc = brig_agentc_stat(fd, path, &entry, &err);
    close(fd);
    brig_sandbox_put(r->d, sb);
    if (rc < 0) {
        brig_http_error(r, err);
    } else {
        json_t *out = entry_json(entry);
        brig_redact_json(red, out);
        brig_http_json(r, 200, out);
    }
    json_decref(entry);
    brig_redactor_free(red);
}

/* ---- uploads ------------------------------------------------------------------ */

enum upload_kind { UP_FILE, UP_TAR, UP_STDIN };

typedef struct upload {
    brigd *d;
    brig_sandbox *sb;
    int fd;
    enum upload_kind kind;
    int64_t bytes, limit;
    brig_error *err;              /* the first failure; the rest of the body is discarded */
    crypto_hash_sha256_state sha; /* of the bytes written, for the timeline */
    char *path;                   /* the file or directory (NULL: stdin) */
    int pid;                      /* stdin: the process */
} upload;

/* Hex SHA-256 of a finished hash, as JSON. */
static json_t *sha_json(crypto_hash_sha256_state *sha)
{
    uint8_t bin[crypto_hash_sha256_BYTES];
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    crypto_hash_sha256_final(sha, bin);
    sodium_bin2hex(hex, sizeof(hex), bin, sizeof(bin));
    return json_string(hex);
}

static void upload_free(brig_req *r)
{
    upload *u = r->stream;
    if (u == NULL)
        return;
    if (u->fd >= 0)
        close(u->fd); /* before the end of the data: the agent drops the partial file */
    brig_sandbox_put(u->d, u->sb);
    brig_error_clear(&u->err);
    free(u->path);
    free(u);
    r->stream = NULL;
}

/* Opens the upload: size check, sandbox, agent, then the request: the file at path (mode < 0:
 * the default), the directory to extract into, or the process pid's stdin. */
static void upload_open(brig_req *r, enum upload_kind kind, const char *path, int mode, int pid)
{
    int64_t limit = kind == UP_STDIN ? 0 : r->d->cfg.max_file_bytes;
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    if (limit && cl && strtoll(cl, NULL, 10) > limit) {
        brig_http_fail(r, BRIG_E_TOO_LARGE, "upload of %s bytes exceeds the limit of %lld bytes",
                       cl, (long long)limit);
        return;
    }
    brig_sandbox *sb = NULL;
    int fd = api_open_agent(r, &sb);
    if (fd < 0)
        return;
    upload *u = brig_xcalloc(1, sizeof(*u));
    u->d = r->d;
    u->sb = sb;
    u->fd = fd;
    u->kind = kind;
    u->limit = limit;
    u->path = path ? brig_xstrdup(path) : NULL;
    u->pid = pid;
    crypto_hash_sha256_init(&u->sha);
    r->stream = u;
    r->stream_free = upload_free;
    if (kind == UP_FILE)
        brig_agentc_write_begin(fd, path, mode, &u->err);
    else if (kind == UP_TAR)
        brig_agentc_tar_extract_begin(fd, path, &u->err);
    else
        brig_agentc_proc_stdin_begin(fd, pid, &u->err);
}

void api_upload_body(brig_req *r, const char *data, size_t n)
{
    upload *u = r->stream;
    if (u->err)
        return;
    u->bytes += (int64_t)n;
    if (u->limit && u->bytes > u->limit) {
        brig_error_set(&u->err, BRIG_E_TOO_LARGE, 0, "upload exceeds the limit of %lld bytes",
                       (long long)u->limit);
        close(u->fd); /* the agent removes the partial file */
        u->fd = -1;
        return;
    }
    crypto_hash_sha256_update(&u->sha, (const uint8_t *)data, n);
    brig_agentc_write_chunk(u->fd, data, n, &u->err);
}

/* The timeline's event of an upload that succeeded. */
static void upload_recorded(brig_req *r, upload *u, int64_t n)
{
    json_t *ev;
    if (u->kind == UP_STDIN)
        ev = json_pack("{s:i, s:I}", "pid", u->pid, "bytes", (json_int_t)n);
    else
        ev = json_pack("{s:s, s:I, s:o}", "path", u->path, "size", (json_int_t)u->bytes, "sha256",
                       sha_json(&u->sha));
    static const char *const kinds[] = {"file.write", "tar.write", "process.stdin"};
    brig_timeline_record(r->d, u->sb, &r->caller, kinds[u->kind], ev);
}

void api_upload_end(brig_req *r)
{
    upload *u = r->stream;
    brig_error *err = NULL;
    int64_t n = 0;
    if (u->err) {
        err = u->err;
        u->err = NULL;
    } else if (brig_agentc_write_end(u->fd, &n, &err) == 0) {
        upload_recorded(r, u, n);
        if (u->kind == UP_STDIN)
            brig_http_json(r, 200, json_pack("{s:I}", "bytes", (json_int_t)n));
        else
            brig_http_empty(r, 204);
        return;
    }
    brig_http_error(r, err);
}

void api_files_put_begin(brig_req *r)
{
    brig_error *err = NULL;
    const char *path = query_path(r, "path", &err);
    if (path == NULL) {
        brig_http_error(r, err);
        return;
    }
    const char *m = brig_http_query(r, "mode");
    int mode = -1;
    if (m && parse_mode(NULL, m, &mode) < 0) {
        brig_http_fail(r, BRIG_E_INVALID, "'mode' must be octal permission bits (e.g. 0755)");
        return;
    }
    upload_open(r, UP_FILE, path, mode, 0);
}

void api_tar_put_begin(brig_req *r)
{
    brig_error *err = NULL;
    const char *path = query_path(r, "path", &err);
    if (path == NULL) {
        brig_http_error(r, err);
        return;
    }
    upload_open(r, UP_TAR, path, -1, 0);
}

void api_proc_stdin_begin(brig_req *r)
{
    char *end = NULL;
    long pid = strtol(r->params[1], &end, 10);
    if (end == r->params[1] || *end || pid < 1 || pid > 0x3fffffff) {
        brig_http_fail(r, BRIG_E_NOT_FOUND, "no process '%.20s'", r->params[1]);
        return;
    }
    upload_open(r, UP_STDIN, NULL, -1, (int)pid);
}

/* ---- downloads ------------------------------------------------------------------ */

typedef struct download {
    brigd *d;
    brig_sandbox *sb;
    int fd;
    bool tar;           /* size unknown; a final ok/error message follows the data */
    bool ended;         /* the agent's data is all in (out holds the rest) */
    brig_frame frame;   /* the current DATA frame */
    brig_redactor *red; /* the sandbox's secrets (a reference), or NULL */
    brig_redact_stream rs;
    brig_buf out; /* redacted bytes ready to send: out.data[off .. len) */
    size_t off;
    int64_t size, got; /* files: the announced size; bytes received */
    /* the timeline's "file.read" / "tar.read": what was sent, hashed */
    brig_caller caller;
    char *path;
    crypto_hash_sha256_state sha;
    int64_t sent;
} download;

static int download_more(download *dl);

static void download_free(void *cls)
{
    download *dl = cls;
    if (!dl->ended && !dl->tar && dl->size == 0 && dl->fd >= 0)
        download_more(dl); /* an empty file: the server never asked for its end */
    if (dl->fd >= 0)
        close(dl->fd);
    brig_sandbox_put(dl->d, dl->sb);
    brig_frame_dispose(&dl->frame);
    brig_redact_dispose(&dl->rs);
    brig_redactor_free(dl->red);
    brig_buf_dispose(&dl->out);
    free(dl->path);
    free(dl);
}

/* All of it is read and redacted (dl->out holds the last of it): the timeline's event. */
static void download_recorded(download *dl)
{
    json_t *ev = json_pack("{s:s, s:I, s:o}", "path", dl->path, "size", (json_int_t)dl->sent,
                           "sha256", sha_json(&dl->sha));
    if (dl->red)
        json_object_set_new(ev, "redacted", json_true());
    brig_timeline_record(dl->d, dl->sb, &dl->caller, dl->tar ? "tar.read" : "file.read", ev);
}

/* Appends what was redacted to dl->out, hashed as sent. */
static void download_hash(download *dl, size_t from)
{
    crypto_hash_sha256_update(&dl->sha, (const uint8_t *)dl->out.data + from, dl->out.len - from);
    dl->sent += (int64_t)(dl->out.len - from);
}

static int grew(const download *dl)
{
    brig_warn("download from %s: the file grew while being read", brig_sandbox_id(dl->sb));
    return -1;
}

/* Reads the next piece from the agent into dl->out (redacted; masks keep the
 * length).  1: data or the end was taken in, -1: failed (logged). */
static int download_more(download *dl)
{
    brig_error *err = NULL;
    int r = brig_agentc_read_chunk(dl->fd, &dl->frame, &err);
    if (r > 0) {
        dl->got += dl->frame.hdr.len;
        if (!dl->tar && dl->got > dl->size)
            return grew(dl);
        size_t from = dl->out.len;
        brig_redact_feed(&dl->rs, dl->frame.payload, dl->frame.hdr.len, &dl->out);
        download_hash(dl, from);
        if (dl->tar || dl->got < dl->size)
            return 1;
        /* The announced size is in: the server asks for nothing more, so the end must
         * be read now, or the read would never be recorded. */
        r = brig_agentc_read_chunk(dl->fd, &dl->frame, &err);
        if (r > 0)
            return grew(dl);
    }
    if (r == 0 && dl->tar) {
        /* tar ran to its end: did it succeed? */
        r = brig_agentc_tar_create_end(dl->fd, &dl->frame, &err) == 0 ? 1 : -1;
    } else if (r == 0) {
        r = dl->got == dl->size ? 1 : -1;
    }
    if (r < 0) {
        brig_warn("download from %s: %s", brig_sandbox_id(dl->sb),
                  err ? err->msg : "file changed size while being read");
        brig_error_clear(&err);
        return -1;
    }
    size_t from = dl->out.len;
    brig_redact_flush(&dl->rs, &dl->out);
    download_hash(dl, from);
    dl->ended = true;
    download_recorded(dl);
    return 1;
}

static ssize_t download_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    download *dl = cls;
    while (dl->off >= dl->out.len) {
        if (dl->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        dl->out.len = dl->off = 0;
        if (download_more(dl) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = dl->out.len - dl->off;
    if (n > max)
        n = max;
    memcpy(buf, dl->out.data + dl->off, n);
    dl->off += n;
    return (ssize_t)n;
}

static download *download_open(brig_req *r, const char *path)
{
    brig_sandbox *sb = NULL;
    brig_redactor *red = NULL;
    int fd = open_redacted(r, &sb, &red);
    if (fd < 0)
        return NULL;
    download *dl = brig_xcalloc(1, sizeof(*dl));
    dl->d = r->d;
    dl->sb = sb;
    dl->fd = fd;
    dl->red = red;
    brig_redact_init_mask(&dl->rs, red);
    dl->caller = r->caller;
    dl->path = brig_xstrdup(path);
    crypto_hash_sha256_init(&dl->sha);
    return dl;
}

static struct MHD_Response *download_response(download *dl, uint64_t size, const char *type)
{
    struct MHD_Response *resp =
        MHD_create_response_from_callback(size, 64 * 1024, download_reader, dl, download_free);
    MHD_add_response_header(resp, "Content-Type", type);
    if (dl->red)
        MHD_add_response_header(resp, "X-Brig-Redaction", "mask");
    return resp;
}

static void list_dir(brig_req *r, const char *path)
{
    brig_sandbox *sb = NULL;
    brig_redactor *red = NULL;
    int fd = open_redacted(r, &sb, &red);
    if (fd < 0)
        return;
    brig_error *err = NULL;
    json_t *entries = NULL;
    brig_agentc_set_timeout(fd, 60000); /* a big directory */
    int rc = brig_agentc_list_dir(fd, path, &entries, &err);
    close(fd);
    brig_sandbox_put(r->d, sb);
    if (rc < 0) {
        brig_http_error(r, err);
    } else {
        json_t *out = json_array();
        for (size_t i = 0; i < json_array_size(entries); i++)
            json_array_append_new(out, entry_json(json_array_get(entries, i)));
        brig_redact_json(red, out); /* names are the sandbox's text too */
        brig_http_json(r, 200, json_pack("{s:o}", "entries", out));
    }
    json_decref(entries);
    brig_redactor_free(red);
}

void api_files_get(brig_req *r)
{
    brig_error *err = NULL;
    const char *path = query_path(r, "path", &err);
    if (path == NULL) {
        brig_http_error(r, err);
        return;
    }
    if (query_flag(r, "list")) {
        list_dir(r, path);
        return;
    }
    if (query_flag(r, "stat")) {
        stat_path(r, path);
        return;
    }
    api_file_download(r, path);
}

void api_file_download(brig_req *r, const char *path)
{
    brig_error *err = NULL;
    download *dl = download_open(r, path);
    int mode = 0;
    if (dl == NULL)
        return;
    if (brig_agentc_read_begin(dl->fd, path, &dl->size, &mode, &err) < 0) {
        download_free(dl);
        brig_http_error(r, err);
        return;
    }
    /* Masks keep the length: the announced size stays right. */
    struct MHD_Response *resp =
        download_response(dl, (uint64_t)dl->size, "application/octet-stream");
    char m[16];
    snprintf(m, sizeof(m), "%04o", mode & 07777);
    MHD_add_response_header(resp, "X-Brig-File-Mode", m);
    brig_http_response(r, 200, resp);
}

void api_tar_get(brig_req *r)
{
    brig_error *err = NULL;
    const char *path = query_path(r, "path", &err);
    if (path == NULL) {
        brig_http_error(r, err);
        return;
    }
    download *dl = download_open(r, path);
    if (dl == NULL)
        return;
    dl->tar = true;
    if (brig_agentc_tar_create_begin(dl->fd, path, &err) < 0) {
        download_free(dl);
        brig_http_error(r, err);
        return;
    }
    brig_http_response(r, 200, download_response(dl, MHD_SIZE_UNKNOWN, "application/x-tar"));
}

/* ---- file-system operations ------------------------------------------------------ */

void api_files_delete(brig_req *r)
{
    brig_error *err = NULL;
    const char *path = query_path(r, "path", &err);
    if (path == NULL) {
        brig_http_error(r, err);
        return;
    }
    api_call c;
    if (api_call_open(r, &c, 300000 /* a big tree */) < 0)
        return;
    bool recursive = query_flag(r, "recursive");
    int rc = brig_agentc_remove(c.fd, path, recursive, &c.err);
    if (rc == 0)
        brig_timeline_record(r->d, c.sb, &r->caller, "file.delete",
                             json_pack("{s:s, s:b}", "path", path, "recursive", recursive));
    api_call_answer(r, &c, rc, 204, NULL);
}

void api_files_move(brig_req *r)
{
    static const char *const fields[] = {"from", "to", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    const char *from, *to;
    brig_error *err = NULL;
    if (body_path(body, "from", &from, &err) < 0 || body_path(body, "to", &to, &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    api_call c;
    if (api_call_open(r, &c, 60000) == 0) {
        int rc = brig_agentc_move(c.fd, from, to, &c.err);
        if (rc == 0)
            brig_timeline_record(r->d, c.sb, &r->caller, "file.move",
                                 json_pack("{s:s, s:s}", "from", from, "to", to));
        api_call_answer(r, &c, rc, 204, NULL);
    }
    json_decref(body);
}

void api_files_mkdir(brig_req *r)
{
    static const char *const fields[] = {"path", "mode", "parents", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    const char *path;
    brig_error *err = NULL;
    int mode = 0755;
    json_t *m = json_object_get(body, "mode"), *parents = json_object_get(body, "parents");
    if (body_path(body, "path", &path, &err) < 0 ||
        (m && parse_mode(m, NULL, &mode) < 0 &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'mode' must be octal permission bits") < 0) ||
        (parents && !json_is_boolean(parents) &&
         brig_error_set(&err, BRIG_E_INVALID, 0, "'parents' must be true or false") < 0)) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) == 0) {
        int rc = brig_agentc_mkdir(c.fd, path, mode, json_is_true(parents), &c.err);
        if (rc == 0)
            brig_timeline_record(r->d, c.sb, &r->caller, "file.mkdir",
                                 json_pack("{s:s}", "path", path));
        api_call_answer(r, &c, rc, 201, rc < 0 ? NULL : json_object());
    }
    json_decref(body);
}
