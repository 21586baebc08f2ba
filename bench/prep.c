/*
 * bench/prep.c - times, from outside brigd, the steps brigd's OCI driver takes
 * around `runc run` because of the hardening: the per-sandbox ext4 writable
 * layer on a loop device (src/brigd/runtime/disk.c) and the id-mapped template
 * mount (runtime/idmap.c), plus the overlay mount that existed before them, and
 * the matching teardown.  The same system calls in the same order with the same
 * flags as brigd; compiled by bench/run.py at run time (cc -O2), run as root.
 *
 *   prep GOLDEN DIR TEMPLATE AGENT_LAYER UID_BASE UID_SIZE
 *
 * GOLDEN   a formatted sparse ext4 image (brigd's <state>/disk/golden-<size>m.img)
 * DIR      a directory to create and remove again (the sandbox directory)
 * TEMPLATE the template rootfs to id-map; AGENT_LAYER brigd's agent layer
 *
 * Prints one line of JSON: nanoseconds per step.  Whatever it mounted it
 * unmounts again, also on failure (the loop device detaches itself: autoclear).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "prep: %s: %s\n", what, strerror(errno));
}

/* disk.c's copy_sparse: only the allocated extents. */
static int copy_sparse(int in, int out)
{
    struct stat st;
    if (fstat(in, &st) < 0 || ftruncate(out, st.st_size) < 0)
        return -1;
    static char buf[1 << 20];
    off_t off = 0;
    for (;;) {
        off_t data = lseek(in, off, SEEK_DATA);
        if (data < 0)
            return 0;
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        for (off_t pos = data; pos < hole;) {
            size_t want = (size_t)(hole - pos) < sizeof(buf) ? (size_t)(hole - pos) : sizeof(buf);
            ssize_t n = pread(in, buf, want, pos);
            if (n <= 0 || pwrite(out, buf, (size_t)n, pos) != n)
                return -1;
            pos += n;
        }
        off = hole;
    }
}

/* disk.c's loop_attach: a free loop device, direct I/O, autoclear. */
static int loop_attach(int img, char dev[32])
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return -1;
    int r = -1;
    for (int attempt = 0; attempt < 16; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0)
            break;
        snprintf(dev, 32, "/dev/loop%d", n);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && mknod(dev, S_IFBLK | 0600, makedev(7, (unsigned)n)) == 0)
            fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            break;
        struct loop_config cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.fd = (__u32)img;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
        int ok = ioctl(fd, LOOP_CONFIGURE, &cfg);
        if (ok < 0 && errno == EINVAL) {
            cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
            ok = ioctl(fd, LOOP_CONFIGURE, &cfg);
        }
        int e = errno;
        if (ok == 0) {
            r = fd;
            break;
        }
        close(fd);
        if (e != EBUSY)
            break;
    }
    close(ctl);
    return r;
}

/* proc.c's brig_proc_userns: a child unshares a user namespace, we write its
 * maps and keep a handle on the namespace. */
static int make_userns(unsigned base, unsigned size)
{
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
        (void)!write(up[1], &c, 1);
        (void)!read(down[0], &c, 1);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    int fd = -1;
    char c = 0;
    if (pid > 0 && read(up[0], &c, 1) == 1 && c == 'y') {
        char path[64], map[64];
        int n = snprintf(map, sizeof(map), "0 %u %u\n", base, size);
        const char *files[] = {"uid_map", "gid_map"};
        int ok = 1;
        for (int i = 0; i < 2 && ok; i++) {
            snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
            int m = open(path, O_WRONLY | O_CLOEXEC);
            ok = m >= 0 && write(m, map, (size_t)n) == n;
            if (m >= 0)
                close(m);
        }
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        if (ok)
            fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    (void)!write(down[1], "x", 1);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    close(up[0]);
    close(down[1]);
    return fd;
}

/* idmap.c's brig_idmap_mount. */
static int idmap_mount(const char *src, const char *dst, int userns)
{
    int tree = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0)
        return -1;
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        .userns_fd = (uint64_t)userns,
    };
    int r = 0;
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0 ||
        move_mount(tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        r = -1;
    close(tree);
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: prep GOLDEN DIR TEMPLATE AGENT_LAYER UID_BASE UID_SIZE\n");
        return 2;
    }
    const char *golden = argv[1], *dir = argv[2], *tmpl = argv[3], *agent = argv[4];
    unsigned base = (unsigned)strtoul(argv[5], NULL, 10),
             size = (unsigned)strtoul(argv[6], NULL, 10);
    char rootfs[4096], lower[4096], disk[4096], img[4096], upper[4200], work[4200], opts[16384];
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", dir);
    snprintf(lower, sizeof(lower), "%s/lower", dir);
    snprintf(disk, sizeof(disk), "%s/disk", dir);
    snprintf(img, sizeof(img), "%s/disk.img", dir);
    snprintf(upper, sizeof(upper), "%s/upper", disk);
    snprintf(work, sizeof(work), "%s/work", disk);
    if (mkdir(dir, 0711) < 0 || mkdir(rootfs, 0755) < 0 || mkdir(lower, 0755) < 0 ||
        mkdir(disk, 0755) < 0) {
        die("mkdir");
        return 1;
    }
    int rc = 1, m_disk = 0, m_lower = 0, m_root = 0, userns = -1;
    int64_t t[16] = {0};
    int k = 0;

    /* 1. the writable layer: copy the golden image, attach, mount (disk.c). */
    t[k++] = now_ns();
    int in = open(golden, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0 || copy_sparse(in, out) < 0) {
        die("copy the golden image");
        goto teardown;
    }
    close(in);
    in = -1;
    t[k++] = now_ns(); /* disk_copy */
    int dio = open(img, O_RDWR | O_DIRECT | O_CLOEXEC);
    char dev[32];
    int loop = loop_attach(dio >= 0 ? dio : out, dev);
    if (dio >= 0)
        close(dio);
    close(out);
    out = -1;
    if (loop < 0) {
        die("attach a loop device");
        goto teardown;
    }
    t[k++] = now_ns(); /* loop_attach */
    int mr = mount(dev, disk, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
                   "errors=remount-ro,noinit_itable");
    close(loop);
    if (mr < 0) {
        die("mount ext4");
        goto teardown;
    }
    m_disk = 1;
    if (mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0 || chown(upper, base, base) < 0) {
        die("prepare upper/work");
        goto teardown;
    }
    t[k++] = now_ns(); /* ext4_mount */
    /* 2. the template, id-mapped (idmap.c); brigd caches the namespace per range. */
    userns = make_userns(base, size);
    if (userns < 0) {
        die("user namespace");
        goto teardown;
    }
    t[k++] = now_ns(); /* userns */
    if (idmap_mount(tmpl, lower, userns) < 0) {
        die("id-mapped mount");
        goto teardown;
    }
    m_lower = 1;
    t[k++] = now_ns(); /* idmap_mount */
    /* 3. the root: agent layer + template + writable layer (oci.c). */
    snprintf(opts, sizeof(opts), "lowerdir=%s:%s,upperdir=%s,workdir=%s,volatile", agent, lower,
             upper, work);
    if (mount("overlay", rootfs, "overlay", MS_NODEV, opts) < 0) {
        die("overlay mount");
        goto teardown;
    }
    m_root = 1;
    t[k++] = now_ns(); /* overlay_mount */
    rc = 0;

teardown:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (userns >= 0)
        close(userns);
    /* oci_destroy's order: the overlay, the id-mapped template, the disk. */
    int64_t u0 = now_ns();
    if (m_root && umount2(rootfs, 0) < 0) {
        die("umount rootfs");
        umount2(rootfs, MNT_DETACH);
        rc = 1;
    }
    if (m_lower && umount2(lower, 0) < 0) {
        die("umount lower");
        umount2(lower, MNT_DETACH);
        rc = 1;
    }
    int64_t u1 = now_ns();
    if (m_disk && umount2(disk, 0) < 0) {
        die("umount disk");
        umount2(disk, MNT_DETACH);
        rc = 1;
    }
    int64_t u2 = now_ns();
    unlink(img);
    int64_t u3 = now_ns();
    rmdir(upper);
    rmdir(work);
    rmdir(rootfs);
    rmdir(lower);
    rmdir(disk);
    rmdir(dir);
    if (rc != 0)
        return rc;
    printf("{\"disk_copy\": %lld, \"loop_attach\": %lld, \"ext4_mount\": %lld, \"userns\": %lld, "
           "\"idmap_mount\": %lld, \"overlay_mount\": %lld, \"umount_overlay_lower\": %lld, "
           "\"umount_disk\": %lld, \"unlink_image\": %lld}\n",
           (long long)(t[1] - t[0]), (long long)(t[2] - t[1]), (long long)(t[3] - t[2]),
           (long long)(t[4] - t[3]), (long long)(t[5] - t[4]), (long long)(t[6] - t[5]),
           (long long)(u1 - u0), (long long)(u2 - u1), (long long)(u3 - u2));
    return 0;
}
