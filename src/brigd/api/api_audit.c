/*
 * api_audit.c - the audit timeline's routes (docs/audit.md): a sandbox's timeline, paged
 * or followed live (NDJSON), the account's (or, for the operator, everyone's) events as
 * JSON Lines, and the chains' verification.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "handlers.h"
#include "stream.h"

#define PAGE_DEFAULT   100
#define PAGE_MAX       1000
#define EXPORT_DEFAULT 10000
#define EXPORT_MAX     100000
#define FOLLOW_WAIT_MS 1000 /* a follower looks at its client this often */

static json_t *last_seq(json_t *events)
{
    size_t n = json_array_size(events);
    return n ? json_incref(json_object_get(json_array_get(events, n - 1), "seq")) : json_null();
}

/* ---- follow: new events as NDJSON lines ------------------------------------------------ */

typedef struct follow {
    brigd *d;
    brig_caller caller;
    char id[BRIG_ID_MAX];
    int client_fd;
    int64_t after; /* the sandbox's newest event sent */
    int64_t seen;  /* brigd's newest seq when we last looked */
    brig_buf line; /* lines ready to send: line.data[off .. len) */
    size_t off;
    bool done;
} follow;

static bool client_gone(follow *f)
{
    struct pollfd p = {f->client_fd, POLLRDHUP, 0};
    return f->client_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Reads the sandbox's next events into f->line; waits for new ones when there are none.
 * false: the stream ends (its sandbox ended and all is sent, shutdown, or a failure). */
static bool follow_more(follow *f)
{
    json_t *events = NULL;
    bool ended = false;
    brig_error *err = NULL;
    if (brig_timeline_read(f->d, &f->caller, f->id, f->after, PAGE_MAX, &events, &ended, &err) <
        0) {
        brig_error_clear(&err);
        return false;
    }
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) brig_ndjson_line(&f->line, json_incref(ev));
    if (json_array_size(events) > 0) {
        f->after = json_integer_value(json_object_get(json_array_get(events, i - 1), "seq"));
        json_decref(events);
        return true;
    }
    json_decref(events);
    if (ended || client_gone(f))
        return false;
    f->seen = brig_timeline_wait(f->d, f->seen, FOLLOW_WAIT_MS);
    return f->seen >= 0;
}

static ssize_t follow_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    follow *f = cls;
    while (f->off >= f->line.len) {
        if (f->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        f->line.len = f->off = 0;
        if (!follow_more(f))
            f->done = true;
    }
    size_t n = f->line.len - f->off;
    if (n > max)
        n = max;
    memcpy(buf, f->line.data + f->off, n);
    f->off += n;
    return (ssize_t)n;
}

static void follow_free(void *cls)
{
    follow *f = cls;
    brig_buf_dispose(&f->line);
    free(f);
}

static void timeline_follow(brig_req *r, int64_t after, json_t *first)
{
    follow *f = brig_xcalloc(1, sizeof(*f));
    f->d = r->d;
    f->caller = r->caller;
    snprintf(f->id, sizeof(f->id), "%.*s", (int)sizeof(f->id) - 1, r->params[0]);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    f->client_fd = ci ? ci->connect_fd : -1;
    f->after = after;
    size_t i;
    json_t *ev;
    json_array_foreach(first, i, ev) brig_ndjson_line(&f->line, json_incref(ev));
    if (json_array_size(first))
        f->after = json_integer_value(json_object_get(json_array_get(first, i - 1), "seq"));
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                  follow_reader, f, follow_free);
    MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
    brig_http_response(r, 200, resp);
}

/* ---- the routes --------------------------------------------------------------------------- */

void api_timeline(brig_req *r)
{
    int64_t after = api_query_int(r, "after", 0, INT64_MAX / 2);
    int64_t limit = api_query_int(r, "limit", PAGE_DEFAULT, PAGE_MAX);
    const char *fv = brig_http_query(r, "follow");
    bool follow = fv && strcmp(fv, "0") != 0 && strcmp(fv, "false") != 0;
    if (after < 0 || limit < 1) {
        brig_http_fail(r, BRIG_E_INVALID,
                       "'after' must be an event's seq and 'limit' an integer in 1..%d", PAGE_MAX);
        return;
    }
    json_t *events = NULL;
    bool ended = false;
    brig_error *err = NULL;
    if (brig_timeline_read(r->d, &r->caller, r->params[0], after, follow ? PAGE_MAX : limit,
                           &events, &ended, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    if (follow) {
        timeline_follow(r, after, events);
        json_decref(events);
        return;
    }
    json_t *next = json_array_size(events) == (size_t)limit ? last_seq(events) : json_null();
    brig_http_json(r, 200,
                   json_pack("{s:s, s:b, s:o, s:o}", "sandbox_id", r->params[0], "ended", ended,
                             "events", events, "next_after", next));
}

void api_audit_export(brig_req *r)
{
    int64_t after = api_query_int(r, "after", 0, INT64_MAX / 2);
    int64_t limit = api_query_int(r, "limit", EXPORT_DEFAULT, EXPORT_MAX);
    int64_t since = api_query_time(r, "since");
    if (after < 0 || limit < 1 || since < 0) {
        brig_http_fail(r, BRIG_E_INVALID,
                       "'since' must be a time (ISO 8601, or ms since the epoch), 'after' an "
                       "event's seq and 'limit' an integer in 1..%d",
                       EXPORT_MAX);
        return;
    }
    json_t *events = NULL;
    brig_error *err = NULL;
    if (brig_timeline_export(r->d, &r->caller, brig_http_query(r, "account"), since, after, limit,
                             &events, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    brig_buf out = {0};
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) brig_ndjson_line(&out, json_incref(ev));
    bool more = json_array_size(events) == (size_t)limit;
    json_t *last = last_seq(events);
    json_decref(events);
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(
        out.len, out.data ? out.data : strdup(""), free);
    MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
    if (more) { /* the next page: ?after=<this> */
        char seq[32];
        snprintf(seq, sizeof(seq), "%lld", (long long)json_integer_value(last));
        MHD_add_response_header(resp, "X-Brig-Next-After", seq);
    }
    json_decref(last);
    brig_http_response(r, 200, resp);
}

void api_audit_verify(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_timeline_verify(r->d, &r->caller, &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}
