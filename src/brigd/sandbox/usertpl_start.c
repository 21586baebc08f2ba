/*
 * usertpl_start.c - a user template's start command and ready check (see
 * usertpl_start.h).
 */
#include "usertpl_start.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentc/agentc.h"
#include "log.h"
#include "secrets.h"
#include "util.h"

#define READY_POLL_MS  50    /* between two ready checks */
#define READY_CHECK_MS 10000 /* one check's own time limit */

static int exec_once(brigd *d, brig_rt_sandbox *rt, const brig_exec_req *req, brig_exec_result *res,
                     brig_error **err)
{
    _cleanup_close_ int fd = d->rt->ops->connect(d->rt, rt, err);
    if (fd < 0)
        return -1;
    return brig_agentc_exec(fd, req, 1u << 20, NULL, res, err);
}

/* Whether /proc/net/tcp{,6}'s text (out) has a socket listening on port. */
static bool listens(const brig_buf *out, int port)
{
    const char *p = out->data;
    while (p && *p) {
        unsigned lport = 0, st = 0;
        if (sscanf(p, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &lport, &st) == 2 &&
            (int)lport == port && st == 0x0A)
            return true;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return false;
}

/* One ready check: 1 ready, 0 not yet, -1 the sandbox cannot be asked. */
static int ready_once(brigd *d, brig_rt_sandbox *rt, const brig_utpl_run *run, json_t *env,
                      brig_error **err)
{
    brig_exec_result res = {0};
    brig_exec_req req = {.cwd = run->workdir, .env = env, .timeout_ms = READY_CHECK_MS};
    json_t *argv = NULL;
    if (run->ready_cmd) {
        req.cmd = run->ready_cmd;
    } else {
        argv = json_pack("[s, s, s]", "cat", "/proc/net/tcp", "/proc/net/tcp6");
        req.argv = argv;
        req.cwd = "/";
    }
    int r = exec_once(d, rt, &req, &res, err);
    if (r == 0)
        r = run->ready_cmd ? res.exit_code == 0 && !res.timed_out && res.signal == 0
                           : listens(&res.out, run->ready_port);
    json_decref(argv);
    brig_exec_result_dispose(&res);
    return r;
}

int brig_utpl_start(brigd *d, brig_sandbox *sb, const brig_utpl_run *run, brig_error **err)
{
    json_t *env = brig_sandbox_command_env(sb, NULL, NULL);
    int r = brig_utpl_start_rt(d, brig_sandbox_runtime(sb), run, env, err);
    json_decref(env);
    return r;
}

int brig_utpl_start_rt(brigd *d, brig_rt_sandbox *rt, const brig_utpl_run *run, json_t *env,
                       brig_error **err)
{
    brig_exec_req req = {.cmd = run->start, .cwd = run->workdir, .env = env, .background = true};
    brig_exec_result res = {0};
    int r = exec_once(d, rt, &req, &res, err);
    brig_exec_result_dispose(&res);
    if (r < 0) {
        brig_error_prefix(err, "the template's start command");
        return -1;
    }
    if (run->ready_cmd == NULL && run->ready_port == 0)
        return 0;
    int64_t until = brig_now_mono_ms() + run->ready_ms;
    for (;;) {
        r = ready_once(d, rt, run, env, err);
        if (r != 0 || brig_now_mono_ms() >= until)
            break;
        struct timespec ts = {0, READY_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        char what[64];
        if (run->ready_cmd)
            snprintf(what, sizeof(what), "the command %.40s", run->ready_cmd);
        else
            snprintf(what, sizeof(what), "port %d", run->ready_port);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                              "the template's ready check (%s) did not pass within %lld s", what,
                              (long long)(run->ready_ms / 1000));
    }
    return r < 0 ? -1 : 0;
}
