/*
 * stream.c - NDJSON streaming (see stream.h).
 */
#include "stream.h"

#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#include "exec_event.h"
#include "log.h"
#include "sandbox/ends.h"
#include "sandbox/injection.h"

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

/* Why the command of an exit message ended: a streamed exec's from the counters
 * around it; a process output's as the process object says (and its end recorded
 * once, sandbox/ends.h). */
static const char *exit_reason(brig_stream *s, json_t *msg)
{
    int code = (int)json_integer_value(json_object_get(msg, "exit_code"));
    int sig = (int)json_integer_value(json_object_get(msg, "signal"));
    bool timed_out = json_is_true(json_object_get(msg, "timed_out"));
    if (s->proc_pid > 0) {
        json_t *proc = json_pack(
            "{s:i, s:b, s:i, s:O, s:b}", "pid", s->proc_pid, "running", 0, "exit_code", code,
            "signal", sig ? json_object_get(msg, "signal") : json_null(), "timed_out", timed_out);
        const char *r = brig_proc_reason(s->d, s->sb, proc);
        json_decref(proc);
        return r;
    }
    brig_rt_events after;
    brig_sandbox_events(s->d, s->sb, &after);
    return brig_exec_reason(&s->before, &after, code, sig, timed_out);
}

/* The timeline's exec event of a streamed command, at its exit. */
static void exit_recorded(brig_stream *s, json_t *msg, const char *reason)
{
    if (s->audit == NULL)
        return;
    brig_exec_result res = {
        .pid = (int)json_integer_value(json_object_get(msg, "pid")),
        .exit_code = (int)json_integer_value(json_object_get(msg, "exit_code")),
        .signal = (int)json_integer_value(json_object_get(msg, "signal")),
        .timed_out = json_is_true(json_object_get(msg, "timed_out")),
        .duration_ms = json_integer_value(json_object_get(msg, "duration_ms")),
    };
    if (res.pid == 0) /* the exit message may not say: the start did */
        res.pid = (int)json_integer_value(json_object_get(s->audit, "pid"));
    int64_t bytes[2] = {s->out_bytes[1], s->out_bytes[2]};
    api_exec_event_end(s->d, s->sb, &s->caller, s->audit, &res, reason, bytes,
                       (int64_t)(s->rs[1].matches + s->rs[2].matches), NULL);
    s->audit = NULL;
}

/* Ends the credentials granted for this exec only: at its exit, before the client reads
 * it (a request it makes next finds them ended), else when the stream ends. */
static void grants_end(brig_stream *s)
{
    brig_injection_end(s->d, s->sb, s->grants);
    json_decref(s->grants);
    s->grants = NULL;
}

/* Turns one agent CONTROL message into an event; sets s->done on a final one. */
static void translate(brig_stream *s, json_t *msg)
{
    brig_agent_reply t = brig_agentproto_reply_type(msg);
    if (t == BRIG_REPLY_STARTED) {
        {
            if (s->audit)
                json_object_set(s->audit, "pid", json_object_get(msg, "pid"));
            brig_ndjson_line(&s->line, json_pack("{s:s, s:O}", "type", "start", "pid",
                                                 json_object_get(msg, "pid")));
        }
    } else if (t == BRIG_REPLY_EXIT) {
        json_t *sig = json_object_get(msg, "signal");
        const char *reason = exit_reason(s, msg);
        exit_recorded(s, msg, reason);
        grants_end(s);
        brig_ndjson_line(&s->line,
                         json_pack("{s:s, s:O, s:O, s:b, s:O, s:s}", "type", "exit", "exit_code",
                                   json_object_get(msg, "exit_code"), "signal",
                                   sig ? sig : json_null(), "timed_out",
                                   json_is_true(json_object_get(msg, "timed_out")), "duration_ms",
                                   json_object_get(msg, "duration_ms"), "reason", reason));
        s->done = true;
    } else if (t == BRIG_REPLY_OUTPUT || t == BRIG_REPLY_DROPPED) {
        brig_ndjson_line(&s->line, json_deep_copy(msg));
    } else if (t == BRIG_REPLY_END) {
        brig_ndjson_line(&s->line, json_deep_copy(msg));
        s->done = true;
    }
}

static void fail(brig_stream *s, brig_error *err)
{
    if (err == NULL)
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "agent connection lost");
    if (s->sb) /* the caller borrowed it: it may know how it ended */
        brig_sandbox_explain_end(s->d, NULL, brig_sandbox_id(s->sb), &err);
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
                s->out_bytes[ch] += s->f.hdr.len;
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
    if (s->audit) { /* it did not reach its exit here */
        int64_t bytes[2] = {s->out_bytes[1], s->out_bytes[2]};
        api_exec_event_end(s->d, s->sb, &s->caller, s->audit, NULL, NULL, bytes,
                           (int64_t)(s->rs[1].matches + s->rs[2].matches),
                           "the stream ended before the command did");
    }
    if (s->has_call)
        brig_agentc_exec_finish(&s->call);
    if (s->fd >= 0)
        close(s->fd); /* for a foreground exec: the agent kills the command */
    brig_exec_req_dispose(&s->req);
    for (int i = 0; i < 3; i++)
        brig_redact_dispose(&s->rs[i]);
    brig_redactor_free(s->red);
    grants_end(s); /* the command has ended or is killed */
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

/* ---- a buffered exec's answer ------------------------------------------------------ */

#define REPLY_CHUNK (48u << 10) /* raw bytes per step: 64 KiB of base64 */
/* Output up to this (both streams): the answer is encoded at once and sent whole. */
#define REPLY_WHOLE_MAX (16u << 10)

/* One output buffer read piece by piece through the redactor. */
typedef struct piece_src {
    const brig_buf *b;
    size_t pos;
    brig_redact_stream rs; /* with a NULL redactor it passes everything at once */
    bool done;
} piece_src;

static void src_init(piece_src *s, const brig_buf *b, const brig_redactor *red)
{
    memset(s, 0, sizeof(*s));
    s->b = b;
    brig_redact_init(&s->rs, red);
}

/* The next redacted piece into clean (emptied first); *last once the buffer's end and
 * what the redactor held are in.  False when there was nothing left. */
static bool src_next(piece_src *s, brig_buf *clean, bool *last)
{
    clean->len = 0;
    if (s->done)
        return false;
    size_t n = s->b->len - s->pos;
    if (n > REPLY_CHUNK)
        n = REPLY_CHUNK;
    if (n)
        brig_redact_feed(&s->rs, (const uint8_t *)s->b->data + s->pos, n, clean);
    s->pos += n;
    *last = s->pos == s->b->len;
    if (*last) {
        brig_redact_flush(&s->rs, clean);
        brig_redact_dispose(&s->rs);
        s->done = true;
    }
    return true;
}

/* Whether a buffer, as redacted, can be a JSON string: valid UTF-8 without NUL. */
static bool is_text(const brig_buf *b, const brig_redactor *red)
{
    piece_src src;
    src_init(&src, b, red);
    brig_buf clean = {0}, joined = {0};
    uint8_t carry[4];
    size_t cl = 0;
    bool last = false, ok = true;
    while (ok && src_next(&src, &clean, &last)) {
        if (clean.len && memchr(clean.data, 0, clean.len))
            ok = false;
        joined.len = 0;
        brig_buf_append(&joined, carry, cl);
        brig_buf_append(&joined, clean.data ? clean.data : "", clean.len);
        size_t cut = last ? joined.len : brig_utf8_cut((const uint8_t *)joined.data, joined.len);
        json_t *probe = cut ? json_stringn(joined.data, cut) : NULL;
        if (cut && probe == NULL)
            ok = false;
        json_decref(probe);
        cl = joined.len - cut;
        memcpy(carry, joined.data + cut, cl);
    }
    if (!src.done)
        brig_redact_dispose(&src.rs);
    brig_buf_dispose(&clean);
    brig_buf_dispose(&joined);
    return ok;
}

typedef struct exec_reply {
    brig_buf head;   /* the JSON before stdout's value */
    brig_buf raw[2]; /* stdout, stderr as the command wrote them (owned) */
    bool b64[2];     /* sent as base64 */
    brig_redactor *red;
    int part;         /* 0 head, 1 stdout, 2 stderr, 3 done */
    piece_src src;    /* of the part being sent */
    brig_buf clean;   /* a redacted piece */
    brig_buf out;     /* encoded bytes ready to send */
    size_t off;       /* of out, already sent */
    uint8_t carry[4]; /* a UTF-8 character's start, or base64's 1-2 bytes, for the next piece */
    size_t carry_len;
    void (*done)(void *cls);
    void *cls;
} exec_reply;

/* Appends p[0..n) of part i, JSON-encoded, to x->out; at last, everything held too. */
static void reply_encode(exec_reply *x, int i, const uint8_t *p, size_t n, bool last)
{
    size_t total = x->carry_len + n;
    uint8_t *buf = brig_xmalloc(total + 1);
    memcpy(buf, x->carry, x->carry_len);
    if (n)
        memcpy(buf + x->carry_len, p, n);
    size_t cut;
    if (x->b64[i]) {
        cut = last ? total : total - total % 3; /* whole groups: the pieces join seamlessly */
        if (cut) {
            size_t len = sodium_base64_ENCODED_LEN(cut, sodium_base64_VARIANT_ORIGINAL);
            char *enc = brig_xmalloc(len);
            sodium_bin2base64(enc, len, buf, cut, sodium_base64_VARIANT_ORIGINAL);
            brig_buf_append(&x->out, enc, strlen(enc));
            free(enc);
        }
    } else {
        cut = last ? total : brig_utf8_cut(buf, total);
        json_t *s = cut ? json_stringn((const char *)buf, cut) : NULL;
        if (cut && s == NULL) {
            /* is_text said yes for the same bytes: only a redactor that changed its
             * mind gets here; no raw byte may break the JSON. */
            for (size_t k = 0; k < cut; k++)
                if (buf[k] >= 0x80 || buf[k] == 0)
                    buf[k] = '?';
            s = json_stringn((const char *)buf, cut);
        }
        char *enc = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        if (enc) /* "…": the quotes are ours */
            brig_buf_append(&x->out, enc + 1, strlen(enc) - 2);
        free(enc);
        json_decref(s);
    }
    x->carry_len = total - cut;
    memcpy(x->carry, buf + cut, x->carry_len);
    free(buf);
}

/* Fills x->out with the next bytes of the answer. */
static void reply_step(exec_reply *x)
{
    if (x->part == 0) {
        brig_buf_append(&x->out, x->head.data, x->head.len);
        brig_buf_dispose(&x->head);
        x->part = 1;
        src_init(&x->src, &x->raw[0], x->red);
        return;
    }
    int i = x->part - 1;
    bool last = false;
    if (!src_next(&x->src, &x->clean, &last))
        last = true;
    reply_encode(x, i, (const uint8_t *)x->clean.data, x->clean.len, last);
    if (!last)
        return;
    if (x->red) /* the raw output holds the secrets: not left in freed memory */
        sodium_memzero(x->raw[i].data, x->raw[i].cap);
    brig_buf_dispose(&x->raw[i]);
    if (i == 0) {
        brig_buf_append(&x->out, "\",\"stderr\":\"", 12);
        x->part = 2;
        src_init(&x->src, &x->raw[1], x->red);
    } else {
        brig_buf_append(&x->out, "\"}\n", 3);
        x->part = 3;
    }
}

static ssize_t reply_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    exec_reply *x = cls;
    while (x->off >= x->out.len) {
        if (x->part == 3)
            return MHD_CONTENT_READER_END_OF_STREAM;
        x->out.len = 0;
        x->off = 0;
        reply_step(x);
    }
    size_t n = x->out.len - x->off;
    if (n > max)
        n = max;
    memcpy(buf, x->out.data + x->off, n);
    x->off += n;
    return (ssize_t)n;
}

static void reply_free(void *cls)
{
    exec_reply *x = cls;
    if ((x->part == 1 || x->part == 2) && !x->src.done)
        brig_redact_dispose(&x->src.rs);
    for (int i = 0; i < 2; i++) {
        if (x->red && x->raw[i].data)
            sodium_memzero(x->raw[i].data, x->raw[i].cap);
        brig_buf_dispose(&x->raw[i]);
    }
    brig_redactor_free(x->red);
    brig_buf_dispose(&x->head);
    brig_buf_dispose(&x->clean);
    brig_buf_dispose(&x->out);
    void (*done)(void *) = x->done;
    void *dcls = x->cls;
    free(x);
    if (done)
        done(dcls);
}

struct MHD_Response *brig_exec_reply_response(json_t *meta, brig_exec_result *res,
                                              brig_redactor *red, void (*done)(void *cls),
                                              void *cls)
{
    exec_reply *x = brig_xcalloc(1, sizeof(*x));
    x->raw[0] = res->out;
    x->raw[1] = res->err;
    memset(&res->out, 0, sizeof(res->out));
    memset(&res->err, 0, sizeof(res->err));
    x->red = red;
    x->done = done;
    x->cls = cls;
    static const char *const enc_key[2] = {"stdout_encoding", "stderr_encoding"};
    for (int i = 0; i < 2; i++) {
        x->b64[i] = !is_text(&x->raw[i], red);
        if (x->b64[i])
            json_object_set_new(meta, enc_key[i], json_string("base64"));
    }
    char *m = json_dumps(meta, JSON_COMPACT);
    json_decref(meta);
    size_t n = m ? strlen(m) : 0;
    if (n > 2) {
        brig_buf_append(&x->head, m, n - 1); /* without its closing brace */
        brig_buf_append(&x->head, ",", 1);
    } else {
        brig_buf_append(&x->head, "{", 1);
    }
    free(m);
    brig_buf_append(&x->head, "\"stdout\":\"", 10);
    struct MHD_Response *resp;
    if (x->raw[0].len + x->raw[1].len <= REPLY_WHOLE_MAX) {
        /* Small: encoded now and sent with its length, in one write instead of a chunk per
         * part (five writes, and as many reads for the client, for an exec `true`). */
        while (x->part != 3)
            reply_step(x);
        resp = MHD_create_response_from_buffer(x->out.len, x->out.data, MHD_RESPMEM_MUST_COPY);
        reply_free(x);
    } else {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reply_reader, x,
                                                 reply_free);
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    return resp;
}
