/*
 * oci_bundle.c - a sandbox's bundle for the OCI runtime, under
 * <state>/sandboxes/<id>/ (oci.c's header lists what is there): the directory,
 * the root file system (writable layer, id-mapped template, overlay with the
 * agent layer), the agent's socket, config.json; and their removal.  Also the
 * agent layer every sandbox shares.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "idmap.h"
#include "log.h"
#include "oci_internal.h"
#include "oci_spec.h"
#include "util.h"

/* ---- helpers ---------------------------------------------------------------- */

char *brig_oci_path(const oci *o, const char *id, const char *name)
{
    return name ? brig_asprintf("%s/%s/%s", o->sb_dir, id, name)
                : brig_asprintf("%s/%s", o->sb_dir, id);
}

void brig_oci_sock_path(const brig_rt_sandbox *sb, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", sb->dirfd,
             sb->iso == BRIG_ISO_GVISOR ? "run/agent.sock" : "agent.sock");
}

int brig_oci_mkdir_p(const char *path, mode_t mode, brig_error **err)
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

void brig_oci_rm_rf(const char *path)
{
    nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* ---- the agent layer ------------------------------------------------------ */

int brig_oci_agent_layer(const char *state_dir, const char *agent_path, char **layer,
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
    /* The key names the binary and the layer's layout (a new layout, a new directory). */
    static const char layout[] = "brig-agent + run/ v2";
    char key[17];
    const void *parts[] = {bin, layout};
    size_t lens[] = {(size_t)st.st_size, sizeof(layout) - 1};
    brig_sha256_hex16(parts, lens, 2, key);

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
    brig_oci_rm_rf(tmp);
    /* run/: gVisor's mount point for the agent's socket directory (oci_spec.c), made
     * here because runsc's gofer, the sandbox's root, cannot add it to host root's .brig. */
    _cleanup_free_ char *tmp_run = brig_asprintf("%s/run", tmp_brig);
    if (brig_oci_mkdir_p(tmp_run, 0755, err) < 0)
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
    brig_oci_rm_rf(tmp); /* when another brigd won the rename */
    *layer = dir;
    return 0;
fail:
    brig_oci_rm_rf(tmp);
    free(dir);
    return -1;
}

int brig_oci_check_searchable(const char *dir, brig_error **err)
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

/* ---- the bundle ------------------------------------------------------------ */

int brig_oci_bundle_dir(const oci *o, const brig_rt_spec *spec, int *dirfd, brig_error **err)
{
    *dirfd = -1;
    _cleanup_free_ char *dir = brig_oci_path(o, spec->id, NULL);
    /* 0710 root:<the sandbox's gid>: its own root may pass (runc init reaches the
     * root file system below), other sandboxes' uids may not even look in. */
    if (mkdir(dir, 0710) < 0)
        return brig_error_sys(err, "mkdir %s", dir);
    *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0 || chown(dir, 0, spec->uid_base) < 0 || chmod(dir, 0710) < 0) {
        brig_error_sys(err, "prepare %s", dir);
        if (*dirfd >= 0)
            close(*dirfd);
        *dirfd = -1;
        rmdir(dir); /* empty yet */
        return -1;
    }
    return 0;
}

int brig_oci_bundle_root(const oci *o, const brig_rt_spec *spec, int dirfd, int *userns,
                         brig_error **err)
{
    *userns = -1;
    _cleanup_free_ char *dir = brig_oci_path(o, spec->id, NULL);
    _cleanup_free_ char *rootfs = brig_oci_path(o, spec->id, "rootfs");
    _cleanup_free_ char *lower = brig_oci_path(o, spec->id, "lower");
    _cleanup_free_ char *disk = brig_oci_path(o, spec->id, "disk");
    _cleanup_free_ char *disk_img = brig_oci_path(o, spec->id, "disk.img");
    bool gvisor = spec->isolation == BRIG_ISO_GVISOR;
    if (mkdirat(dirfd, "rootfs", 0755) < 0 || mkdirat(dirfd, "lower", 0755) < 0 ||
        mkdirat(dirfd, "disk", 0755) < 0 || (gvisor && mkdirat(dirfd, "run", 0700) < 0))
        return brig_error_sys(err, "create sandbox directories in %s", dir);
    /* 1. The writable layer: its own bounded file system.  The overlay's root
     *    directory takes its owner and mode from upper/: root of the sandbox, 0755. */
    _cleanup_free_ char *golden = NULL, *snap = NULL;
    if (brig_disk_golden(o->disk_dir, spec->disk_mib, &golden, err) < 0 ||
        brig_disk_attach(golden, disk_img, disk, spec->uid_base, err) < 0)
        return -1;
    /* 2. The template, read-only, its owners mapped into the sandbox's id range (in
     *    every mode: under gVisor runsc's own processes run as the sandbox's host ids
     *    and open these files, oci_spec.c). */
    if (brig_idmap_userns(spec->uid_base, spec->uid_size, userns, err) < 0 ||
        brig_idmap_mount(spec->rootfs, lower, *userns, err) < 0 ||
        brig_oci_volumes_bind(o, spec, dirfd, *userns, err) < 0 || /* its volumes: volume.c */
        (spec->snapshot && brig_oci_snapshot_layers(o, spec, &snap, err) < 0)) /* oci_layer.c */
        return -1;
    /* gVisor's gofer, the sandbox's root, makes the agent's socket in run/. */
    if (gvisor && fchownat(dirfd, "run", spec->uid_base, spec->uid_base, 0) < 0)
        return brig_error_sys(err, "chown %s/run", dir);
    /* 3. The root: agent layer + (a snapshot's layers +) template + writable layer.
     *    volatile: no syncs for a layer that is thrown away with the sandbox. */
    _cleanup_free_ char *opts =
        brig_asprintf("lowerdir=%s:%s%s%s,upperdir=%s/upper,workdir=%s/work,volatile",
                      o->agent_layer, snap ? snap : "", snap ? ":" : "", lower, disk, disk);
    if (mount("overlay", rootfs, "overlay", MS_NODEV, opts) < 0)
        return brig_error_sys(err, "mount the sandbox root filesystem");
    return 0;
}

int brig_oci_bundle_listen(const brig_rt_sandbox *sb, brig_error **err)
{
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    brig_oci_sock_path(sb, &sa);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0) {
        brig_error_sys(err, "agent socket");
        if (lfd >= 0)
            close(lfd);
        return -1;
    }
    return lfd;
}

int brig_oci_bundle_config(const oci *o, const brig_rt_spec *spec, int ns, brig_error **err)
{
    _cleanup_free_ char *cfg_path = brig_oci_path(o, spec->id, "config.json");
    _cleanup_free_ char *ns_path = brig_asprintf("/proc/%d/fd/%d", (int)getpid(), ns);
    json_t *cfg = spec->isolation == BRIG_ISO_GVISOR
                      ? brig_oci_spec_gvisor(spec, o->cgroup, o->pty_max, ns_path)
                      : brig_oci_spec_new(spec, o->cgroup, o->pty_max, ns_path);
    brig_oci_volumes_spec(o, spec, cfg);
    _cleanup_free_ char *json = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    int cfd = open(cfg_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (cfd < 0 || brig_write_full(cfd, json, strlen(json)) < 0) {
        brig_error_sys(err, "write %s", cfg_path);
        if (cfd >= 0)
            close(cfd);
        return -1;
    }
    close(cfd);
    return 0;
}

/* Unmount in the reverse order of create: its volumes' clones, the overlay, then what
 * it was built from (the id-mapped template, the disk, whose loop device then detaches
 * itself). */
int brig_oci_bundle_unmount(const oci *o, const char *id, brig_error **err)
{
    int failed = brig_oci_volumes_unmount(o, id, err) < 0;
    brig_oci_disk_thaw(o, id); /* an unmount of a frozen file system would wait */
    /* netns: a gVisor sandbox's network namespace while it is checkpointed (gvisor_ckpt.c) */
    static const char *const layers[] = {"netns", "rootfs", "lower", "disk"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(layers); i++) {
        _cleanup_free_ char *m = brig_oci_path(o, id, layers[i]);
        if (umount2(m, 0) < 0 && errno != EINVAL && errno != ENOENT) {
            if (errno == EBUSY && umount2(m, MNT_DETACH) == 0) {
                brig_warn("%s: %s busy, detached", id, layers[i]);
            } else {
                brig_error_sys(err, "unmount %s", m);
                failed = 1;
            }
        }
    }
    if (brig_oci_layers_unmount(o, id, err) < 0) /* a snapshot's, below rootfs */
        failed = 1;
    return failed ? -1 : 0;
}

int brig_oci_layer_open(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    (void)rt;
    if (sb->iso != BRIG_ISO_CONTAINER && !sb->host_layer)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a %s sandbox not made for a build keeps its writes in its own "
                              "overlay, where the host cannot take them",
                              brig_isolation_name(sb->iso));
    int fd = openat(sb->dirfd, "disk/upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return brig_error_sys(err, "open the writable layer of %s", sb->id);
    return fd;
}
