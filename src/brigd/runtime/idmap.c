/*
 * idmap.c - user namespaces for id-mapped mounts (see idmap.h).
 */
#include "idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawn.h"
#include "util.h"

int brig_idmap_userns(unsigned base, unsigned size, int *fd, brig_error **err)
{
    return brig_proc_userns(base, size, fd, err);
}

int brig_idmap_userns_from(unsigned from, unsigned base, unsigned size, int *fd, brig_error **err)
{
    return brig_proc_userns_map(from, base, size, fd, err);
}

int brig_idmap_mount(const char *src, const char *dst, int userns_fd, brig_error **err)
{
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, src,
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0)
        return brig_error_sys(err, "open_tree %s", src);
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        .userns_fd = (__u64)userns_fd,
    };
    int r = 0;
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
        r = brig_error_sys(err, "id-map %s", src);
    else if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        r = brig_error_sys(err, "attach the id-mapped template at %s", dst);
    close(tree);
    return r;
}
