/*
 * oci.c - the OCI runtime driver: a sandbox is a container run by runc (or crun,
 * or gVisor's runsc) from a bundle brigd writes.
 *
 * Per sandbox, under <state>/sandboxes/<id>/:
 *   config.json   the OCI runtime spec brigd generates (oci_spec_new)
 *   disk.img      the writable layer: an ext4 image (disk.c), mounted at disk/
 *                 through a loop device; upper/ and work/ of the overlay live on it
 *   lower/        the template rootfs, id-mapped into the sandbox's uid range and
 *                 read-only (idmap.c)
 *   rootfs/       overlayfs: lower = agent layer + lower/, upper = disk/upper,
 *                 work = disk/work; mounted by brigd before runc runs
 *   agent.sock    the agent's listening socket, created and bound by brigd and
 *                 handed to the agent as fd 3 (runc --preserve-fds 1): the sandbox
 *                 shares no host directory with us
 *   agent.log     the agent's and runc's stdout/stderr
 *   init.pid      the container init's host pid (runc --pid-file)
 *
 * The agent binary reaches the sandbox as an extra read-only overlay layer
 * (<state>/agent/<hash>/.brig/brig-agent), so templates never embed it and a
 * rebuilt agent needs no template rebuild.
 *
 * Container inits are reparented to brigd (a child subreaper) when `runc run
 * --detach` exits; we hold a pidfd to each, which makes kill and wait race-free.
 * The sandbox's user namespace is made by brigd, owned by the sandbox's own
 * host uid, and joined by runc (see idmap.h).
 * Destroy order: SIGKILL init (the kernel then kills the whole pid namespace) ->
 * wait for it -> `runc delete` (cgroups, runc state; then what cgroup->prepare made, if
 * runc never ran) -> unmount rootfs, lower,
 * disk (the loop device detaches itself) -> remove the directory.  Every step tolerates work
 * already done, so destroy also cleans half-created sandboxes and leftovers of a crashed brigd.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "disk.h"
#include "frame.h"
#include "idmap.h"
#include "seccomp.h"
#include "core/id.h"
#include "log.h"
#include "spawn.h"
#include "runtime.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define AGENT_IN_SANDBOX "/.brig/brig-agent"
#define READY_TIMEOUT_MS 10000 /* agent handshake after runc started it */
#define KILL_TIMEOUT_MS  10000 /* init gone after SIGKILL */

typedef struct oci {
    const brig_cgroup_ops *cgroup; /* the host's cgroup flavour */
    char *runtime;                 /* runtime binary (absolute path) */
    char *root;                    /* runtime state dir (--root), ours alone */
    char *sb_dir;                  /* <state>/sandboxes */
    char *agent_layer;             /* <state>/agent/<hash> */
    char *disk_dir;                /* <state>/disk: golden images of the writable layer */
    int64_t pty_max;               /* ptys per sandbox: its devpts instance's max= */
    int64_t tcp_memory_mib;        /* TCP buffers per sandbox (cgroup->prepare) */
} oci;

struct brig_rt_sandbox {
    char id[BRIG_ID_MAX];
    int dirfd; /* O_PATH fd of the sandbox directory */
    int pidfd; /* container init; -1 when unknown */
    pid_t pid; /* its host pid (valid while pidfd says it lives) */
};

/* ---- helpers ---------------------------------------------------------------- */

static char *find_in_path(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? brig_xstrdup(name) : NULL;
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0')
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    _cleanup_free_ char *copy = brig_xstrdup(path);
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *p = brig_asprintf("%s/%s", d, name);
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

/* crun where the host has a pure cgroup v2 hierarchy (it refuses v1/v2 hybrids),
 * runc everywhere else. */
static char *resolve_runtime(const char *want, brig_error **err)
{
    if (strcmp(want, "auto") == 0) {
        struct statfs fs;
        if (statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) {
            char *p = find_in_path("crun");
            if (p)
                return p;
        }
        want = "runc";
    }
    char *p = find_in_path(want);
    if (p == NULL)
        brig_error_set(
            err, BRIG_E_INTERNAL, 0,
            "OCI runtime '%s' not found (set oci_runtime to runc, crun, runsc or a path)", want);
    return p;
}

static int mkdir_p(const char *path, mode_t mode, brig_error **err)
{
    _cleanup_free_ char *p = brig_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return brig_error_sys(err, "mkdir %s", p);
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return brig_error_sys(err, "mkdir %s", p);
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int r = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (r < 0 && errno != ENOENT)
        brig_warn("remove %s: %s", path, strerror(errno));
    return 0;
}

/* rm -rf that never crosses into another mount (a still-mounted rootfs). */
static void rm_rf(const char *path)
{
    nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Copies the agent binary into a content-addressed layer directory. */
static int prepare_agent_layer(const char *state_dir, const char *agent_path, char **layer,
                               brig_error **err)
{
    _cleanup_close_ int fd = open(agent_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return brig_error_sys(err, "open agent binary %s", agent_path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return brig_error_sys(err, "stat %s", agent_path);
    _cleanup_free_ char *bin = brig_xmalloc((size_t)st.st_size);
    if (brig_read_full(fd, bin, (size_t)st.st_size) != st.st_size)
        return brig_error_sys(err, "read %s", agent_path);
    char key[17];
    const void *parts[] = {bin};
    size_t lens[] = {(size_t)st.st_size};
    brig_sha256_hex16(parts, lens, 1, key);

    _cleanup_free_ char *base = brig_asprintf("%s/agent", state_dir);
    char *dir = brig_asprintf("%s/%s", base, key);
    _cleanup_free_ char *bin_path = brig_asprintf("%s/.brig/brig-agent", dir);
    if (access(bin_path, X_OK) == 0) {
        *layer = dir;
        return 0;
    }
    _cleanup_free_ char *tmp = brig_asprintf("%s/.tmp-%s-%d", base, key, (int)getpid());
    _cleanup_free_ char *tmp_brig = brig_asprintf("%s/.brig", tmp);
    _cleanup_free_ char *tmp_bin = brig_asprintf("%s/brig-agent", tmp_brig);
    rm_rf(tmp);
    if (mkdir_p(tmp_brig, 0755, err) < 0)
        goto fail;
    int out = open(tmp_bin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (out < 0 || brig_write_full(out, bin, (size_t)st.st_size) < 0 || fsync(out) < 0) {
        brig_error_sys(err, "write %s", tmp_bin);
        if (out >= 0)
            close(out);
        goto fail;
    }
    close(out);
    if (chmod(tmp, 0755) < 0 || (rename(tmp, dir) < 0 && errno != EEXIST && errno != ENOTEMPTY)) {
        brig_error_sys(err, "install agent layer %s", dir);
        goto fail;
    }
    rm_rf(tmp); /* when another brigd won the rename */
    *layer = dir;
    return 0;
fail:
    rm_rf(tmp);
    free(dir);
    return -1;
}

/* Runs `<runtime> --root <root> args...`; output (runtime's messages) into out. */
static int run_runtime(oci *o, const char *const *args, brig_buf *out, int *status,
                       brig_error **err)
{
    const char *argv[16];
    size_t n = 0;
    argv[n++] = o->runtime;
    argv[n++] = "--root";
    argv[n++] = o->root;
    for (size_t i = 0; args[i] && n < BRIG_ARRAY_LEN(argv) - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return brig_proc_run(argv, out, 4096, status, err);
}

/* The last "msg=" of runc's log lines, or the last line: what went wrong. */
static char *runtime_message(const char *text)
{
    const char *m = NULL;
    for (const char *p = text; (p = strstr(p, "msg=")) != NULL; p += 4)
        m = p + 4;
    if (m == NULL) {
        size_t len = strlen(text);
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
            len--;
        const char *start = text + len;
        while (start > text && start[-1] != '\n')
            start--;
        return brig_xstrndup(start, (size_t)(text + len - start));
    }
    if (*m == '"')
        m++;
    size_t len = strcspn(m, "\"\n");
    return brig_xstrndup(m, len);
}

/* "/proc/self/fd/<dirfd>/<name>": keeps unix socket paths short whatever the
 * state directory is (sun_path holds 108 bytes). */
static void sock_path(const brig_rt_sandbox *sb, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/agent.sock", sb->dirfd);
}

/* ---- the OCI runtime spec -------------------------------------------------- */

static json_t *str_array(const char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *mount_entry(const char *dest, const char *type, const char *src,
                           const char *const *opts)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source", src,
                     "options", str_array(opts));
}

/* Builds config.json for spec.  Isolation choices and why are in docs/security.md. */
static json_t *oci_spec_new(const oci *o, const brig_rt_spec *spec, const char *userns)
{
    static const char *const caps[] = {
        "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FOWNER",           "CAP_FSETID",
        "CAP_KILL",    "CAP_SETGID",       "CAP_SETUID",           "CAP_SETPCAP",
        "CAP_SETFCAP", "CAP_SYS_CHROOT",   "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE",
        NULL};
    static const char *const masked[] = {"/proc/acpi",
                                         "/proc/asound",
                                         "/proc/kcore",
                                         "/proc/keys",
                                         "/proc/latency_stats",
                                         "/proc/timer_list",
                                         "/proc/timer_stats",
                                         "/proc/sched_debug",
                                         "/proc/scsi",
                                         "/sys/firmware",
                                         "/sys/devices/virtual/powercap",
                                         NULL};
    /* /proc/pressure: reading it is harmless, but a written trigger is host-wide kernel
     * work, and a process exiting with thousands of them open sat in uninterruptible
     * sleep for minutes (its sandbox's teardown with it). */
    static const char *const readonly[] = {
        "/proc/bus",           "/proc/fs", "/proc/irq", "/proc/pressure", "/proc/sys",
        "/proc/sysrq-trigger", NULL};
    static const char *const args[] = {AGENT_IN_SANDBOX, "--listen-fd", "3", NULL};
    static const char *const env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
        "LANG=C.UTF-8", NULL};
    static const char *const o_proc[] = {"nosuid", "noexec", "nodev", NULL};
    static const char *const o_dev[] = {"nosuid", "strictatime", "mode=755", "size=65536k", NULL};
    /* max=: every devpts instance draws from the host's kernel.pty.max; without a
     * bound of its own, one sandbox took the whole pool and other sandboxes' PTY execs
     * failed.  brigd sizes the host's pool for max_sandboxes of these (main.c). */
    char pts_max[32];
    snprintf(pts_max, sizeof(pts_max), "max=%lld", (long long)o->pty_max);
    const char *const o_pts[] = {"nosuid",    "noexec", "newinstance", "ptmxmode=0666",
                                 "mode=0620", "gid=5",  pts_max,       NULL};
    static const char *const o_shm[] = {"nosuid",    "noexec",      "nodev",
                                        "mode=1777", "size=65536k", NULL};
    static const char *const o_mq[] = {"nosuid", "noexec", "nodev", NULL};
    static const char *const o_sys[] = {"nosuid", "noexec", "nodev", "ro", NULL};
    static const char *const o_cg[] = {"nosuid", "noexec", "nodev", "relatime", "ro", NULL};

    json_t *capset = json_pack("{s:o, s:o, s:o}", "bounding", str_array(caps), "effective",
                               str_array(caps), "permitted", str_array(caps));
    json_t *process =
        json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b}", "terminal", 0, "user", "uid", 0,
                  "gid", 0, "args", str_array(args), "env", str_array(env), "cwd", "/",
                  "capabilities", capset, "noNewPrivileges", 1);
    /* No "rlimits": the runtime would set them from outside the sandbox's user
     * namespace (owned by the sandbox's uid), which needs CAP_SYS_RESOURCE on the
     * host.  The agent lowers its own limits instead, for every command. */

    json_t *mounts = json_array();
    json_array_append_new(mounts, mount_entry("/proc", "proc", "proc", o_proc));
    json_array_append_new(mounts, mount_entry("/dev", "tmpfs", "tmpfs", o_dev));
    json_array_append_new(mounts, mount_entry("/dev/pts", "devpts", "devpts", o_pts));
    json_array_append_new(mounts, mount_entry("/dev/shm", "tmpfs", "shm", o_shm));
    json_array_append_new(mounts, mount_entry("/dev/mqueue", "mqueue", "mqueue", o_mq));
    json_array_append_new(mounts, mount_entry("/sys", "sysfs", "sysfs", o_sys));
    json_array_append_new(mounts, mount_entry("/sys/fs/cgroup", "cgroup", "cgroup", o_cg));

    _cleanup_free_ char *cgpath = brig_asprintf("/brig/%s", spec->id);
    json_int_t mem = (json_int_t)(spec->memory_mib << 20);
    json_t *memory = json_pack("{s:I}", "limit", mem);
    /* OCI "swap" is memory + swap: equal to the limit means no swap at all. */
    if (o->cgroup->swap_limit)
        json_object_set_new(memory, "swap", json_integer(mem));
    json_t *resources =
        json_pack("{s:[{s:b, s:s}], s:o, s:{s:I}, s:{s:I, s:I}}", "devices", "allow", 0, "access",
                  "rwm", "memory", memory, "pids", "limit", (json_int_t)spec->pids_limit, "cpu",
                  "quota", (json_int_t)(spec->cpus * 100000), "period", (json_int_t)100000);
    if (o->cgroup->io_weight)
        json_object_set_new(resources, "blockIO", json_pack("{s:i}", "weight", 100));
    json_t *idmap = json_pack("[{s:i, s:I, s:I}]", "containerID", 0, "hostID",
                              (json_int_t)spec->uid_base, "size", (json_int_t)spec->uid_size);
    json_t *linux_ = json_pack(
        "{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}, {s:s}, {s:s}], s:O, s:O, s:s, s:o, s:o, s:o, s:o}",
        "namespaces", "type", "user", "type", "pid", "type", "network", "type", "ipc", "type",
        "uts", "type", "mount", "type", "cgroup", "uidMappings", idmap, "gidMappings", idmap,
        "cgroupsPath", cgpath, "resources", resources, "maskedPaths", str_array(masked),
        "readonlyPaths", str_array(readonly), "seccomp", brig_seccomp_profile());
    json_decref(idmap);
    /* Join the user namespace brigd made (owned by the sandbox's own host uid)
     * rather than let the runtime make one owned by root. */
    if (userns)
        json_object_set_new(json_array_get(json_object_get(linux_, "namespaces"), 0), "path",
                            json_string(userns));

    return json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process",
                     process, "root", "path", "rootfs", "readonly", 0, "hostname", "sandbox",
                     "mounts", mounts, "linux", linux_);
}

/* ---- ops ------------------------------------------------------------------- */

static int oci_connect(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    (void)rt;
    struct sockaddr_un sa;
    sock_path(sb, &sa);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return brig_error_sys(err, "socket");
    /* Bounded handshake: a wedged agent must not hang an API thread forever. */
    struct timeval tv = {READY_TIMEOUT_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "connect to the agent of %s", sb->id);
        close(fd);
        return -1;
    }
    if (brig_proto_client_hello(fd, NULL, err) < 0) {
        if (err && *err)
            (*err)->kind = BRIG_E_UNAVAILABLE;
        brig_error_prefix(err, "agent of %s", sb->id);
        close(fd);
        return -1;
    }
    return fd;
}

static void sb_free(brig_rt_sandbox *sb)
{
    if (sb == NULL)
        return;
    if (sb->dirfd >= 0)
        close(sb->dirfd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    free(sb);
}

/* Waits until the process behind pidfd has exited (it may stay a zombie). */
static int wait_pidfd(int pidfd, int timeout_ms)
{
    struct pollfd p = {pidfd, POLLIN, 0};
    int64_t deadline = brig_now_mono_ms() + timeout_ms;
    for (;;) {
        int left = (int)(deadline - brig_now_mono_ms());
        if (left < 0)
            left = 0;
        int r = poll(&p, 1, left);
        if (r > 0)
            return 0;
        if (r == 0)
            return -1;
        if (errno != EINTR)
            return -1;
    }
}

/* SIGKILL to init: the kernel kills the rest of its pid namespace, and init's
 * exit (the pidfd turns readable) completes only once they are all gone.  A
 * process in uninterruptible sleep keeps it from completing until it wakes. */
static int oci_kill(brig_runtime *rt, brig_rt_sandbox *sb, int timeout_ms)
{
    (void)rt;
    if (sb == NULL || sb->pidfd < 0)
        return 0; /* nothing known to wait for: destroy's `runc delete --force` kills */
    if (pidfd_send_signal(sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        brig_warn("%s: kill init: %s", sb->id, strerror(errno));
    return wait_pidfd(sb->pidfd, timeout_ms);
}

static int oci_exit_fd(brig_runtime *rt, brig_rt_sandbox *sb)
{
    (void)rt;
    return sb ? sb->pidfd : -1;
}

static int oci_destroy(brig_runtime *rt, const char *id, brig_rt_sandbox *sb, brig_error **err)
{
    oci *o = rt->priv;
    int failed = 0;
    if (sb && sb->pidfd >= 0) {
        if (pidfd_send_signal(sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
            brig_warn("%s: kill init: %s", id, strerror(errno));
        if (wait_pidfd(sb->pidfd, KILL_TIMEOUT_MS) < 0)
            brig_warn("%s: init did not exit after SIGKILL", id);
    }
    /* runc delete: kills leftovers (--force), removes cgroups and runc's state. */
    brig_buf out = {0};
    int st = 0;
    const char *del[] = {"delete", "--force", id, NULL};
    if (run_runtime(o, del, &out, &st, err) < 0) {
        failed = 1;
    } else if (st != 0 && (out.data == NULL || strstr(out.data, "does not exist") == NULL)) {
        _cleanup_free_ char *m = runtime_message(out.data ? out.data : "");
        brig_error_set(err, BRIG_E_INTERNAL, 0, "%s delete %s: %s", o->runtime, id, m);
        failed = 1;
    }
    brig_buf_dispose(&out);
    /* runc 1.1 forgets the container even when it could not remove a cgroup (a
     * process from elsewhere still in it): what is left is ours to remove, also the
     * memory cgroup brigd made before runc (cgroup->prepare) when runc never ran. */
    if (!failed && o->cgroup->remove(id, err) < 0)
        failed = 1;

    /* Unmount in the reverse order of create: the overlay, then what it was
     * built from (the id-mapped template, the disk, whose loop device then
     * detaches itself). */
    _cleanup_free_ char *dir = brig_asprintf("%s/%s", o->sb_dir, id);
    static const char *const layers[] = {"rootfs", "lower", "disk"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(layers); i++) {
        _cleanup_free_ char *m = brig_asprintf("%s/%s", dir, layers[i]);
        if (umount2(m, 0) < 0 && errno != EINVAL && errno != ENOENT) {
            if (errno == EBUSY && umount2(m, MNT_DETACH) == 0) {
                brig_warn("%s: %s busy, detached", id, layers[i]);
            } else {
                brig_error_sys(err, "unmount %s", m);
                failed = 1;
            }
        }
    }
    if (!failed)
        rm_rf(dir);
    return failed ? -1 : 0;
}

static int oci_create(brig_runtime *rt, const brig_rt_spec *spec, brig_rt_sandbox **out,
                      brig_error **err)
{
    oci *o = rt->priv;
    brig_rt_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", spec->id);
    sb->dirfd = sb->pidfd = -1;
    int lfd = -1, logfd = -1;
    char *dir = brig_asprintf("%s/%s", o->sb_dir, spec->id);
    char *rootfs = brig_asprintf("%s/rootfs", dir);
    char *cfg_path = brig_asprintf("%s/config.json", dir);
    char *log_path = brig_asprintf("%s/agent.log", dir);
    char *pid_path = brig_asprintf("%s/init.pid", dir);
    char *lower = brig_asprintf("%s/lower", dir);
    char *disk = brig_asprintf("%s/disk", dir);
    char *disk_img = brig_asprintf("%s/disk.img", dir);
    char *opts = NULL, *json = NULL, *userns_path = NULL;
    int userns = -1;
    int r = -1;

    /* 0710 root:<the sandbox's gid>: its own root may pass (runc init reaches the
     * root file system below), other sandboxes' uids may not even look in. */
    if (mkdir(dir, 0710) < 0) {
        brig_error_sys(err, "mkdir %s", dir);
        free(sb); /* not ours: never clean up a directory we did not create */
        sb = NULL;
        goto out;
    }
    sb->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sb->dirfd < 0 || chown(dir, 0, spec->uid_base) < 0 || chmod(dir, 0710) < 0) {
        brig_error_sys(err, "prepare %s", dir);
        goto out;
    }
    /* The TCP buffer bound (cgroup.c), before anything of the sandbox runs. */
    if (o->cgroup->check(err) < 0 || o->cgroup->prepare(spec->id, o->tcp_memory_mib << 20, err) < 0)
        goto out;
    if (mkdirat(sb->dirfd, "rootfs", 0755) < 0 || mkdirat(sb->dirfd, "lower", 0755) < 0 ||
        mkdirat(sb->dirfd, "disk", 0755) < 0) {
        brig_error_sys(err, "create sandbox directories in %s", dir);
        goto out;
    }
    /* 1. The writable layer: its own bounded file system.  The overlay's root
     *    directory takes its owner and mode from upper/: root of the sandbox, 0755. */
    char *golden = NULL;
    if (brig_disk_golden(o->disk_dir, spec->disk_mib, &golden, err) < 0 ||
        brig_disk_attach(golden, disk_img, disk, spec->uid_base, err) < 0) {
        free(golden);
        goto out;
    }
    free(golden);
    /* 2. The template, read-only, its owners mapped into the sandbox's id range. */
    if (brig_idmap_userns(spec->uid_base, spec->uid_size, &userns, err) < 0 ||
        brig_idmap_mount(spec->rootfs, lower, userns, err) < 0)
        goto out;
    userns_path = brig_asprintf("/proc/%d/fd/%d", (int)getpid(), userns);
    /* 3. The root: agent layer + template + writable layer.  volatile: no syncs
     *    for a layer that is thrown away with the sandbox. */
    opts = brig_asprintf("lowerdir=%s:%s,upperdir=%s/upper,workdir=%s/work,volatile",
                         o->agent_layer, lower, disk, disk);
    if (mount("overlay", rootfs, "overlay", MS_NODEV, opts) < 0) {
        brig_error_sys(err, "mount the sandbox root filesystem");
        goto out;
    }

    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    sock_path(sb, &sa);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0) {
        brig_error_sys(err, "agent socket");
        goto out;
    }

    json_t *cfg = oci_spec_new(o, spec, userns_path);
    json = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    int cfd = open(cfg_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (cfd < 0 || brig_write_full(cfd, json, strlen(json)) < 0) {
        brig_error_sys(err, "write %s", cfg_path);
        if (cfd >= 0)
            close(cfd);
        goto out;
    }
    close(cfd);

    logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) {
        brig_error_sys(err, "open %s", log_path);
        goto out;
    }
    const char *argv[] = {o->runtime, "--root", o->root,      "run",    "--detach",
                          "--bundle", dir,      "--pid-file", pid_path, "--preserve-fds",
                          "1",        spec->id, NULL};
    brig_spawn s = {.argv = argv,
                    .stdin_fd = -1,
                    .stdout_fd = logfd,
                    .stderr_fd = logfd,
                    .extra_fds = &lfd,
                    .n_extra = 1};
    pid_t pid;
    if (brig_proc_spawn(&s, &pid, err) < 0)
        goto out;
    int st = brig_proc_wait(pid);
    close(lfd);
    lfd = -1;
    close(logfd);
    logfd = -1;
    if (st != 0) {
        char buf[4096];
        int lf = open(log_path, O_RDONLY | O_CLOEXEC);
        ssize_t n = lf >= 0 ? pread(lf, buf, sizeof(buf) - 1, 0) : -1;
        if (lf >= 0)
            close(lf);
        buf[n > 0 ? n : 0] = '\0';
        char *m = runtime_message(buf);
        char how[64];
        brig_proc_describe(st, how, sizeof(how));
        brig_error_set(err, BRIG_E_INTERNAL, 0, "%s run %s: %s (%s)", o->runtime, spec->id,
                       *m ? m : "no message", how);
        free(m);
        goto out;
    }

    /* The init pid: hold a pidfd before anything else can happen to it. */
    char buf[32] = {0};
    int pf = open(pid_path, O_RDONLY | O_CLOEXEC);
    ssize_t pn = pf >= 0 ? read(pf, buf, sizeof(buf) - 1) : -1;
    if (pf >= 0)
        close(pf);
    pid_t ipid = pn > 0 ? (pid_t)atoi(buf) : 0;
    sb->pidfd = ipid > 0 ? pidfd_open(ipid, 0) : -1;
    sb->pid = ipid;
    if (sb->pidfd < 0) {
        brig_error_sys(err, "sandbox init (pid %d) is gone", (int)ipid);
        goto out;
    }

    /* Ready when the agent answers the handshake. */
    int afd = oci_connect(rt, sb, err);
    if (afd < 0) {
        brig_error_prefix(err, "sandbox did not become ready");
        goto out;
    }
    close(afd);
    *out = sb;
    r = 0;

out:
    if (lfd >= 0)
        close(lfd);
    if (logfd >= 0)
        close(logfd);
    if (r < 0 && sb) {
        brig_error *derr = NULL;
        if (oci_destroy(rt, spec->id, sb, &derr) < 0) {
            brig_err("%s: cleanup after failed create: %s", spec->id, derr->msg);
            brig_error_clear(&derr);
        }
        sb_free(sb);
    }
    free(json);
    free(opts);
    free(dir);
    free(rootfs);
    free(cfg_path);
    free(log_path);
    free(pid_path);
    free(lower);
    free(disk);
    free(disk_img);
    free(userns_path);
    if (userns >= 0) /* the container and the id-mapped mount hold it now */
        close(userns);
    return r;
}

static int oci_attach(brig_runtime *rt, const char *id, brig_rt_sandbox **out, brig_error **err)
{
    oci *o = rt->priv;
    brig_rt_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", id);
    sb->pidfd = -1;
    _cleanup_free_ char *dir = brig_asprintf("%s/%s", o->sb_dir, id);
    sb->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sb->dirfd < 0) {
        brig_error_sys(err, "open %s", dir);
        goto fail;
    }
    brig_buf outb = {0};
    int st = 0;
    const char *state[] = {"state", id, NULL};
    if (run_runtime(o, state, &outb, &st, err) < 0) {
        brig_buf_dispose(&outb);
        goto fail;
    }
    json_t *j = st == 0 && outb.data ? json_loads(outb.data, 0, NULL) : NULL;
    brig_buf_dispose(&outb);
    const char *status = json_string_value(json_object_get(j, "status"));
    json_int_t pid = json_integer_value(json_object_get(j, "pid"));
    int running = status && strcmp(status, "running") == 0 && pid > 0;
    json_decref(j);
    if (!running) {
        brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "container %s is not running", id);
        goto fail;
    }
    sb->pidfd = pidfd_open((pid_t)pid, 0);
    sb->pid = (pid_t)pid;
    if (sb->pidfd < 0) {
        brig_error_sys(err, "pidfd of %s", id);
        goto fail;
    }
    int cfd = oci_connect(rt, sb, err);
    if (cfd < 0)
        goto fail;
    close(cfd);
    *out = sb;
    return 0;
fail:
    sb_free(sb);
    return -1;
}

static int add_unique(char ***ids, size_t *n, const char *id)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*ids)[i], id) == 0)
            return 0;
    *ids = brig_xrealloc(*ids, (*n + 1) * sizeof(char *));
    (*ids)[(*n)++] = brig_xstrdup(id);
    return 0;
}

static int oci_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    oci *o = rt->priv;
    *ids = NULL;
    *n = 0;
    DIR *d = opendir(o->sb_dir);
    if (d == NULL)
        return brig_error_sys(err, "open %s", o->sb_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            add_unique(ids, n, e->d_name);
    closedir(d);
    brig_buf out = {0};
    int st = 0;
    const char *list[] = {"list", "-q", NULL};
    if (run_runtime(o, list, &out, &st, NULL) == 0 && st == 0 && out.data) {
        char *save = NULL;
        for (char *l = strtok_r(out.data, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            if (*l)
                add_unique(ids, n, l);
    }
    brig_buf_dispose(&out);
    return 0;
}

static int oci_netns(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    (void)rt;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return brig_error_sys(err, "open %s", path);
    /* The pid is the init's only while the pidfd says it still runs. */
    struct pollfd p = {sb->pidfd, POLLIN, 0};
    if (sb->pidfd < 0 || poll(&p, 1, 0) != 0) {
        close(fd);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "sandbox %s is not running", sb->id);
    }
    return fd;
}

static void oci_release(brig_runtime *rt, brig_rt_sandbox *sb)
{
    (void)rt;
    sb_free(sb);
}

static void oci_free(brig_runtime *rt)
{
    oci *o = rt->priv;
    free(o->runtime);
    free(o->root);
    free(o->sb_dir);
    free(o->agent_layer);
    free(o->disk_dir);
    free(o);
    free(rt);
}

static const brig_runtime_ops oci_ops = {
    .name = "oci",
    .create = oci_create,
    .attach = oci_attach,
    .connect = oci_connect,
    .destroy = oci_destroy,
    .kill = oci_kill,
    .exit_fd = oci_exit_fd,
    .netns = oci_netns,
    .release = oci_release,
    .list = oci_list,
    .free = oci_free,
};

/* A sandbox's root is an unprivileged host uid that must reach its root file
 * system below the state dir: every directory on the way needs o+x. */
static int check_searchable(const char *dir, brig_error **err)
{
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL)
        return brig_error_sys(err, "resolve %s", dir);
    for (;;) {
        struct stat st;
        if (stat(real, &st) < 0)
            return brig_error_sys(err, "stat %s", real);
        if (!(st.st_mode & S_IXOTH))
            return brig_error_set(
                err, BRIG_E_INTERNAL, 0,
                "%s (mode %04o) is not searchable by other users; sandboxes run as "
                "unprivileged host uids and must reach their files below the state dir %s: "
                "chmod o+x %s, or choose another state dir",
                real, (unsigned)(st.st_mode & 07777), dir, real);
        char *slash = strrchr(real, '/');
        if (slash == NULL || slash == real)
            return 0;
        *slash = '\0';
    }
}

int brig_runtime_oci_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err)
{
    if (check_searchable(cfg->state_dir, err) < 0)
        return -1;
    oci *o = brig_xcalloc(1, sizeof(*o));
    o->runtime = resolve_runtime(cfg->oci_runtime, err);
    if (o->runtime == NULL)
        goto fail;
    o->cgroup = cfg->cgroup;
    o->pty_max = cfg->pty_max;
    o->tcp_memory_mib = cfg->tcp_memory_mib;
    o->root = brig_asprintf("%s/runc", cfg->state_dir);
    o->sb_dir = brig_asprintf("%s/sandboxes", cfg->state_dir);
    o->disk_dir = brig_asprintf("%s/disk", cfg->state_dir);
    if (mkdir_p(o->root, 0700, err) < 0 || mkdir_p(o->sb_dir, 0711, err) < 0)
        goto fail;
    if (prepare_agent_layer(cfg->state_dir, cfg->agent_path, &o->agent_layer, err) < 0)
        goto fail;
    brig_runtime *rt = brig_xcalloc(1, sizeof(*rt));
    rt->ops = &oci_ops;
    rt->priv = o;
    brig_info("runtime: oci via %s (agent layer %s)", o->runtime, o->agent_layer);
    *out = rt;
    return 0;
fail:
    free(o->runtime);
    free(o->root);
    free(o->sb_dir);
    free(o->agent_layer);
    free(o->disk_dir);
    free(o);
    return -1;
}
