/*
 * super_conn.h - the supervisor's state (super, its client connections) and what
 * super_conn.c does with a connection: queue frames and answers, add and drop it.  The
 * bottom of the supervisor's files (super_internal.h lists them); private to them.
 */
#ifndef BRIG_SUPER_CONN_H
#define BRIG_SUPER_CONN_H

#include "agent.h"

#include "framedec.h"
#include "util.h"

#define OUTQ_HIGH     (256u << 10)       /* primary: stop reading the output above this backlog */
#define INQ_HIGH      (1u << 20)         /* stop taking stdin from clients above this backlog */
#define FILL_LOW      (64u << 10)        /* followers: refill from the ring below this backlog */
#define RETIRE_GRACE  30000              /* ms a forgotten record still serves attached clients */
#define TIMEOUT_LIMIT (INT64_C(1) << 40) /* ~35 years: "never" without overflowing */

typedef enum { K_PRIMARY, K_BGIN, K_OUTPUT, K_STDIN, K_WAIT, K_ONESHOT } sconn_kind;

/* One client connection of this process. */
typedef struct sconn {
    int fd;
    sconn_kind kind;
    brig_buf outq; /* encoded frames not yet sent */
    size_t outq_off;
    brig_framedec rx;    /* frames from the client */
    bool reads_stdin;    /* DATA on channel 0 may come, until the empty frame */
    bool in_ended;       /* ... and it came */
    bool discard;        /* its stdin frames are dropped (error answered, or stdin closed) */
    bool replied;        /* a final answer is queued (or, primary: `started` went out) */
    bool closing;        /* close once outq is sent (and the stdin stream has ended) */
    bool dead;           /* closed: freed at the end of the round */
    uint64_t in_written; /* stdin: bytes of this client written to the command */
    uint64_t rpos;       /* output: the next ring position to send */
    uint64_t end_pos;    /* output without follow: stop at this position */
    bool follow;         /* output: stay for new output and the exit */
    int64_t deadline;    /* wait: monotonic ms, 0 = none */
} sconn;

typedef struct super {
    brig_agent_conn *c;
    json_t *req; /* the exec request (process objects show argv/cmd/user) */
    const brig_exec_spec *s;
    brig_child *ch;
    int sfd;              /* signalfd: SIGCHLD, SIGTERM, SIGINT */
    int tfd;              /* the timeout's timerfd, -1 without one */
    int ctl;              /* control channel to PID 1; -1 once PID 1 forgot us */
    brig_agent_watch cmd; /* the command: pid, its status once reaped */
    bool exited;          /* reaped, output drained, pipes closed */
    bool timed_out;
    int64_t t1;       /* monotonic ms at the exit */
    int64_t ended_at; /* ms since the epoch at the exit */
    brig_ring ring;
    brig_buf inq; /* stdin bytes not yet written to the command */
    size_t inq_off;
    sconn *in_owner;          /* whose bytes are in inq */
    bool stdin_closed;        /* no stdin is taken any more */
    bool stdin_close_pending; /* close it (or send VEOF) once inq is written */
    bool chan_ended[3];       /* primary: the empty DATA frame of channel 1/2 is queued */
    int pty_held;             /* the pty master after its EIO, until the command is reaped */
    sconn **conns;
    size_t nconns, cap;
    sconn *primary; /* the foreground client, NULL when there is none (any more) */
    bool retired;   /* PID 1 forgot the record */
    bool stopping;  /* the agent is shutting down */
    int64_t retired_at;
} super;

static inline size_t brig_super_outq_pending(const sconn *k)
{
    return k->outq.len - k->outq_off;
}

static inline size_t brig_super_inq_pending(const super *S)
{
    return S->inq.len - S->inq_off;
}

/* ---- super_conn.c ---- */

void brig_super_queue_frame(sconn *k, uint8_t type, uint16_t chan, const void *p, size_t n);
/* Takes ownership of msg. */
void brig_super_queue_json(sconn *k, json_t *msg);
/* Queues a final answer (takes msg); the connection closes once it is sent. */
void brig_super_reply(sconn *k, json_t *msg);
void brig_super_reply_code(sconn *k, const char *code, const char *msg);
/* A new connection of kind on fd (made non-blocking). */
sconn *brig_super_conn_add(super *S, int fd, sconn_kind kind);
/* Closes k (politely when it ended normally); it is freed at the end of the round. */
void brig_super_conn_drop(super *S, sconn *k, bool polite);
/* Frees the connections dropped this round. */
void brig_super_conns_sweep(super *S);

#endif
