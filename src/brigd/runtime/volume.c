/*
 * volume.c - the OCI driver's volumes (runtime.h's volume ops; docs/volumes.md).
 *
 * A volume is an ext4 image, <state>/volumes/<id>.img (host root's, 0600), with a
 * journal: unlike a sandbox's writable layer, its data outlives the sandbox, brigd and a
 * crash of the host.  Its size is the kernel's bound: a full volume is ENOSPC inside.
 * What sandboxes see is its data/ directory (the file system's root and lost+found stay
 * out of their reach), its files stored with the ids a sandbox uses (0: its root), so
 * every sandbox sees them as its own whatever its host uid range.
 *
 * A microVM mounts the image itself, as a disk (microvm_vol.c): never while the host
 * has it mounted, and the host never while a VMM holds it.
 * While sandboxes use it, the image is on one loop device and mounted once, at
 * <state>/volumes/<id>.mnt (0700): one file system instance, never two over one image.
 * Each sandbox gets a clone of data/, id-mapped into its uid range through the user
 * namespace its template is mapped with (idmap.c), read-only when asked, at
 * <sandbox dir>/vol/<n>; its OCI spec bind-mounts that at the volume's path (runc: into
 * the container; runsc: served by its gofer, which runs as the sandbox's ids).  Destroy
 * unmounts the clones (brig_oci_volumes_unmount); once the last user is gone the caller
 * lets go of the host mount (volume_unmount), and the loop device detaches itself.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "disk.h"
#include "log.h"
#include "oci_internal.h"
#include "spawn.h"
#include "util.h"

/* Mounting a volume on the host and letting it go, one at a time: two sandboxes that
 * mount one volume at once must find (not make) each other's mount. */
static pthread_mutex_t vol_lock = PTHREAD_MUTEX_INITIALIZER;

/* "<state>/sandboxes/<id>/<name>" (oci_bundle.c's layout; not its brig_oci_path: the bundle
 * calls this file, never the other way round); caller frees. */
static char *sb_path(const oci *o, const char *id, const char *name)
{
    return brig_asprintf("%s/%s/%s", o->sb_dir, id, name);
}

/* "<state>/volumes/<id><suffix>"; caller frees. */
static char *vol_path(const oci *o, const char *id, const char *suffix)
{
    return brig_asprintf("%s/%s%s", o->vol_dir, id, suffix);
}

static bool is_mount_root(const char *path)
{
    struct statx sx;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) < 0)
        return false;
    return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
           (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* Unmounts path (lazily when busy); a path that is no mount is no error. */
static int unmount_one(const char *path, brig_error **err)
{
    if (!is_mount_root(path))
        return 0;
    if (umount2(path, 0) == 0 || errno == EINVAL || errno == ENOENT)
        return 0;
    if (errno == EBUSY && umount2(path, MNT_DETACH) == 0) {
        brig_warn("volume mount %s busy, detached", path);
        return 0;
    }
    return brig_error_sys(err, "unmount %s", path);
}

/* ---- the ops ----------------------------------------------------------------------- */

int brig_oci_volume_make(brig_runtime *rt, const char *id, int64_t size_mib, brig_error **err)
{
    oci *o = rt->priv;
    _cleanup_free_ char *img = vol_path(o, id, ".img");
    _cleanup_free_ char *tmp = vol_path(o, id, ".img.tmp");
    if (access(img, F_OK) == 0)
        return 0;
    unlink(tmp); /* a make cut short */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size_mib << 20) < 0) {
        brig_error_sys(err, "create %s", tmp);
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    /* The image is new and sparse, so its inode tables and journal read as zeros: no
     * need to write them (lazy_*_init, and noinit_itable at mount). */
    const char *argv[] = {
        "mkfs.ext4", "-q", "-F", "-E",          "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
        "-m",        "0",  "-L", "brig-volume", tmp,
        NULL};
    brig_buf out = {0};
    int st = 0;
    int r = brig_proc_run(argv, &out, 4096, &st, err);
    if (r == 0 && st != 0)
        r = brig_error_set(err, BRIG_E_INTERNAL, 0, "mkfs.ext4 of volume %s failed: %s", id,
                           out.data ? out.data : "no output");
    brig_buf_dispose(&out);
    if (r == 0 && rename(tmp, img) < 0)
        r = brig_error_sys(err, "rename %s", tmp);
    if (r < 0)
        unlink(tmp);
    return r;
}

int brig_oci_volume_unmount(brig_runtime *rt, const char *id, brig_error **err)
{
    oci *o = rt->priv;
    _cleanup_free_ char *mnt = vol_path(o, id, ".mnt");
    pthread_mutex_lock(&vol_lock);
    int r = unmount_one(mnt, err);
    if (r == 0 && rmdir(mnt) < 0 && errno != ENOENT)
        r = brig_error_sys(err, "remove %s", mnt);
    pthread_mutex_unlock(&vol_lock);
    return r;
}

int brig_oci_volume_remove(brig_runtime *rt, const char *id, brig_error **err)
{
    oci *o = rt->priv;
    if (brig_oci_volume_unmount(rt, id, err) < 0)
        return -1;
    static const char *const suffixes[] = {".img", ".img.tmp"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(suffixes); i++) {
        _cleanup_free_ char *p = vol_path(o, id, suffixes[i]);
        if (unlink(p) < 0 && errno != ENOENT)
            return brig_error_sys(err, "remove %s", p);
    }
    return 0;
}

int brig_oci_volume_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    oci *o = rt->priv;
    *ids = NULL;
    *n = 0;
    DIR *d = opendir(o->vol_dir);
    if (d == NULL)
        return brig_error_sys(err, "open %s", o->vol_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *dot = strchr(e->d_name, '.');
        if (e->d_name[0] == '.' || dot == NULL ||
            (strcmp(dot, ".img") != 0 && strcmp(dot, ".img.tmp") != 0 && strcmp(dot, ".mnt") != 0))
            continue;
        char *id = brig_xstrndup(e->d_name, (size_t)(dot - e->d_name));
        bool dup = false;
        for (size_t i = 0; i < *n && !dup; i++)
            dup = strcmp((*ids)[i], id) == 0;
        if (dup) {
            free(id);
            continue;
        }
        *ids = brig_xrealloc(*ids, (*n + 1) * sizeof(char *));
        (*ids)[(*n)++] = id;
    }
    closedir(d);
    return 0;
}

/* ---- a sandbox's mounts ------------------------------------------------------------------ */

/* Whether a VMM holds the image open (a microVM mounts the volume: microvm_vol.c): QEMU
 * locks bytes from 100 of every image it opens (its OFD locks, one byte per permission). */
static bool image_in_vm(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 200};
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* The volume's one host mount, made when it has none yet.  Needs vol_lock. */
static int host_mount_locked(const oci *o, const char *id, brig_error **err)
{
    _cleanup_free_ char *mnt = vol_path(o, id, ".mnt");
    _cleanup_free_ char *img = vol_path(o, id, ".img");
    if (is_mount_root(mnt))
        return 0;
    if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
        return brig_error_sys(err, "mkdir %s", mnt);
    char held[32];
    if (brig_disk_attached(img, held))
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "volume %s is still attached to %s by an earlier mount that has "
                              "not gone yet; try again",
                              id, held);
    int fd = open(img, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return brig_error_sys(err, "open volume image %s", img);
    if (image_in_vm(fd)) {
        close(fd);
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "volume %s is mounted by a microVM sandbox: a container sandbox "
                              "mounts a volume only when no microVM does",
                              id);
    }
    /* Direct I/O: no second copy of the volume's data in the host's page cache. */
    int dio = open(img, O_RDWR | O_DIRECT | O_CLOEXEC);
    char dev[32];
    int loop = brig_disk_loop(dio >= 0 ? dio : fd, dio >= 0, dev, err);
    if (dio >= 0)
        close(dio);
    close(fd);
    if (loop < 0)
        return -1;
    int r = mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
                  "errors=remount-ro,noinit_itable");
    if (r < 0)
        brig_error_sys(err, "mount volume %s (%s)", id, dev);
    close(loop); /* mounted, or not: the device detaches itself with its last user */
    if (r < 0)
        return -1;
    _cleanup_free_ char *data = brig_asprintf("%s/data", mnt);
    struct stat st;
    if ((mkdir(data, 0755) < 0 && errno != EEXIST) || lstat(data, &st) < 0 ||
        !S_ISDIR(st.st_mode)) {
        brig_error_sys(err, "prepare %s", data);
        unmount_one(mnt, NULL);
        return -1;
    }
    return 0;
}

/* A clone of the volume's data/ at dst, id-mapped through userns, nosuid, nodev, and
 * read-only when asked.  Needs vol_lock (the host mount must stay while it is cloned). */
static int clone_locked(const oci *o, const brig_rt_volume *v, const char *dst, int userns,
                        brig_error **err)
{
    _cleanup_free_ char *data = vol_path(o, v->id, ".mnt/data");
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, data, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0)
        return brig_error_sys(err, "open_tree %s", data);
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                    (v->read_only ? MOUNT_ATTR_RDONLY : 0),
        .userns_fd = (__u64)userns,
    };
    int r = 0;
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
        r = brig_error_sys(err, "id-map volume %s", v->id);
    else if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        r = brig_error_sys(err, "attach volume %s at %s", v->id, dst);
    close(tree);
    return r;
}

int brig_oci_volumes_bind(const oci *o, const brig_rt_spec *spec, int dirfd, int userns,
                          brig_error **err)
{
    if (spec->n_volumes == 0)
        return 0;
    if (mkdirat(dirfd, "vol", 0755) < 0)
        return brig_error_sys(err, "mkdir vol in the sandbox directory of %s", spec->id);
    for (size_t i = 0; i < spec->n_volumes; i++) {
        char name[32];
        snprintf(name, sizeof(name), "vol/%zu", i);
        if (mkdirat(dirfd, name, 0755) < 0)
            return brig_error_sys(err, "mkdir %s in the sandbox directory of %s", name, spec->id);
        _cleanup_free_ char *dst = sb_path(o, spec->id, name);
        pthread_mutex_lock(&vol_lock);
        int r = host_mount_locked(o, spec->volumes[i].id, err);
        if (r == 0)
            r = clone_locked(o, &spec->volumes[i], dst, userns, err);
        pthread_mutex_unlock(&vol_lock);
        if (r < 0)
            return -1; /* the caller's destroy unmounts what was made */
    }
    return 0;
}

void brig_oci_volumes_spec(const oci *o, const brig_rt_spec *spec, json_t *cfg)
{
    json_t *mounts = json_object_get(cfg, "mounts");
    for (size_t i = 0; i < spec->n_volumes; i++) {
        char name[32];
        snprintf(name, sizeof(name), "vol/%zu", i);
        _cleanup_free_ char *src = sb_path(o, spec->id, name);
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s, s, s, s]}", "destination",
                                                spec->volumes[i].path, "type", "bind", "source",
                                                src, "options", "rbind",
                                                spec->volumes[i].read_only ? "ro" : "rw", "nosuid",
                                                "nodev"));
    }
}

int brig_oci_volumes_unmount(const oci *o, const char *id, brig_error **err)
{
    _cleanup_free_ char *dir = sb_path(o, id, "vol");
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : brig_error_sys(err, "open %s", dir);
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *m = brig_asprintf("%s/%s", dir, e->d_name);
        if (unmount_one(m, err) < 0)
            failed = 1;
    }
    closedir(d);
    return failed ? -1 : 0;
}
