/*
 * agentc.h - brigd's side of the agent protocol (docs/protocol.md): one request
 * per connection, on an fd opened by the runtime driver (handshake done).
 * None of these functions closes the fd; the caller owns it.
 */
#ifndef BRIG_AGENTC_H
#define BRIG_AGENTC_H

#include <jansson.h>
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
} brig_exec_req;

typedef struct brig_exec_result {
    int exit_code;
    int signal; /* 0 when the command was not killed by a signal */
    bool timed_out;
    int64_t duration_ms;
    brig_buf out, err; /* captured stdout / stderr (up to the limit) */
    bool out_truncated, err_truncated;
} brig_exec_result;

/* Runs a command and collects its output, keeping at most `limit` bytes per
 * stream (the rest is read and dropped, so the command never blocks on us). */
int brig_agentc_exec(int fd, const brig_exec_req *req, size_t limit, brig_exec_result *res,
                     brig_error **err);
void brig_exec_result_dispose(brig_exec_result *res);

/* Streaming file write: begin, any number of chunks, end (returns the size). */
int brig_agentc_write_begin(int fd, const char *path, int mode, brig_error **err);
int brig_agentc_write_chunk(int fd, const void *p, size_t n, brig_error **err);
int brig_agentc_write_end(int fd, int64_t *size, brig_error **err);

/* Streaming file read: begin answers size and mode, then chunks until EOF. */
int brig_agentc_read_begin(int fd, const char *path, int64_t *size, int *mode, brig_error **err);
/* Returns 1 with data in f->payload[0..f->hdr.len), 0 at the end, -1 on error. */
int brig_agentc_read_chunk(int fd, brig_frame *f, brig_error **err);

#endif
