/*
 * ends.h - why a command or a sandbox ended, typed (docs/api.md, "Why it ended").
 *
 * A sandbox's end keeps its detail (the store's `reason`: deleted_by_api, idle_timeout,
 * ...) and shows a typed `end_reason` derived from it, so rows written before the
 * typed reasons get one too.  A command's reason comes from how it exited and from
 * the sandbox's limit counters before and after it (runtime.h, events): the OOM
 * killer's count, not a guess from SIGKILL.
 */
#ifndef BRIG_ENDS_H
#define BRIG_ENDS_H

#include <jansson.h>
#include <stdbool.h>

#include "registry.h"
#include "runtime/runtime.h"

/* The typed reason of a sandbox end: its detail (the store's reason) and whether it
 * failed at create.  "deleted", "idle", "lifetime", "cpu_abuse", "tcp_memory",
 * "balance", "spend_limit", "agent_lost", "oom_killed", "brigd_restart",
 * "host_shutdown", "create_failed"; NULL for no detail. */
const char *brig_end_code(const char *detail, bool failed);

/* The typed reason of a command's end: "timeout", "oom_killed", "pids_limit",
 * "disk_full", "signal" or "exited".  before/after: the counters around it (NULL:
 * unknown; then only timeout, signal and exited). */
const char *brig_exec_reason(const brig_rt_events *before, const brig_rt_events *after,
                             int exit_code, int signal, bool timed_out);

/* sb's counters now. */
void brig_sandbox_events(brigd *d, const brig_sandbox *sb, brig_rt_events *out);

/* The reason of a process object of the agent's (docs/api.md, Processes) that ended,
 * from its exit code, signal, timed_out and the counters at its start when brigd
 * started it: set as "reason" in proc (null while it runs) and returned.  Once per
 * background command brigd started, its end is recorded in the timeline (exec.ended). */
const char *brig_proc_reason(brigd *d, brig_sandbox *sb, json_t *proc);

/* A background command that started: its exec event (a copy is kept) and the
 * counters before it, until its end is seen. */
void brig_bg_started(brig_sandbox *sb, int pid, const json_t *ev, const brig_rt_events *before);

/* The sandbox ends (code: its typed reason): the background commands whose end was
 * not seen get their exec.ended events, with that reason. */
void brig_bg_ended_with(brigd *d, brig_sandbox *sb, const char *code);

/* The janitor's tick: notes the OOM counter, so an agent that dies can be told
 * killed by the OOM killer from lost. */
void brig_ends_tick(brigd *d, brig_sandbox *sb, int64_t now);

/* Why sb's agent died: "oom_killed" when its OOM counter rose since the janitor last
 * looked, or within the last 2 s; else "agent_lost".  words: its last lines (n bytes). */
const char *brig_agent_death(brigd *d, brig_sandbox *sb, char *words, size_t n);

#endif
