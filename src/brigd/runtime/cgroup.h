/*
 * cgroup.h - which cgroup hierarchy this host has, chosen once at start-up.
 *
 * The OCI runtime creates and removes each sandbox's cgroup from the resources
 * brigd writes into config.json; this module decides what can be asked for: v1
 * (runc's cgroupfs driver; this development host), v2 (unified), or "none" - no
 * usable memory/cpu/pids controllers - which refuses to start sandboxes rather
 * than run them without limits; and it sets, ahead of the runtime, the one limit
 * the runtime cannot (v1's TCP buffer bound).
 */
#ifndef BRIG_CGROUP_H
#define BRIG_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include "error.h"

typedef struct brig_cgroup_ops {
    const char *name; /* "v1" | "v2" | "none" */
    bool swap_limit;  /* swap can be limited (memsw on v1, memory.swap.max on v2) */
    bool tcp_limit;   /* v1's memory.kmem.tcp: socket buffers get a bound of their own (v2
                         charges them to memory.max: no separate bound needed) */
    bool io_weight;   /* a proportional I/O weight is available */
    /* 0 when sandboxes may start, -1 with the reason otherwise. */
    int (*check)(brig_error **err);
    /* CPU time used by a sandbox's cgroup so far, in ns (-1 when unknown). */
    int64_t (*cpu_ns)(const char *id);
    /* Removes what is left of a sandbox's cgroups (the runtime's delete normally
     * removes them, but runc 1.1 reports success when it could not); 0 when none is
     * left, -1 with *err when one is still in use. */
    int (*remove)(const char *id, brig_error **err);
    /* SIGKILLs every process of the sandbox still in its cgroup (thawed first; host root's
     * are not the sandbox's and are left) and waits up to timeout_ms for them to go: what
     * the runtime's delete could not see (runsc's Sentry and gofer once runsc's state is
     * lost).  The number of processes it killed, or -1 when some survived. */
    int (*kill_all)(const char *id, int timeout_ms);
    /* Gives every thread of sandbox id the nice value nice: a warm sandbox is started at a
     * lower priority than requests (pool.c) and gets the normal one when it is claimed. */
    void (*renice)(const char *id, int nice);
    /* Before the runtime starts sandbox id: what the OCI spec cannot ask of this
     * runtime.  v1 with tcp_limit: makes the sandbox's memory cgroup with its TCP
     * buffer limit (tcp_bytes), which the runtime then joins (runc 1.1 ignores OCI's
     * kernelTCP; the limit only counts sockets made after it is set).  0 or -1. */
    int (*prepare)(const char *id, int64_t tcp_bytes, brig_error **err);
    /* TCP buffer memory sandbox id holds now, in bytes, where the flavour counts it
     * apart from memory (v1 with tcp_limit); -1 elsewhere. */
    int64_t (*tcp_bytes)(const char *id);
    /* The limits' event counters of sandbox id's cgroup: processes its memory limit's OOM
     * killer killed (v1 memory.oom_control, v2 memory.events: oom_kill) and forks its
     * pids limit refused (pids.events: max); -1 each where unknown. */
    void (*events)(const char *id, int64_t *oom_kills, int64_t *pids_max);
    /* Lets a frozen sandbox's processes run again (v1 freezer.state THAWED, v2
     * cgroup.freeze 0), whatever froze them: a frozen process does not die of SIGKILL
     * until thawed.  Nothing to thaw is no error. */
    void (*thaw)(const char *id);
} brig_cgroup_ops;

/* Limits of a cgroup brigd makes itself (cgroup_place.c). */
typedef struct brig_cgroup_limits {
    int64_t memory_bytes; /* memory (and swap: none) */
    double cpus;          /* CPU quota, in CPUs */
    int64_t pids;         /* tasks */
} brig_cgroup_limits;

#define BRIG_CGROUP_PROCS_MAX 6

/* Makes sandbox id's cgroup at /brig/<id> with limits l, for a process no OCI runtime
 * starts: procs gets the cgroup.procs files (NULL-terminated; caller frees each) the
 * process must join before it runs anything of the sandbox.  cgroup->remove undoes it. */
int brig_cgroup_place(const brig_cgroup_ops *cg, const char *id, const brig_cgroup_limits *l,
                      char *procs[BRIG_CGROUP_PROCS_MAX], brig_error **err);

/* What sandbox id's cgroup says it uses now: CPU time, memory now and at its peak, tasks;
 * -1 each where unknown. */
void brig_cgroup_usage(const brig_cgroup_ops *cg, const char *id, int64_t *cpu_ns, int64_t *memory,
                       int64_t *memory_peak, int64_t *pids);

/* Detects the host's hierarchy (under root, normally /sys/fs/cgroup). */
const brig_cgroup_ops *brig_cgroup_detect(const char *root);

#endif
