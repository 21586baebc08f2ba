/*
 * disk.c - per-sandbox ext4 images on loop devices (see disk.h).
 */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"
#include "spawn.h"
#include "util.h"

/* One formatting at a time: concurrent first creates of a size must not race
 * on the same temporary image. */
static pthread_mutex_t golden_lock = PTHREAD_MUTEX_INITIALIZER;

static int make_golden(const char *dir, int64_t size_mib, char *p, char **path, brig_error **err);

int brig_disk_golden(const char *dir, int64_t size_mib, char **path, brig_error **err)
{
    char *p = brig_asprintf("%s/golden-%lldm.img", dir, (long long)size_mib);
    if (access(p, R_OK) == 0) {
        *path = p;
        return 0;
    }
    pthread_mutex_lock(&golden_lock);
    int r = make_golden(dir, size_mib, p, path, err);
    pthread_mutex_unlock(&golden_lock);
    return r;
}

static int make_golden(const char *dir, int64_t size_mib, char *p, char **path, brig_error **err)
{
    if (access(p, R_OK) == 0) { /* another thread made it while we waited */
        *path = p;
        return 0;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        free(p);
        return brig_error_sys(err, "mkdir %s", dir);
    }
    _cleanup_free_ char *tmp = brig_asprintf("%s.tmp-%d", p, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size_mib << 20) < 0) {
        brig_error_sys(err, "create %s", tmp);
        if (fd >= 0)
            close(fd);
        goto fail;
    }
    close(fd);
    const char *argv[] = {"mkfs.ext4",
                          "-q",
                          "-F",
                          "-O",
                          "^has_journal",
                          "-E",
                          "lazy_itable_init=1,nodiscard",
                          "-m",
                          "0",
                          "-L",
                          "brig-sandbox",
                          tmp,
                          NULL};
    brig_buf out = {0};
    int st = 0;
    if (brig_proc_run(argv, &out, 4096, &st, err) < 0 || st != 0) {
        if (st != 0)
            brig_error_set(err, BRIG_E_INTERNAL, 0, "mkfs.ext4 failed: %s",
                           out.data ? out.data : "no output");
        brig_buf_dispose(&out);
        goto fail;
    }
    brig_buf_dispose(&out);
    if (rename(tmp, p) < 0) {
        brig_error_sys(err, "rename %s", tmp);
        goto fail;
    }
    brig_info("disk: formatted %s", p);
    *path = p;
    return 0;
fail:
    unlink(tmp);
    free(p);
    return -1;
}

/* Copies only the allocated extents of a sparse file. */
static int copy_sparse(int in, int out, brig_error **err)
{
    struct stat st;
    if (fstat(in, &st) < 0 || ftruncate(out, st.st_size) < 0)
        return brig_error_sys(err, "size the disk image");
    char *buf = brig_xmalloc(1 << 20);
    off_t off = 0;
    int r = 0;
    for (;;) {
        off_t data = lseek(in, off, SEEK_DATA);
        if (data < 0)
            break; /* ENXIO: no data after off */
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0) {
            r = brig_error_sys(err, "seek the golden image");
            break;
        }
        for (off_t pos = data; pos < hole;) {
            size_t want = (size_t)(hole - pos) < (1u << 20) ? (size_t)(hole - pos) : (1u << 20);
            ssize_t n = pread(in, buf, want, pos);
            if (n <= 0 || pwrite(out, buf, (size_t)n, pos) != n) {
                r = brig_error_sys(err, "copy the golden image");
                goto done;
            }
            pos += n;
        }
        off = hole;
    }
done:
    free(buf);
    return r;
}

/* LOOP_CTL_GET_FREE hands every caller the same free device until one configures it: the
 * creates of a burst would race for it (all but one EBUSY, again and again).  brigd's own
 * threads take turns here; another process can still win one, and then we try the next. */
static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;

int brig_disk_loop(int img, bool direct, char dev[32], brig_error **err)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return brig_error_sys(err, "open /dev/loop-control");
    int r = -1;
    bool failed = false; /* *err says why */
    pthread_mutex_lock(&loop_lock);
    for (int attempt = 0; attempt < 16; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) {
            brig_error_sys(err, "find a free loop device");
            failed = true;
            break;
        }
        snprintf(dev, 32, "/dev/loop%d", n);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && mknod(dev, S_IFBLK | 0600, makedev(7, (unsigned)n)) == 0)
            fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            brig_error_sys(err, "open %s", dev);
            failed = true;
            break;
        }
        struct loop_config cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.fd = (__u32)img;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (direct ? LO_FLAGS_DIRECT_IO : 0);
        int ok = ioctl(fd, LOOP_CONFIGURE, &cfg);
        if (ok < 0 && errno == EINVAL && direct) {
            cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR; /* no direct I/O on this file system */
            ok = ioctl(fd, LOOP_CONFIGURE, &cfg);
        }
        int e = errno;
        if (ok == 0) {
            r = fd;
            break;
        }
        close(fd);
        if (e != EBUSY) { /* EBUSY: another process took it first; try the next one */
            brig_error_set(err, BRIG_E_INTERNAL, e, "configure %s", dev);
            failed = true;
            break;
        }
    }
    pthread_mutex_unlock(&loop_lock);
    close(ctl);
    if (r < 0 && !failed)
        brig_error_set(err, BRIG_E_UNAVAILABLE, EBUSY,
                       "no loop device could be configured in 16 tries: others took each one");
    return r;
}

int brig_disk_attach(const char *golden, const char *img, const char *mnt, unsigned owner,
                     brig_error **err)
{
    int in = open(golden, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return brig_error_sys(err, "open %s", golden);
    int out = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return brig_error_sys(err, "create %s", img);
    }
    int r = copy_sparse(in, out, err);
    close(in);
    close(out);
    return r < 0 ? -1 : brig_disk_mount(img, mnt, owner, err);
}

int brig_disk_mount(const char *img, const char *mnt, unsigned owner, brig_error **err)
{
    /* Direct I/O (no second copy of the sandbox's data in the host's page cache)
     * needs the backing file opened with O_DIRECT. */
    int out = open(img, O_RDWR | O_CLOEXEC);
    if (out < 0)
        return brig_error_sys(err, "open %s", img);
    int dio = open(img, O_RDWR | O_DIRECT | O_CLOEXEC);
    char dev[32];
    int loop = brig_disk_loop(dio >= 0 ? dio : out, dio >= 0, dev, err);
    if (dio >= 0)
        close(dio);
    close(out);
    if (loop < 0)
        return -1;
    /* noinit_itable: the kernel would zero every inode table in the background
     * (tens of MiB of writes per sandbox); a throw-away layer does not need it. */
    int r = mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
                  "errors=remount-ro,noinit_itable");
    if (r < 0)
        brig_error_sys(err, "mount %s", dev);
    close(loop); /* unmounted or never mounted: the device detaches itself */
    if (r < 0)
        return -1;
    /* A snapshot's layer (oci_snapshot.c) has both already. */
    _cleanup_free_ char *upper = brig_asprintf("%s/upper", mnt);
    _cleanup_free_ char *work = brig_asprintf("%s/work", mnt);
    bool had_upper = mkdir(upper, 0755) < 0 && errno == EEXIST;
    if ((mkdir(work, 0700) < 0 && errno != EEXIST) ||
        (!had_upper && chown(upper, owner, owner) < 0) || access(upper, F_OK) < 0)
        return brig_error_sys(err, "prepare %s", mnt); /* the caller unmounts mnt */
    return 0;
}

int brig_disk_mount_ro(const char *img, const char *mnt, brig_error **err)
{
    int in = open(img, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return brig_error_sys(err, "open %s", img);
    char dev[32];
    int loop = brig_disk_loop(in, false, dev, err); /* a read-only file: a read-only device */
    close(in);
    if (loop < 0)
        return -1;
    int r = mount(dev, mnt, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOATIME, NULL);
    if (r < 0)
        brig_error_sys(err, "mount %s read-only", dev);
    close(loop);
    return r < 0 ? -1 : 0;
}

/* The loop device (its name into dev) that still has the image open, when one has: an
 * earlier mount of the volume whose last user has not let go yet (a clone detached while
 * busy).  A second file system instance over the same image would corrupt it. */
bool brig_disk_attached(const char *img, char dev[32])
{
    struct stat want;
    if (stat(img, &want) < 0)
        return false;
    DIR *d = opendir("/sys/block");
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "loop", 4) != 0)
            continue;
        char path[300], backing[4096];
        snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, backing, sizeof(backing) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n <= 0)
            continue;
        backing[n] = '\0';
        backing[strcspn(backing, "\n")] = '\0';
        struct stat st;
        found = stat(backing, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino;
        if (found)
            snprintf(dev, 32, "/dev/%.20s", e->d_name);
    }
    closedir(d);
    return found;
}
