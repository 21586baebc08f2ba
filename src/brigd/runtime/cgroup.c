/*
 * cgroup.c - detecting the cgroup flavour (see cgroup.h).
 */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static int ok(brig_error **err)
{
    (void)err;
    return 0;
}

static int refuse(brig_error **err)
{
    return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                          "this host has no usable memory, cpu and pids cgroup controllers: "
                          "refusing to run sandboxes without limits");
}

static int64_t read_first_int(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[256];
    int64_t v = -1;
    while (fgets(line, sizeof(line), f)) {
        if (key == NULL) {
            v = strtoll(line, NULL, 10);
            break;
        }
        size_t kl = strlen(key);
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            v = strtoll(line + kl + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

/* The sandbox cgroups live at /brig/<id> (the OCI cgroupsPath). */
static int64_t v1_cpu_ns(const char *id)
{
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/cpuacct/brig/%s/cpuacct.usage", id);
    return read_first_int(p, NULL);
}

static int64_t v2_cpu_ns(const char *id)
{
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/brig/%s/cpu.stat", id);
    int64_t us = read_first_int(p, "usage_usec");
    return us < 0 ? -1 : us * 1000;
}

static int64_t no_cpu(const char *id)
{
    (void)id;
    return -1;
}

/* rmdir of one cgroup directory; gone already is fine. */
static int remove_dir(const char *path, brig_error **err)
{
    if (rmdir(path) < 0 && errno != ENOENT && errno != ENOTDIR)
        return brig_error_sys(err, "remove cgroup %s", path);
    return 0;
}

/* v1: one hierarchy per controller (and named ones: systemd, unified), each with
 * brig/<id>; combined controllers appear under several names (cpu -> cpu,cpuacct). */
static int v1_remove(const char *id, brig_error **err)
{
    DIR *dir = opendir("/sys/fs/cgroup");
    if (dir == NULL)
        return brig_error_sys(err, "open /sys/fs/cgroup");
    int r = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/%s/brig/%s", e->d_name, id);
        if (remove_dir(p, r < 0 ? NULL : err) < 0)
            r = -1;
    }
    closedir(dir);
    return r;
}

static int v2_remove(const char *id, brig_error **err)
{
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/brig/%s", id);
    return remove_dir(p, err);
}

static int no_remove(const char *id, brig_error **err)
{
    (void)id;
    (void)err;
    return 0;
}

static int v1_prepare(const char *id, int64_t tcp_bytes, brig_error **err);
static int64_t v1_tcp_bytes(const char *id);

/* Why a command or a sandbox ended (docs/api.md, "Why it ended") is read from these
 * counters, not guessed from a SIGKILL: each only grows over the cgroup's life. */
static void v1_events(const char *id, int64_t *oom_kills, int64_t *pids_max)
{
    _cleanup_free_ char *m = brig_asprintf("/sys/fs/cgroup/memory/brig/%s/memory.oom_control", id);
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/pids/brig/%s/pids.events", id);
    *oom_kills = read_first_int(m, "oom_kill");
    *pids_max = read_first_int(p, "max");
}

static void v2_events(const char *id, int64_t *oom_kills, int64_t *pids_max)
{
    _cleanup_free_ char *m = brig_asprintf("/sys/fs/cgroup/brig/%s/memory.events", id);
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/brig/%s/pids.events", id);
    *oom_kills = read_first_int(m, "oom_kill");
    *pids_max = read_first_int(p, "max");
}

static void no_events(const char *id, int64_t *oom_kills, int64_t *pids_max)
{
    (void)id;
    *oom_kills = *pids_max = -1;
}

/* Writes text to a cgroup file; one that is not there is nothing to do. */
static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (write(fd, text, strlen(text)) < 0)
        brig_warn("write %s to %s: %s", text, path, strerror(errno));
    close(fd);
}

static void v1_thaw(const char *id)
{
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/freezer/brig/%s/freezer.state", id);
    write_file(p, "THAWED");
}

static void v2_thaw(const char *id)
{
    _cleanup_free_ char *p = brig_asprintf("/sys/fs/cgroup/brig/%s/cgroup.freeze", id);
    write_file(p, "0");
}

static void no_thaw(const char *id)
{
    (void)id;
}

static int no_prepare(const char *id, int64_t tcp_bytes, brig_error **err)
{
    (void)id;
    (void)tcp_bytes;
    (void)err;
    return 0;
}

static int64_t no_tcp(const char *id)
{
    (void)id;
    return -1;
}

/* ---- killing what is left in a cgroup ---------------------------------------------------- */

/* A process's real uid (-1 when it is gone). */
static long real_uid(long pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[256];
    long uid = -1;
    while (uid < 0 && fgets(line, sizeof(line), f))
        if (strncmp(line, "Uid:", 4) == 0)
            uid = strtol(line + 4, NULL, 10);
    fclose(f);
    return uid;
}

/* SIGKILL to each pid listed in procs that is the sandbox's: every process of a sandbox
 * (its container's, runsc's since G2) runs as an id of its range, never host root, and a
 * host root process someone put into its cgroup is not brig's to kill.  How many got it
 * (-1: no such cgroup). */
static int kill_listed(const char *procs)
{
    FILE *f = fopen(procs, "re");
    if (f == NULL)
        return -1;
    int n = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1) {
        if (pid > 1 && real_uid(pid) > 0 && kill((pid_t)pid, SIGKILL) == 0)
            n++;
    }
    fclose(f);
    return n;
}

/* Kills until procs lists none of the sandbox's (a process may fork while its siblings
 * die); the caller thawed the cgroup (a frozen process dies of SIGKILL only once thawed).
 * How many the first look found, or -1 when some outlive timeout_ms. */
static int kill_procs(const char *procs, int timeout_ms)
{
    int found = 0;
    int64_t deadline = brig_now_mono_ms() + timeout_ms;
    for (;;) {
        int n = kill_listed(procs);
        if (n <= 0)
            return found;
        if (found == 0) /* later passes meet the dying again */
            found = n;
        if (brig_now_mono_ms() > deadline)
            return -1;
        struct timespec ts = {0, 5 * 1000 * 1000}; /* the kernel takes them down */
        nanosleep(&ts, NULL);
    }
}

static int v1_kill_all(const char *id, int timeout_ms)
{
    _cleanup_free_ char *procs = brig_asprintf("/sys/fs/cgroup/pids/brig/%s/cgroup.procs", id);
    v1_thaw(id);
    return kill_procs(procs, timeout_ms);
}

static int v2_kill_all(const char *id, int timeout_ms)
{
    _cleanup_free_ char *procs = brig_asprintf("/sys/fs/cgroup/brig/%s/cgroup.procs", id);
    v2_thaw(id);
    return kill_procs(procs, timeout_ms);
}

static int no_kill_all(const char *id, int timeout_ms)
{
    (void)id;
    (void)timeout_ms;
    return 0;
}

/* Sets the nice value of every thread tasks lists (a nice value is a thread's). */
static void renice_listed(const char *tasks, int nice)
{
    FILE *f = fopen(tasks, "re");
    if (f == NULL)
        return;
    long tid;
    while (fscanf(f, "%ld", &tid) == 1)
        setpriority(PRIO_PROCESS, (id_t)tid, nice);
    fclose(f);
}

static void v1_renice(const char *id, int nice)
{
    _cleanup_free_ char *tasks = brig_asprintf("/sys/fs/cgroup/pids/brig/%s/tasks", id);
    renice_listed(tasks, nice);
}

static void v2_renice(const char *id, int nice)
{
    _cleanup_free_ char *tasks = brig_asprintf("/sys/fs/cgroup/brig/%s/cgroup.threads", id);
    renice_listed(tasks, nice);
}

static void no_renice(const char *id, int nice)
{
    (void)id;
    (void)nice;
}

static brig_cgroup_ops v1 = {.name = "v1",
                             .check = ok,
                             .cpu_ns = v1_cpu_ns,
                             .prepare = v1_prepare,
                             .tcp_bytes = v1_tcp_bytes,
                             .events = v1_events,
                             .thaw = v1_thaw,
                             .remove = v1_remove,
                             .kill_all = v1_kill_all,
                             .renice = v1_renice};
static brig_cgroup_ops v2 = {.name = "v2",
                             .check = ok,
                             .cpu_ns = v2_cpu_ns,
                             .prepare = no_prepare,
                             .tcp_bytes = no_tcp,
                             .events = v2_events,
                             .thaw = v2_thaw,
                             .remove = v2_remove,
                             .kill_all = v2_kill_all,
                             .renice = v2_renice};
static const brig_cgroup_ops none = {.name = "none",
                                     .check = refuse,
                                     .cpu_ns = no_cpu,
                                     .prepare = no_prepare,
                                     .tcp_bytes = no_tcp,
                                     .events = no_events,
                                     .thaw = no_thaw,
                                     .remove = no_remove,
                                     .kill_all = no_kill_all,
                                     .renice = no_renice};

#define V1_MEMORY "/sys/fs/cgroup/memory/brig"

/* TCP buffers come from one host-wide budget (net.ipv4.tcp_mem) that v1 does not count
 * as memory: a 512 MiB sandbox pinned 902 MiB of them over its loopback, and two such
 * stall every TCP socket of the host.  memory.kmem.tcp.limit_in_bytes bounds them per
 * cgroup (over it, sockets stop growing their buffers and wait).  v2 needs none of
 * this: it charges socket buffers to memory.max. */
static int v1_prepare(const char *id, int64_t tcp_bytes, brig_error **err)
{
    if (!v1.tcp_limit)
        return 0;
    _cleanup_free_ char *dir = brig_asprintf("%s/%s", V1_MEMORY, id);
    if ((mkdir(V1_MEMORY, 0755) < 0 && errno != EEXIST) ||
        (mkdir(dir, 0755) < 0 && errno != EEXIST))
        return brig_error_sys(err, "create memory cgroup %s", dir);
    _cleanup_free_ char *path = brig_asprintf("%s/memory.kmem.tcp.limit_in_bytes", dir);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    char v[32];
    int n = snprintf(v, sizeof(v), "%lld", (long long)tcp_bytes);
    if (fd < 0 || write(fd, v, (size_t)n) != n)
        return brig_error_sys(err, "set %s to %s", path, v);
    return 0;
}

static int64_t v1_tcp_bytes(const char *id)
{
    if (!v1.tcp_limit)
        return -1;
    _cleanup_free_ char *p = brig_asprintf("%s/%s/memory.kmem.tcp.usage_in_bytes", V1_MEMORY, id);
    return read_first_int(p, NULL);
}

static bool exists(const char *root, const char *rel)
{
    _cleanup_free_ char *p = brig_asprintf("%s/%s", root, rel);
    return access(p, F_OK) == 0;
}

const brig_cgroup_ops *brig_cgroup_detect(const char *root)
{
    struct statfs fs;
    if (statfs(root, &fs) < 0)
        return &none;
    if (fs.f_type == CGROUP2_SUPER_MAGIC) {
        _cleanup_free_ char *p = brig_asprintf("%s/cgroup.controllers", root);
        FILE *f = fopen(p, "re");
        char line[512] = "";
        if (f) {
            if (fgets(line, sizeof(line), f) == NULL)
                line[0] = '\0';
            fclose(f);
        }
        if (!strstr(line, "memory") || !strstr(line, "pids") || !strstr(line, "cpu"))
            return &none;
        v2.swap_limit = true; /* memory.swap.max exists wherever memory does */
        v2.io_weight = strstr(line, "io") != NULL;
        return &v2;
    }
    if (!exists(root, "memory/memory.limit_in_bytes") || !exists(root, "pids") ||
        !exists(root, "cpu/cpu.cfs_quota_us"))
        return &none;
    v1.swap_limit = exists(root, "memory/memory.memsw.limit_in_bytes");
    v1.tcp_limit = exists(root, "memory/memory.kmem.tcp.limit_in_bytes");
    v1.io_weight = exists(root, "blkio/blkio.weight");
    return &v1;
}
