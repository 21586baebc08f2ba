/*
 * idmap.c - user namespaces for id-mapped mounts (see idmap.h).
 */
#include "idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc.h"
#include "util.h"

typedef struct ns_entry {
    unsigned base, size;
    int fd;
} ns_entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ns_entry *cache;
static size_t n_cache;

int brig_idmap_userns(unsigned base, unsigned size, int *fd, brig_error **err)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_cache; i++) {
        if (cache[i].base == base && cache[i].size == size) {
            *fd = cache[i].fd;
            pthread_mutex_unlock(&lock);
            return 0;
        }
    }
    int nfd = -1;
    int r = brig_proc_userns(base, size, &nfd, err);
    if (r == 0) {
        cache = brig_xrealloc(cache, (n_cache + 1) * sizeof(*cache));
        cache[n_cache++] = (ns_entry){base, size, nfd};
        *fd = nfd;
    }
    pthread_mutex_unlock(&lock);
    return r;
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

void brig_idmap_cleanup(void)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_cache; i++)
        close(cache[i].fd);
    free(cache);
    cache = NULL;
    n_cache = 0;
    pthread_mutex_unlock(&lock);
}
