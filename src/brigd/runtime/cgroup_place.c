/*
 * cgroup_place.c - a sandbox's cgroup made by brigd itself, for a process no OCI runtime
 * starts (a microVM's VMM), and what any sandbox's cgroup says it uses (see cgroup.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "util.h"

/* Writes text to path; a missing file is skipped when optional. */
static int put(const char *path, const char *text, bool optional, brig_error **err)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && optional && errno == ENOENT)
        return 0;
    if (fd < 0)
        return brig_error_sys(err, "open %s", path);
    ssize_t w = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    if (w < 0 && !optional)
        return brig_error_set(err, BRIG_E_INTERNAL, e, "write %s: %s", path, strerror(e));
    return 0;
}

static int mkdir_ok(const char *path, brig_error **err)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return brig_error_sys(err, "mkdir %s", path);
    return 0;
}

/* One v1 hierarchy's brig/<id>, its limit files written; its cgroup.procs added to procs. */
static int v1_one(const char *ctl, const char *id, const char *const *kv, char **procs, size_t *n,
                  brig_error **err)
{
    _cleanup_free_ char *top = brig_asprintf("/sys/fs/cgroup/%s/brig", ctl);
    _cleanup_free_ char *dir = brig_asprintf("%s/%s", top, id);
    if (mkdir_ok(top, err) < 0 || mkdir_ok(dir, err) < 0)
        return -1;
    for (size_t i = 0; kv && kv[i]; i += 2) {
        _cleanup_free_ char *p = brig_asprintf("%s/%s", dir, kv[i]);
        if (put(p, kv[i + 1], strstr(kv[i], "memsw") != NULL, err) < 0)
            return -1;
    }
    procs[(*n)++] = brig_asprintf("%s/cgroup.procs", dir);
    return 0;
}

static int place_v1(const char *id, const brig_cgroup_limits *l, char **procs, brig_error **err)
{
    _cleanup_free_ char *mem = brig_asprintf("%lld", (long long)l->memory_bytes);
    _cleanup_free_ char *quota = brig_asprintf("%lld", (long long)(l->cpus * 100000));
    _cleanup_free_ char *pids = brig_asprintf("%lld", (long long)l->pids);
    const char *m[] = {"memory.limit_in_bytes", mem, "memory.memsw.limit_in_bytes", mem, NULL};
    const char *c[] = {"cpu.cfs_period_us", "100000", "cpu.cfs_quota_us", quota, NULL};
    const char *p[] = {"pids.max", pids, NULL};
    size_t n = 0;
    if (v1_one("memory", id, m, procs, &n, err) < 0 || v1_one("cpu", id, c, procs, &n, err) < 0 ||
        v1_one("cpuacct", id, NULL, procs, &n, err) < 0 ||
        v1_one("pids", id, p, procs, &n, err) < 0)
        return -1;
    return 0;
}

static int place_v2(const char *id, const brig_cgroup_limits *l, char **procs, brig_error **err)
{
    put("/sys/fs/cgroup/cgroup.subtree_control", "+memory +cpu +pids", true, NULL);
    if (mkdir_ok("/sys/fs/cgroup/brig", err) < 0)
        return -1;
    put("/sys/fs/cgroup/brig/cgroup.subtree_control", "+memory +cpu +pids", true, NULL);
    _cleanup_free_ char *dir = brig_asprintf("/sys/fs/cgroup/brig/%s", id);
    if (mkdir_ok(dir, err) < 0)
        return -1;
    _cleanup_free_ char *mem = brig_asprintf("%lld", (long long)l->memory_bytes);
    _cleanup_free_ char *cpu = brig_asprintf("%lld 100000", (long long)(l->cpus * 100000));
    _cleanup_free_ char *pids = brig_asprintf("%lld", (long long)l->pids);
    const char *kv[] = {"memory.max", mem, "memory.swap.max", "0",
                        "cpu.max",    cpu, "pids.max",        pids};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(kv); i += 2) {
        _cleanup_free_ char *p = brig_asprintf("%s/%s", dir, kv[i]);
        if (put(p, kv[i + 1], strcmp(kv[i], "memory.swap.max") == 0, err) < 0)
            return -1;
    }
    procs[0] = brig_asprintf("%s/cgroup.procs", dir);
    return 0;
}

int brig_cgroup_place(const brig_cgroup_ops *cg, const char *id, const brig_cgroup_limits *l,
                      char *procs[BRIG_CGROUP_PROCS_MAX], brig_error **err)
{
    memset(procs, 0, sizeof(char *) * BRIG_CGROUP_PROCS_MAX);
    if (strcmp(cg->name, "v1") == 0)
        return place_v1(id, l, procs, err);
    if (strcmp(cg->name, "v2") == 0)
        return place_v2(id, l, procs, err);
    return cg->check(err);
}

/* The first number in path (one that says "max" is none: -1); -1 when unreadable. */
static int64_t read_int(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[64];
    int64_t v = -1;
    if (fgets(line, sizeof(line), f) && line[0] >= '0' && line[0] <= '9')
        v = strtoll(line, NULL, 10);
    fclose(f);
    return v;
}

static int64_t cg_read(const char *fmt, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), fmt, id);
    return read_int(path);
}

void brig_cgroup_usage(const brig_cgroup_ops *cg, const char *id, int64_t *cpu_ns, int64_t *memory,
                       int64_t *memory_peak, int64_t *pids)
{
    *cpu_ns = cg->cpu_ns(id);
    *memory = *memory_peak = *pids = -1;
    if (strcmp(cg->name, "v1") == 0) {
        *memory = cg_read("/sys/fs/cgroup/memory/brig/%s/memory.usage_in_bytes", id);
        *memory_peak = cg_read("/sys/fs/cgroup/memory/brig/%s/memory.max_usage_in_bytes", id);
        *pids = cg_read("/sys/fs/cgroup/pids/brig/%s/pids.current", id);
    } else if (strcmp(cg->name, "v2") == 0) {
        *memory = cg_read("/sys/fs/cgroup/brig/%s/memory.current", id);
        *memory_peak = cg_read("/sys/fs/cgroup/brig/%s/memory.peak", id); /* 5.19+ */
        *pids = cg_read("/sys/fs/cgroup/brig/%s/pids.current", id);
    }
}
