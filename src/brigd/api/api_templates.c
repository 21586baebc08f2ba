/*
 * api_templates.c - the template routes: the list, a build started in the background
 * (202 with its record; sandbox/build.h runs it), and a build's record or, with
 * ?follow=1, its output as NDJSON until it ends.  docs/api.md describes them.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "core/format.h"
#include "handlers.h"
#include "log.h"
#include "sandbox/build.h"
#include "sandbox/template.h"
#include "sandbox/usertpl.h"
#include "stream.h"

#define TAIL_MAX      (16u << 10) /* output bytes in a record's log_tail */
#define LINE_MAX_SEND (8u << 10)  /* a longer line is sent in pieces */
#define READ_MAX      (64u << 10) /* output bytes taken from the build at a time */
#define HANGUP_MS     1000        /* how often a waiting follower looks for its client */

void api_template_list(brig_req *r)
{
    /* the built-in ones, then the caller's account's (usertpl.h) */
    brig_http_json(r, 200,
                   json_pack("{s:o}", "templates", brig_utpl_list(r->d, r->caller.account_id)));
}

/* Output as a JSON string: bytes that are not UTF-8 become U+FFFD. */
static json_t *text_json(const char *p, size_t n)
{
    if (brig_utf8_valid(p, n))
        return json_stringn(p, n);
    char *s = brig_utf8_display(p, n);
    json_t *j = json_string(s);
    free(s);
    return j;
}

static json_t *time_json(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    char buf[32];
    brig_format_time(ms, buf);
    return json_string(buf);
}

json_t *api_build_json(const brig_build_info *in, bool with_tail)
{
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I}", "build_id", in->id, "template",
                  in->template, "key", in->key, "state", brig_build_state_name(in->state), "error",
                  in->error ? text_json(in->error, strlen(in->error)) : json_null(), "started_at",
                  time_json(in->started_ms), "ended_at", time_json(in->ended_ms), "log_bytes",
                  (json_int_t)in->log_bytes);
    if (with_tail)
        json_object_set_new(j, "log_tail",
                            text_json(in->tail.data ? in->tail.data : "", in->tail.len));
    if (in->account[0] == '\0')
        return j;
    /* a user's build: its sandbox, and once ended what POST /v1/templates answers */
    json_object_set_new(j, "sandbox_id", in->sandbox[0] ? json_string(in->sandbox) : json_null());
    if (in->state == BRIG_BUILD_RUNNING)
        return j;
    int status = in->state == BRIG_BUILD_SUCCEEDED ? 201
                 : in->result                      ? 422
                                                   : brig_error_http_status(in->error_kind);
    json_object_set_new(j, "status", json_integer(status));
    json_object_set_new(j, "result", in->result ? json_incref(in->result) : json_null());
    return j;
}

void api_reply_build(brig_req *r, unsigned status, brig_build *b)
{
    brig_build_info info;
    brig_build_info_get(b, TAIL_MAX, &info);
    brig_http_json(r, status, api_build_json(&info, true));
    if (status == 202) {
        _cleanup_free_ char *loc =
            brig_asprintf("/v1/templates/%s/builds/%s", info.template, info.id);
        MHD_add_response_header(r->resp, "Location", loc);
    }
    brig_build_info_dispose(&info);
}

void api_template_build(brig_req *r)
{
    brig_build *b = NULL;
    bool started = false;
    brig_error *err = NULL;
    if (brig_build_start(r->d, r->params[0], &b, &started, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    api_reply_build(r, 202, b);
    brig_build_put(b);
}

/* ---- following a build's output ------------------------------------------------- */

typedef struct follow {
    brig_build *b; /* a reference */
    uint64_t pos;  /* output bytes taken so far */
    brig_buf part; /* the start of a line whose end has not come yet */
    brig_buf out;  /* NDJSON ready to send */
    size_t off;    /* of out, already sent */
    int client_fd; /* the HTTP client's socket, to notice it hang up */
    bool done;     /* the end event is in out */
} follow;

static void emit_log(follow *f, const char *p, size_t n)
{
    if (n > 0)
        brig_ndjson_line(&f->out, json_pack("{s:s, s:o}", "type", "log", "data", text_json(p, n)));
}

/* Sends the whole lines of part and keeps the rest; a line longer than LINE_MAX_SEND
 * goes in pieces (cut between UTF-8 characters), and at the end everything goes. */
static void emit_lines(follow *f, bool all)
{
    if (f->part.len == 0)
        return;
    size_t start = 0;
    for (;;) {
        const char *p = f->part.data + start;
        size_t left = f->part.len - start;
        const char *nl = left ? memchr(p, '\n', left) : NULL;
        size_t n = nl ? (size_t)(nl + 1 - p) : 0;
        if (n == 0 && left >= LINE_MAX_SEND)
            n = brig_utf8_cut((const uint8_t *)p, LINE_MAX_SEND);
        if (n == 0 && all)
            n = left;
        if (n == 0)
            break;
        emit_log(f, p, n);
        start += n;
    }
    memmove(f->part.data, f->part.data + start, f->part.len - start);
    f->part.len -= start;
}

static bool client_gone(int fd)
{
    struct pollfd p = {fd, POLLRDHUP, 0};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Fills f->out with the next events; false when the client went away. */
static bool follow_step(follow *f)
{
    uint64_t dropped = 0;
    size_t had = f->part.len;
    bool ended = brig_build_read(f->b, &f->pos, READ_MAX, HANGUP_MS, &f->part, &dropped);
    if (dropped > 0) {
        /* what was held of a line is from before the gap: it goes first */
        brig_buf rest = {0};
        if (f->part.len > had) {
            brig_buf_append(&rest, f->part.data + had, f->part.len - had);
            f->part.len = had;
        }
        emit_lines(f, true);
        brig_ndjson_line(&f->out,
                         json_pack("{s:s, s:I}", "type", "dropped", "bytes", (json_int_t)dropped));
        if (rest.len > 0)
            brig_buf_append(&f->part, rest.data, rest.len);
        brig_buf_dispose(&rest);
    }
    emit_lines(f, ended);
    if (ended) {
        brig_build_info info;
        brig_build_info_get(f->b, 0, &info);
        json_t *end = api_build_json(&info, false);
        json_object_set_new(end, "type", json_string("end"));
        brig_ndjson_line(&f->out, end);
        brig_build_info_dispose(&info);
        f->done = true;
    }
    return f->out.len > 0 || !client_gone(f->client_fd);
}

static ssize_t follow_reader(void *cls, uint64_t at, char *buf, size_t max)
{
    (void)at;
    follow *f = cls;
    while (f->off >= f->out.len) {
        if (f->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        f->out.len = 0;
        f->off = 0;
        if (!follow_step(f))
            return MHD_CONTENT_READER_END_WITH_ERROR; /* nobody listens any more */
    }
    size_t n = f->out.len - f->off < max ? f->out.len - f->off : max;
    memcpy(buf, f->out.data + f->off, n);
    f->off += n;
    return (ssize_t)n;
}

static void follow_free(void *cls)
{
    follow *f = cls;
    brig_build_put(f->b);
    brig_buf_dispose(&f->part);
    brig_buf_dispose(&f->out);
    free(f);
}

void api_template_build_get(brig_req *r)
{
    brig_build *b = NULL;
    brig_error *err = NULL;
    const char *name = r->params[0];
    char n[40], t[32], ref[80];
    if (r->caller.account_id[0] && brig_utpl_ref(name, n, t) == 0) { /* a user's: name:tag */
        snprintf(ref, sizeof(ref), "%s:%s", n, t);
        name = ref;
    }
    if (brig_build_get(r->d, r->caller.account_id, name, r->params[1], &b, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    const char *v = brig_http_query(r, "follow");
    if (v == NULL || strcmp(v, "0") == 0 || strcmp(v, "false") == 0) {
        api_reply_build(r, 200, b);
        brig_build_put(b);
        return;
    }
    follow *f = brig_xcalloc(1, sizeof(*f));
    f->b = b;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    f->client_fd = ci ? ci->connect_fd : -1;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                  follow_reader, f, follow_free);
    MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
    brig_http_response(r, 200, resp);
    /* A builder may be silent for minutes (base: apt in the chroot), and MHD counts the
     * time our reader waits as idle time: no idle limit for this answer.  A client that
     * hangs up is noticed within HANGUP_MS; the next request resets the limit (http.c). */
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0);
}
