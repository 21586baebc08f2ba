/*
 * microvm_boot.c - how the microVM driver starts a VM and reaches its agent
 * (microvm_internal.h), shared by a boot (microvm.c) and a start from a memory snapshot
 * (microvm_memsnap.c): what the VMM is given (its volumes, cgroup, files, link), its disk,
 * the VMM started, the agent's connections through the VMM's forward, the VMM's end.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentconn.h"
#include "log.h"
#include "microvm_internal.h"
#include "spawn.h"
#include "util.h"

#define READY_TIMEOUT_MS 60000 /* boot to agent: ~2.5 s under TCG here, far more when loaded */
#define VMM_OVERHEAD_MIB 256   /* QEMU itself beside the guest's memory (TCG's cache: 64) */
#define VMM_PIDS         512   /* QEMU's threads */

typedef brig_vm_sb vm_sb;

char *brig_vm_path(const microvm *m, const char *id, const char *name)
{
    return name ? brig_asprintf("%s/vms/%s/%s", m->dir, id, name)
                : brig_asprintf("%s/vms/%s", m->dir, id);
}

#define vm_path brig_vm_path

/* ---- the network namespace and the agent's socket -------------------------------------- */

/* A connection to the agent: 127.0.0.1:AGENT_PORT of the sandbox's namespace, which the
 * VMM forwards into the guest.  *refused: nothing listens (yet) or not in time: try again. */
static int agent_dial(vm_sb *sb, int timeout_ms, bool *refused, brig_error **err)
{
    int fd = brig_vm_netns_run(sb->netns, err);
    if (fd < 0)
        return -1;
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(BRIG_VM_AGENT_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        /* SO_SNDTIMEO ends a slow connect with EINPROGRESS: QEMU's slirp did not accept
         * in time on a busy host, which is worth another try like a refusal. */
        *refused =
            errno == ECONNREFUSED || errno == EINPROGRESS || errno == EAGAIN || errno == ETIMEDOUT;
        brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "connect to the agent of %s", sb->id);
        close(fd);
        return -1;
    }
    /* QEMU accepts for the guest before the guest's agent does: a connection it could not
     * forward is closed at once, which the handshake sees. */
    *refused = true;
    return brig_agent_handshake(fd, sb->id, timeout_ms, err);
}

int brig_vm_agent_open(vm_sb *sb, brig_error **err)
{
    bool refused = false;
    return agent_dial(sb, BRIG_VM_CONNECT_TIMEOUT_MS, &refused, err);
}

int brig_vm_agent_ready(vm_sb *sb, brig_error **err)
{
    int64_t deadline = brig_now_mono_ms() + READY_TIMEOUT_MS;
    for (int delay_ms = 20;; delay_ms = delay_ms < 100 ? delay_ms * 2 : delay_ms) {
        brig_error *e = NULL;
        bool refused = false;
        /* Short tries: a connection QEMU accepted while the guest's link was not up yet
         * waits for the guest's TCP to retransmit (seconds); a new one gets through. */
        int fd = agent_dial(sb, 250, &refused, &e);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        struct pollfd p = {sb->pidfd, POLLIN, 0};
        bool gone = poll(&p, 1, 0) != 0;
        if (!refused || gone || brig_now_mono_ms() > deadline) {
            brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "the VM of %s %s (%s)", sb->id,
                           gone ? "exited before its agent answered" : "did not answer in time",
                           e ? e->msg : "");
            brig_error_clear(&e);
            return -1;
        }
        brig_error_clear(&e);
        struct pollfd w = {sb->pidfd, POLLIN, 0};
        poll(&w, 1, delay_ms);
    }
}

/* ---- the VMM's end ------------------------------------------------------------------- */

int brig_vm_kill_wait(vm_sb *sb, int timeout_ms)
{
    if (sb == NULL || sb->pidfd < 0)
        return 0;
    if (pidfd_send_signal(sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        brig_warn("%s: kill the VMM: %s", sb->id, strerror(errno));
    return brig_pidfd_wait(sb->pidfd, timeout_ms);
}

void brig_vm_kill(vm_sb *sb)
{
    brig_vm_kill_wait(sb, BRIG_VM_KILL_TIMEOUT_MS);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb->pidfd = -1;
}

void brig_vm_rm_rf(const char *path)
{
    const char *argv[] = {"rm", "-rf", "--one-file-system", path, NULL};
    int st = 0;
    brig_error *e = NULL;
    if (brig_proc_run(argv, NULL, 0, &st, &e) < 0 || st != 0)
        brig_warn("rm -rf %s failed", path);
    brig_error_clear(&e);
}

static int open_in(const char *path, int flags, brig_error **err)
{
    int fd = open(path, flags | O_CLOEXEC, 0600);
    if (fd < 0)
        brig_error_sys(err, "open %s", path);
    return fd;
}

static int write_text(const char *path, const char *text, brig_error **err)
{
    int fd = open_in(path, O_WRONLY | O_CREAT | O_TRUNC, err);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, text, strlen(text));
    close(fd);
    return w == (ssize_t)strlen(text) ? 0 : brig_error_sys(err, "write %s", path);
}

/* The VMM's pid in vm.pid (for a restarted brigd) and its pidfd in sb. */
static int keep_pid(microvm *m, const char *id, pid_t pid, vm_sb *sb, brig_error **err)
{
    _cleanup_free_ char *pidfile = vm_path(m, id, "vm.pid");
    _cleanup_free_ char *text = brig_asprintf("%d\n", (int)pid);
    if (write_text(pidfile, text, err) < 0)
        return -1;
    if ((sb->pidfd = pidfd_open(pid, 0)) < 0)
        return brig_error_sys(err, "the VMM of %s (pid %d) is gone", id, (int)pid);
    return 0;
}

/* What a VM's VMM is started with, but its disk and control socket (brig_vm_launch makes
 * those at each start: a memory snapshot's first VM is started twice). */
struct brig_vm_parts {
    brig_vm_vol vols[BRIG_VM_VOLUMES_MAX];
    size_t n_vols;
    char *vols_cmdline;
    char *procs[BRIG_CGROUP_PROCS_MAX];
    int fds[4]; /* kernel, initrd, console, VMM log */
    brig_vm_net net;
};

void brig_vm_parts_close(brig_vm_parts *p)
{
    brig_vm_net_dispose(&p->net);
    brig_vm_vols_close(p->vols, p->n_vols);
    for (size_t i = 0; i < BRIG_ARRAY_LEN(p->fds); i++)
        if (p->fds[i] >= 0)
            close(p->fds[i]);
    for (size_t i = 0; i < BRIG_CGROUP_PROCS_MAX; i++)
        free(p->procs[i]);
    free(p->vols_cmdline);
    free(p);
}

const brig_vm_net *brig_vm_parts_link(const brig_vm_parts *p)
{
    return &p->net;
}

/* Its volumes, its cgroup, its files as descriptors, its link (NULL with *err). */
brig_vm_parts *brig_vm_parts_open(microvm *m, const brig_rt_spec *spec, vm_sb *sb, brig_error **err)
{
    brig_vm_parts *p = brig_xcalloc(1, sizeof(*p));
    p->net.tap_fd = -1;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(p->fds); i++)
        p->fds[i] = -1;
    if (brig_vm_vols_open(m->state_dir, spec, p->vols, err) < 0) {
        free(p);
        return NULL;
    }
    p->n_vols = spec->n_volumes;
    brig_cgroup_limits lim = {(spec->memory_mib + VMM_OVERHEAD_MIB) << 20, spec->cpus, VMM_PIDS};
    _cleanup_free_ char *kernel = brig_asprintf("%s/vmlinuz", m->kernel_dir);
    _cleanup_free_ char *initrd = brig_asprintf("%s/initrd.cpio", m->dir);
    _cleanup_free_ char *con = vm_path(m, spec->id, "console.log");
    _cleanup_free_ char *log = vm_path(m, spec->id, "vmm.log");
    int rc = (p->vols_cmdline = brig_vm_vols_cmdline(p->vols, p->n_vols, err)) ? 0 : -1;
    if (rc == 0)
        rc = brig_cgroup_place(m->cgroup, spec->id, &lim, p->procs, err);
    if (rc == 0 && ((p->fds[0] = open_in(kernel, O_RDONLY, err)) < 0 ||
                    (p->fds[1] = open_in(initrd, O_RDONLY, err)) < 0 ||
                    (p->fds[2] = open_in(con, O_WRONLY | O_CREAT | O_APPEND, err)) < 0 ||
                    (p->fds[3] = open_in(log, O_WRONLY | O_CREAT | O_APPEND, err)) < 0 ||
                    fchown(p->fds[2], spec->uid_base, spec->uid_base) < 0))
        rc = -1;
    /* The sandbox's link first (runtime.h's net_first), then the guest's tap on it. */
    if (rc == 0 && ((spec->net_first && spec->net_first(spec->net_arg, sb->netns, err) < 0) ||
                    brig_vm_net_setup(sb->netns, &p->net, err) < 0))
        rc = -1;
    if (rc < 0) {
        brig_vm_parts_close(p);
        return NULL;
    }
    return p;
}

int brig_vm_launch(microvm *m, const brig_rt_spec *spec, brig_vm_parts *p, const brig_vm_start *how,
                   vm_sb *sb, brig_error **err)
{
    _cleanup_free_ char *disk = vm_path(m, spec->id, "disk.qcow2");
    _cleanup_free_ char *dir = vm_path(m, spec->id, NULL);
    _cleanup_free_ char *image = brig_vm_template_image(spec->rootfs, spec->disk_mib, err);
    /* a base image (a snapshot's disk) hard-linked into the VM's directory: the VM's chain
     * outlives the snapshot's deletion; "image" records the template's, under it */
    _cleanup_free_ char *base = vm_path(m, spec->id, "base.qcow2");
    _cleanup_free_ char *record = vm_path(m, spec->id, "image");
    if (image == NULL || write_text(record, image, err) < 0)
        return -1;
    unlink(base);
    if (how->image && link(how->image, base) < 0)
        return brig_error_sys(err, "link %s", how->image);
    if (brig_vm_overlay(how->image ? base : image, how->image ? "qcow2" : "raw", disk,
                        spec->uid_base, err) < 0)
        return -1;
    int disk_fd = open_in(disk, O_RDWR, err);
    int qmp_fd = disk_fd >= 0 ? brig_vm_qmp_listen(dir, err) : -1;
    brig_vm_boot b = {.id = spec->id,
                      .memory_mib = spec->memory_mib,
                      .cpus = spec->cpus >= 1 ? (int)(spec->cpus + 0.999) : 1,
                      .uid = spec->uid_base,
                      .netns_fd = sb->netns,
                      .kernel_fd = p->fds[0],
                      .initrd_fd = p->fds[1],
                      .disk_fd = disk_fd,
                      .console_fd = p->fds[2],
                      .log_fd = p->fds[3],
                      .qmp_fd = qmp_fd,
                      .net = &p->net,
                      .vols = p->vols,
                      .n_vols = p->n_vols,
                      .vols_cmdline = p->vols_cmdline,
                      .cgroup_procs = (const char *const *)p->procs,
                      .memsnap = how->memsnap,
                      .incoming = how->incoming,
                      .backing_fd = how->backing_fd};
    pid_t pid = 0;
    int rc = qmp_fd >= 0 ? m->vmm->start(m, &b, &pid, err) : -1;
    if (disk_fd >= 0)
        close(disk_fd);
    if (qmp_fd >= 0)
        close(qmp_fd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb->pidfd = -1;
    return rc < 0 ? -1 : keep_pid(m, spec->id, pid, sb, err);
}
