/*
 * agent.h - what brig-agent's modules share.
 *
 * brig-agent is PID 1 inside a sandbox.  Its modules:
 *
 *   main.c      PID 1 duties (reaping, orderly shutdown), the listening socket, the accept loop
 *   handlers.c  PID 1's table of processes and their supervisors; routes connections to them
 *   ctl.c       the control channel between PID 1 and each handler (messages, fd passing)
 *   conn.c      one connection's handler process: handshake, request, dispatch, replies
 *   exec.c      the `exec` operation: user, environment, spawning the command (pipes or pty)
 *   super.c     the supervisor of one process: its poll loop (super_internal.h lists its
 *               parts: super_ctl.c, super_client.c, super_proc.c, super_conn.c)
 *   ring.c      a process's output buffer
 *   procops.c   the handler's half of the proc_* operations (routing, proc_list)
 *   files.c     write_file and read_file
 *   fsops.c     stat, list_dir, remove, move, mkdir
 *   tar.c       tar_extract and tar_create, with the sandbox's own tar
 *   guest.c     guest_sync: a microVM guest's clock, entropy and link after a resume or restore
 *   user.c      passwd and group entries, parsed from the sandbox's files
 *   proc.c      the process tree: list children, signal them, kill and reap every descendant
 *
 * Requests are decoded and validated, free of side effects, by src/common/agentproto.c, which
 * brigd's client shares (the operations' names, the typed requests, the messages' types).
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
#include "agentproto.h"

/* One connection, owned by its handler process. */
typedef struct brig_agent_conn {
    int fd;           /* the connected stream socket */
    int ctl;          /* the handler's control channel to PID 1 (ctl.c) */
    brig_frame frame; /* receive buffer of the blocking frame reads */
    int version;      /* negotiated protocol version, once the handshake is done */
    pid_t agent_pid;  /* the main agent process (reported in HELLO; 1 inside a sandbox) */
    bool replied;     /* the answer (or an error) went out: no error reply may follow */
    bool gone;        /* a write to the peer failed: send nothing more */
    bool handed_off;  /* the connection now belongs to a supervisor: just close our fd */
} brig_agent_conn;

/* ---- conn.c ---- */

/* Runs in a freshly forked handler process that owns `fd` (an accepted connection), `ctl`
 * (its end of a control channel to PID 1) and no other agent descriptor: resets the signal
 * state, becomes a child subreaper, serves one request and exits.  Never returns. */
void brig_agent_conn_serve(int fd, int ctl, pid_t agent_pid) __attribute__((noreturn));

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

/* Reads and drops the client's DATA frames until the empty one, EOF or a frame that is not
 * DATA (after an early error the client may still be sending). */
void brig_agent_discard_input(brig_agent_conn *c);

/* Ends a connection politely: shuts our half, reads away what the peer already sent, closes.
 * Closing a unix socket with unread data makes the peer's next read fail with ECONNRESET
 * instead of a clean EOF (net/unix/af_unix.c, unix_release_sock). */
void brig_agent_close_polite(int fd);

/* The protocol code for an errno: ENOENT not_found, EEXIST/ENOTEMPTY exists, EISDIR
 * is_directory, ENOTDIR not_directory, EACCES/EPERM/EROFS permission, ENOSPC/EDQUOT no_space,
 * EFBIG too_large, anything else io. */
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

/* ---- the operations (req is the request object, borrowed; q its parsed form) ---- */

typedef int brig_agent_op_fn(brig_agent_conn *c, json_t *req, const brig_agent_req *q,
                             brig_error **err);

brig_agent_op_fn brig_agent_exec;       /* exec.c */
brig_agent_op_fn brig_agent_write_file; /* files.c */
brig_agent_op_fn brig_agent_read_file;
brig_agent_op_fn brig_agent_proc_list; /* procops.c */
brig_agent_op_fn brig_agent_proc_route;
brig_agent_op_fn brig_agent_stat; /* fsops.c */
brig_agent_op_fn brig_agent_list_dir;
brig_agent_op_fn brig_agent_remove;
brig_agent_op_fn brig_agent_move;
brig_agent_op_fn brig_agent_mkdir;
brig_agent_op_fn brig_agent_tar_extract; /* tar.c */
brig_agent_op_fn brig_agent_tar_create;
brig_agent_op_fn brig_agent_guest_sync; /* guest.c */
brig_agent_op_fn brig_agent_fs_freeze;

/* mkdir -p of dir; created directories get mode 0755.  A component that exists but is not
 * a directory fails with ENOTDIR.  (files.c) */
int brig_agent_mkdir_parents(const char *dir, brig_error **err);

/* ---- ctl.c: the control channel (a SOCK_SEQPACKET socketpair per handler) ---- */

enum {
    BRIG_CTL_REGISTER = 1, /* handler -> PID 1: I supervise process `pid` (answer: ACK) */
    BRIG_CTL_EXITED,       /* supervisor -> PID 1: my process exited (no answer) */
    BRIG_CTL_ROUTE,        /* handler -> PID 1, with a connection: hand it and `req` to the
                              supervisor of `pid` (answer: ACK, NOT_FOUND or BUSY) */
    BRIG_CTL_LIST,         /* handler -> PID 1: the supervised pids (answer: PIDS) */
    BRIG_CTL_ACK,
    BRIG_CTL_NOT_FOUND,
    BRIG_CTL_BUSY,
    BRIG_CTL_ATTACH,  /* PID 1 -> supervisor, with a connection: serve `req` on it */
    BRIG_CTL_PIDS,    /* PID 1 -> handler: brig_ctl_pids */
    BRIG_CTL_QUIESCE, /* PID 1 -> supervisor: drop every client connection (answer: ACK) */
};

typedef struct brig_ctl_msg {
    uint32_t type;
    int32_t pid;
    brig_proc_req req; /* ROUTE, ATTACH */
} brig_ctl_msg;

#define BRIG_CTL_PIDS_MAX 4096 /* proc_list lists at most this many processes */

typedef struct brig_ctl_pids {
    uint32_t type; /* BRIG_CTL_PIDS */
    uint32_t n;
    int32_t pids[BRIG_CTL_PIDS_MAX]; /* oldest first; only n are sent */
} brig_ctl_pids;

/* Sends one message of n bytes, with descriptor pass_fd attached unless it is -1.  With
 * MSG_DONTWAIT when nonblock.  Returns 0 or -1 with errno. */
int brig_ctl_send(int ctl, const void *msg, size_t n, int pass_fd, bool nonblock);

/* Receives one message into buf (cap bytes).  Returns its size (> 0), 0 at EOF, or -1 with
 * errno (EAGAIN when nonblock and nothing is there; EMSGSIZE when it did not fit).  A
 * descriptor that came with it is stored in *fd (O_CLOEXEC), else *fd = -1 (also when one
 * was sent but could not be received, e.g. at the descriptor limit); fd may be NULL when
 * none is expected (one that comes anyway is closed). */
ssize_t brig_ctl_recv(int ctl, void *buf, size_t cap, int *fd, bool nonblock);

/* Sends msg and waits for the answer (blocking), which is stored in *ans (ans_cap bytes).
 * Returns the answer's size, or -1 with *err. */
ssize_t brig_ctl_call(int ctl, const brig_ctl_msg *msg, int pass_fd, void *ans, size_t ans_cap,
                      brig_error **err);

/* ---- handlers.c: PID 1's table (see the file's header) ---- */

typedef struct brig_reg_slot {
    int ctl;        /* PID 1's end of the handler's control channel; -1 once closed */
    pid_t handler;  /* the handler's own pid (a supervisor's, once it registered) */
    bool pending;   /* quiescing: its connections may still be open */
    pid_t pid;      /* the process it supervises, 0 before it registers one */
    uint64_t born;  /* registration order */
    uint64_t ended; /* order of exit; 0 while running */
} brig_reg_slot;

typedef struct brig_handlers {
    brig_reg_slot *v;
    size_t n, cap;
    uint64_t seq;
    bool quiet; /* quiescing or quiet: no connection is routed any more */
} brig_handlers;

/* Finished processes kept (with their supervisors) until this many newer ones finished. */
#define BRIG_KEEP_FINISHED 64

void brig_handlers_add(brig_handlers *reg, int ctl, pid_t handler);
/* Handles every message waiting on slot i's channel (it is readable or hung up). */
void brig_handlers_serve(brig_handlers *reg, size_t i);
/* Drops the slots whose channel was closed. */
void brig_handlers_sweep(brig_handlers *reg);
/* Closes every channel (in a new handler: they are PID 1's, not its; at shutdown: every
 * supervisor then knows it is forgotten). */
void brig_handlers_close_all(brig_handlers *reg);
/* Quiescing (a gVisor checkpoint, main.c): every handler that serves a connection is killed
 * and every supervisor told to drop its clients (BRIG_CTL_QUIESCE); no connection is routed
 * from here on.  brig_handlers_quiet: true once every one of them is done (its channel
 * closed, or the supervisor's ACK came).  brig_handlers_wake ends it. */
void brig_handlers_quiesce(brig_handlers *reg);
bool brig_handlers_quiet(const brig_handlers *reg);
void brig_handlers_wake(brig_handlers *reg);

/* ---- user.c ---- */

typedef struct brig_user {
    char *name, *home; /* owned */
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* owned: the primary group and every group that lists the user */
    size_t ngroups;
} brig_user;

/* Looks `name` up in /etc/passwd and its groups in /etc/group.  An unknown name is
 * BRIG_E_INVALID (bad_request). */
int brig_agent_user_lookup(const char *name, brig_user *u, brig_error **err);
void brig_agent_user_dispose(brig_user *u);

/* ---- ring.c: a process's output buffer ---- */

typedef struct brig_ring {
    uint8_t *data;    /* byte p at data[p % cap] (sealed: data[p - tail]) */
    size_t cap;       /* allocated bytes of data */
    size_t limit;     /* what the buffer may hold: the exec's buffer_bytes */
    uint64_t head;    /* bytes ever appended */
    uint64_t tail;    /* the oldest byte held; also the bytes dropped so far */
    uint64_t *runs;   /* circular: start << 2 | channel of each run of one channel */
    size_t run_cap;   /* allocated runs */
    size_t run_max;   /* the most runs kept */
    size_t run_first; /* index of the oldest run */
    size_t run_n;     /* runs held */
    bool sealed;      /* shrunk to what it holds: no more appends */
} brig_ring;

void brig_ring_init(brig_ring *r, size_t limit);
void brig_ring_dispose(brig_ring *r);
/* Appends n bytes of channel chan (1 or 2), dropping the oldest bytes beyond the limit. */
void brig_ring_append(brig_ring *r, int chan, const void *p, size_t n);
/* Copies up to max bytes of one channel from position *pos into dst and advances *pos;
 * returns the count (0: nothing new) and the channel in *chan.  When *pos was below the
 * tail, *skipped gets the bytes that were dropped before they could be read (and *pos
 * jumps to the tail); else 0. */
size_t brig_ring_read(const brig_ring *r, uint64_t *pos, int *chan, void *dst, size_t max,
                      uint64_t *skipped);
/* The process has ended: shrink the buffer to what it holds; appends are ignored after. */
void brig_ring_seal(brig_ring *r);

/* ---- exec.c, super.c: a supervised process ---- */

/* A started command, as the supervisor owns it. */
typedef struct brig_child {
    pid_t pid;          /* leader of its own session and process group */
    int out[3];         /* our read ends: [1] stdout (or the pty master), [2] stderr; -1 none */
    int in;             /* our end of its stdin (a pipe, or a dup of the pty master); -1 none */
    bool pty;           /* out[1] and in are a pty master (one stream, on channel 1) */
    int64_t t0;         /* monotonic ms at fork */
    int64_t started_at; /* ms since the epoch at fork */
} brig_child;

/* Runs the supervisor of a started process until it is done (see super.c).  Takes c's
 * connection (as the process's foreground client, or only to answer `started` and relay
 * initial stdin when s->background), `sfd` (the handler's signalfd: SIGCHLD, SIGTERM,
 * SIGINT) and ch's descriptors.  req (borrowed, kept alive by the caller) describes the
 * process in process objects. */
void brig_agent_supervise(brig_agent_conn *c, json_t *req, const brig_exec_spec *s, int sfd,
                          brig_child *ch);

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
 * signals are returned as a bitmask, as brig_agent_signalfd_drain does). */
uint64_t brig_agent_proc_kill_all(int sfd, brig_agent_watch *w);

/* Reads and discards every pending signal of a non-blocking signalfd.  Returns a bitmask of
 * the signals seen (bit n = signal n, for n < 64). */
uint64_t brig_agent_signalfd_drain(int sfd);

#endif
