/*
 * agentc.h - brigd's side of the agent protocol (docs/protocol.md): one request
 * per connection, on an fd opened by the runtime driver (handshake done).
 * None of these functions closes the fd; the caller owns it.
 */
#ifndef BRIG_AGENTC_H
#define BRIG_AGENTC_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "frame.h"
#include "util.h"

typedef struct brig_exec_req {
    json_t *argv;       /* array of strings, or NULL when cmd is used (borrowed) */
    const char *cmd;    /* shell command, or NULL */
    const char *cwd;    /* NULL: the agent's default */
    json_t *env;        /* object of strings or NULL (borrowed) */
    int64_t timeout_ms; /* 0: none */
    const char *user;   /* NULL: root */
    int pty_cols;       /* 0: no pty */
    int pty_rows;
    bool background;      /* answer "started" and leave the process running */
    int64_t buffer_bytes; /* 0: the agent's default */
    bool has_stdin;       /* send stdin_data as the command's stdin */
    uint8_t *stdin_data;  /* owned (brig_exec_req_dispose) */
    size_t stdin_len;
} brig_exec_req;

void brig_exec_req_dispose(brig_exec_req *req);

typedef struct brig_exec_result {
    int pid; /* in the sandbox */
    int exit_code;
    int signal; /* 0 when the command was not killed by a signal */
    bool timed_out;
    int64_t duration_ms;
    brig_buf out, err; /* captured stdout / stderr (up to the limit) */
    bool out_truncated, err_truncated;
    bool budget_exceeded; /* a buffer could not grow: the budget said no */
} brig_exec_result;

/* What a buffered exec's output buffers may grow by: grow(cls, n) is asked before
 * they take n more bytes of memory, and false keeps them as they are. */
typedef struct brig_exec_budget {
    bool (*grow)(void *cls, size_t n);
    void *cls;
} brig_exec_budget;

/* Runs a command and collects its output, keeping at most `limit` bytes per
 * stream, and with a budget only what it grants (the rest is read and dropped,
 * so the command never blocks on us; the stream is marked truncated).  budget
 * may be NULL (no bound but the limit). */
int brig_agentc_exec(int fd, const brig_exec_req *req, size_t limit, const brig_exec_budget *budget,
                     brig_exec_result *res, brig_error **err);
void brig_exec_result_dispose(brig_exec_result *res);

/* Sends an exec request (and its stdin, from a helper thread so a command that
 * does not read stdin cannot deadlock us against its output); the replies are
 * then read with brig_agentc_next.  brig_agentc_exec_finish joins the thread. */
typedef struct brig_exec_call {
    int fd;
    pthread_t stdin_thread;
    bool has_thread;
    const brig_exec_req *req;
} brig_exec_call;

int brig_agentc_exec_start(brig_exec_call *call, int fd, const brig_exec_req *req,
                           brig_error **err);
void brig_agentc_exec_finish(brig_exec_call *call);

/* What the agent sent next on a streaming connection. */
typedef enum {
    BRIG_EV_DATA,    /* output bytes on chan (f->payload, f->hdr.len > 0) */
    BRIG_EV_EOF,     /* the end of channel chan */
    BRIG_EV_MESSAGE, /* a CONTROL message other than an error: *msg (caller frees) */
} brig_agent_event;

/* Reads the next frame: DATA is returned as is, CONTROL parsed into *msg; an
 * agent error message becomes -1 with *err of the matching kind. */
int brig_agentc_next(int fd, brig_frame *f, brig_agent_event *ev, json_t **msg, brig_error **err);

/* One request, one CONTROL reply (agent errors become *err). */
int brig_agentc_call(int fd, json_t *req, json_t **reply, brig_error **err);

/* Maps an agent {"type":"error"} message to *err (returns -1). */
int brig_agentc_error(json_t *msg, brig_error **err);

/* Sets the connection's receive timeout (0: none). */
void brig_agentc_set_timeout(int fd, int64_t ms);

/* Sets req's path field `key` to path: a string, or "<key>_b64" (base64 of the
 * bytes) when path is not UTF-8, which a JSON string cannot hold
 * (docs/protocol.md, "File-system operations"). */
void brig_agentc_set_path(json_t *req, const char *key, const char *path);

/* Streaming file write: begin, any number of chunks, end (returns the size). */
int brig_agentc_write_begin(int fd, const char *path, int mode, brig_error **err);
/* Same, for another op that streams DATA in (tar_extract, proc_stdin): req is
 * sent as is. */
int brig_agentc_stream_begin(int fd, json_t *req, brig_error **err);
int brig_agentc_write_chunk(int fd, const void *p, size_t n, brig_error **err);
int brig_agentc_write_end(int fd, int64_t *size, brig_error **err);

/* Streaming file read: begin answers size and mode, then chunks until EOF. */
int brig_agentc_read_begin(int fd, const char *path, int64_t *size, int *mode, brig_error **err);
/* Returns 1 with data in f->payload[0..f->hdr.len), 0 at the end, -1 on error. */
int brig_agentc_read_chunk(int fd, brig_frame *f, brig_error **err);

#endif
