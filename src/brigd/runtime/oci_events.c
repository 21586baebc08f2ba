/*
 * oci_events.c - what a sandbox's limits did, and its agent's last words (see
 * runtime.h: events, last_words).  Both read files brigd or the kernel keep for the
 * sandbox; neither talks to it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "oci_internal.h"
#include "util.h"

#define LAST_WORDS_READ  4096 /* of agent.log's end, at most */
#define LAST_WORDS_LINES 3

void brig_oci_events(brig_runtime *rt, const char *id, brig_rt_events *out)
{
    oci *o = rt->priv;
    o->cgroup->events(id, &out->oom_kills, &out->pids_max);
    /* The writable layer is mounted at disk/ (disk.c): what statvfs says is free for
     * an unprivileged user is what the sandbox (a range of such uids) can still use. */
    _cleanup_free_ char *disk = brig_oci_path(o, id, "disk");
    struct statvfs st;
    if (statvfs(disk, &st) == 0) {
        out->disk_avail = (int64_t)st.f_bavail * (int64_t)st.f_frsize;
        out->inode_avail = (int64_t)st.f_favail;
    } else {
        out->disk_avail = out->inode_avail = -1;
    }
}

void brig_oci_last_words(brig_runtime *rt, const char *id, char *buf, size_t n)
{
    oci *o = rt->priv;
    buf[0] = '\0';
    _cleanup_free_ char *path = brig_oci_path(o, id, "agent.log");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || n < 2)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    char tail[LAST_WORDS_READ + 1];
    off_t from = end > LAST_WORDS_READ ? end - LAST_WORDS_READ : 0;
    ssize_t got = end > 0 ? pread(fd, tail, (size_t)(end - from), from) : 0;
    if (got <= 0)
        return;
    while (got > 0 && (tail[got - 1] == '\n' || tail[got - 1] == '\0'))
        got--;
    tail[got] = '\0';
    /* The last few lines, cut to fit from their start's side. */
    char *start = tail + got;
    for (int lines = 0; start > tail && lines < LAST_WORDS_LINES;) {
        start--;
        if (*start == '\n' && ++lines == LAST_WORDS_LINES)
            start++;
    }
    size_t len = strlen(start);
    if (len > n - 1)
        start += len - (n - 1);
    while (((unsigned char)*start & 0xC0) == 0x80) /* not in a character's middle */
        start++;
    snprintf(buf, n, "%s", start);
}
