/*
 * stream.c - NDJSON streaming (see stream.h).
 */
#include "stream.h"

#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

size_t brig_utf8_cut(const uint8_t *p, size_t n)
{
    /* Look back at most 3 bytes for the lead byte of a truncated sequence. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        uint8_t c = p[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte: keep looking */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

void brig_ndjson_line(brig_buf *out, json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (s == NULL)
        return;
    brig_buf_append(out, s, strlen(s));
    brig_buf_append(out, "\n", 1);
    free(s);
}

static void emit(int chan, const uint8_t *p, size_t n, brig_buf *out)
{
    const char *type = chan == BRIG_CHAN_STDERR ? "stderr" : "stdout";
    json_t *text = json_stringn((const char *)p, n);
    if (text) {
        brig_ndjson_line(out, json_pack("{s:s, s:o}", "type", type, "data", text));
        return;
    }
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *enc = brig_xmalloc(len);
    sodium_bin2base64(enc, len, p, n, sodium_base64_VARIANT_ORIGINAL);
    brig_ndjson_line(out,
                     json_pack("{s:s, s:s, s:s}", "type", type, "data", enc, "encoding", "base64"));
    free(enc);
}

void brig_ndjson_data(brig_ndjson *nj, int chan, const uint8_t *p, size_t n, brig_buf *out)
{
    if (chan != BRIG_CHAN_STDOUT && chan != BRIG_CHAN_STDERR)
        return;
    size_t cl = nj->carry_len[chan];
    uint8_t *buf = brig_xmalloc(cl + n);
    memcpy(buf, nj->carry[chan], cl);
    memcpy(buf + cl, p, n);
    size_t total = cl + n;
    size_t cut = brig_utf8_cut(buf, total);
    json_t *probe = cut ? json_stringn((const char *)buf, cut) : NULL;
    if (cut > 0 && probe == NULL) {
        /* Not text: send everything as it is, carry nothing. */
        emit(chan, buf, total, out);
        nj->carry_len[chan] = 0;
    } else {
        json_decref(probe);
        if (cut > 0)
            emit(chan, buf, cut, out);
        nj->carry_len[chan] = total - cut;
        memcpy(nj->carry[chan], buf + cut, total - cut);
    }
    free(buf);
}

void brig_ndjson_eof(brig_ndjson *nj, int chan, brig_buf *out)
{
    if ((chan == BRIG_CHAN_STDOUT || chan == BRIG_CHAN_STDERR) && nj->carry_len[chan] > 0) {
        emit(chan, nj->carry[chan], nj->carry_len[chan], out);
        nj->carry_len[chan] = 0;
    }
}

/* Turns one agent CONTROL message into an event; sets s->done on a final one. */
static void translate(brig_stream *s, json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    t = t ? t : "";
    if (strcmp(t, "started") == 0) {
        brig_ndjson_line(
            &s->line, json_pack("{s:s, s:O}", "type", "start", "pid", json_object_get(msg, "pid")));
    } else if (strcmp(t, "exit") == 0) {
        json_t *sig = json_object_get(msg, "signal");
        brig_ndjson_line(&s->line, json_pack("{s:s, s:O, s:O, s:b, s:O}", "type", "exit",
                                             "exit_code", json_object_get(msg, "exit_code"),
                                             "signal", sig ? sig : json_null(), "timed_out",
                                             json_is_true(json_object_get(msg, "timed_out")),
                                             "duration_ms", json_object_get(msg, "duration_ms")));
        s->done = true;
    } else if (strcmp(t, "output") == 0 || strcmp(t, "dropped") == 0) {
        brig_ndjson_line(&s->line, json_deep_copy(msg));
    } else if (strcmp(t, "end") == 0) {
        brig_ndjson_line(&s->line, json_deep_copy(msg));
        s->done = true;
    }
}

static void fail(brig_stream *s, brig_error *err)
{
    if (err == NULL)
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "agent connection lost");
    if (s->sb) /* the caller borrowed it: it may know how it ended */
        brig_sandbox_explain_end(s->d, NULL, s->sb->id, &err);
    brig_ndjson_line(&s->line, json_pack("{s:s, s:s, s:s}", "type", "error", "code",
                                         brig_error_code(err->kind), "message", err->msg));
    brig_error_clear(&err);
    s->done = true;
}

/* Waits for the agent; 0 when a frame is ready, -1 when the HTTP client left. */
static int wait_agent(brig_stream *s)
{
    struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->client_fd, POLLRDHUP, 0}};
    for (;;) {
        int r = poll(p, s->client_fd >= 0 ? 2 : 1, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (s->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return -1;
        if (p[0].revents)
            return 0;
    }
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    brig_stream *s = cls;
    while (s->off >= s->line.len) {
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        s->line.len = 0;
        s->off = 0;
        if (wait_agent(s) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR; /* nobody listens any more */
        brig_agent_event ev;
        json_t *msg = NULL;
        brig_error *err = NULL;
        if (brig_agentc_next(s->fd, &s->f, &ev, &msg, &err) < 0) {
            fail(s, err);
            continue;
        }
        int ch = s->f.hdr.chan < 3 ? s->f.hdr.chan : 0;
        if (ev == BRIG_EV_DATA || ev == BRIG_EV_EOF) {
            /* Secrets out first: the redactor holds back what may still match. */
            brig_buf clean = {0};
            if (ev == BRIG_EV_DATA)
                brig_redact_feed(&s->rs[ch], s->f.payload, s->f.hdr.len, &clean);
            else
                brig_redact_flush(&s->rs[ch], &clean);
            if (clean.len)
                brig_ndjson_data(&s->nj, ch, (const uint8_t *)clean.data, clean.len, &s->line);
            if (ev == BRIG_EV_EOF)
                brig_ndjson_eof(&s->nj, ch, &s->line);
            brig_buf_dispose(&clean);
        } else {
            /* Nothing of a channel may stay held past a control message (exit, end,
             * a gap): release it, still redacted as far as it matched. */
            for (int c = 1; c < 3; c++) {
                brig_buf clean = {0};
                brig_redact_flush(&s->rs[c], &clean);
                if (clean.len)
                    brig_ndjson_data(&s->nj, c, (const uint8_t *)clean.data, clean.len, &s->line);
                brig_buf_dispose(&clean);
            }
            translate(s, msg);
            json_decref(msg);
        }
    }
    size_t n = s->line.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->line.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

void brig_stream_free(brig_stream *s)
{
    if (s == NULL)
        return;
    if (s->has_call)
        brig_agentc_exec_finish(&s->call);
    if (s->fd >= 0)
        close(s->fd); /* for a foreground exec: the agent kills the command */
    brig_exec_req_dispose(&s->req);
    for (int i = 0; i < 3; i++)
        brig_redact_dispose(&s->rs[i]);
    brig_redactor_free(s->red);
    brig_sandbox_put(s->d, s->sb);
    brig_frame_dispose(&s->f);
    brig_buf_dispose(&s->line);
    free(s);
}

void brig_stream_redact(brig_stream *s, brig_redactor *red)
{
    s->red = red;
    for (int i = 0; i < 3; i++)
        brig_redact_init(&s->rs[i], red);
}

static void free_cb(void *cls)
{
    brig_stream_free(cls);
}

struct MHD_Response *brig_stream_response(brig_stream *s)
{
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, s, free_cb);
    MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
    return resp;
}
