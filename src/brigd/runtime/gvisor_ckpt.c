/*
 * gvisor_ckpt.c - a gVisor sandbox's memory checkpoint (docs/snapshots.md, "gVisor: memory
 * checkpoint"): `runsc checkpoint` writes the sandbox's memory to disk and ends its
 * processes, `runsc restore` brings it back from the same bundle.
 *
 * gVisor cannot save a Unix socket bound to, or connected through, a host socket, and the
 * agent's (created on the host through runsc --host-uds=create) and brigd's connections to
 * it are: the agent first closes them all (SIGUSR2, agent/main.c) and says it is done by
 * removing its socket's path; after the restore SIGUSR1 has it listen again.
 *
 * Under <state>/sandboxes/<id>/ while checkpointed:
 *   checkpoint/    runsc's image (its memory and kernel state)
 *   netns          the sandbox's network namespace, bind-mounted: it outlives the sandbox's
 *                  processes, with its interfaces (config.json names it for the restore)
 *   checkpointed   written once the checkpoint is complete and runsc forgot the sandbox:
 *                  what a restarted brigd finds (attach: paused, no process)
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "oci_internal.h"

#define QUIET_TIMEOUT_MS 10000 /* the agent's connections all closed */

/* `runsc [flags] args...`; a non-zero exit is an error with runsc's last line. */
static int runsc(oci *o, const char *const *args, brig_error **err)
{
    return brig_oci_run(o, BRIG_ISO_GVISOR, args, err);
}

static int signal_agent(oci *o, const char *id, const char *sig, brig_error **err)
{
    const char *args[] = {"kill", id, sig, NULL};
    return runsc(o, args, err);
}

/* Until the agent removed its socket's path (every connection closed), while it runs. */
static int wait_quiet(const brig_rt_sandbox *sb, brig_error **err)
{
    struct sockaddr_un sa;
    brig_oci_sock_path(sb, &sa);
    int64_t deadline = brig_now_mono_ms() + QUIET_TIMEOUT_MS;
    for (int delay_us = 200;; delay_us = delay_us < 20000 ? delay_us * 2 : delay_us) {
        struct stat st;
        if (lstat(sa.sun_path, &st) < 0 && errno == ENOENT)
            return 0;
        struct pollfd p = {sb->pidfd, POLLIN, 0};
        if (poll(&p, 1, 0) != 0 || brig_now_mono_ms() > deadline)
            return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                                  "the agent of %s did not close its connections", sb->id);
        usleep((useconds_t)delay_us);
    }
}

/* The network namespace bind-mounted at netns, and config.json naming it (runsc restore
 * reads the bundle's config.json again). */
static int netns_keep(const oci *o, const brig_rt_sandbox *sb, brig_error **err)
{
    _cleanup_free_ char *file = brig_oci_path(o, sb->id, "netns");
    _cleanup_free_ char *cfg_path = brig_oci_path(o, sb->id, "config.json");
    char src[64];
    snprintf(src, sizeof(src), "/proc/%d/ns/net", (int)sb->pid);
    int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return brig_error_sys(err, "create %s", file);
    close(fd);
    if (mount(src, file, NULL, MS_BIND, NULL) < 0)
        return brig_error_sys(err, "bind-mount %s", src);
    json_t *cfg = json_load_file(cfg_path, 0, NULL);
    json_t *ns = json_object_get(json_object_get(cfg, "linux"), "namespaces");
    size_t i;
    json_t *n;
    json_array_foreach(ns, i, n)
    {
        const char *type = json_string_value(json_object_get(n, "type"));
        if (type && strcmp(type, "network") == 0)
            json_object_set_new(n, "path", json_string(file));
    }
    int rc = cfg && json_dump_file(cfg, cfg_path, JSON_INDENT(1)) == 0
                 ? 0
                 : brig_error_set(err, BRIG_E_INTERNAL, 0, "rewrite %s", cfg_path);
    json_decref(cfg);
    return rc;
}

/* What a checkpoint left, removed: its image, its marker, the namespace's mount. */
static void checkpoint_drop(const oci *o, const char *id)
{
    _cleanup_free_ char *img = brig_oci_path(o, id, "checkpoint");
    _cleanup_free_ char *mark = brig_oci_path(o, id, "checkpointed");
    _cleanup_free_ char *ns = brig_oci_path(o, id, "netns");
    unlink(mark);
    brig_oci_rm_rf(img);
    if (umount2(ns, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        brig_warn("%s: unmount %s: %s", id, ns, strerror(errno));
    unlink(ns);
}

int brig_gvisor_checkpoint(oci *o, brig_rt_sandbox *sb, brig_error **err)
{
    _cleanup_free_ char *img = brig_oci_path(o, sb->id, "checkpoint");
    _cleanup_free_ char *mark = brig_oci_path(o, sb->id, "checkpointed");
    const char *ck[] = {"checkpoint", "--image-path", img, sb->id, NULL};
    const char *del[] = {"delete", "--force", sb->id, NULL};
    brig_oci_rm_rf(img); /* a partial one of an earlier try */
    if (signal_agent(o, sb->id, "USR2", err) < 0)
        return -1;
    if (wait_quiet(sb, err) < 0 || netns_keep(o, sb, err) < 0 || runsc(o, ck, err) < 0)
        goto undo;
    /* Its processes are gone; runsc's record of it goes too (a restore makes a new one). */
    brig_error *derr = NULL;
    if (runsc(o, del, &derr) < 0) {
        brig_warn("%s: after its checkpoint: %s", sb->id, derr->msg);
        brig_error_clear(&derr);
    }
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb->pidfd = -1;
    sb->pid = 0;
    int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return brig_error_sys(err, "create %s", mark);
    close(fd);
    brig_info("%s: checkpointed", sb->id);
    return 0;
undo:; /* still running (a failed checkpoint leaves it so when it can): listening again */
    brig_error *werr = NULL;
    if (signal_agent(o, sb->id, "USR1", &werr) < 0) {
        brig_warn("%s: after a failed checkpoint: %s", sb->id, werr->msg);
        brig_error_clear(&werr);
    }
    checkpoint_drop(o, sb->id);
    return -1;
}

int brig_gvisor_restore(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    oci *o = rt->priv;
    _cleanup_free_ char *img = brig_oci_path(o, sb->id, "checkpoint");
    if (brig_oci_runtime_start(o, sb->id, sb->iso, sb->host_layer, -1, img, err) < 0)
        return -1;
    if (brig_gvisor_seal(o, sb->id, err) < 0 || brig_oci_init_hold(o, sb, err) < 0 ||
        signal_agent(o, sb->id, "USR1", err) < 0 || brig_oci_agent_ready(rt, sb, err) < 0) {
        const char *del[] = {"delete", "--force", sb->id, NULL};
        brig_error *derr = NULL;
        if (runsc(o, del, &derr) < 0) { /* it stays checkpointed: a resume tries again */
            brig_warn("%s: after a failed restore: %s", sb->id, derr->msg);
            brig_error_clear(&derr);
        }
        if (sb->pidfd >= 0)
            close(sb->pidfd);
        sb->pidfd = -1;
        return -1;
    }
    checkpoint_drop(o, sb->id);
    brig_info("%s: restored", sb->id);
    return 0;
}

/* ---- a fork with memory (docs/snapshots.md, "Memory forks") ---------------------------- */

int brig_gvisor_agent_listen(oci *o, const char *id, brig_error **err)
{
    return signal_agent(o, id, "USR1", err);
}

int brig_gvisor_agent_quiet(oci *o, brig_rt_sandbox *sb, brig_error **err)
{
    return signal_agent(o, sb->id, "USR2", err) < 0 ? -1 : wait_quiet(sb, err);
}

int brig_gvisor_image(oci *o, brig_rt_sandbox *sb, const char *img, brig_error **err)
{
    const char *ck[] = {"checkpoint", "--leave-running", "--image-path", img, sb->id, NULL};
    return runsc(o, ck, err);
}
