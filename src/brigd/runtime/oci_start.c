/*
 * oci_start.c - running the OCI runtime (runc, or gVisor's runsc) for the driver's files, and
 * starting a sandbox's runtime and waiting for its agent: the steps a create (oci.c) and a
 * gVisor restore (gvisor_ckpt.c) share.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentconn.h"
#include "log.h"
#include "oci_internal.h"
#include "spawn.h"
#include "util.h"

#define READY_TIMEOUT_MS 10000 /* agent handshake after runc started it */

/* "<runtime> --root <root>" (and runsc's flags) into argv; returns the count. */
static size_t runtime_argv(const oci *o, brig_isolation iso, const char **argv)
{
    size_t n = 0;
    bool gvisor = iso == BRIG_ISO_GVISOR;
    argv[n++] = gvisor ? o->runsc : o->runtime;
    argv[n++] = "--root";
    argv[n++] = gvisor ? o->runsc_root : o->root;
    for (size_t i = 0; gvisor && o->runsc_flags[i]; i++)
        argv[n++] = o->runsc_flags[i];
    return n;
}

/* Runs `<runtime> --root <root> args...`; output (runtime's messages) into out. */
int brig_oci_run_runtime(oci *o, brig_isolation iso, const char *const *args, brig_buf *out,
                         int *status, brig_error **err)
{
    const char *argv[24];
    size_t n = runtime_argv(o, iso, argv);
    for (size_t i = 0; args[i] && n < BRIG_ARRAY_LEN(argv) - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return brig_proc_run(argv, out, 4096, status, err);
}

/* The last "msg=" of runc's log lines, or the last line: what went wrong. */
char *brig_oci_runtime_message(const char *text)
{
    const char *m = NULL;
    for (const char *p = text; (p = strstr(p, "msg=")) != NULL; p += 4)
        m = p + 4;
    if (m == NULL) {
        size_t len = strlen(text);
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
            len--;
        const char *start = text + len;
        while (start > text && start[-1] != '\n')
            start--;
        return brig_xstrndup(start, (size_t)(text + len - start));
    }
    if (*m == '"')
        m++;
    size_t len = strcspn(m, "\"\n");
    return brig_xstrndup(m, len);
}

/* ---- ops ------------------------------------------------------------------- */

int brig_oci_connect(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    int fd = brig_oci_connect_begin(rt, sb, err);
    return fd < 0 ? -1 : brig_agent_handshake_end(fd, sb->id, err);
}

int brig_oci_connect_begin(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    (void)rt;
    struct sockaddr_un sa;
    brig_oci_sock_path(sb, &sa);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return brig_error_sys(err, "socket");
    /* Bounded connect: a wedged agent must not hang an API thread forever. */
    struct timeval tv = {READY_TIMEOUT_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "connect to the agent of %s", sb->id);
        close(fd);
        return -1;
    }
    return brig_agent_handshake_begin(fd, sb->id, READY_TIMEOUT_MS, err);
}

int brig_oci_runtime_start(const oci *o, const char *id, brig_isolation iso, bool host_layer,
                           int lfd, const char *image, brig_error **err)
{
    bool gvisor = iso == BRIG_ISO_GVISOR;
    _cleanup_free_ char *dir = brig_oci_path(o, id, NULL);
    _cleanup_free_ char *log_path = brig_oci_path(o, id, "agent.log");
    _cleanup_free_ char *pid_path = brig_oci_path(o, id, "init.pid");
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0)
        return brig_error_sys(err, "open %s", log_path);
    const char *argv[24];
    const int fds[] = {lfd, o->seccomp_fd};
    size_t n = runtime_argv(o, iso, argv);
    for (size_t i = 0; gvisor && host_layer && i < n; i++)
        if (strncmp(argv[i], "--overlay2=", 11) == 0)
            argv[i] = "--overlay2=none"; /* its writes where layer_open finds them */
    const char *run[] = {
        image ? "restore" : "run", "--detach", "--bundle", dir, "--pid-file", pid_path};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(run); i++)
        argv[n++] = run[i];
    if (image) {
        argv[n++] = "--image-path";
        argv[n++] = image;
    }
    if (!gvisor) { /* the agent's socket as fd 3 (runsc's agent makes its own), its filter 4 */
        argv[n++] = "--preserve-fds";
        argv[n++] = "2";
    }
    argv[n++] = id;
    argv[n] = NULL;
    brig_spawn s = {.argv = argv,
                    .stdin_fd = -1,
                    .stdout_fd = logfd,
                    .stderr_fd = logfd,
                    .extra_fds = gvisor ? NULL : fds,
                    .n_extra = gvisor ? 0 : 2,
                    .mask = gvisor ? brig_gvisor_mask : NULL};
    pid_t pid;
    int rc = brig_proc_spawn(&s, &pid, err);
    int st = rc < 0 ? 0 : brig_proc_wait(pid);
    close(logfd);
    if (rc < 0 || st == 0)
        return rc;
    char buf[4096];
    int lf = open(log_path, O_RDONLY | O_CLOEXEC);
    ssize_t got = lf >= 0 ? pread(lf, buf, sizeof(buf) - 1, 0) : -1;
    if (lf >= 0)
        close(lf);
    buf[got > 0 ? got : 0] = '\0';
    _cleanup_free_ char *m = brig_oci_runtime_message(buf);
    char how[64];
    brig_proc_describe(st, how, sizeof(how));
    return brig_error_set(err, BRIG_E_INTERNAL, 0, "%s %s %s: %s (%s)", argv[0],
                          image ? "restore" : "run", id, *m ? m : "no message", how);
}

int brig_oci_init_hold(const oci *o, brig_rt_sandbox *sb, brig_error **err)
{
    _cleanup_free_ char *pid_path = brig_oci_path(o, sb->id, "init.pid");
    pid_t ipid = brig_pidfile_read(pid_path);
    sb->pidfd = ipid > 0 ? pidfd_open(ipid, 0) : -1;
    sb->pid = ipid;
    if (sb->pidfd < 0)
        return brig_error_sys(err, "sandbox init (pid %d) is gone", (int)ipid);
    return 0;
}

/* Under gVisor the agent makes its socket itself (runsc hands a sandbox no listening
 * socket of ours): until it appears, and is listening, a connect fails; we try again
 * while the sandbox lives, up to READY_TIMEOUT_MS. */
static int socket_wait(const brig_rt_sandbox *sb, brig_error **err)
{
    struct sockaddr_un sa;
    brig_oci_sock_path(sb, &sa);
    int64_t deadline = brig_now_mono_ms() + READY_TIMEOUT_MS;
    for (int delay_us = 200;; delay_us = delay_us < 5000 ? delay_us * 2 : delay_us) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return brig_error_sys(err, "socket");
        int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        close(fd);
        if (r == 0)
            return 0;
        struct pollfd p = {sb->pidfd, POLLIN, 0};
        if ((e != ENOENT && e != ECONNREFUSED) || poll(&p, 1, 0) != 0 ||
            brig_now_mono_ms() > deadline)
            return brig_error_set(err, BRIG_E_UNAVAILABLE, e, "the agent of %s never listened",
                                  sb->id);
        usleep((useconds_t)delay_us);
    }
}

int brig_oci_agent_ready(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    if (sb->iso == BRIG_ISO_GVISOR && socket_wait(sb, err) < 0) {
        brig_error_prefix(err, "sandbox did not become ready");
        return -1;
    }
    int afd = brig_oci_connect(rt, sb, err);
    if (afd < 0) {
        brig_error_prefix(err, "sandbox did not become ready");
        return -1;
    }
    close(afd);
    return 0;
}

int brig_oci_run(oci *o, brig_isolation iso, const char *const *args, brig_error **err)
{
    brig_buf out = {0};
    int st = 0;
    if (brig_oci_run_runtime(o, iso, args, &out, &st, err) < 0) {
        brig_buf_dispose(&out);
        return -1;
    }
    int rc = 0;
    if (st != 0) {
        size_t last = 0;
        while (args[last + 1])
            last++;
        _cleanup_free_ char *m = brig_oci_runtime_message(out.data ? out.data : "");
        rc = brig_error_set(err, BRIG_E_INTERNAL, 0, "%s %s %s: %s",
                            iso == BRIG_ISO_GVISOR ? "runsc" : "runc", args[0],
                            last > 0 ? args[last] : "", m);
    }
    brig_buf_dispose(&out);
    return rc;
}
