/*
 * super_internal.h - what the supervisor's files share, and nothing else includes.  The
 * supervisor of one process (super.c's header tells what it owns and its invariants) is
 * split by concern, each file calling only those listed below it:
 *
 *   super.c         the poll loop and the supervisor's start and end
 *   super_ctl.c     the control channel: connections PID 1 routes to us, and their requests
 *   super_client.c  client I/O: reading frames (stdin), sending queues, followers' refills,
 *                   per-round answers and closing
 *   super_proc.c    the process: its stdin queue, its output into the ring, its exit,
 *                   killing it, process objects
 *   super_conn.c    a client connection: its queue of frames, answers, adding and dropping
 */
#ifndef BRIG_SUPER_INTERNAL_H
#define BRIG_SUPER_INTERNAL_H

#include "super_conn.h" /* the state and connections: the bottom */

/* ---- super_proc.c ---- */

/* The `exit` message of docs/protocol.md. */
json_t *brig_super_exit_msg(const super *S);
/* The process object of docs/protocol.md, with "type" set to `type` (or none when NULL). */
json_t *brig_super_proc_obj(const super *S, const char *type);
/* A stdin client whose stream has ended gets its answer once none of its bytes wait. */
void brig_super_stdin_answer(super *S, sconn *k);
/* No more stdin (queued bytes are dropped). */
void brig_super_stdin_close(super *S);
/* Writes queued stdin to the command. */
void brig_super_stdin_pump(super *S);
/* Whether k may hand us stdin bytes now (one writer at a time, bounded backlog). */
bool brig_super_stdin_turn(const super *S, const sconn *k);
/* Kills the command's group and every remaining descendant. */
void brig_super_kill_all(super *S);
/* Reads at most one chunk (limit bytes) of output channel chan; the bytes read. */
size_t brig_super_out_pump(super *S, int chan, size_t limit);
/* The command has been reaped: drain and close its output, end its stdin, tell everyone. */
void brig_super_finish(super *S);
/* Signals the signalfd reported (a bit per signal number). */
void brig_super_on_signals(super *S, uint64_t seen);

/* ---- super_client.c ---- */

/* A protocol violation or EOF on k.  The primary's going away kills a running command. */
void brig_super_conn_lost(super *S, sconn *k, bool eof);
/* Reads what k's socket holds, frame by frame, while it may hand us stdin. */
void brig_super_conn_read(super *S, sconn *k);
/* Sends what k's socket takes now. */
void brig_super_conn_write(super *S, sconn *k);
/* Per-round duties of each connection: answers that became due, and closing. */
void brig_super_conns_service(super *S, int64_t now);

/* ---- super_ctl.c ---- */

/* Messages from PID 1: connections to serve, or EOF (the record is forgotten). */
void brig_super_ctl_read(super *S);

#endif
