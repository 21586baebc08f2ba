/*
 * stream.h - streaming answers: agent frames turned into NDJSON events
 * ({"type":"stdout","data":…}) sent to the HTTP client as they arrive.
 *
 * Text stays text: a chunk that is valid UTF-8 is sent as a JSON string, and a
 * multi-byte character split across two chunks is carried over whole; anything
 * else is base64 with "encoding":"base64".
 */
#ifndef BRIG_STREAM_H
#define BRIG_STREAM_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentc/agentc.h"
#include "vault/redact.h"
#include "sandbox/sandbox.h"
#include "util.h"

/* Per-channel carry of an incomplete UTF-8 sequence (channels 1 and 2). */
typedef struct brig_ndjson {
    uint8_t carry[3][4];
    size_t carry_len[3];
} brig_ndjson;

/* Length of the longest prefix of p that does not end inside a UTF-8 sequence
 * (at most 3 bytes shorter than n). */
size_t brig_utf8_cut(const uint8_t *p, size_t n);

/* Appends the event lines for output bytes / the end of a channel to out. */
void brig_ndjson_data(brig_ndjson *nj, int chan, const uint8_t *p, size_t n, brig_buf *out);
void brig_ndjson_eof(brig_ndjson *nj, int chan, brig_buf *out);
/* Appends obj as one line (takes ownership of obj). */
void brig_ndjson_line(brig_buf *out, json_t *obj);

/* A streamed answer fed by one agent connection. */
typedef struct brig_stream {
    brigd *d;
    brig_sandbox *sb;    /* borrowed reference, released at the end */
    int fd;              /* agent connection (owned) */
    int client_fd;       /* the HTTP client's socket, to notice it hang up */
    brig_exec_req req;   /* exec streams: the request (owns its stdin) */
    brig_exec_call call; /* exec streams: the stdin writer */
    bool has_call;
    brig_frame f;
    brig_ndjson nj;
    brig_redactor *red;       /* the sandbox's secrets to redact (owned; NULL: none) */
    brig_redact_stream rs[3]; /* per channel (1 stdout, 2 stderr) */
    brig_buf line;            /* what is ready to send */
    size_t off;               /* bytes of line already sent */
    bool done;                /* the final event is in line */
    /* exec streams: the timeline's exec event, recorded at its exit (or its end) */
    json_t *audit;
    brig_caller caller;
    int64_t out_bytes[3]; /* per channel, as the command wrote them */
    /* why it ended: exec streams, the sandbox's limit counters before the command; a
     * process's output, its pid (its exit's reason is the process's) */
    brig_rt_events before;
    int proc_pid;
    json_t *grants; /* exec streams: credentials for this exec only, ended with it */
} brig_stream;

/* A buffered exec's answer, encoded while it is sent: the JSON object meta (the
 * result's other fields) with "stdout" and "stderr" added, each as text or, when
 * it is not valid UTF-8 or holds NUL bytes, as base64 with "<name>_encoding":
 * "base64"; red's secrets (NULL: none) are redacted on the way.  Memory: the two
 * buffers and a few chunks, never a second copy of the output nor its JSON; except
 * for a small output (16 KiB at most), whose answer is encoded at once into one buffer
 * and sent with its length (one write, not a chunk per part).  Takes meta, red and the
 * buffers of res (res is left empty); done(cls) runs once MHD is finished with the
 * response (for a small one: once it is encoded), after the buffers are freed. */
struct MHD_Response *brig_exec_reply_response(json_t *meta, brig_exec_result *res,
                                              brig_redactor *red, void (*done)(void *cls),
                                              void *cls);

/* Makes s redact red's secrets out of the output it forwards (takes red). */
void brig_stream_redact(brig_stream *s, brig_redactor *red);

/* Wraps s in a chunked application/x-ndjson response that owns s. */
struct MHD_Response *brig_stream_response(brig_stream *s);
void brig_stream_free(brig_stream *s);

#endif
