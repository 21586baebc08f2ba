/*
 * oci.c - the OCI runtime driver: a sandbox is a container run by runc (or crun,
 * or gVisor's runsc) from a bundle brigd writes (oci_bundle.c).  This file holds
 * the driver's ops: create (a checklist of steps), attach, connect, kill,
 * destroy, and finding the runtime.
 *
 * Per sandbox, under <state>/sandboxes/<id>/:
 *   config.json   the OCI runtime spec brigd generates (oci_spec.c)
 *   disk.img      the writable layer: an ext4 image (disk.c), mounted at disk/
 *                 through a loop device; upper/ and work/ of the overlay live on it
 *   lower/        the template rootfs, id-mapped into the sandbox's uid range and
 *                 read-only (idmap.c)
 *   rootfs/       overlayfs: lower = agent layer + lower/, upper = disk/upper,
 *                 work = disk/work; mounted by brigd before runc runs
 *   agent.sock    the agent's listening socket, created and bound by brigd and
 *                 handed to the agent as fd 3 (runc --preserve-fds 2; fd 4 is the
 *                 system-call filter, seccomp.h): the sandbox
 *                 shares no host directory with us
 *   agent.log     the agent's and runc's stdout/stderr
 *   vol/<n>       its volumes: each a clone of the volume's data/, id-mapped into its
 *                 uid range, bind-mounted at the volume's path (volume.c)
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
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "agentconn.h"
#include "frame.h"
#include "log.h"
#include "oci_internal.h"
#include "seccomp.h"
#include "spawn.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define KILL_TIMEOUT_MS 10000 /* init gone after SIGKILL */

/* ---- the runtime binary ------------------------------------------------------ */

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

/* SIGKILL to init: the kernel kills the rest of its pid namespace, and init's
 * exit (the pidfd turns readable) completes only once they are all gone.  A
 * process in uninterruptible sleep keeps it from completing until it wakes. */
static int oci_kill(brig_runtime *rt, brig_rt_sandbox *sb, int timeout_ms)
{
    (void)rt;
    if (sb)
        sb->killed = true; /* a checkpointed one is not restored by a resume after this */
    if (sb == NULL || sb->pidfd < 0)
        return 0; /* nothing known to wait for: destroy's `runc delete --force` kills */
    if (pidfd_send_signal(sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        brig_warn("%s: kill init: %s", sb->id, strerror(errno));
    return brig_pidfd_wait(sb->pidfd, timeout_ms);
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
    o->cgroup->thaw(id); /* paused: a frozen process dies of SIGKILL only once thawed */
    if (sb && sb->pidfd >= 0) {
        if (pidfd_send_signal(sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
            brig_warn("%s: kill init: %s", id, strerror(errno));
        if (brig_pidfd_wait(sb->pidfd, KILL_TIMEOUT_MS) < 0)
            brig_warn("%s: init did not exit after SIGKILL", id);
    }
    /* runc delete: kills leftovers (--force), removes cgroups and runc's state (runsc's
     * delete: its sandbox and gofer processes, its state). */
    brig_isolation iso =
        sb ? sb->iso : (brig_gvisor_has(o, id) ? BRIG_ISO_GVISOR : BRIG_ISO_CONTAINER);
    brig_buf out = {0};
    int st = 0;
    const char *del[] = {"delete", "--force", id, NULL};
    if (iso == BRIG_ISO_GVISOR && brig_gvisor_checkpointed(o, id)) {
        /* runsc forgot it at its checkpoint: nothing of it runs (gvisor_ckpt.c) */
    } else if (brig_oci_run_runtime(o, iso, del, &out, &st, err) < 0) {
        failed = 1;
    } else if (st != 0 && (out.data == NULL || strstr(out.data, "does not exist") == NULL)) {
        _cleanup_free_ char *m = brig_oci_runtime_message(out.data ? out.data : "");
        brig_error_set(err, BRIG_E_INTERNAL, 0, "%s delete %s: %s",
                       iso == BRIG_ISO_GVISOR ? o->runsc : o->runtime, id, m);
        failed = 1;
    }
    brig_buf_dispose(&out);
    /* What the delete could not see: runsc's Sentry and gofer when runsc's state is gone
     * (a crash between its run and its state's write, a state dir restored from a backup). */
    int left = failed ? 0 : o->cgroup->kill_all(id, KILL_TIMEOUT_MS);
    if (left > 0)
        brig_warn("%s: killed %d processes its runtime's delete left", id, left);
    else if (left < 0)
        brig_warn("%s: processes survive SIGKILL in its cgroup", id);
    /* runc 1.1 forgets the container even when it could not remove a cgroup (a
     * process from elsewhere still in it): what is left is ours to remove, also the
     * memory cgroup brigd made before runc (cgroup->prepare) when runc never ran. */
    if (!failed && o->cgroup->remove(id, err) < 0)
        failed = 1;

    if (brig_oci_bundle_unmount(o, id, err) < 0)
        failed = 1;
    if (!failed) {
        _cleanup_free_ char *dir = brig_oci_path(o, id, NULL);
        brig_oci_rm_rf(dir);
    }
    return failed ? -1 : 0;
}

/* ---- create, step by step ------------------------------------------------------ */

/* The isolation setup, in order; a failure after the directory exists
 * unwinds through oci_destroy, which tolerates every step not taken. */
static int oci_create(brig_runtime *rt, const brig_rt_spec *spec, brig_rt_sandbox **out,
                      brig_error **err)
{
    oci *o = rt->priv;
    brig_rt_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", spec->id);
    sb->dirfd = sb->pidfd = -1;
    sb->iso = spec->isolation;
    int userns = -1, lfd = -1;
    /* A fork with memory's child: runsc restores the source's image (its agent listens again
     * once told: gvisor_ckpt.c). */
    _cleanup_free_ char *img =
        spec->snapshot_memory ? brig_oci_snapshot_file(o, spec->snapshot, "memory") : NULL;
    if (brig_oci_bundle_dir(o, spec, &sb->dirfd, err) < 0)
        goto fail_sb; /* nothing made: never clean up a directory we did not create */
    if (brig_gvisor_host_layer_mark(o, spec, sb->dirfd, err) < 0)
        goto fail_destroy;
    sb->host_layer = brig_gvisor_host_layer(sb->dirfd);
    /* The TCP buffer bound (cgroup.c), before anything of the sandbox runs.  Not under
     * gVisor: its TCP buffers are its own kernel's memory (netstack), and runsc sets no
     * limit on a cgroup that exists before it (the memory limit would be lost). */
    if (o->cgroup->check(err) < 0 ||
        (sb->iso != BRIG_ISO_GVISOR &&
         o->cgroup->prepare(spec->id, o->tcp_memory_mib << 20, err) < 0))
        goto fail_destroy;
    if (brig_oci_bundle_root(o, spec, sb->dirfd, &userns, err) < 0)
        goto fail_destroy;
    if (sb->iso == BRIG_ISO_GVISOR) {
        /* runsc makes its own user namespace (oci_spec.c): the id-mapped mount holds
         * brigd's.  Its network first (runtime.h, net_first); userns holds the
         * namespace's fd from here. */
        close(userns);
        userns = -1;
        if (brig_gvisor_netns_new(&userns, err) < 0 ||
            brig_oci_bundle_config(o, spec, userns, err) < 0 ||
            (spec->net_first && spec->net_first(spec->net_arg, userns, err) < 0))
            goto fail_destroy;
    } else {
        lfd = brig_oci_bundle_listen(sb, err);
        if (lfd < 0 || brig_oci_bundle_config(o, spec, userns, err) < 0)
            goto fail_destroy;
    }
    int rc = brig_oci_runtime_start(o, spec->id, spec->isolation, sb->host_layer, lfd, img, err);
    if (lfd >= 0)
        close(lfd);
    lfd = -1;
    if (rc < 0 || (sb->iso == BRIG_ISO_GVISOR && brig_gvisor_seal(o, spec->id, err) < 0) ||
        brig_oci_init_hold(o, sb, err) < 0 ||
        (img && brig_gvisor_agent_listen(o, spec->id, err) < 0) ||
        brig_oci_agent_ready(rt, sb, err) < 0)
        goto fail_destroy;
    if (userns >= 0)
        close(userns); /* the sandbox (and a container's id-mapped mount) holds it now */
    *out = sb;
    return 0;

fail_destroy:
    if (lfd >= 0)
        close(lfd);
    if (userns >= 0)
        close(userns);
    brig_error *derr = NULL;
    if (oci_destroy(rt, spec->id, sb, &derr) < 0) {
        brig_err("%s: cleanup after failed create: %s", spec->id, derr->msg);
        brig_error_clear(&derr);
    }
fail_sb:
    sb_free(sb);
    return -1;
}

static int oci_attach(brig_runtime *rt, const char *id, brig_rt_sandbox **out, brig_error **err)
{
    oci *o = rt->priv;
    brig_rt_sandbox *sb = brig_xcalloc(1, sizeof(*sb));
    snprintf(sb->id, sizeof(sb->id), "%s", id);
    sb->pidfd = -1;
    sb->iso = brig_gvisor_has(o, id) ? BRIG_ISO_GVISOR : BRIG_ISO_CONTAINER;
    _cleanup_free_ char *dir = brig_oci_path(o, id, NULL);
    sb->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sb->dirfd < 0) {
        brig_error_sys(err, "open %s", dir);
        goto fail;
    }
    brig_oci_disk_thaw(o, id); /* brigd died during a snapshot */
    sb->host_layer = sb->iso == BRIG_ISO_GVISOR && brig_gvisor_host_layer(sb->dirfd);
    if (sb->iso == BRIG_ISO_GVISOR && brig_gvisor_checkpointed(o, id)) {
        *out = sb; /* its memory on disk, no process: paused until restored */
        return 0;
    }
    brig_buf outb = {0};
    int st = 0;
    const char *state[] = {"state", id, NULL};
    if (brig_oci_run_runtime(o, sb->iso, state, &outb, &st, err) < 0) {
        brig_buf_dispose(&outb);
        goto fail;
    }
    json_t *j = st == 0 && outb.data ? json_loads(outb.data, 0, NULL) : NULL;
    brig_buf_dispose(&outb);
    const char *status = json_string_value(json_object_get(j, "status"));
    json_int_t pid = json_integer_value(json_object_get(j, "pid"));
    bool paused = status && strcmp(status, "paused") == 0; /* its agent is frozen: not asked */
    int running = status && (strcmp(status, "running") == 0 || paused) && pid > 0;
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
    int cfd = paused ? -2 : brig_oci_connect(rt, sb, err);
    if (cfd == -1)
        goto fail;
    if (cfd >= 0)
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
    for (int iso = 0; iso < BRIG_ISO_COUNT; iso++) {
        if (iso == BRIG_ISO_GVISOR && o->runsc == NULL)
            continue;
        brig_buf out = {0};
        int st = 0;
        const char *list[] = {"list", iso == BRIG_ISO_GVISOR ? "--quiet" : "-q", NULL};
        if (brig_oci_run_runtime(o, (brig_isolation)iso, list, &out, &st, NULL) == 0 && st == 0 &&
            out.data) {
            char *save = NULL;
            for (char *l = strtok_r(out.data, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                if (*l)
                    add_unique(ids, n, l);
        }
        brig_buf_dispose(&out);
    }
    return 0;
}

static int oci_netns(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    oci *o = rt->priv;
    if (sb->pidfd < 0 && sb->iso == BRIG_ISO_GVISOR && brig_gvisor_checkpointed(o, sb->id)) {
        int fd = openat(sb->dirfd, "netns", O_RDONLY | O_CLOEXEC); /* kept: gvisor_ckpt.c */
        return fd >= 0 ? fd : brig_error_sys(err, "open the network namespace of %s", sb->id);
    }
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
    free(o->vol_dir);
    free(o->runsc);
    free(o->runsc_root);
    free(o->runsc_missing);
    for (size_t i = 0; o->runsc_flags[i]; i++)
        free(o->runsc_flags[i]);
    close(o->seccomp_fd);
    free(o);
    free(rt);
}

/* Containers always (the driver does not start without its runtime); gVisor where
 * runsc was found and runs (gvisor.c). */
static int oci_available(brig_runtime *rt, brig_isolation iso, brig_error **err)
{
    oci *o = rt->priv;
    if (iso == BRIG_ISO_CONTAINER || (iso == BRIG_ISO_GVISOR && o->runsc))
        return 0;
    if (iso == BRIG_ISO_GVISOR)
        return brig_error_set(err, BRIG_E_INVALID, 0, "%s", o->runsc_missing);
    return brig_error_set(err, BRIG_E_INVALID, 0, "isolation '%s' is not available on this host",
                          brig_isolation_name(iso));
}

static const brig_runtime_ops oci_ops = {
    .name = "oci",
    .available = oci_available,
    .create = oci_create,
    .attach = oci_attach,
    .connect = brig_oci_connect,
    .connect_begin = brig_oci_connect_begin,
    .destroy = oci_destroy,
    .kill = oci_kill,
    .exit_fd = oci_exit_fd,
    .netns = oci_netns,
    .events = brig_oci_events,
    .last_words = brig_oci_last_words,
    .release = oci_release,
    .list = oci_list,
    .stats = brig_oci_stats,
    .volume_make = brig_oci_volume_make,
    .volume_remove = brig_oci_volume_remove,
    .volume_unmount = brig_oci_volume_unmount,
    .volume_list = brig_oci_volume_list,
    .layer_open = brig_oci_layer_open,
    .pause = brig_oci_pause,
    .resume = brig_oci_resume,
    .paused = brig_oci_paused,
    .snapshot_take = brig_oci_snapshot_take,
    .snapshot_memory = brig_oci_snapshot_memory,
    .snapshot_remove = brig_oci_snapshot_remove,
    .snapshot_list = brig_oci_snapshot_list,
    .free = oci_free,
};

/* The sandboxes' system-call filter, compiled once (seccomp.h), and the profile it was
 * compiled from in <state>/seccomp.json, for an operator or bench/ to read. */
static int seccomp_prepare(oci *o, const char *state_dir, brig_error **err)
{
    json_t *profile = brig_seccomp_profile();
    _cleanup_free_ char *path = brig_asprintf("%s/seccomp.json", state_dir);
    int rc = brig_seccomp_compile(profile, &o->seccomp_fd, err);
    if (rc == 0 && json_dump_file(profile, path, JSON_INDENT(1)) < 0)
        brig_warn("write %s: failed", path);
    json_decref(profile);
    return rc;
}

int brig_runtime_oci_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err)
{
    if (brig_oci_check_searchable(cfg->state_dir, err) < 0)
        return -1;
    oci *o = brig_xcalloc(1, sizeof(*o));
    o->seccomp_fd = -1;
    o->runtime = resolve_runtime(cfg->oci_runtime, err);
    if (o->runtime == NULL)
        goto fail;
    o->cgroup = cfg->cgroup;
    o->pty_max = cfg->pty_max;
    o->tcp_memory_mib = cfg->tcp_memory_mib;
    o->root = brig_asprintf("%s/runc", cfg->state_dir);
    o->sb_dir = brig_asprintf("%s/sandboxes", cfg->state_dir);
    o->disk_dir = brig_asprintf("%s/disk", cfg->state_dir);
    o->vol_dir = brig_asprintf("%s/volumes", cfg->state_dir);
    if (brig_oci_mkdir_p(o->root, 0700, err) < 0 || brig_oci_mkdir_p(o->sb_dir, 0711, err) < 0 ||
        brig_oci_mkdir_p(o->vol_dir, 0700, err) < 0)
        goto fail;
    if (brig_oci_agent_layer(cfg->state_dir, cfg->agent_path, &o->agent_layer, err) < 0 ||
        seccomp_prepare(o, cfg->state_dir, err) < 0 || brig_gvisor_init(o, cfg, err) < 0)
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
    free(o->vol_dir);
    free(o->runsc);
    free(o->runsc_root);
    free(o->runsc_missing);
    if (o->seccomp_fd >= 0)
        close(o->seccomp_fd);
    free(o);
    return -1;
}
