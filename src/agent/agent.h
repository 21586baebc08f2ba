/*
 * agent.h - what brig-agent's modules share.
 *
 * brig-agent is PID 1 inside a sandbox.  Its modules:
 *
 *   main.c   PID 1 duties (reaping, orderly shutdown), the listening socket, the accept loop
 *   conn.c   one connection's handler process: handshake, request, dispatch, replies
 *   exec.c   the `exec` operation: spawn, output streaming, stdin relay, timeout
 *   files.c  the `write_file` and `read_file` operations
 *   proc.c   the process tree: list children, signal them, kill and reap every descendant
 *
 * docs/protocol.md is the contract with brigd; docs/agent.md explains the process model.
 *
 * Error convention (error.h): operations return 0 once their final message went out, or -1
 * with *err set.  The protocol error code sent to the client is derived from the error by
 * brig_agent_error_code(): protocol violations and invalid requests are `bad_request`, an
 * error carrying an errno is mapped from that errno, anything else from its kind.
 */
#ifndef BRIG_AGENT_H
#define BRIG_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "frame.h"

/* One connection, owned by its handler process. */
typedef struct brig_agent_conn {
    int fd;           /* the connected stream socket */
    brig_frame frame; /* receive buffer of the blocking frame reads */
    int version;      /* negotiated protocol version, once the handshake is done */
    pid_t agent_pid;  /* the main agent process (reported in HELLO; 1 inside a sandbox) */
    bool replied;     /* the answer (or an error) went out: no error reply may follow */
    bool gone;        /* a write to the peer failed: send nothing more */
} brig_agent_conn;

/* ---- conn.c ---- */

/* Runs in a freshly forked handler process that owns `fd` (an accepted connection) and no
 * other agent descriptor: resets the signal state, becomes a child subreaper, serves one
 * request and exits.  Never returns. */
void brig_agent_conn_serve(int fd, pid_t agent_pid) __attribute__((noreturn));

/* Sends `msg` as a CONTROL frame (blocking).  Takes ownership of msg.  A failed write sets
 * c->gone.  Does nothing (and returns -1) when c->gone is already set. */
int brig_agent_send_json(brig_agent_conn *c, json_t *msg, brig_error **err);

/* Sends one frame (blocking); a failed write sets c->gone. */
int brig_agent_send(brig_agent_conn *c, uint8_t type, uint16_t chan, const void *p, size_t n,
                    brig_error **err);

/* Sends {"type":"error","code":code,"message":msg} and sets c->replied.  Best effort: a
 * write failure only sets c->gone. */
void brig_agent_reply_code(brig_agent_conn *c, const char *code, const char *msg);

/* Sends the error reply for e (code from brig_agent_error_code) and sets c->replied. */
void brig_agent_reply_error(brig_agent_conn *c, const brig_error *e);

/* The protocol code for an errno: ENOENT not_found, EEXIST exists, EISDIR is_directory,
 * ENOTDIR not_directory, EACCES/EPERM permission, ENOSPC/EDQUOT no_space, EFBIG too_large,
 * anything else io. */
const char *brig_agent_errno_code(int errnum);

/* The protocol code for an error (see the header comment). */
const char *brig_agent_error_code(const brig_error *e);

/* The error kind that goes with an errno; decides whether the failure is logged (only
 * BRIG_E_INTERNAL and BRIG_E_PROTOCOL are: they are the agent's or the peer's fault, the
 * others are ordinary answers such as "no such file"). */
brig_err_kind brig_agent_errno_kind(int errnum);

/* brig_error_set for a failed system call on the client's behalf: kind from the errno. */
#define brig_agent_fail(err, errnum, ...)                                                          \
    brig_error_set((err), brig_agent_errno_kind(errnum), (errnum), __VA_ARGS__)

/* Shorthand for a malformed request (code bad_request). */
#define brig_agent_bad_request(err, ...) brig_error_set((err), BRIG_E_INVALID, 0, __VA_ARGS__)

/* Returns the member `key` of object o, or NULL when it is missing or JSON null (optional
 * request fields treat null as absent). */
json_t *brig_agent_field(json_t *o, const char *key);

/* Returns the value of a JSON string, or NULL when j is not a string or holds a NUL byte
 * (C strings cannot carry them to the kernel). */
const char *brig_agent_cstring(json_t *j);

/* ---- exec.c, files.c: the operations (req is the request object, borrowed) ---- */

int brig_agent_exec(brig_agent_conn *c, json_t *req, brig_error **err);
int brig_agent_write_file(brig_agent_conn *c, json_t *req, brig_error **err);
int brig_agent_read_file(brig_agent_conn *c, json_t *req, brig_error **err);

/* ---- proc.c ---- */

/* A child whose wait status a reaping loop should keep for the caller. */
typedef struct brig_agent_watch {
    pid_t pid;  /* the child to watch (> 0) */
    int status; /* its wait status, once done */
    bool done;  /* it has been reaped */
} brig_agent_watch;

/* Returns the caller's child processes as a malloc'd array (caller frees) and their number in
 * *n.  Reads /proc/self/task/<tid>/children where the kernel has it, else scans every
 * /proc/<pid>/stat for ppid == getpid().  The answer can be stale by the time it is used;
 * callers loop until waitpid reports that no child is left. */
pid_t *brig_agent_proc_children(size_t *n);

/* Sends sig to pid and to the process group pid is in, unless that is the caller's own
 * group.  A group other than ours was made by one of our descendants (setsid/setpgid only
 * reach groups within one's own session), so this never hits an outsider. */
void brig_agent_proc_signal(pid_t pid, int sig);

/* Reaps every child that has exited, without blocking; a reaped `w` child gets its status
 * recorded (w may be NULL).  Returns 1 while children remain, 0 once there are none. */
int brig_agent_proc_reap(brig_agent_watch *w);

/* Kills every descendant of the caller and reaps them until none is left.  The caller must
 * be PID 1 (then kill(-1) does it) or a child subreaper, so that orphans come back to it
 * instead of escaping to init.  When w is not NULL and not yet reaped, its process group is
 * killed first (it leads one: the command's).  `sfd` is a non-blocking signalfd that
 * includes SIGCHLD; it is used to wait between rounds and is drained (its other pending
 * signals are dropped: everything is being killed anyway). */
void brig_agent_proc_kill_all(int sfd, brig_agent_watch *w);

/* Reads and discards every pending signal of a non-blocking signalfd.  Returns a bitmask of
 * the signals seen (bit n = signal n, for n < 64). */
uint64_t brig_agent_signalfd_drain(int sfd);

#endif
