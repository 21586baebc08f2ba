/*
 * cmdends.h - what brigd keeps of a sandbox's commands until it has seen them end:
 * each background command's audit event and the limits' counters at its start (its
 * end is recorded once, by whoever sees it first: a process read, a wait, its output's
 * exit, or the sandbox's end), and the OOM counter the janitor saw last (for an agent
 * that dies: killed by the OOM killer, or lost).  Plain data under its own lock;
 * ends.c decides what it means.
 */
#ifndef BRIG_CMDENDS_H
#define BRIG_CMDENDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime.h"

typedef struct brig_cmdends brig_cmdends;

brig_cmdends *brig_cmdends_new(void);
void brig_cmdends_free(brig_cmdends *c); /* NULL is fine */

/* A background command started: its event (taken) and the counters before it.  A pid
 * the sandbox reuses replaces the older entry (whose end was then never seen). */
void brig_cmdends_add(brig_cmdends *c, int pid, json_t *ev, const brig_rt_events *before);
/* The counters before pid's start; false when brigd did not start it (or saw its end). */
bool brig_cmdends_before(brig_cmdends *c, int pid, brig_rt_events *before);
/* Takes pid's event off (the caller records its end); NULL when none. */
json_t *brig_cmdends_take(brig_cmdends *c, int pid);
/* Takes every event off (the sandbox ends); a JSON array (empty: none). */
json_t *brig_cmdends_take_all(brig_cmdends *c);

/* The janitor's reading of the OOM counter at now (ms); the last one and when it last
 * rose come back from brig_cmdends_oom_seen. */
void brig_cmdends_oom_note(brig_cmdends *c, int64_t oom_kills, int64_t now);
void brig_cmdends_oom_seen(brig_cmdends *c, int64_t *oom_kills, int64_t *rose_at);

#endif
