/*
 * layer.c - a template's root filesystem from a sandbox's writable layer (see layer.h).
 */
#include "layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"
#include "spawn.h"
#include "util.h"

#define DEPTH_MAX 256 /* directories deeper than this are an attack, not a build */

typedef struct walk {
    unsigned base, size;
    int64_t bytes;
    brig_error **err;
} walk;

static unsigned shift(const walk *w, unsigned id)
{
    return id >= w->base && id - w->base < w->size ? id - w->base : 65534;
}

/* Removes name in dir (a tree too), never following a symlink. */
static int remove_at(int dir, const char *name, int depth)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dir, name, 0);
    if (depth > DEPTH_MAX)
        return -1;
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dp = fd < 0 ? NULL : fdopendir(fd);
    if (dp == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct dirent *e;
    int r = 0;
    while ((e = readdir(dp)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            r |= remove_at(dirfd(dp), e->d_name, depth + 1);
    closedir(dp);
    return r < 0 ? -1 : unlinkat(dir, name, AT_REMOVEDIR);
}

static int copy_file(walk *w, int udir, int ddir, const char *name, const struct stat *st)
{
    _cleanup_close_ int in = openat(udir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (in < 0)
        return brig_error_sys(w->err, "open %s of the layer", name);
    _cleanup_close_ int out =
        openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return brig_error_sys(w->err, "create %s", name);
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL)) {
            char buf[65536];
            n = read(in, buf, sizeof(buf));
            if (n > 0 && brig_write_full(out, buf, (size_t)n) < 0)
                n = -1;
        }
        if (n < 0)
            return brig_error_sys(w->err, "copy %s", name);
        if (n == 0)
            break;
        w->bytes += n;
    }
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchown(out, shift(w, st->st_uid), shift(w, st->st_gid)) < 0 ||
        fchmod(out, st->st_mode & 0777) < 0 || futimens(out, ts) < 0)
        return brig_error_sys(w->err, "set the owner and mode of %s", name);
    return 0;
}

static int apply_dir(walk *w, int udir, int ddir, int depth);

/* A directory of the layer: replaces a non-directory, empties an opaque one's
 * counterpart (the layer hid what was below), then goes in. */
static int take_dir(walk *w, int udir, int ddir, const char *name, const struct stat *st, int depth)
{
    _cleanup_close_ int u = openat(udir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (u < 0)
        return brig_error_sys(w->err, "open %s of the layer", name);
    char opaque = 0;
    bool is_opaque = fgetxattr(u, "trusted.overlay.opaque", &opaque, 1) == 1 && opaque == 'y';
    struct stat dst;
    bool exists = fstatat(ddir, name, &dst, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && (!S_ISDIR(dst.st_mode) || is_opaque)) {
        if (remove_at(ddir, name, 0) < 0)
            return brig_error_sys(w->err, "replace %s", name);
        exists = false;
    }
    if (!exists && mkdirat(ddir, name, 0700) < 0)
        return brig_error_sys(w->err, "mkdir %s", name);
    _cleanup_close_ int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return brig_error_sys(w->err, "open %s", name);
    if (apply_dir(w, u, d, depth + 1) < 0)
        return -1;
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    /* a directory of dest is never a hard link of the parent's (cp makes new ones) */
    if (fchown(d, shift(w, st->st_uid), shift(w, st->st_gid)) < 0 ||
        fchmod(d, st->st_mode & 01777) < 0 || futimens(d, ts) < 0)
        return brig_error_sys(w->err, "set the owner and mode of %s", name);
    return 0;
}

/* Anything else of the layer replaces what dest has at that name. */
static int take_entry(walk *w, int udir, int ddir, const char *name, const struct stat *st)
{
    if (remove_at(ddir, name, 0) < 0)
        return brig_error_sys(w->err, "replace %s", name);
    if (S_ISCHR(st->st_mode) && st->st_rdev == 0) /* a whiteout: the file was removed */
        return 0;
    if (S_ISREG(st->st_mode))
        return copy_file(w, udir, ddir, name, st);
    if (S_ISLNK(st->st_mode)) {
        char target[4096];
        ssize_t n = readlinkat(udir, name, target, sizeof(target) - 1);
        if (n < 0)
            return brig_error_sys(w->err, "read the link %s", name);
        target[n] = '\0';
        if (symlinkat(target, ddir, name) < 0 ||
            fchownat(ddir, name, shift(w, st->st_uid), shift(w, st->st_gid), AT_SYMLINK_NOFOLLOW) <
                0)
            return brig_error_sys(w->err, "make the link %s", name);
        return 0;
    }
    if (S_ISFIFO(st->st_mode)) {
        if (mkfifoat(ddir, name, st->st_mode & 0777) < 0 ||
            fchownat(ddir, name, shift(w, st->st_uid), shift(w, st->st_gid), AT_SYMLINK_NOFOLLOW) <
                0)
            return brig_error_sys(w->err, "make the FIFO %s", name);
        return 0;
    }
    return 0; /* devices and sockets stay out of a template */
}

static int apply_dir(walk *w, int udir, int ddir, int depth)
{
    if (depth > DEPTH_MAX)
        return brig_error_set(w->err, BRIG_E_INVALID, 0,
                              "the layer nests directories deeper than %d", DEPTH_MAX);
    int fd = dup(udir);
    DIR *dp = fd < 0 ? NULL : fdopendir(fd);
    if (dp == NULL) {
        if (fd >= 0)
            close(fd);
        return brig_error_sys(w->err, "read a directory of the layer");
    }
    int r = 0;
    struct dirent *e;
    while (r == 0 && (e = readdir(dp)) != NULL) {
        const char *name = e->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        /* brigd's own: the agent's mount point, and the resolver it writes */
        if (depth == 0 && strcmp(name, ".brig") == 0)
            continue;
        struct stat st;
        if (fstatat(udir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone meanwhile */
        if (S_ISDIR(st.st_mode))
            r = take_dir(w, udir, ddir, name, &st, depth);
        else
            r = take_entry(w, udir, ddir, name, &st);
    }
    closedir(dp);
    return r;
}

/* brigd writes the resolver of every sandbox: the parent's stays.  Reached by file
 * descriptors: a user parent's etc may be a symlink, which must not lead to the host's. */
static void keep_resolver(const char *parent_rootfs, int dest)
{
    _cleanup_close_ int proot = open(parent_rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int petc =
        proot < 0 ? -1 : openat(proot, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int etc = openat(dest, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat ps;
    if (petc < 0 || etc < 0 || fstatat(petc, "resolv.conf", &ps, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(ps.st_mode) || remove_at(etc, "resolv.conf", 0) < 0)
        return;
    if (linkat(petc, "resolv.conf", etc, "resolv.conf", 0) < 0)
        brig_warn("keep %s/etc/resolv.conf: %s", parent_rootfs, strerror(errno));
}

int brig_layer_flatten(const char *parent_rootfs, int upper_fd, unsigned uid_base,
                       unsigned uid_size, const char *dest, int64_t *own_bytes, brig_error **err)
{
    *own_bytes = 0;
    /* Hard links first (the parent's files, shared); a full copy across file systems. */
    const char *link[] = {"cp", "-a", "--link", "--", parent_rootfs, dest, NULL};
    const char *copy[] = {"cp", "-a", "--", parent_rootfs, dest, NULL};
    brig_buf out = {0};
    int st = 0;
    if (brig_proc_run(link, &out, 4096, &st, err) < 0)
        return -1;
    if (st != 0) {
        brig_layer_remove(dest);
        out.len = 0;
        if (brig_proc_run(copy, &out, 4096, &st, err) < 0) {
            brig_buf_dispose(&out);
            return -1;
        }
    }
    if (st != 0) {
        brig_error_set(err, BRIG_E_INTERNAL, 0, "copy %s: %s", parent_rootfs,
                       out.data ? out.data : "cp failed");
        brig_buf_dispose(&out);
        return -1;
    }
    brig_buf_dispose(&out);
    _cleanup_close_ int d = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return brig_error_sys(err, "open %s", dest);
    walk w = {.base = uid_base, .size = uid_size, .err = err};
    if (apply_dir(&w, upper_fd, d, 0) < 0)
        return -1;
    keep_resolver(parent_rootfs, d);
    *own_bytes = w.bytes;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
        brig_warn("remove %s: %s", path, strerror(errno));
    return 0;
}

void brig_layer_remove(const char *path)
{
    nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
