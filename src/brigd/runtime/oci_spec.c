/*
 * oci_spec.c - the OCI runtime spec of a sandbox (see oci_spec.h).  Isolation
 * choices and why are in docs/security.md.
 */
#include "oci_spec.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

#define AGENT_IN_SANDBOX     "/.brig/brig-agent"
#define GVISOR_TASKS_PER_PID 3 /* host tasks per program process under runsc (systrap) */

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

/* The agent as the container's process: root inside, a fixed set of
 * capabilities, no new privileges. */
static json_t *spec_process(void)
{
    static const char *const caps[] = {
        "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FOWNER",           "CAP_FSETID",
        "CAP_KILL",    "CAP_SETGID",       "CAP_SETUID",           "CAP_SETPCAP",
        "CAP_SETFCAP", "CAP_SYS_CHROOT",   "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE",
        NULL};
    /* fd 4: the system-call filter, which the agent loads before anything else
     * (seccomp.h: compiled once by brigd, not by runc at every start). */
    static const char *const args[] = {AGENT_IN_SANDBOX, "--listen-fd", "3",
                                       "--seccomp-fd",   "4",           NULL};
    static const char *const env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
        "LANG=C.UTF-8", NULL};
    json_t *capset = json_pack("{s:o, s:o, s:o}", "bounding", str_array(caps), "effective",
                               str_array(caps), "permitted", str_array(caps));
    /* No "rlimits": the runtime would set them from outside the sandbox's user
     * namespace (owned by the sandbox's uid), which needs CAP_SYS_RESOURCE on the
     * host.  The agent lowers its own limits instead, for every command. */
    return json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b}", "terminal", 0, "user", "uid",
                     0, "gid", 0, "args", str_array(args), "env", str_array(env), "cwd", "/",
                     "capabilities", capset, "noNewPrivileges", 1);
}

static json_t *spec_mounts(int64_t pty_max)
{
    static const char *const o_proc[] = {"nosuid", "noexec", "nodev", NULL};
    static const char *const o_dev[] = {"nosuid", "strictatime", "mode=755", "size=65536k", NULL};
    /* max=: every devpts instance draws from the host's kernel.pty.max; without a
     * bound of its own, one sandbox took the whole pool and other sandboxes' PTY execs
     * failed.  brigd sizes the host's pool for max_sandboxes of these (main.c). */
    char pts_max[32];
    snprintf(pts_max, sizeof(pts_max), "max=%lld", (long long)pty_max);
    const char *const o_pts[] = {"nosuid",    "noexec", "newinstance", "ptmxmode=0666",
                                 "mode=0620", "gid=5",  pts_max,       NULL};
    static const char *const o_shm[] = {"nosuid",    "noexec",      "nodev",
                                        "mode=1777", "size=65536k", NULL};
    static const char *const o_mq[] = {"nosuid", "noexec", "nodev", NULL};
    static const char *const o_sys[] = {"nosuid", "noexec", "nodev", "ro", NULL};
    static const char *const o_cg[] = {"nosuid", "noexec", "nodev", "relatime", "ro", NULL};

    json_t *mounts = json_array();
    json_array_append_new(mounts, mount_entry("/proc", "proc", "proc", o_proc));
    json_array_append_new(mounts, mount_entry("/dev", "tmpfs", "tmpfs", o_dev));
    json_array_append_new(mounts, mount_entry("/dev/pts", "devpts", "devpts", o_pts));
    json_array_append_new(mounts, mount_entry("/dev/shm", "tmpfs", "shm", o_shm));
    json_array_append_new(mounts, mount_entry("/dev/mqueue", "mqueue", "mqueue", o_mq));
    json_array_append_new(mounts, mount_entry("/sys", "sysfs", "sysfs", o_sys));
    json_array_append_new(mounts, mount_entry("/sys/fs/cgroup", "cgroup", "cgroup", o_cg));
    return mounts;
}

/* The cgroup resources: no device, memory (and no swap where the flavour can
 * bound it), pids, CPU quota, an I/O weight where available. */
static json_t *spec_resources(const brig_rt_spec *spec, const brig_cgroup_ops *cgroup)
{
    json_int_t mem = (json_int_t)(spec->memory_mib << 20);
    json_t *memory = json_pack("{s:I}", "limit", mem);
    /* OCI "swap" is memory + swap: equal to the limit means no swap at all. */
    if (cgroup->swap_limit)
        json_object_set_new(memory, "swap", json_integer(mem));
    json_t *resources =
        json_pack("{s:[{s:b, s:s}], s:o, s:{s:I}, s:{s:I, s:I}}", "devices", "allow", 0, "access",
                  "rwm", "memory", memory, "pids", "limit", (json_int_t)spec->pids_limit, "cpu",
                  "quota", (json_int_t)(spec->cpus * 100000), "period", (json_int_t)100000);
    if (cgroup->io_weight)
        json_object_set_new(resources, "blockIO", json_pack("{s:i}", "weight", 100));
    return resources;
}

static json_t *spec_linux(const brig_rt_spec *spec, const brig_cgroup_ops *cgroup,
                          const char *userns)
{
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
    _cleanup_free_ char *cgpath = brig_asprintf("/brig/%s", spec->id);
    json_t *idmap = json_pack("[{s:i, s:I, s:I}]", "containerID", 0, "hostID",
                              (json_int_t)spec->uid_base, "size", (json_int_t)spec->uid_size);
    json_t *linux_ = json_pack(
        "{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}, {s:s}, {s:s}], s:O, s:O, s:s, s:o, s:o, s:o}",
        "namespaces", "type", "user", "type", "pid", "type", "network", "type", "ipc", "type",
        "uts", "type", "mount", "type", "cgroup", "uidMappings", idmap, "gidMappings", idmap,
        "cgroupsPath", cgpath, "resources", spec_resources(spec, cgroup), "maskedPaths",
        str_array(masked), "readonlyPaths", str_array(readonly));
    json_decref(idmap);
    /* Join the user namespace brigd made (owned by the sandbox's own host uid)
     * rather than let the runtime make one owned by root. */
    if (userns)
        json_object_set_new(json_array_get(json_object_get(linux_, "namespaces"), 0), "path",
                            json_string(userns));
    return linux_;
}

json_t *brig_oci_spec_new(const brig_rt_spec *spec, const brig_cgroup_ops *cgroup, int64_t pty_max,
                          const char *userns)
{
    return json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process",
                     spec_process(), "root", "path", "rootfs", "readonly", 0, "hostname", "sandbox",
                     "mounts", spec_mounts(pty_max), "linux", spec_linux(spec, cgroup, userns));
}

json_t *brig_oci_spec_gvisor(const brig_rt_spec *spec, const brig_cgroup_ops *cgroup,
                             int64_t pty_max, const char *netns)
{
    static const char *const args[] = {AGENT_IN_SANDBOX, "--listen", BRIG_GVISOR_AGENT_SOCK,
                                       "--console-off", NULL};
    static const char *const o_run[] = {"rbind", "rw", "nosuid", "nodev", "noexec", NULL};
    static const char *const o_tmp[] = {"rbind", "rw", "nosuid", "nodev", NULL};
    json_t *cfg = brig_oci_spec_new(spec, cgroup, pty_max, NULL);
    json_object_set_new(json_object_get(cfg, "process"), "args", str_array(args));
    json_array_append_new(json_object_get(cfg, "mounts"),
                          mount_entry(BRIG_GVISOR_RUN_DIR, "bind", "run", o_run));
    /* runsc puts a tmpfs on /tmp unless the spec mounts something there: files in /tmp
     * would live in the sandbox's memory (a big one ends the sandbox) instead of on its
     * disk, bounded by disk_mib, as in a container. */
    json_array_append_new(json_object_get(cfg, "mounts"),
                          mount_entry("/tmp", "bind", "rootfs/tmp", o_tmp));
    json_t *linux_ = json_object_get(cfg, "linux");
    /* The host cgroup holds runsc's processes: gVisor's kernel and, on systrap, a stub
     * process or thread of the host per program thread (about 2.5 host tasks per
     * program): the programs get as many processes as a container's.  A sandbox that
     * reaches it is ended, not throttled (docs/security.md). */
    json_object_set_new(json_object_get(json_object_get(linux_, "resources"), "pids"), "limit",
                        json_integer((json_int_t)spec->pids_limit * GVISOR_TASKS_PER_PID + 64));
    /* The user namespace stays, without a path: runsc makes it with the sandbox's own
     * id range, and its kernel, stubs and gofer run as those host ids, not as root
     * (runsc cannot join one brigd made: a Go program cannot setns a user namespace). */
    json_t *ns = json_object_get(linux_, "namespaces");
    size_t i;
    json_t *n;
    json_array_foreach(ns, i, n)
    {
        if (strcmp(json_string_value(json_object_get(n, "type")), "network") == 0)
            json_object_set_new(n, "path", json_string(netns));
    }
    return cfg;
}
