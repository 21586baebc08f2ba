/*
 * oci_internal.h - what the OCI driver's files share (oci.c, the driver's
 * lifecycle ops; oci_bundle.c, a sandbox's directory and root file system),
 * and nothing else includes.  runtime.h stays the driver interface.
 */
#ifndef BRIG_OCI_INTERNAL_H
#define BRIG_OCI_INTERNAL_H

#include <stdbool.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "cgroup.h"
#include "core/id.h"
#include "runtime.h"
#include "util.h"

typedef struct oci {
    const brig_cgroup_ops *cgroup; /* the host's cgroup flavour */
    char *runtime;                 /* runtime binary (absolute path): containers */
    char *root;                    /* runtime state dir (--root), ours alone */
    char *runsc;                   /* gVisor's runsc (absolute path), or NULL */
    char *runsc_root;              /* runsc's state dir (--root), ours alone */
    char *runsc_missing;           /* why isolation gvisor cannot run here, or NULL */
    char *runsc_flags[8];          /* runsc's flags for every command, NULL-terminated */
    bool runsc_host_layer;         /* runsc_overlay none: every gVisor root writes on the host */
    char *sb_dir;                  /* <state>/sandboxes */
    char *agent_layer;             /* <state>/agent/<hash> */
    char *disk_dir;                /* <state>/disk: golden images of the writable layer */
    char *vol_dir;                 /* <state>/volumes: volumes' images and host mounts */
    int64_t pty_max;               /* ptys per sandbox: its devpts instance's max= */
    int64_t tcp_memory_mib;        /* TCP buffers per sandbox (cgroup->prepare) */
    int seccomp_fd;                /* the compiled filter, a container's fd 4 (seccomp.h) */
} oci;

struct brig_rt_sandbox {
    char id[BRIG_ID_MAX];
    int dirfd; /* O_PATH fd of the sandbox directory */
    int pidfd; /* container init; -1 when unknown */
    pid_t pid; /* its host pid (valid while pidfd says it lives) */
    brig_isolation iso;
    bool host_layer; /* gvisor: its root's writes reach its writable layer (gvisor.c) */
    bool killed;     /* the kill op was called: it is ending */
};

/* ---- gvisor.c: what isolation gvisor adds --------------------------------------- */

/* Finds runsc (want: "auto" or a path) and checks that it runs; sets o->runsc and
 * o->runsc_root, or o->runsc_missing with what is missing.  -1 only for an error of
 * our own (the state directory). */
int brig_gvisor_init(oci *o, const brig_runtime_config *cfg, brig_error **err);
/* A new network namespace (an fd of it, O_CLOEXEC). */
int brig_gvisor_netns_new(int *fd, brig_error **err);
/* What runsc must not see (spawn.h's mask): /proc/sys/net.  runsc (2024-07) takes a
 * namespace in which /proc/sys/net/core/rmem_default exists for the host's root
 * namespace and refuses it; since Linux 6.x every network namespace has that file. */
extern const char *const brig_gvisor_mask[];
/* Is id a sandbox runsc holds state for? */
bool brig_gvisor_has(const oci *o, const char *id);
/* A gVisor sandbox whose root's writes go through the gofer into its writable layer on the
 * host (--overlay2=none: created with brig_rt_spec.host_layer, or runsc_overlay none) is
 * marked so in its directory (host-layer), where a restarted brigd finds it; the host can
 * then copy its writes (a snapshot, a template's build).  mark: at its create. */
int brig_gvisor_host_layer_mark(const oci *o, const brig_rt_spec *spec, int dirfd,
                                brig_error **err);
bool brig_gvisor_host_layer(int dirfd);
/* After `runsc run`: what runsc made too open on the host, closed (its file store). */
int brig_gvisor_seal(const oci *o, const char *id, brig_error **err);

/* Is sandbox id checkpointed (its memory on disk, no process of it runs: gvisor_ckpt.c)? */
bool brig_gvisor_checkpointed(const oci *o, const char *id);
/* gvisor_ckpt.c: the memory checkpoint of a gVisor sandbox (docs/snapshots.md). */
/* Quiets its agent, checkpoints sb's memory to disk and ends its processes (sb's pidfd
 * closed); on failure it runs on, when it can. */
int brig_gvisor_checkpoint(oci *o, brig_rt_sandbox *sb, brig_error **err);
/* Restores a checkpointed sb and waits for its agent; the checkpoint is removed once it runs.
 * On failure it stays checkpointed. */
int brig_gvisor_restore(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
/* For a fork with memory (oci_snapshot.c): running sb's agent closes every connection
 * (SIGUSR2, until it did); listens again (SIGUSR1: a running sandbox, a restored one);
 * the image of paused sb's memory (`runsc checkpoint --leave-running`: it stays). */
int brig_gvisor_agent_quiet(oci *o, brig_rt_sandbox *sb, brig_error **err);
int brig_gvisor_agent_listen(oci *o, const char *id, brig_error **err);
int brig_gvisor_image(oci *o, brig_rt_sandbox *sb, const char *img, brig_error **err);

/* ---- oci_start.c: the runtime, and the steps of a create that a restore takes again ---- */

/* Runs `<runtime> --root <root> [runsc's flags] args...` (the runtime of iso); output
 * (the runtime's messages) into out. */
int brig_oci_run_runtime(oci *o, brig_isolation iso, const char *const *args, brig_buf *out,
                         int *status, brig_error **err);
/* The last "msg=" of runc's log lines, or the last line: what went wrong (caller frees). */
char *brig_oci_runtime_message(const char *text);
/* The same, a non-zero exit an error with the runtime's message. */
int brig_oci_run(oci *o, brig_isolation iso, const char *const *args, brig_error **err);
/* The driver's connect op: a new connection to sb's agent, handshake done; and its
 * connect_begin op: the same with only our HELLO sent. */
int brig_oci_connect(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
int brig_oci_connect_begin(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);

/* `<runtime> run --detach` on sandbox id's bundle (image: `runsc restore` from that
 * checkpoint instead), the agent's listening socket lfd (or -1) as the container's fd 3 and
 * the runtime's output appended to agent.log; fails with the runtime's own message. */
int brig_oci_runtime_start(const oci *o, const char *id, brig_isolation iso, bool host_layer,
                           int lfd, const char *image, brig_error **err);
/* The container's init, from the runtime's pid file: a pidfd held on it before anything
 * else can happen to it. */
int brig_oci_init_hold(const oci *o, brig_rt_sandbox *sb, brig_error **err);
/* Ready when the agent answers the handshake (gVisor: once its socket appears). */
int brig_oci_agent_ready(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);

/* ---- oci_events.c ------------------------------------------------------------ */

/* The driver's events and last_words ops (runtime.h). */
void brig_oci_events(brig_runtime *rt, const char *id, brig_rt_events *out);
void brig_oci_last_words(brig_runtime *rt, const char *id, char *buf, size_t n);

/* ---- oci_bundle.c ------------------------------------------------------------ */

/* "<sb_dir>/<id>/<name>" (name NULL: the directory); caller frees. */
char *brig_oci_path(const oci *o, const char *id, const char *name);
/* "/proc/self/fd/<dirfd>/agent.sock": keeps unix socket paths short whatever
 * the state directory is (sun_path holds 108 bytes). */
void brig_oci_sock_path(const brig_rt_sandbox *sb, struct sockaddr_un *sa);
int brig_oci_mkdir_p(const char *path, mode_t mode, brig_error **err);
/* rm -rf that never crosses into another mount (a still-mounted rootfs). */
void brig_oci_rm_rf(const char *path);
/* Copies the agent binary into a content-addressed layer directory under
 * state_dir (*layer: its path, caller frees). */
int brig_oci_agent_layer(const char *state_dir, const char *agent_path, char **layer,
                         brig_error **err);
/* Fails with a clear error unless every directory up to dir is searchable by
 * other users (a sandbox's root is an unprivileged host uid). */
int brig_oci_check_searchable(const char *dir, brig_error **err);

/* The steps of a create that make the bundle, in order; each leaves what it
 * made for brig_oci_bundle_remove (and the runtime's delete) to take away. */
/* Makes the sandbox's directory, 0710 root:<its gid>; *dirfd: an O_PATH fd
 * of it.  -1 leaves nothing (a directory that existed is not ours: untouched). */
int brig_oci_bundle_dir(const oci *o, const brig_rt_spec *spec, int *dirfd, brig_error **err);
/* rootfs/: the writable layer (disk.c), the template id-mapped through a new
 * user namespace (*userns, caller closes; idmap.c), the overlay of the agent
 * layer, the template and the writable layer. */
int brig_oci_bundle_root(const oci *o, const brig_rt_spec *spec, int dirfd, int *userns,
                         brig_error **err);
/* The agent's listening socket, agent.sock (the fd; caller closes). */
int brig_oci_bundle_listen(const brig_rt_sandbox *sb, brig_error **err);
/* config.json (oci_spec.c), joining the namespace ns: the user namespace of a
 * container, the network namespace of a gVisor sandbox. */
int brig_oci_bundle_config(const oci *o, const brig_rt_spec *spec, int ns, brig_error **err);
/* Unmounts the root, the template and the writable layer; what is not
 * mounted is no error.  -1 when one stays mounted (the directory must stay). */
int brig_oci_bundle_unmount(const oci *o, const char *id, brig_error **err);
/* The runtime op layer_open (runtime.h): disk/upper of a container sandbox. */
int brig_oci_layer_open(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);

/* ---- volume.c: volumes (docs/volumes.md) ------------------------------------------------ */

/* The driver's volume ops (runtime.h). */
int brig_oci_volume_make(brig_runtime *rt, const char *id, int64_t size_mib, brig_error **err);
int brig_oci_volume_remove(brig_runtime *rt, const char *id, brig_error **err);
int brig_oci_volume_unmount(brig_runtime *rt, const char *id, brig_error **err);
int brig_oci_volume_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err);
/* A create's step, within brig_oci_bundle_root: each of spec's volumes mounted on the host
 * (once per volume) and cloned, id-mapped through userns, at vol/<n> of the sandbox's
 * directory; what was made stays for destroy. */
int brig_oci_volumes_bind(const oci *o, const brig_rt_spec *spec, int dirfd, int userns,
                          brig_error **err);
/* Appends the bind mounts of spec's volumes (vol/<n> at their paths) to cfg's mounts. */
void brig_oci_volumes_spec(const oci *o, const brig_rt_spec *spec, json_t *cfg);
/* Unmounts the sandbox's clones (vol/<n>); none is no error. */
int brig_oci_volumes_unmount(const oci *o, const char *id, brig_error **err);

/* ---- oci_pause.c: the driver's pause, resume and paused ops (runtime.h) ------------ */

int brig_oci_pause(brig_runtime *rt, brig_rt_sandbox *sb, const char **memory, brig_error **err);
int brig_oci_resume(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err);
int brig_oci_paused(brig_runtime *rt, const char *id);

/* ---- oci_snapshot.c, oci_layer.c: snapshots' layers (runtime.h)
 * ----------------------------------- */

int brig_oci_snapshot_take(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                           char digest[65], int64_t *bytes, brig_error **err);
/* "<state>/snapshots/<id>/<name>" (caller frees). */
char *brig_oci_snapshot_file(const oci *o, const char *id, const char *name);
int brig_oci_snapshot_memory(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                             char digest[65], int64_t *bytes, brig_error **err);
int brig_oci_snapshot_remove(brig_runtime *rt, const char *id, brig_error **err);
/* oci_layer.c: thaws the sandbox's file system, frozen for a snapshot by a brigd that died
 * meanwhile (FIFREEZE outlives its caller); one not frozen: nothing. */
void brig_oci_disk_thaw(const oci *o, const char *id);
int brig_oci_snapshot_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err);
/* oci_layer.c: reads in's data, each 64 KiB block that is not all zeros (out >= 0: copies
 * them to out, sized like in), into its digest (hex); *bytes: the data hashed. */
int brig_oci_layer_copy(int in, int out, char hex[65], int64_t *bytes, brig_error **err);

/* Records that the layer file open at fd (at path) matches its digest as it is now
 * (path.verified; oci_layer.c checks it again once the file changed). */
void brig_oci_layer_mark(int fd, const char *path);

/* A snapshot's layers, top first: its own (disk.img), then those of the snapshot its
 * sandbox was made from, and so on (each an ext4 image whose upper/ is the layer). */
#define BRIG_OCI_MAX_LAYERS 32
typedef struct brig_oci_layer {
    char file[32];     /* its image's name in the snapshot's (or sandbox's layers/) directory */
    unsigned uid_base; /* the range whose ids own its files */
    char digest[65];   /* of its image (brig_oci_layer_copy) */
} brig_oci_layer;
typedef struct brig_oci_chain {
    brig_oci_layer l[BRIG_OCI_MAX_LAYERS];
    size_t n;
} brig_oci_chain;
/* The chain's digest, what a snapshot's row keeps: its one layer's, or the sha256 of every
 * layer's "<digest> <uid_base>\n", top first. */
void brig_oci_chain_digest(const brig_oci_chain *c, char hex[65]);
/* The manifest's "layers" (a manifest without: its disk.img, owned by uid_base's range);
 * BRIG_E_CONFLICT for one that cannot be read. */
int brig_oci_chain_read(const char *manifest, unsigned uid_base, brig_oci_chain *c,
                        brig_error **err);
json_t *brig_oci_chain_json(const brig_oci_chain *c);
/* A create's step for a sandbox made from a snapshot: the snapshot's layers linked, checked
 * (once) and mounted, read-only and id-mapped into spec's range, under layers/;
 * *lowers: their paths for the overlay's lowerdir (caller frees).  BRIG_E_CONFLICT
 * "damaged" for a layer or manifest that does not match its digest. */
int brig_oci_snapshot_layers(const oci *o, const brig_rt_spec *spec, char **lowers,
                             brig_error **err);
/* Unmounts a sandbox's snapshot layers (none: no error). */
int brig_oci_layers_unmount(const oci *o, const char *id, brig_error **err);

/* ---- oci_stats.c ------------------------------------------------------------- */

/* The driver's stats op: its cgroup's counters and its writable layer's use. */
int brig_oci_stats(brig_runtime *rt, brig_rt_sandbox *sb, brig_rt_stats *out);

#endif
