/*
 * microvm_internal.h - what the microVM driver's files share (microvm.c, the driver's
 * lifecycle ops; microvm_boot.c, a VM's start and its agent's connections; microvm_memsnap.c,
 * starts from memory snapshots; microvm_image.c, the guest's initramfs and disks;
 * microvm_qemu.c, QEMU as its VMM), and nothing else includes.  runtime.h stays the driver
 * interface.
 *
 * A sandbox of isolation "microvm" is a virtual machine with its own kernel (Debian's cloud
 * kernel, scripts/setup-vm), whose PID 1 is brig-agent on the template's root file system.
 * The VMM that runs it is an ops table of its own (brig_vmm_ops): QEMU's microvm machine
 * now; Firecracker or Cloud Hypervisor can be another on hosts that install them.
 */
#ifndef BRIG_MICROVM_INTERNAL_H
#define BRIG_MICROVM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "core/id.h"
#include "error.h"
#include "runtime.h"

/* The agent's TCP port inside the guest, forwarded by the VMM to 127.0.0.1:AGENT_PORT of
 * the sandbox's own network namespace (only brigd enters it). */
#define BRIG_VM_AGENT_PORT   5000
#define BRIG_VM_AGENT_PORT_S "5000"

/* The MAC of the sandbox's NIC in a VM started from a memory snapshot (and in the VM the
 * snapshot was taken of): the same device line in both; the agent then gives it the
 * sandbox's MAC and address (guest_sync).  The agent's link is 52:54:00:00:00:01. */
#define BRIG_VM_NIC_MAC "52:54:00:00:00:02"

typedef struct microvm microvm;

/* The guest's network (microvm_net.c): a tap bridged to the sandbox's eth0, whose address,
 * gateway and MAC the guest takes.  tap_fd -1: no network (brigd's networking is off). */
typedef struct brig_vm_net {
    int tap_fd;
    uint32_t addr, gw; /* network byte order */
    unsigned char mac[6];
} brig_vm_net;

/* netns -1: a new network namespace (lo up), its fd; else a TCP socket made inside netns
 * (the agent's port is reached there).  -1 with *err. */
int brig_vm_netns_run(int netns, brig_error **err);

/* Sets it up in namespace netns, after the network layer attached eth0 there. */
int brig_vm_net_setup(int netns, brig_vm_net *out, brig_error **err);
void brig_vm_net_dispose(brig_vm_net *n);
/* " brig.ip=A brig.gw=G brig.mac=M" for the guest's /init, or "" (caller frees). */
char *brig_vm_net_cmdline(const brig_vm_net *n);

/* A volume as the VMM gets it (microvm_vol.c): its image, opened read-only or not. */
typedef struct brig_vm_vol {
    int fd;
    int ro_fd; /* read-write ones: a read-only descriptor too (QEMU opens it so first) */
    bool ro;
    const char *path; /* in the guest */
} brig_vm_vol;

/* Opens spec's volumes' images (<state_dir>/volumes/<id>.img) into out[n_volumes];
 * BRIG_E_CONFLICT for one the host has mounted (a container sandbox uses it). */
int brig_vm_vols_open(const char *state_dir, const brig_rt_spec *spec, brig_vm_vol *out,
                      brig_error **err);
void brig_vm_vols_close(brig_vm_vol *v, size_t n);
/* " brig.vol=<n>:<rw|ro>:<path>..." for the guest's /init, or "" (caller frees); NULL and
 * BRIG_E_INVALID when the paths do not fit the kernel's command line. */
char *brig_vm_vols_cmdline(const brig_vm_vol *v, size_t n, brig_error **err);

/* What a VMM is given to start one VM; every file is an open descriptor (the VMM runs as
 * the sandbox's uid and reopens them through /proc/self/fd: no host path of ours needs to
 * be reachable by it). */
typedef struct brig_vm_boot {
    const char *id;
    int64_t memory_mib;
    int cpus;
    unsigned uid; /* the VMM's uid and gid */
    int netns_fd; /* the sandbox's network namespace: the VMM runs inside it */
    int kernel_fd, initrd_fd, disk_fd, console_fd, log_fd;
    int qmp_fd;              /* the listening control socket (brig_vm_qmp_listen) */
    const brig_vm_net *net;  /* the guest's NIC: its tap_fd, MAC and /init's arguments */
    const brig_vm_vol *vols; /* its volumes, extra disks */
    size_t n_vols;
    const char *vols_cmdline;        /* brig_vm_vols_cmdline's */
    const char *const *cgroup_procs; /* cgroup.procs files the VMM joins, NULL-terminated */
    /* Memory snapshots (microvm_memsnap.c): memsnap, the device line every VM of a snapshot
     * has (its NIC's MAC BRIG_VM_NIC_MAC, nothing of the sandbox on the kernel's command
     * line); incoming, the VM waits for its memory (brig_vm_qmp_restore) instead of booting;
     * backing_fd >= 0, the disk's backing image (the snapshot's disk) as that descriptor. */
    bool memsnap, incoming;
    int backing_fd;
} brig_vm_boot;

typedef struct brig_vmm_ops {
    const char *name; /* "qemu" */
    /* Finds the VMM on this host: 0, or -1 with *why (caller frees) saying what is missing. */
    int (*probe)(microvm *m, char **why);
    /* Starts the VM in the background; *pid is its process (reparented to brigd). */
    int (*start)(microvm *m, const brig_vm_boot *b, pid_t *pid, brig_error **err);
} brig_vmm_ops;

extern const brig_vmm_ops brig_vmm_qemu;

struct microvm {
    const brig_cgroup_ops *cgroup;
    const brig_vmm_ops *vmm;
    char *state_dir;      /* brigd's (volumes: <state>/volumes, the OCI driver's) */
    char *dir;            /* <state>/microvm */
    char *kernel_dir;     /* the guest kernel: vmlinuz, modules/ (scripts/setup-vm) */
    char *agent_path;     /* brig-agent, copied into the initramfs */
    char *vmm_path;       /* the VMM binary, once probed */
    char *accel;          /* "kvm" | "tcg" (setting microvm_accel) */
    bool host_kvm;        /* /dev/kvm is hardware-backed */
    long tsc_khz;         /* the host's TSC (tcg: the guest kernel is told it), 0 if unknown */
    char *missing;        /* why isolation microvm cannot run here, or NULL */
    pthread_mutex_t lock; /* initrd_built */
    bool initrd_built;    /* <dir>/initrd.cpio is this brigd's (brig_vm_ready) */
    bool memsnap;         /* creates start from memory snapshots (setting microvm_memsnap) */
    pthread_mutex_t memsnap_lock; /* one snapshot taken at a time */
};

/* 0 once the initramfs is built (the first call builds it); -1 with *err. */
int brig_vm_ready(microvm *m, brig_error **err);

/* ---- a VM's start (microvm_boot.c) ----------------------------------------------------- */

#define BRIG_VM_CONNECT_TIMEOUT_MS 30000
#define BRIG_VM_KILL_TIMEOUT_MS    10000
#define BRIG_VM_VOLUMES_MAX        8 /* extra disks (docs/volumes.md's limit) */

/* <dir>/vms/<id>[/<name>] (caller frees). */
char *brig_vm_path(const microvm *m, const char *id, const char *name);

/* A sandbox's handle (cast to brig_rt_sandbox: the type is each driver's own). */
typedef struct brig_vm_sb {
    char id[BRIG_ID_MAX];
    int pidfd; /* the VMM's process; -1 when unknown */
    int netns; /* the sandbox's network namespace (the VMM's) */
} brig_vm_sb;

/* What a VMM is started with, kept across the starts of one create (opaque): the
 * sandbox's volumes opened, its cgroup made, its files opened, its link set up in netns
 * sb->netns (NULL with *err). */
typedef struct brig_vm_parts brig_vm_parts;
brig_vm_parts *brig_vm_parts_open(microvm *m, const brig_rt_spec *spec, brig_vm_sb *sb,
                                  brig_error **err);
void brig_vm_parts_close(brig_vm_parts *p);
/* The sandbox's link (tap_fd -1: it has no network). */
const brig_vm_net *brig_vm_parts_link(const brig_vm_parts *p);

/* How brig_vm_launch starts a VM: booting (image NULL: a disk over the template's image) or
 * from a memory snapshot (brig_vm_boot's memsnap, incoming; image: the snapshot's disk, the
 * new disk's backing, handed to the VMM as backing_fd). */
typedef struct brig_vm_start {
    const char *image;
    bool memsnap, incoming;
    int backing_fd;
} brig_vm_start;

/* Makes the VM's disk (disk.qcow2, new) and starts its VMM; sb->pidfd is then the VMM's. */
int brig_vm_launch(microvm *m, const brig_rt_spec *spec, brig_vm_parts *p, const brig_vm_start *how,
                   brig_vm_sb *sb, brig_error **err);
/* Ready once the agent answers a handshake; fails as soon as the VMM exits. */
int brig_vm_agent_ready(brig_vm_sb *sb, brig_error **err);
/* A new agent connection (handshake done), or -1. */
int brig_vm_agent_open(brig_vm_sb *sb, brig_error **err);
/* SIGKILL to the VMM, then waits up to timeout_ms for its end: 0 once gone (runtime.h's
 * kill); brig_vm_kill also closes sb->pidfd (-1 after). */
int brig_vm_kill_wait(brig_vm_sb *sb, int timeout_ms);
void brig_vm_kill(brig_vm_sb *sb);
/* rm -rf --one-file-system path (a warning when it fails). */
void brig_vm_rm_rf(const char *path);

/* ---- memory snapshots (microvm_memsnap.c) ---------------------------------------------- */

/* Starts sandbox spec's VM from the memory snapshot of its template and tariff, taking that
 * snapshot first (from this VM, booted) when there is none yet; until its agent answered
 * guest_sync (the sandbox's time, entropy and link). */
int brig_vm_memsnap_start(microvm *m, const brig_rt_spec *spec, brig_vm_parts *p, brig_vm_sb *sb,
                          brig_error **err);
/* Removes every memory snapshot (taken with another initramfs: at the first VM). */
void brig_vm_memsnap_clear(microvm *m);

extern const brig_runtime_ops brig_microvm_ops;

/* ---- the VMM's control channel (microvm_qmp.c) ----------------------------------------- */

#define BRIG_VM_QMP_SOCK "qmp.sock" /* in the VM's directory */

/* A listening socket at <dir>/qmp.sock for the VMM (the caller closes its copy). */
int brig_vm_qmp_listen(const char *dir, brig_error **err);
/* Runs QMP command cmd (no arguments: "stop", "cont", "query-status") on the VMM of the VM
 * whose directory is dir; status (when not NULL): the "status" of its return ("running",
 * "paused"...), or "".  BRIG_E_UNAVAILABLE when no VMM listens there (the VM is gone). */
int brig_vm_qmp(const char *dir, const char *cmd, char *status, size_t n, brig_error **err);
/* Stops the VM and writes its memory and devices' state to fd (QMP migrate), until done. */
int brig_vm_qmp_save(const char *dir, int fd, brig_error **err);
/* Reads them back from fd into a VMM started with incoming set, and lets the VM run. */
int brig_vm_qmp_restore(const char *dir, int fd, brig_error **err);

/* ---- the agent's guest_sync (microvm_guest.c) ------------------------------------------ */

/* Sends guest_sync on agent connection fd (handshake done): the host's time, a fresh seed
 * and, when net has a tap, the sandbox's link for NIC BRIG_VM_NIC_MAC. */
int brig_vm_guest_sync(int fd, const brig_vm_net *net, brig_error **err);
/* Sends fs_freeze: the guest's root flushed and frozen, or thawed. */
int brig_vm_fs_freeze(int fd, bool freeze, brig_error **err);

/* ---- file system snapshots of a VM (microvm_snap.c) ------------------------------------ */

/* runtime.h's snapshot_take for a paused VM: its disk (the layers above the template's
 * image, flattened) as <state>/snapshots/<id>/vm.qcow2, its guest's root frozen meanwhile. */
int brig_vm_snapshot_take(microvm *m, brig_vm_sb *sb, const char *id, bool durable, char digest[65],
                          int64_t *bytes, brig_error **err);
/* The disk of spec's snapshot, checked against spec->snapshot_digest (caller frees);
 * BRIG_E_INVALID for a container's snapshot, BRIG_E_CONFLICT for a damaged one. */
char *brig_vm_snapshot_disk(microvm *m, const brig_rt_spec *spec, brig_error **err);

/* ---- the guest's files (microvm_image.c) ---------------------------------------------- */

/* Builds <dir>/initrd.cpio from busybox, the kernel's modules and the agent (at start-up). */
int brig_vm_initrd_build(microvm *m, brig_error **err);
/* The template's root disk image for VMs of disk_mib (<rootfs>.<disk_mib>M.ext4 beside it:
 * the template's files and disk_mib free, made once, shared by those VMs): returns its path
 * (caller frees). */
char *brig_vm_template_image(const char *rootfs, int64_t disk_mib, brig_error **err);
/* A copy-on-write disk at path over image (of format fmt: "raw", "qcow2"), owned by uid. */
int brig_vm_overlay(const char *image, const char *fmt, const char *path, unsigned uid,
                    brig_error **err);

#endif
