/*
 * agentc.c - the agent client's core (see agentc.h): agent errors, the next message, one
 * request and its reply, and the streams of DATA brigd sends.
 */
#include "agentc_internal.h"

#include <string.h>
#include <sys/socket.h>

#include "core/metrics.h"

/* A call that failed on the agent's side of brigd: counted by kind (docs/metrics.md). */
static void count_error(const char *kind)
{
    char labels[64];
    brig_metric_add(BRIG_M_AGENT_ERRORS,
                    brig_metrics_labels(labels, sizeof(labels), "kind", kind, NULL), 1);
}

int brig_agentc_error(json_t *msg, brig_error **err)
{
    static const struct {
        const char *code;
        brig_err_kind kind;
    } map[] = {
        {"bad_request", BRIG_E_INVALID},   {"not_found", BRIG_E_NOT_FOUND},
        {"exists", BRIG_E_CONFLICT},       {"is_directory", BRIG_E_INVALID},
        {"not_directory", BRIG_E_INVALID}, {"permission", BRIG_E_FORBIDDEN},
        {"no_space", BRIG_E_NO_SPACE},     {"too_large", BRIG_E_TOO_LARGE},
    };
    const char *code = json_string_value(json_object_get(msg, "code"));
    const char *m = json_string_value(json_object_get(msg, "message"));
    brig_err_kind kind = BRIG_E_INTERNAL;
    for (size_t i = 0; code && i < BRIG_ARRAY_LEN(map); i++)
        if (strcmp(map[i].code, code) == 0)
            kind = map[i].kind;
    if (kind == BRIG_E_INTERNAL) /* the others are answers about the request */
        count_error("agent");
    return brig_error_set(err, kind, 0, "%s", m ? m : (code ? code : "agent error"));
}

void brig_agentc_set_timeout(int fd, int64_t ms)
{
    struct timeval tv = {0, 0}; /* 0: wait forever */
    if (ms > 0) {
        tv.tv_sec = ms / 1000;
        tv.tv_usec = (ms % 1000) * 1000;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

int brig_agentc_unexpected(json_t *msg, brig_error **err)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    count_error("protocol");
    return brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent reply '%s'", t ? t : "");
}

int brig_agentc_next(int fd, brig_frame *f, brig_agent_event *ev, json_t **msg, brig_error **err)
{
    *msg = NULL;
    if (brig_frame_read(fd, f, NULL, err) < 0) {
        count_error("io");
        return -1;
    }
    if (f->hdr.type == BRIG_FRAME_DATA) {
        *ev = f->hdr.len ? BRIG_EV_DATA : BRIG_EV_EOF;
        return 0;
    }
    if (f->hdr.type != BRIG_FRAME_CONTROL)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected HELLO from the agent");
    json_t *m = NULL;
    if (brig_frame_parse_json(f->payload, f->hdr.len, &m, err) < 0)
        return -1;
    if (brig_agentproto_reply_type(m) == BRIG_REPLY_ERROR) {
        brig_agentc_error(m, err);
        json_decref(m);
        return -1;
    }
    *ev = BRIG_EV_MESSAGE;
    *msg = m;
    return 0;
}

int brig_agentc_send(int fd, const brig_agent_req *q, brig_error **err)
{
    json_t *m = brig_agentproto_encode(q);
    int r = brig_frame_write_json(fd, BRIG_FRAME_CONTROL, m, err);
    json_decref(m);
    return r;
}

int brig_agentc_reply(int fd, json_t **out, brig_error **err)
{
    brig_frame f = {0};
    int r = brig_frame_read_json(fd, &f, BRIG_FRAME_CONTROL, out, err);
    brig_frame_dispose(&f);
    if (r < 0) {
        count_error("io");
        return -1;
    }
    if (brig_agentproto_reply_type(*out) == BRIG_REPLY_ERROR) {
        brig_agentc_error(*out, err);
        json_decref(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int brig_agentc_call(int fd, const brig_agent_req *q, json_t **reply, brig_error **err)
{
    json_t *msg = NULL;
    if (brig_agentc_send(fd, q, err) < 0 || brig_agentc_reply(fd, &msg, err) < 0)
        return -1;
    if (reply)
        *reply = msg;
    else
        json_decref(msg);
    return 0;
}

/* ---- streams of DATA to the agent ---------------------------------------------------- */

int brig_agentc_stream_begin(int fd, const brig_agent_req *q, brig_error **err)
{
    int r = brig_agentc_send(fd, q, err);
    brig_agentc_set_timeout(fd, BRIG_AGENTC_STREAM_MS);
    return r;
}

/* A write failed: the agent probably answered with an error and closed; prefer
 * its message over EPIPE. */
static int write_failed(int fd, brig_error **err)
{
    brig_error *werr = NULL;
    json_t *msg = NULL;
    brig_agentc_set_timeout(fd, 1000);
    if (brig_agentc_reply(fd, &msg, &werr) < 0 && werr && werr->kind != BRIG_E_PROTOCOL &&
        werr->kind != BRIG_E_UNAVAILABLE) {
        brig_error_clear(err);
        if (err)
            *err = werr;
        else
            brig_error_clear(&werr);
        return -1;
    }
    json_decref(msg);
    brig_error_clear(&werr);
    return -1;
}

int brig_agentc_write_chunk(int fd, const void *p, size_t n, brig_error **err)
{
    const uint8_t *b = p;
    while (n > 0) {
        size_t k = n < BRIG_DATA_CHUNK ? n : BRIG_DATA_CHUNK;
        if (brig_frame_write(fd, BRIG_FRAME_DATA, BRIG_CHAN_IN, b, k, err) < 0)
            return write_failed(fd, err);
        b += k;
        n -= k;
    }
    return 0;
}

int brig_agentc_write_end(int fd, int64_t *size, brig_error **err)
{
    if (brig_frame_write(fd, BRIG_FRAME_DATA, BRIG_CHAN_IN, NULL, 0, err) < 0)
        return write_failed(fd, err);
    json_t *msg = NULL;
    if (brig_agentc_reply(fd, &msg, err) < 0)
        return -1;
    int r = 0;
    if (brig_agentproto_reply_type(msg) != BRIG_REPLY_OK)
        r = brig_agentc_unexpected(msg, err);
    else if (size) /* write_file answers its "size", the others the "bytes" they took */
        *size = json_integer_value(
            json_object_get(msg, json_object_get(msg, "size") ? "size" : "bytes"));
    json_decref(msg);
    return r;
}
