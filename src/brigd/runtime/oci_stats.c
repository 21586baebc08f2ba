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

int brig_oci_stats(brig_runtime *rt, brig_rt_sandbox *sb, brig_rt_stats *out)
{
    oci *o = rt->priv;
    *out = (brig_rt_stats){-1, -1, -1, -1, -1, -1};
    if (sb == NULL)
        return -1;
    brig_cgroup_usage(o->cgroup, sb->id, &out->cpu_ns, &out->memory_bytes, &out->memory_peak_bytes,
                      &out->pids);
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
