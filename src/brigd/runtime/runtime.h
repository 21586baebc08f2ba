/*
 * runtime.h - the runtime driver interface: how a sandbox is isolated.
 *
 * A driver is an ops table chosen once at start-up (oci today, firecracker on
 * KVM hosts later).  Everything above it - exec, files, lifecycle - only needs
 * create/attach/connect/destroy: a new sandbox whose agent has answered the
 * handshake, and a way to open more agent connections to it.
 */
#ifndef BRIG_RUNTIME_H
#define BRIG_RUNTIME_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

typedef struct brig_runtime brig_runtime;
typedef struct brig_rt_sandbox brig_rt_sandbox; /* driver-defined per-sandbox handle */

/* How a sandbox is isolated, a property of each sandbox (docs/security.md): container
 * (the host kernel, under namespaces and a seccomp allow-list: runc or crun) or gvisor
 * (gVisor's user-space kernel: runsc) or microvm (a virtual machine with its own kernel:
 * QEMU's microvm machine, microvm.c).  The names are the API's. */
typedef enum brig_isolation {
    BRIG_ISO_CONTAINER,
    BRIG_ISO_GVISOR,
    BRIG_ISO_MICROVM,
    BRIG_ISO_COUNT
} brig_isolation;

/* "container", "gvisor", "microvm"; "?" for no mode. */
const char *brig_isolation_name(brig_isolation iso);
/* The mode a name names; -1 for a name that is none. */
int brig_isolation_parse(const char *name);

/* A volume a sandbox mounts (docs/volumes.md): its own bounded file system, kept by the
 * driver under its id, mounted at path (absolute, checked by the caller) with its files
 * owned by the sandbox's ids. */
typedef struct brig_rt_volume {
    const char *id;   /* vol_... */
    const char *path; /* inside the sandbox */
    bool read_only;
} brig_rt_volume;

typedef struct brig_rt_spec {
    const char *id;     /* sandbox id; also the container id */
    const char *rootfs; /* the template's root filesystem, used read-only */
    int64_t memory_mib; /* memory limit */
    int64_t pids_limit; /* max tasks */
    double cpus;        /* CPU quota, in CPUs */
    int64_t disk_mib;   /* size of the writable layer */
    unsigned uid_base;  /* first host uid/gid of the sandbox's range */
    unsigned uid_size;  /* ids in the range (root inside = uid_base) */
    brig_isolation isolation;
    const brig_rt_volume *volumes; /* mounted at create, in order; n_volumes of them */
    size_t n_volumes;
    /* Started from a snapshot (docs/snapshots.md), when set: the snapshot's layers, whose
     * chain must hash to snapshot_digest (else the create fails, BRIG_E_CONFLICT
     * "damaged"), are read-only lower layers of its root, their owners (ids of the range
     * at snapshot_uid_base, for its top layer) id-mapped into this sandbox's range. */
    const char *snapshot;
    const char *snapshot_digest;
    unsigned snapshot_uid_base;
    bool snapshot_memory; /* gvisor: restore the snapshot's memory image (snapshot_memory) */
    /* Called by create, when set, once the sandbox's network namespace (netns_fd; not
     * kept by the callee) exists and before anything of the sandbox runs, for an
     * isolation whose network stack takes the interfaces it finds when it starts
     * (gvisor); not called where interfaces can join a running sandbox (container).
     * A failure fails the create. */
    int (*net_first)(void *arg, int netns_fd, brig_error **err);
    void *net_arg;
    /* gvisor: the root's writes go through runsc's gofer into the host's writable layer
     * (--overlay2=none), whatever runsc_overlay says, so that layer_open can take them (a
     * template's build).  The container mode always writes there. */
    bool host_layer;
} brig_rt_spec;

/* What a sandbox uses at one moment (docs/metrics.md); -1 in a field its driver or
 * host cannot tell. */
typedef struct brig_rt_stats {
    int64_t cpu_ns;            /* CPU time used so far */
    int64_t memory_bytes;      /* memory charged to it now */
    int64_t memory_peak_bytes; /* the most ever charged to it */
    int64_t pids;              /* its tasks now */
    int64_t disk_bytes;        /* used of its writable layer */
    int64_t disk_inodes;       /* inodes used there */
} brig_rt_stats;

/* What a sandbox's limits did so far, for why a command or the sandbox ended: each
 * counter only grows, so a caller compares two readings (docs/api.md, "Why it
 * ended").  -1 where unknown. */
typedef struct brig_rt_events {
    int64_t oom_kills;   /* processes its memory limit's OOM killer killed */
    int64_t pids_max;    /* forks its pids limit refused */
    int64_t disk_avail;  /* bytes its writable layer still has for it (now) */
    int64_t inode_avail; /* inodes, the same */
} brig_rt_events;

typedef struct brig_runtime_ops {
    const char *name;
    /* 0 when this host can run sandboxes isolated so; else -1 with a BRIG_E_INVALID
     * *err that names what is missing ("isolation 'gvisor' needs runsc: ..."). */
    int (*available)(brig_runtime *rt, brig_isolation iso, brig_error **err);
    /* Creates and starts a sandbox; returns once its agent answered the handshake.
     * On failure nothing of the sandbox is left behind. */
    int (*create)(brig_runtime *rt, const brig_rt_spec *spec, brig_rt_sandbox **out,
                  brig_error **err);
    /* Re-attaches to a sandbox left by a previous brigd; fails unless it is
     * running and its agent answers, or paused (its agent is not asked). */
    int (*attach)(brig_runtime *rt, const char *id, brig_rt_sandbox **out, brig_error **err);
    /* Opens a new agent connection (handshake done); returns the fd. */
    int (*connect)(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
    /* A new agent connection with only our HELLO sent: the agent forks its handler and
     * answers while the caller goes on; brig_proto_client_hello_recv reads the answer.
     * May be NULL (the driver cannot). */
    int (*connect_begin)(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
    /* Agent connections opened ahead of their use (spareconn.h): begins new ones
     * (connect_begin: nothing waits for the agent) until sb keeps `want` (at most
     * BRIG_SPARECONN_MAX), which connect then hands out first, their handshake finished;
     * want 0 closes those it keeps.  The count kept, or -1 with *err when a connect
     * failed.  None is kept while sb is paused or ending, nor by a driver without
     * connect_begin.  May be NULL (connect always opens one). */
    int (*spares)(brig_runtime *rt, brig_rt_sandbox *sb, int want, brig_error **err);
    /* Kills every process and removes every trace of the sandbox (runtime state,
     * cgroups, mounts, files); -1 when anything is left, and then it may be called
     * again later.  sb may be NULL (leftovers found by reconcile).  Idempotent.  It
     * waits (boundedly) for the processes to die: callers that must not wait call
     * kill(…, 0) first and destroy only once that says they are gone.  sb stays allocated
     * (other threads may still hold it; their connects then fail cleanly) until
     * release. */
    int (*destroy)(brig_runtime *rt, const char *id, brig_rt_sandbox *sb, brig_error **err);
    /* Sends every process of the sandbox SIGKILL and waits up to timeout_ms (0: not
     * at all) until they are gone, without cleaning up (destroy does that).  0 when
     * they are gone, -1 while some still live: a process in uninterruptible sleep
     * dies only when it leaves it.  Idempotent; cheap to call again. */
    int (*kill)(brig_runtime *rt, brig_rt_sandbox *sb, int timeout_ms);
    /* A descriptor that turns readable (POLLIN) once every process of the sandbox is
     * gone, for poll/epoll; owned by sb (valid until release).  -1 when unknown. */
    int (*exit_fd)(brig_runtime *rt, brig_rt_sandbox *sb);
    /* An fd of the sandbox's network namespace (the caller closes it). */
    int (*netns)(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
    /* Frees a handle from create/attach (NULL is fine). */
    void (*release)(brig_runtime *rt, brig_rt_sandbox *sb);
    /* Samples what sandbox sb uses now (cheap: a few files read, never waits on the
     * sandbox); -1 when nothing of it can be read (it is gone). */
    int (*stats)(brig_runtime *rt, brig_rt_sandbox *sb, brig_rt_stats *out);

    /* Its limits' counters now (reads files: no wait on the sandbox). */
    void (*events)(brig_runtime *rt, const char *id, brig_rt_events *out);
    /* The last lines its agent wrote (its console: stdout and stderr), at most n - 1
     * bytes, NUL-terminated; "" when none.  For a sandbox whose agent died. */
    void (*last_words)(brig_runtime *rt, const char *id, char *buf, size_t n);
    /* Volumes (docs/volumes.md): a new, empty one of size_mib under id; removing one no
     * sandbox mounts; letting go of the host's hold on one no sandbox mounts any more (a
     * create that mounts it takes it again); the ids of those it keeps.  The caller
     * serialises them against creates that mount the same volume.  Idempotent. */
    int (*volume_make)(brig_runtime *rt, const char *id, int64_t size_mib, brig_error **err);
    int (*volume_remove)(brig_runtime *rt, const char *id, brig_error **err);
    int (*volume_unmount)(brig_runtime *rt, const char *id, brig_error **err);
    int (*volume_list)(brig_runtime *rt, char ***ids, size_t *n, brig_error **err);
    /* An O_DIRECTORY fd of the sandbox's writable layer as the host sees it (an overlay
     * upper directory: whiteouts, opaque directories; owned by the sandbox's host ids),
     * for a template build (layer.h); BRIG_E_INVALID where the driver keeps none that
     * the host can read (gvisor keeps its writes in its own overlay). */
    int (*layer_open)(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
    /* Pausing (docs/snapshots.md): every process of the sandbox stops where it is
     * (container: the cgroup freezer; gvisor: runsc pause), its memory stays resident;
     * resume lets them go on.  Idempotent.  *memory (pause, may be NULL): in, what is
     * asked ("checkpoint": gvisor writes the sandbox's memory to disk and ends its
     * processes, resume restores it; BRIG_E_INVALID where the driver cannot; else a
     * freeze); out, what was kept of its memory, "resident" or "checkpoint".  A
     * checkpointed sandbox's exit fd is -1 until its resume (then a new one).
     * paused: 1 when the sandbox is paused now, 0 when
     * not, -1 when its runtime cannot tell (gone).  destroy works on a paused sandbox
     * (it thaws it); kill sends its SIGKILL but a frozen process dies of it only once
     * resumed. */
    int (*pause)(brig_runtime *rt, brig_rt_sandbox *sb, const char **memory, brig_error **err);
    int (*resume)(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
    int (*paused)(brig_runtime *rt, const char *id);
    /* Snapshots (docs/snapshots.md): snapshot_take copies paused sandbox sb's writable layer
     * (its file system frozen and flushed meanwhile: crash-consistent) as snapshot id, with
     * its digest (sha256 of its data blocks and their offsets, hex) and the bytes of data it
     * holds; durable: synced to disk before it returns (a fork's, deleted at once and used
     * by sandboxes that a host crash ends anyway, is not); snapshot_remove deletes one
     * (idempotent). */
    int (*snapshot_take)(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                         char digest[65], int64_t *bytes, brig_error **err);
    /* The same, and the sandbox's memory with it (a fork whose children go on running its
     * processes, docs/snapshots.md): gvisor's image of its memory, taken at the same
     * instant as the layer; a create whose spec has snapshot_memory restores it.  The
     * sandbox must be running (it is paused by the caller for the copy); its agent's
     * connections end.  NULL, or BRIG_E_INVALID, where the driver cannot. */
    int (*snapshot_memory)(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                           char digest[65], int64_t *bytes, brig_error **err);
    int (*snapshot_remove)(brig_runtime *rt, const char *id, brig_error **err);
    /* Ids of every snapshot it keeps a layer of (a crash may leave one no row names). */
    int (*snapshot_list)(brig_runtime *rt, char ***ids, size_t *n, brig_error **err);
    /* Ids of every sandbox this driver holds anything for (running or not). */
    int (*list)(brig_runtime *rt, char ***ids, size_t *n, brig_error **err);
    /* How sandboxes of isolation iso are accelerated, where that is a choice (microvm:
     * "kvm", or "tcg": emulated, slow); NULL elsewhere.  May be NULL. */
    const char *(*accel)(brig_runtime *rt, brig_isolation iso);
    void (*free)(brig_runtime *rt);
} brig_runtime_ops;

struct brig_runtime {
    const brig_runtime_ops *ops;
    void *priv; /* driver state */
};

/* Settings every driver receives. */
typedef struct brig_runtime_config {
    const char *state_dir;      /* brigd's state dir; drivers keep their files below it */
    const char *agent_path;     /* the brig-agent binary to run as PID 1 */
    const char *oci_runtime;    /* auto | runc | crun | PATH: isolation "container" */
    const char *runsc;          /* auto | PATH: gVisor's runsc, isolation "gvisor" */
    const char *runsc_platform; /* systrap | ptrace | kvm (settings.c) */
    const char *runsc_overlay;  /* self | memory | none */
    bool runsc_directfs;
    const struct brig_cgroup_ops *cgroup; /* the host's cgroup flavour */
    int64_t pty_max;                      /* ptys per sandbox */
    int64_t tcp_memory_mib;               /* TCP buffer memory per sandbox, where the cgroup flavour
                                             bounds it apart from memory (v1) */
    const char *microvm_accel;            /* kvm | tcg: isolation "microvm" (settings.c) */
    const char *microvm_kernel;           /* the guest kernel's directory; "" is the default */
    bool microvm_memsnap;                 /* microVMs start from memory snapshots (settings.c) */
} brig_runtime_config;

int brig_runtime_oci_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err);
/* The microVM driver alone (isolation "microvm"; microvm.c). */
int brig_runtime_microvm_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err);
/* The driver brigd runs: each sandbox's ops go to the OCI driver or the microVM driver by
 * its isolation (rtmux.c); owns both. */
int brig_runtime_mux_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err);

static inline void brig_runtime_free(brig_runtime *rt)
{
    if (rt)
        rt->ops->free(rt);
}

#endif
