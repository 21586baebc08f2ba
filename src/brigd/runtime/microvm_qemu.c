/*
 * microvm_qemu.c - QEMU as the microVM driver's VMM (brig_vmm_ops): Debian's
 * qemu-system-x86, its `microvm` machine (virtio-mmio devices, no PCI, no firmware).
 *
 * QEMU runs confined the way Firecracker's jailer would confine it: as the sandbox's own
 * unprivileged uid (setpriv, no supplementary groups), inside the sandbox's network
 * namespace (nsenter), in the sandbox's cgroup (its tariff's memory and CPU bound the whole
 * VM), under its own seccomp filter (-sandbox on), reaching files only through descriptors
 * brigd opened for it.  It is started in the background by a short shell, so that it
 * outlives a brigd restart (reattach) and is reaped by brigd's subreaper meanwhile.
 *
 * The agent's channel: QEMU's user-mode network forwards 127.0.0.1:5000 of the sandbox's
 * namespace to the agent's port in the guest (restrict=on: the guest reaches nothing
 * through it).  Only brigd enters that namespace, so no other local user reaches the port;
 * each connection is a connection (the agent protocol needs many).  QEMU's control channel
 * (QMP: pause, resume) is a unix socket brigd listens on and hands over (microvm_qmp.c).
 * No vsock here: this host's kernel has no vhost-vsock (docs/operations.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "microvm_internal.h"
#include "spawn.h"
#include "util.h"

#define QEMU_BIN  "qemu-system-x86_64"
#define AGENT_MAC "52:54:00:00:00:01" /* the agent's link; /init tells the NICs apart by MAC */

static char *which(const char *name)
{
    const char *dirs[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(dirs); i++) {
        char *p = brig_asprintf("%s/%s", dirs[i], name);
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

static int qemu_probe(microvm *m, char **why)
{
    const char *need[] = {QEMU_BIN, "qemu-img", "nsenter", "setpriv", "mkfs.ext4"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(need); i++) {
        char *p = which(need[i]);
        if (p == NULL) {
            *why = brig_asprintf("isolation 'microvm' needs %s, which is not installed on this "
                                 "host (scripts/setup installs qemu-system-x86, qemu-utils)",
                                 need[i]);
            return -1;
        }
        if (i == 0)
            m->vmm_path = p;
        else
            free(p);
    }
    return 0;
}

/* The volumes' disks: each image a descriptor in an fd set (QEMU uses it as it is, where a
 * /proc/self/fd path would be opened again, as the sandbox's uid, which may not open the
 * image), serial brigvol<i> for the guest's /init. */
static size_t vol_args(const brig_vm_boot *b, char **a, size_t n)
{
    for (size_t i = 0; i < b->n_vols; i++) {
        a[n++] = brig_xstrdup("-add-fd");
        a[n++] = brig_asprintf("fd=%d,set=%zu", b->vols[i].fd, i + 1);
        if (b->vols[i].ro_fd >= 0) {
            a[n++] = brig_xstrdup("-add-fd");
            a[n++] = brig_asprintf("fd=%d,set=%zu", b->vols[i].ro_fd, i + 1);
        }
        a[n++] = brig_xstrdup("-drive");
        a[n++] = brig_asprintf("id=vol%zu,file=/dev/fdset/%zu,format=raw,if=none,readonly=%s", i,
                               i + 1, b->vols[i].ro ? "on" : "off");
        a[n++] = brig_xstrdup("-device");
        a[n++] = brig_asprintf("virtio-blk-device,drive=vol%zu,serial=brigvol%zu", i, i);
    }
    return n;
}

/* The NICs: the agent's (QEMU's user-mode network), the sandbox's (its tap), and where a
 * memory snapshot's VM gets its memory from. */
static size_t net_args(const brig_vm_boot *b, char **a, size_t n)
{
    a[n++] = brig_xstrdup("-netdev");
    a[n++] = brig_xstrdup("user,id=agent,restrict=on,hostfwd=tcp:127.0.0.1:" BRIG_VM_AGENT_PORT_S
                          "-:" BRIG_VM_AGENT_PORT_S);
    a[n++] = brig_xstrdup("-device");
    a[n++] = brig_xstrdup("virtio-net-device,netdev=agent,mac=" AGENT_MAC);
    if (b->net->tap_fd >= 0) { /* the sandbox's network: the tap bridged to its eth0 */
        const unsigned char *m6 = b->net->mac;
        a[n++] = brig_xstrdup("-netdev");
        a[n++] = brig_asprintf("tap,id=net,fd=%d,vhost=off", b->net->tap_fd);
        a[n++] = brig_xstrdup("-device");
        a[n++] = b->memsnap ? brig_xstrdup("virtio-net-device,netdev=net,mac=" BRIG_VM_NIC_MAC)
                            : brig_asprintf("virtio-net-device,netdev=net,mac=%02x:%02x:%02x:"
                                            "%02x:%02x:%02x",
                                            m6[0], m6[1], m6[2], m6[3], m6[4], m6[5]);
    }
    if (b->incoming) { /* its memory comes over QMP (brig_vm_qmp_restore) */
        a[n++] = brig_xstrdup("-incoming");
        a[n++] = brig_xstrdup("defer");
    }
    return n;
}

/* The fixed part of QEMU's command line after the binary. */
static size_t qemu_args(const microvm *m, const brig_vm_boot *b, char **a, size_t n)
{
    bool tcg = strcmp(m->accel, "tcg") == 0;
    a[n++] = brig_xstrdup("-M");
    a[n++] = brig_xstrdup("microvm");
    a[n++] = brig_xstrdup("-accel");
    /* tcg: a bounded translation cache (its default, 1 GiB, would count against the
     * sandbox's memory) */
    a[n++] = brig_xstrdup(tcg ? "tcg,thread=multi,tb-size=64" : "kvm");
    if (!tcg) {
        a[n++] = brig_xstrdup("-cpu");
        a[n++] = brig_xstrdup("host");
    }
    a[n++] = brig_xstrdup("-m");
    a[n++] = brig_asprintf("%lld", (long long)b->memory_mib);
    a[n++] = brig_xstrdup("-smp");
    a[n++] = brig_asprintf("%d", b->cpus);
    const char *fixed[] = {"-nodefaults",
                           "-no-user-config",
                           "-no-reboot",
                           "-display",
                           "none",
                           "-monitor",
                           "none",
                           "-sandbox",
                           "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                           "resourcecontrol=deny"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(fixed); i++)
        a[n++] = brig_xstrdup(fixed[i]);
    a[n++] = brig_xstrdup("-kernel");
    a[n++] = brig_asprintf("/proc/self/fd/%d", b->kernel_fd);
    a[n++] = brig_xstrdup("-initrd");
    a[n++] = brig_asprintf("/proc/self/fd/%d", b->initrd_fd);
    /* tsc_early_khz: microvm has no PIT/HPET to calibrate the TSC against, and under TCG
     * the guest otherwise hangs in a fraction of boots (vm-probe.md) */
    a[n++] = brig_xstrdup("-append");
    /* a memory snapshot's VMs learn the sandbox's link from the agent (guest_sync) */
    _cleanup_free_ char *net = b->memsnap ? brig_xstrdup("") : brig_vm_net_cmdline(b->net);
    const char *vols = b->vols_cmdline && !b->memsnap ? b->vols_cmdline : "";
    a[n++] = m->tsc_khz > 0 && tcg
                 ? brig_asprintf("console=ttyS0 reboot=t panic=-1 quiet tsc_early_khz=%ld%s%s",
                                 m->tsc_khz, net, vols)
                 : brig_asprintf("console=ttyS0 reboot=t panic=-1 quiet%s%s", net, vols);
    a[n++] = brig_xstrdup("-chardev");
    a[n++] = brig_asprintf("file,id=con,path=/proc/self/fd/%d", b->console_fd);
    a[n++] = brig_xstrdup("-serial");
    a[n++] = brig_xstrdup("chardev:con");
    /* QMP, for pause and resume (microvm_qmp.c): on the socket brigd listens on */
    a[n++] = brig_xstrdup("-chardev");
    a[n++] = brig_asprintf("socket,id=qmp,fd=%d,server=on,wait=off", b->qmp_fd);
    a[n++] = brig_xstrdup("-mon");
    a[n++] = brig_xstrdup("chardev=qmp,mode=control");
    a[n++] = brig_xstrdup("-drive");
    _cleanup_free_ char *backing =
        b->backing_fd >= 0 ? brig_asprintf(",backing.file.filename=/proc/self/fd/%d", b->backing_fd)
                           : brig_xstrdup("");
    a[n++] = brig_asprintf("id=root,file=/proc/self/fd/%d,format=qcow2,if=none,cache=unsafe,"
                           "discard=unmap%s",
                           b->disk_fd, backing);
    a[n++] = brig_xstrdup("-device");
    a[n++] = brig_xstrdup("virtio-blk-device,drive=root,serial=brigroot");
    n = vol_args(b, a, n);
    /* entropy from the host: without it the guest's first getrandom() waits ~1.5 s under TCG */
    a[n++] = brig_xstrdup("-device");
    a[n++] = brig_xstrdup("virtio-rng-device");
    return net_args(b, a, n);
}

/* sh joins the cgroups, then starts QEMU in the background (nsenter into the namespace,
 * setpriv to the sandbox's uid) and prints its pid.  The descriptors are 3: the netns,
 * 4..: the files, the control socket, the volumes, the tap (brig_spawn's extra_fds keep
 * their order). */
static const char launcher[] =
    "while [ \"$1\" != -- ]; do echo $$ >\"$1\" || exit 1; shift; done; shift; "
    "nsenter --net=/proc/self/fd/3 -- \"$@\" </dev/null >/dev/null & echo $!";

static int qemu_start(microvm *m, const brig_vm_boot *b, pid_t *pid, brig_error **err)
{
    char *a[160];
    size_t n = 0;
    a[n++] = brig_xstrdup("/bin/sh");
    a[n++] = brig_xstrdup("-c");
    a[n++] = brig_xstrdup(launcher);
    a[n++] = brig_xstrdup("sh");
    for (size_t i = 0; b->cgroup_procs[i] && n < 16; i++)
        a[n++] = brig_xstrdup(b->cgroup_procs[i]);
    a[n++] = brig_xstrdup("--");
    a[n++] = brig_xstrdup("setpriv");
    a[n++] = brig_asprintf("--reuid=%u", b->uid);
    a[n++] = brig_asprintf("--regid=%u", b->uid);
    a[n++] = brig_xstrdup("--clear-groups");
    a[n++] = brig_xstrdup("--");
    a[n++] = brig_xstrdup(m->vmm_path);
    brig_vm_boot fds = *b; /* as the child sees them: fds 3.. in extra_fds order */
    fds.kernel_fd = 4, fds.initrd_fd = 5, fds.disk_fd = 6, fds.console_fd = 7, fds.qmp_fd = 8;
    int extra[SPAWN_EXTRA_MAX] = {b->netns_fd, b->kernel_fd,  b->initrd_fd,
                                  b->disk_fd,  b->console_fd, b->qmp_fd};
    size_t n_extra = 6;
    if (b->backing_fd >= 0) {
        fds.backing_fd = 3 + (int)n_extra;
        extra[n_extra++] = b->backing_fd;
    }
    brig_vm_vol vols[16];
    for (size_t i = 0; i < b->n_vols && n_extra + 3 <= BRIG_ARRAY_LEN(extra); i++) {
        vols[i] = b->vols[i];
        vols[i].fd = 3 + (int)n_extra;
        extra[n_extra++] = b->vols[i].fd;
        if (b->vols[i].ro_fd >= 0) {
            vols[i].ro_fd = 3 + (int)n_extra;
            extra[n_extra++] = b->vols[i].ro_fd;
        }
    }
    fds.vols = vols;
    brig_vm_net net = *b->net;
    net.tap_fd = b->net->tap_fd >= 0 ? 3 + (int)n_extra : -1;
    if (b->net->tap_fd >= 0)
        extra[n_extra++] = b->net->tap_fd;
    fds.net = &net;
    n = qemu_args(m, &fds, a, n);
    a[n] = NULL;
    int pfd[2];
    int rc = -1;
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        brig_error_sys(err, "pipe");
        goto out;
    }
    brig_spawn s = {.argv = (const char *const *)a,
                    .stdin_fd = -1,
                    .stdout_fd = pfd[1],
                    .stderr_fd = b->log_fd,
                    .extra_fds = extra,
                    .n_extra = n_extra};
    pid_t sh;
    int spawned = brig_proc_spawn(&s, &sh, err);
    close(pfd[1]);
    if (spawned == 0) {
        int st = brig_proc_wait(sh);
        char buf[32] = {0};
        ssize_t r = read(pfd[0], buf, sizeof(buf) - 1);
        long p = r > 0 ? strtol(buf, NULL, 10) : 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || p <= 0)
            brig_error_set(err, BRIG_E_INTERNAL, 0, "%s could not be started for %s", QEMU_BIN,
                           b->id);
        else
            *pid = (pid_t)p, rc = 0;
    }
    close(pfd[0]);
out:
    for (size_t i = 0; i < n; i++)
        free(a[i]);
    return rc;
}

const brig_vmm_ops brig_vmm_qemu = {.name = "qemu", .probe = qemu_probe, .start = qemu_start};
