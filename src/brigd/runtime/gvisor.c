/*
 * gvisor.c - what isolation "gvisor" adds to the OCI driver (oci_internal.h):
 * finding gVisor's runsc, a network namespace made ahead of the sandbox, and
 * what runsc must not see.
 *
 * runsc is Debian's (trixie's package, unpacked by scripts/setup into
 * /usr/lib/brig/bin: docs/operations.md); "auto" looks there, then in PATH.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "oci_internal.h"
#include "spawn.h"
#include "util.h"

#define RUNSC_INSTALLED "/usr/lib/brig/bin/runsc" /* scripts/setup puts it there */

const char *const brig_gvisor_mask[] = {"/proc/sys/net", NULL};

static char *runsc_path(const char *want)
{
    if (strcmp(want, "auto") != 0)
        return access(want, X_OK) == 0 ? brig_xstrdup(want) : NULL;
    if (access(RUNSC_INSTALLED, X_OK) == 0)
        return brig_xstrdup(RUNSC_INSTALLED);
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy =
        brig_xstrdup(path && *path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *p = brig_asprintf("%s/runsc", d);
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

/* runsc's flags, the same for each of its commands: the platform (systrap needs no KVM),
 * gVisor's own network stack on the interfaces it finds in the sandbox's namespace, host
 * unix sockets created inside the sandbox for the agent's (its only bind-mounted
 * directory, run/), where the root's writes live (docs/operations.md), directfs. */
static void runsc_flags(oci *o, const brig_runtime_config *cfg)
{
    size_t n = 0;
    const char *overlay = cfg->runsc_overlay ? cfg->runsc_overlay : "self";
    o->runsc_flags[n++] =
        brig_asprintf("--platform=%s", cfg->runsc_platform ? cfg->runsc_platform : "systrap");
    o->runsc_flags[n++] = brig_xstrdup("--network=sandbox");
    o->runsc_flags[n++] = brig_xstrdup("--host-uds=create");
    o->runsc_host_layer = strcmp(overlay, "none") == 0;
    o->runsc_flags[n++] = o->runsc_host_layer ? brig_xstrdup("--overlay2=none")
                                              : brig_asprintf("--overlay2=root:%s", overlay);
    o->runsc_flags[n++] = brig_asprintf("--directfs=%s", cfg->runsc_directfs ? "true" : "false");
    o->runsc_flags[n] = NULL;
}

int brig_gvisor_init(oci *o, const brig_runtime_config *cfg, brig_error **err)
{
    const char *want = cfg->runsc;
    runsc_flags(o, cfg);
    o->runsc_root = brig_asprintf("%s/runsc", cfg->state_dir);
    if (brig_oci_mkdir_p(o->runsc_root, 0700, err) < 0)
        return -1;
    char *p = runsc_path(want ? want : "auto");
    if (p == NULL) {
        o->runsc_missing = brig_asprintf(
            "isolation 'gvisor' needs gVisor's runsc, which is not installed on this host (%s; "
            "scripts/setup installs it, or set runsc to its path)",
            strcmp(want ? want : "auto", "auto") == 0 ? RUNSC_INSTALLED " nor in PATH" : want);
        return 0;
    }
    const char *argv[] = {p, "--version", NULL};
    brig_buf out = {0};
    int st = 0;
    brig_error *e = NULL;
    if (brig_proc_run(argv, &out, 256, &st, &e) < 0 || st != 0) {
        o->runsc_missing = brig_asprintf("isolation 'gvisor' needs gVisor's runsc: %s does not "
                                         "run on this host (%s)",
                                         p, e ? e->msg : "runsc --version failed");
        brig_error_clear(&e);
        free(p);
    } else {
        o->runsc = p;
        brig_info("runtime: gvisor via %s", p);
    }
    brig_buf_dispose(&out);
    return 0;
}

/* A thread of its own: unshare(CLONE_NEWNET) moves only the calling thread. */
static void *netns_thread(void *arg)
{
    int *fd = arg;
    if (unshare(CLONE_NEWNET) < 0)
        *fd = -errno;
    else if ((*fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        *fd = -errno;
    return NULL;
}

int brig_gvisor_netns_new(int *fd, brig_error **err)
{
    pthread_t t;
    int r = -EAGAIN;
    if (pthread_create(&t, NULL, netns_thread, &r) != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "start a thread");
    pthread_join(t, NULL);
    if (r < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -r, "new network namespace: %s", strerror(-r));
    *fd = r;
    return 0;
}

bool brig_gvisor_checkpointed(const oci *o, const char *id)
{
    _cleanup_free_ char *p = brig_oci_path(o, id, "checkpointed");
    return access(p, F_OK) == 0;
}

bool brig_gvisor_has(const oci *o, const char *id)
{
    if (o->runsc_root == NULL)
        return false;
    if (brig_gvisor_checkpointed(o, id)) /* runsc forgot it at its checkpoint */
        return true;
    _cleanup_free_ char *prefix = brig_asprintf("%s_sandbox:", id);
    DIR *d = opendir(o->runsc_root);
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

int brig_gvisor_host_layer_mark(const oci *o, const brig_rt_spec *spec, int dirfd, brig_error **err)
{
    if (spec->isolation != BRIG_ISO_GVISOR || !(spec->host_layer || o->runsc_host_layer))
        return 0;
    int fd = openat(dirfd, "host-layer", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return brig_error_sys(err, "mark %s's writable layer", spec->id);
    close(fd);
    return 0;
}

bool brig_gvisor_host_layer(int dirfd)
{
    return faccessat(dirfd, "host-layer", F_OK, 0) == 0;
}

int brig_gvisor_seal(const oci *o, const char *id, brig_error **err)
{
    /* runsc (as host root) makes the root overlay's file store, where the sandbox's
     * own writes to / live, world-readable: only the Sentry's descriptor needs it. */
    _cleanup_free_ char *name = brig_asprintf("disk/upper/.gvisor.filestore.%s", id);
    _cleanup_free_ char *store = brig_oci_path(o, id, name);
    if (chmod(store, 0600) < 0 && errno != ENOENT)
        return brig_error_sys(err, "chmod %s", store);
    return 0;
}
