/*
 * microvm.c - the microVM driver (isolation "microvm"): each sandbox a virtual machine
 * with its own kernel, started by a VMM (microvm_internal.h; QEMU's microvm machine now).
 *
 * A sandbox's VM lives in <state>/microvm/vms/<id>: its copy-on-write disk over the
 * template's image (disk.qcow2), its console (console.log: the guest kernel's and the
 * agent's lines), the VMM's own log (vmm.log) and its pid (vm.pid, for a restarted brigd).
 * The VMM runs in the sandbox's network namespace, made here, and in its cgroup at
 * /brig/<id>, made here with the tariff's memory (plus the VMM's own overhead) and CPU.
 *
 * The accelerator: KVM where /dev/kvm is hardware-backed; elsewhere (a PVM host, which can
 * not run an ordinary guest) the mode is refused unless the operator set
 * microvm_accel = tcg: QEMU's emulation, 20-50x slower, for tests and trials.
 *
 * The guest's network is the sandbox's own link, bridged to its NIC (microvm_net.c).
 * Pause and resume: the VMM's vCPUs stop and go on (QMP, microvm_qmp.c), memory resident;
 * after a resume the agent sets the guest's clock (guest_sync, microvm_guest.c).  With
 * microvm_memsnap on, a create starts its VM from a memory snapshot (microvm_memsnap.c).
 * How a VM is started and its agent reached: microvm_boot.c.
 * Volumes: extra disks the guest mounts (microvm_vol.c).  Snapshots: its disk
 * (microvm_snap.c).  Not there yet, refused with a clear error: template builds (layer_open).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentconn.h"
#include "log.h"
#include "microvm_internal.h"
#include "util.h"

typedef brig_vm_sb vm_sb;

#define vm_path brig_vm_path

static int mv_connect(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    (void)rt;
    return brig_vm_agent_open((vm_sb *)h, err);
}

/* ---- kill, destroy ---------------------------------------------------------------------- */

/* The VMM is the whole VM: its end is the sandbox's. */
static int mv_kill(brig_runtime *rt, brig_rt_sandbox *h, int timeout_ms)
{
    (void)rt;
    return brig_vm_kill_wait((vm_sb *)h, timeout_ms);
}

static int mv_exit_fd(brig_runtime *rt, brig_rt_sandbox *h)
{
    (void)rt;
    return h ? ((vm_sb *)h)->pidfd : -1;
}

static int mv_destroy(brig_runtime *rt, const char *id, brig_rt_sandbox *h, brig_error **err)
{
    microvm *m = rt->priv;
    mv_kill(rt, h, BRIG_VM_KILL_TIMEOUT_MS);
    /* Whatever else is in its cgroup: the VMM of a VM whose handle is gone (reconcile). */
    int left = m->cgroup->kill_all(id, BRIG_VM_KILL_TIMEOUT_MS);
    if (left < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "%s: its VMM survives SIGKILL", id);
    if (m->cgroup->remove(id, err) < 0)
        return -1;
    _cleanup_free_ char *dir = vm_path(m, id, NULL);
    brig_vm_rm_rf(dir);
    if (access(dir, F_OK) == 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "%s is left", dir);
    return 0;
}

static void sb_free(vm_sb *sb)
{
    if (sb == NULL)
        return;
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    if (sb->netns >= 0)
        close(sb->netns);
    free(sb);
}

static void mv_release(brig_runtime *rt, brig_rt_sandbox *h)
{
    (void)rt;
    sb_free((vm_sb *)h);
}

/* ---- create, attach --------------------------------------------------------------------- */

/* Boots the VM, or starts it from a memory snapshot (microvm_memsnap.c), until its agent
 * answers. */
static int vm_start(microvm *m, const brig_rt_spec *spec, vm_sb *sb, brig_error **err)
{
    brig_vm_parts *p = brig_vm_parts_open(m, spec, sb, err);
    if (p == NULL)
        return -1;
    /* a snapshot's device line is fixed: volumes (extra disks) boot */
    int rc;
    if (spec->snapshot) { /* its disk over the snapshot's (microvm_snap.c) */
        _cleanup_free_ char *img = brig_vm_snapshot_disk(m, spec, err);
        int fd = img ? open(img, O_RDONLY | O_CLOEXEC) : -1;
        brig_vm_start how = {.image = img, .backing_fd = fd};
        rc = fd >= 0 ? brig_vm_launch(m, spec, p, &how, sb, err) : -1;
        if (fd >= 0)
            close(fd);
        if (rc == 0)
            rc = brig_vm_agent_ready(sb, err);
    } else if (m->memsnap && spec->n_volumes == 0) {
        rc = brig_vm_memsnap_start(m, spec, p, sb, err);
    } else {
        brig_vm_start how = {.backing_fd = -1};
        rc = brig_vm_launch(m, spec, p, &how, sb, err);
        if (rc == 0)
            rc = brig_vm_agent_ready(sb, err);
    }
    brig_vm_parts_close(p);
    return rc;
}

static void mv_last_words(brig_runtime *rt, const char *id, char *buf, size_t n);
static int mv_paused(brig_runtime *rt, const char *id);

static int mv_refuse(const char *what, brig_error **err)
{
    return brig_error_set(err, BRIG_E_INVALID, 0, "%s is not available for isolation 'microvm' yet",
                          what);
}

static int mv_create(brig_runtime *rt, const brig_rt_spec *spec, brig_rt_sandbox **out,
                     brig_error **err)
{
    microvm *m = rt->priv;
    if (spec->n_volumes > BRIG_VM_VOLUMES_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0, "a microVM mounts at most %d volumes",
                              BRIG_VM_VOLUMES_MAX);
    if (brig_vm_ready(m, err) < 0)
        return -1;
    _cleanup_free_ char *dir = vm_path(m, spec->id, NULL);
    if (mkdir(dir, 0700) < 0)
        return brig_error_sys(err, "mkdir %s", dir);
    vm_sb *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", spec->id);
    sb->pidfd = -1;
    int64_t t0 = brig_now_mono_ms();
    if ((sb->netns = brig_vm_netns_run(-1, err)) < 0 || vm_start(m, spec, sb, err) < 0) {
        char said[1024];
        mv_last_words(rt, spec->id, said, sizeof(said));
        if (said[0])
            brig_warn("%s: its VM's console said: %s", spec->id, said);
        brig_error *derr = NULL;
        if (mv_destroy(rt, spec->id, (brig_rt_sandbox *)sb, &derr) < 0) {
            brig_err("%s: cleanup after failed create: %s", spec->id, derr->msg);
            brig_error_clear(&derr);
        }
        sb_free(sb);
        return -1;
    }
    brig_info("%s: VM ready in %lld ms (%s, %s)", spec->id, (long long)(brig_now_mono_ms() - t0),
              m->vmm->name, m->accel);
    *out = (brig_rt_sandbox *)sb;
    return 0;
}

/* The VMM of a VM left by a previous brigd: its recorded pid, still in the sandbox's cgroup
 * (a pid reused since is another process's). */
static int vmm_find(microvm *m, const char *id, pid_t *out, brig_error **err)
{
    _cleanup_free_ char *pidfile = vm_path(m, id, "vm.pid");
    pid_t pid = brig_pidfile_read(pidfile);
    _cleanup_free_ char *cgf = brig_asprintf("/proc/%d/cgroup", (int)pid);
    _cleanup_free_ char *want = brig_asprintf("/brig/%s\n", id);
    char text[4096] = {0};
    int fd = pid > 0 ? open(cgf, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t r = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    int pidfd = r > 0 && strstr(text, want) ? pidfd_open(pid, 0) : -1;
    if (fd >= 0)
        close(fd);
    if (pidfd < 0)
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "the VM of %s is not running", id);
    *out = pid;
    return pidfd;
}

/* The guest's root thawed, if a snapshot left it frozen (idempotent; a warning if not). */
static void vm_thaw(vm_sb *sb)
{
    brig_error *e = NULL;
    int fd = brig_vm_agent_open(sb, &e);
    if (fd < 0 || brig_vm_fs_freeze(fd, false, &e) < 0)
        brig_warn("%s: its guest's root was not thawed: %s", sb->id, e ? e->msg : "?");
    if (fd >= 0)
        close(fd);
    brig_error_clear(&e);
}

static int mv_attach(brig_runtime *rt, const char *id, brig_rt_sandbox **out, brig_error **err)
{
    microvm *m = rt->priv;
    vm_sb *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", id);
    sb->netns = -1;
    pid_t pid = 0;
    _cleanup_free_ char *ns = NULL; /* before the first goto: fail frees it */
    if ((sb->pidfd = vmm_find(m, id, &pid, err)) < 0)
        goto fail;
    /* Its namespace, through the VMM's (the pidfd, still live after, says it is that one). */
    ns = brig_asprintf("/proc/%d/ns/net", (int)pid);
    sb->netns = open(ns, O_RDONLY | O_CLOEXEC);
    struct pollfd p = {sb->pidfd, POLLIN, 0};
    if (sb->netns < 0 || poll(&p, 1, 0) != 0) {
        brig_error_sys(err, "open %s", ns);
        goto fail;
    }
    /* A paused VM's agent cannot answer: its VMM's word is enough (runtime.h).  A running
     * one's root is thawed: brigd may have died during a snapshot (microvm_snap.c). */
    if (mv_paused(rt, id) != 1) {
        int fd = brig_vm_agent_open(sb, err);
        if (fd < 0)
            goto fail;
        close(fd);
        vm_thaw(sb);
    }
    *out = (brig_rt_sandbox *)sb;
    return 0;
fail:
    sb_free(sb);
    return -1;
}

/* ---- what it uses, what it said --------------------------------------------------------- */

static int mv_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    microvm *m = rt->priv;
    *ids = NULL;
    *n = 0;
    _cleanup_free_ char *vms = brig_asprintf("%s/vms", m->dir);
    DIR *d = opendir(vms);
    if (d == NULL)
        return errno == ENOENT ? 0 : brig_error_sys(err, "open %s", vms);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        *ids = brig_xrealloc(*ids, (*n + 1) * sizeof(char *));
        (*ids)[(*n)++] = brig_xstrdup(e->d_name);
    }
    closedir(d);
    return 0;
}

bool brig_microvm_has(brig_runtime *rt, const char *id)
{
    microvm *m = rt->priv;
    _cleanup_free_ char *dir = vm_path(m, id, NULL);
    return access(dir, F_OK) == 0;
}

static int mv_netns(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    (void)rt;
    int fd = fcntl(((vm_sb *)h)->netns, F_DUPFD_CLOEXEC, 3);
    return fd < 0 ? brig_error_sys(err, "dup") : fd;
}

static int mv_stats(brig_runtime *rt, brig_rt_sandbox *h, brig_rt_stats *out)
{
    microvm *m = rt->priv;
    vm_sb *sb = (vm_sb *)h;
    *out = (brig_rt_stats){-1, -1, -1, -1, -1, -1};
    if (sb == NULL)
        return -1;
    brig_cgroup_usage(m->cgroup, sb->id, &out->cpu_ns, &out->memory_bytes, &out->memory_peak_bytes,
                      &out->pids);
    /* The disk: what its copy-on-write layer holds on the host. */
    _cleanup_free_ char *disk = vm_path(m, sb->id, "disk.qcow2");
    struct stat st;
    if (stat(disk, &st) == 0)
        out->disk_bytes = (int64_t)st.st_blocks * 512;
    return out->cpu_ns < 0 && out->memory_bytes < 0 ? -1 : 0;
}

/* The cgroup's OOM kills are the VMM's (the whole VM): the guest's own OOM kills happen
 * inside, where its agent sees them. */
static void mv_events(brig_runtime *rt, const char *id, brig_rt_events *out)
{
    microvm *m = rt->priv;
    *out = (brig_rt_events){-1, -1, -1, -1};
    m->cgroup->events(id, &out->oom_kills, &out->pids_max);
}

/* The console's last bytes: the guest kernel's and its agent's last lines. */
static void mv_last_words(brig_runtime *rt, const char *id, char *buf, size_t n)
{
    microvm *m = rt->priv;
    buf[0] = '\0';
    _cleanup_free_ char *path = vm_path(m, id, "console.log");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || n < 2) {
        if (fd >= 0)
            close(fd);
        return;
    }
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)(n - 1) ? end - (off_t)(n - 1) : 0;
    ssize_t got = end > 0 ? pread(fd, buf, (size_t)(end - from), from) : 0;
    close(fd);
    buf[got > 0 ? got : 0] = '\0';
    for (char *p = buf; *p; p++)
        if ((*p < ' ' && *p != '\n') || *p == 0x7f)
            *p = ' ';
}

/* ---- pause, resume --------------------------------------------------------------------- */

/* The VMM stops the guest's vCPUs (QMP stop): nothing of the guest runs, its memory stays
 * resident in the VMM; cont lets them go on.  Both are idempotent in QEMU. */
static int vm_switch(brig_runtime *rt, brig_rt_sandbox *h, const char *cmd, brig_error **err)
{
    vm_sb *sb = (vm_sb *)h;
    _cleanup_free_ char *dir = vm_path(rt->priv, sb->id, NULL);
    if (brig_vm_qmp(dir, cmd, NULL, 0, err) < 0) {
        brig_error_prefix(err, "sandbox %s", sb->id);
        return -1;
    }
    return 0;
}

static int mv_pause(brig_runtime *rt, brig_rt_sandbox *h, const char **memory, brig_error **err)
{
    if (memory)
        *memory = "resident";
    return vm_switch(rt, h, "stop", err);
}

/* The guest's clock stood still while it was stopped: the agent sets it from the host's
 * (guest_sync).  A guest that cannot be told is resumed all the same, behind. */
static int mv_resume(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    if (vm_switch(rt, h, "cont", err) < 0)
        return -1;
    brig_error *e = NULL;
    int fd = brig_vm_agent_open((vm_sb *)h, &e);
    if (fd < 0 || brig_vm_guest_sync(fd, NULL, &e) < 0)
        brig_warn("%s: its guest's clock was not set after the resume: %s", ((vm_sb *)h)->id,
                  e ? e->msg : "?");
    if (fd >= 0)
        close(fd);
    brig_error_clear(&e);
    vm_thaw((vm_sb *)h); /* one paused when brigd died during a snapshot */
    return 0;
}

static int mv_paused(brig_runtime *rt, const char *id)
{
    microvm *m = rt->priv;
    _cleanup_free_ char *dir = vm_path(m, id, NULL);
    char status[32];
    brig_error *e = NULL;
    int rc = brig_vm_qmp(dir, "query-status", status, sizeof(status), &e);
    brig_error_clear(&e);
    return rc < 0 ? -1 : strcmp(status, "paused") == 0;
}

/* ---- what a VM cannot do yet ------------------------------------------------------------ */

static int no_layer(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    (void)rt, (void)sb;
    return mv_refuse("building a template from a sandbox", err);
}

static int mv_snapshot_take(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                            char digest[65], int64_t *bytes, brig_error **err)
{
    return brig_vm_snapshot_take(rt->priv, (vm_sb *)sb, id, durable, digest, bytes, err);
}

/* ---- the driver ------------------------------------------------------------------------- */

static int mv_available(brig_runtime *rt, brig_isolation iso, brig_error **err)
{
    microvm *m = rt->priv;
    if (iso != BRIG_ISO_MICROVM)
        return brig_error_set(err, BRIG_E_INVALID, 0, "isolation '%s' is not a microVM",
                              brig_isolation_name(iso));
    if (m->missing)
        return brig_error_set(err, BRIG_E_INVALID, 0, "%s", m->missing);
    if (strcmp(m->accel, "kvm") == 0 && !m->host_kvm)
        return brig_error_set(
            err, BRIG_E_INVALID, 0,
            "isolation 'microvm' needs hardware KVM, and this host has none (/dev/kvm is "
            "missing or not hardware-backed, e.g. PVM); an operator may set microvm_accel = tcg "
            "to run microVMs under QEMU's emulation instead: 20-50x slower, for tests and "
            "trials only");
    return brig_vm_ready(m, err);
}

static const char *mv_accel(brig_runtime *rt, brig_isolation iso)
{
    microvm *m = rt->priv;
    return iso == BRIG_ISO_MICROVM ? m->accel : NULL;
}

static void mv_free(brig_runtime *rt)
{
    microvm *m = rt->priv;
    free(m->state_dir);
    free(m->dir);
    free(m->kernel_dir);
    free(m->agent_path);
    free(m->vmm_path);
    free(m->accel);
    free(m->missing);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->memsnap_lock);
    free(m);
    free(rt);
}

const brig_runtime_ops brig_microvm_ops = {
    .name = "microvm",
    .available = mv_available,
    .create = mv_create,
    .attach = mv_attach,
    .connect = mv_connect,
    .destroy = mv_destroy,
    .kill = mv_kill,
    .exit_fd = mv_exit_fd,
    .netns = mv_netns,
    .release = mv_release,
    .stats = mv_stats,
    .events = mv_events,
    .last_words = mv_last_words,
    .layer_open = no_layer,
    .pause = mv_pause,
    .resume = mv_resume,
    .paused = mv_paused,
    .snapshot_take = mv_snapshot_take,
    .list = mv_list,
    .accel = mv_accel,
    .free = mv_free,
};
