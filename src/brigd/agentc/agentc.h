/*
 * agentc.h - brigd's typed client of the agent protocol (docs/protocol.md): one call per
 * operation, one request per connection, on an fd opened by the runtime driver (handshake
 * done).  None of these functions closes the fd; the caller owns it.
 *
 * The requests are encoded by src/common/agentproto.c, which the agent's decoder shares: no
 * caller packs an op or writes a frame.  The module is split by concern:
 *
 *   agentc.c  the core: agent errors, the next message, one request and its reply, the
 *             streams of DATA sent to the agent (write_file, tar_extract, proc_stdin)
 *   exec.c    exec: buffered, or started here and read by the caller (streamed)
 *   files.c   files and the file-system operations (stat, list_dir, remove, move, mkdir, tar)
 *   procs.c   the proc_* operations on processes started before
 *
 * Errors: an agent error message becomes -1 with *err of the matching kind (not_found is
 * BRIG_E_NOT_FOUND, exists BRIG_E_CONFLICT, ...); a reply brigd cannot use is
 * BRIG_E_PROTOCOL.
 *
 * Timeouts: a call waits for its answer as long as the connection's receive timeout allows
 * (brig_agentc_set_timeout; the caller chooses it), unless its comment says it sets its own.
 */
#ifndef BRIG_AGENTC_H
#define BRIG_AGENTC_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agentproto.h"
#include "error.h"
#include "frame.h"
#include "util.h"

/* ---- the core (agentc.c) ------------------------------------------------------------- */

/* Sets the connection's receive timeout (0: none). */
void brig_agentc_set_timeout(int fd, int64_t ms);

/* Maps an agent {"type":"error"} message to *err (returns -1). */
int brig_agentc_error(json_t *msg, brig_error **err);

/* What the agent sent next on a streaming connection. */
typedef enum {
    BRIG_EV_DATA,    /* output bytes on chan (f->payload, f->hdr.len > 0) */
    BRIG_EV_EOF,     /* the end of channel chan */
    BRIG_EV_MESSAGE, /* a CONTROL message other than an error: *msg (caller frees) */
} brig_agent_event;

/* Reads the next frame into f (the caller's receive buffer, brig_frame_dispose): DATA is
 * returned as is, CONTROL parsed into *msg; an agent error message becomes -1 with *err. */
int brig_agentc_next(int fd, brig_frame *f, brig_agent_event *ev, json_t **msg, brig_error **err);

/* Streams of DATA to the agent, after a *_begin below (write_file, tar_extract, proc_stdin):
 * any number of chunks, then the end, which answers the bytes the agent took (*size may be
 * NULL).  A failed write reports the agent's own error when it sent one. */
int brig_agentc_write_chunk(int fd, const void *p, size_t n, brig_error **err);
int brig_agentc_write_end(int fd, int64_t *size, brig_error **err);

/* ---- exec (exec.c) --------------------------------------------------------------------- */

/* An exec as brigd holds it (validated by api/validate.c), encoded as brig_exec_spec. */
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
    bool stdin_closed;    /* background: no stdin pipe kept open for proc_stdin */
    bool follow;          /* background, no stdin: then stay for its output (res->following) */
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
    /* req->follow and the agent agreed (an older agent does not): the connection now carries
     * the output as proc_output with follow does, from its first byte, and its exit. */
    bool following;
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
 * may be NULL (no bound but the limit).  A background exec returns at "started"
 * (res->pid; with req->follow, res->following says whether the output follows on fd).  Sets
 * its own timeout (brig_agentc_exec_start). */
int brig_agentc_exec(int fd, const brig_exec_req *req, size_t limit, const brig_exec_budget *budget,
                     brig_exec_result *res, brig_error **err);
void brig_exec_result_dispose(brig_exec_result *res);
/* The same, with tap(cls, chan, p, n) called on every chunk of output as it arrives. */
typedef void (*brig_exec_tap)(void *cls, int chan, const uint8_t *p, size_t n);
int brig_agentc_exec_tap(int fd, const brig_exec_req *req, size_t limit,
                         const brig_exec_budget *budget, brig_exec_tap tap, void *tap_cls,
                         brig_exec_result *res, brig_error **err);

/* Sends an exec request (and its stdin, from a helper thread so a command that
 * does not read stdin cannot deadlock us against its output); the replies are
 * then read with brig_agentc_next.  brig_agentc_exec_finish joins the thread.
 * The receive timeout becomes the command's timeout plus 30 s (30 s for a
 * background one or one without a timeout). */
typedef struct brig_exec_call {
    int fd;
    pthread_t stdin_thread;
    bool has_thread;
    const brig_exec_req *req;
} brig_exec_call;

int brig_agentc_exec_start(brig_exec_call *call, int fd, const brig_exec_req *req,
                           brig_error **err);
void brig_agentc_exec_finish(brig_exec_call *call);

/* ---- files (files.c) ------------------------------------------------------------------- */

/* Paths are any bytes but NUL (one that is not UTF-8 travels as "<field>_b64"). */

/* stat: *entry is the agent's entry of path (docs/protocol.md, "File-system operations";
 * caller frees). */
int brig_agentc_stat(int fd, const char *path, json_t **entry, brig_error **err);

/* list_dir: *entries is the array of every entry of the directory, in name order (caller
 * frees). */
int brig_agentc_list_dir(int fd, const char *path, json_t **entries, brig_error **err);

int brig_agentc_remove(int fd, const char *path, bool recursive, brig_error **err);
int brig_agentc_move(int fd, const char *from, const char *to, brig_error **err);
/* mode: the permission bits, sent as given (no umask). */
int brig_agentc_mkdir(int fd, const char *path, int mode, bool parents, brig_error **err);

/* Streaming file write: begin (mode < 0: the agent's default), then brig_agentc_write_chunk
 * and _end, which answers the file's size.  Sets a 5-minute timeout. */
int brig_agentc_write_begin(int fd, const char *path, int mode, brig_error **err);

/* Streaming tar extraction into the directory path: begin, then brig_agentc_write_chunk and
 * _end, which answers the bytes received.  Sets a 5-minute timeout. */
int brig_agentc_tar_extract_begin(int fd, const char *path, brig_error **err);

/* Streaming file read: begin answers size and mode, then chunks until the end.  Sets a
 * 5-minute timeout. */
int brig_agentc_read_begin(int fd, const char *path, int64_t *size, int *mode, brig_error **err);
/* Returns 1 with data in f->payload[0..f->hdr.len), 0 at the end, -1 on error.  f is the
 * caller's receive buffer (brig_frame_dispose). */
int brig_agentc_read_chunk(int fd, brig_frame *f, brig_error **err);

/* Streaming tar of the directory path: begin, then brig_agentc_read_chunk until 0, then
 * _end, which reads whether tar succeeded.  Sets a 5-minute timeout. */
int brig_agentc_tar_create_begin(int fd, const char *path, brig_error **err);
int brig_agentc_tar_create_end(int fd, brig_frame *f, brig_error **err);

/* ---- processes (procs.c) --------------------------------------------------------------- */

/* Process objects are the agent's (docs/protocol.md, "A process object"; times in ms since
 * the epoch); the caller frees them. */

/* *procs: the array of every process the agent keeps, oldest first. */
int brig_agentc_proc_list(int fd, json_t **procs, brig_error **err);
int brig_agentc_proc_get(int fd, int pid, json_t **proc, brig_error **err);
/* Waits until the process has exited or timeout_ms (0: no limit) elapsed, and answers its
 * object.  Sets the receive timeout to timeout_ms + 30 s (none for 0). */
int brig_agentc_proc_wait(int fd, int pid, int64_t timeout_ms, json_t **proc, brig_error **err);
int brig_agentc_proc_signal(int fd, int pid, int sig, brig_error **err);
int brig_agentc_proc_resize(int fd, int pid, int cols, int rows, brig_error **err);
int brig_agentc_proc_stdin_close(int fd, int pid, brig_error **err);

/* Streaming stdin of a process: begin, then brig_agentc_write_chunk and _end, which answers
 * the bytes written to the command's stdin.  Sets a 5-minute timeout. */
int brig_agentc_proc_stdin_begin(int fd, int pid, brig_error **err);

/* Asks for a process's output (with follow: until it exits); the messages and output are
 * then read with brig_agentc_next.  Sets a 30-second timeout. */
int brig_agentc_proc_output(int fd, int pid, bool follow, brig_error **err);

#endif
