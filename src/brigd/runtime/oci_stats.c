/*
 * oci_stats.c - what an OCI sandbox uses now (runtime.h's stats op): CPU, memory and
 * tasks from its cgroups (at /brig/<id>, the cgroupsPath oci_spec.c gives runc), its
 * disk from its writable layer's file system (statfs of <sandbox>/disk: an ext4 of its
 * own, so what it shows is the sandbox's alone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "oci_internal.h"
#include "util.h"

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

static void cgroup_stats(const oci *o, const char *id, brig_rt_stats *out)
{
    out->cpu_ns = o->cgroup->cpu_ns(id);
    if (strcmp(o->cgroup->name, "v1") == 0) {
        out->memory_bytes = cg_read("/sys/fs/cgroup/memory/brig/%s/memory.usage_in_bytes", id);
        out->memory_peak_bytes =
            cg_read("/sys/fs/cgroup/memory/brig/%s/memory.max_usage_in_bytes", id);
        out->pids = cg_read("/sys/fs/cgroup/pids/brig/%s/pids.current", id);
    } else if (strcmp(o->cgroup->name, "v2") == 0) {
        out->memory_bytes = cg_read("/sys/fs/cgroup/brig/%s/memory.current", id);
        out->memory_peak_bytes = cg_read("/sys/fs/cgroup/brig/%s/memory.peak", id); /* 5.19+ */
        out->pids = cg_read("/sys/fs/cgroup/brig/%s/pids.current", id);
    }
}

int brig_oci_stats(brig_runtime *rt, brig_rt_sandbox *sb, brig_rt_stats *out)
{
    oci *o = rt->priv;
    *out = (brig_rt_stats){-1, -1, -1, -1, -1, -1};
    if (sb == NULL)
        return -1;
    cgroup_stats(o, sb->id, out);
    _cleanup_free_ char *dir = brig_oci_path(o, sb->id, NULL);
    _cleanup_free_ char *disk = brig_oci_path(o, sb->id, "disk");
    struct stat a, b;
    struct statvfs fs;
    /* Only while the layer is mounted there: else statvfs would tell the state dir's. */
    if (stat(dir, &a) == 0 && stat(disk, &b) == 0 && a.st_dev != b.st_dev &&
        statvfs(disk, &fs) == 0) {
        out->disk_bytes = (int64_t)((fs.f_blocks - fs.f_bfree) * fs.f_frsize);
        out->disk_inodes = (int64_t)(fs.f_files - fs.f_ffree);
    }
    return out->cpu_ns < 0 && out->memory_bytes < 0 && out->disk_bytes < 0 ? -1 : 0;
}
