/*
 * exec_event.c - the audit timeline's "exec" event (see exec_event.h).
 */
#include "exec_event.h"

#include <string.h>

#include "core/format.h"
#include "core/metrics.h"
#include "sandbox/usage.h"
#include "util.h"

#define COMMAND_MAX 4096 /* bytes of a command line kept in the event */

static json_t *names_of(json_t *obj)
{
    json_t *a = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) json_array_append_new(a, json_string(k));
    return a;
}

static json_t *now_json(void)
{
    char at[32];
    brig_format_time(brig_now_real_ms(), at);
    return json_string(at);
}

/* The command line: a shell command, or argv; cut at COMMAND_MAX bytes (at a
 * character's start) with "command_truncated". */
static void set_command(json_t *ev, const brig_exec_req *req)
{
    if (req->cmd == NULL) {
        json_object_set_new(ev, "argv", req->argv ? json_deep_copy(req->argv) : json_array());
        return;
    }
    size_t n = strlen(req->cmd);
    if (n > COMMAND_MAX) {
        n = COMMAND_MAX;
        while (n > 0 && ((unsigned char)req->cmd[n] & 0xC0) == 0x80)
            n--;
        json_object_set_new(ev, "command_truncated", json_true());
    }
    json_object_set_new(ev, "command", json_stringn(req->cmd, n));
}

json_t *api_exec_event(const brig_exec_req *req, json_t *secrets)
{
    json_t *ev = json_object();
    set_command(ev, req);
    json_object_set_new(ev, "cwd", req->cwd ? json_string(req->cwd) : json_null());
    json_object_set_new(ev, "user", json_string(req->user ? req->user : "root"));
    json_object_set_new(ev, "background", json_boolean(req->background));
    json_object_set_new(ev, "pty", json_boolean(req->pty_cols > 0));
    json_object_set_new(ev, "timeout_ms", json_integer((json_int_t)req->timeout_ms));
    json_object_set_new(ev, "env", names_of(req->env));
    json_object_set_new(ev, "secrets", names_of(secrets));
    json_object_set_new(ev, "started_at", now_json());
    return ev;
}

void api_exec_event_end(brigd *d, brig_sandbox *sb, const brig_caller *c, json_t *ev,
                        const brig_exec_result *res, const char *reason, const int64_t bytes[2],
                        int64_t redactions, const char *error)
{
    brig_usage_exec(d, sb);
    if (res && ev && !json_is_true(json_object_get(ev, "background")))
        brig_metric_observe(BRIG_M_EXEC_SECONDS, NULL, (double)res->duration_ms / 1000);
    if (ev == NULL)
        return;
    if (res) {
        json_object_set_new(ev, "pid", json_integer(res->pid));
        if (!json_is_true(json_object_get(ev, "background"))) {
            json_object_set_new(ev, "ended_at", now_json());
            json_object_set_new(ev, "exit_code", json_integer(res->exit_code));
            json_object_set_new(ev, "signal",
                                res->signal ? json_integer(res->signal) : json_null());
            json_object_set_new(ev, "timed_out", json_boolean(res->timed_out));
            json_object_set_new(ev, "duration_ms", json_integer((json_int_t)res->duration_ms));
            json_object_set_new(ev, "reason", reason ? json_string(reason) : json_null());
        }
    }
    if (bytes) {
        json_object_set_new(ev, "stdout_bytes", json_integer((json_int_t)bytes[0]));
        json_object_set_new(ev, "stderr_bytes", json_integer((json_int_t)bytes[1]));
        json_object_set_new(ev, "redactions", json_integer((json_int_t)redactions));
    }
    if (error)
        json_object_set_new(ev, "error", json_string(error));
    brig_timeline_record(d, sb, c, "exec", ev);
}
