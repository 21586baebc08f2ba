/*
 * ends.c - why a command or a sandbox ended (see ends.h).
 */
#include "ends.h"

#include <signal.h>
#include <string.h>

#include "cmdends.h"
#include "core/format.h"
#include "runtime/cgroup.h"
#include "timeline.h"
#include "util.h"

#define DISK_FULL_BYTES (1 << 20) /* less than this left: the disk is full */
#define OOM_RECENT_MS   2000      /* an OOM kill this recent explains an agent's death */

/* Today's details (stored, shown as `reason`) and the typed reason each is. */
static const struct {
    const char *detail, *code;
} codes[] = {
    {"deleted_by_api", "deleted"},        {"idle_timeout", "idle"},
    {"max_lifetime", "lifetime"},         {"paused_too_long", "idle"},
    {"cpu_abuse", "cpu_abuse"},           {"tcp_memory", "tcp_memory"},
    {"balance_exhausted", "balance"},     {"spend_limit", "spend_limit"},
    {"agent_lost", "agent_lost"},         {"oom_killed", "oom_killed"},
    {"lost_on_restart", "brigd_restart"}, {"destroyed_by_operator", "host_shutdown"},
    {"host_reboot", "host_shutdown"},     {"host_shutdown", "host_shutdown"},
};

const char *brig_end_code(const char *detail, bool failed)
{
    if (failed)
        return "create_failed";
    if (detail == NULL || detail[0] == '\0')
        return NULL;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(codes); i++)
        if (strcmp(codes[i].detail, detail) == 0)
            return codes[i].code;
    return "deleted"; /* a detail this version does not know: ended by a request */
}

static bool rose(int64_t before, int64_t after)
{
    return before >= 0 && after > before;
}

const char *brig_exec_reason(const brig_rt_events *before, const brig_rt_events *after,
                             int exit_code, int signal, bool timed_out)
{
    if (timed_out)
        return "timeout";
    bool counted = before && after;
    /* SIGKILL, or a shell's report of a child it took (128 + 9), while the OOM killer's
     * count rose: that killer sent it. */
    bool killed = signal == SIGKILL || (signal == 0 && exit_code == 128 + SIGKILL);
    if (counted && killed && rose(before->oom_kills, after->oom_kills))
        return "oom_killed";
    if (exit_code != 0 && counted && rose(before->pids_max, after->pids_max))
        return "pids_limit";
    if (exit_code != 0 && after &&
        ((after->disk_avail >= 0 && after->disk_avail < DISK_FULL_BYTES) ||
         after->inode_avail == 0))
        return "disk_full";
    return signal ? "signal" : "exited";
}

void brig_sandbox_events(brigd *d, const brig_sandbox *sb, brig_rt_events *out)
{
    *out = (brig_rt_events){-1, -1, -1, -1};
    if (d->rt->ops->events && brig_sandbox_runtime(sb))
        d->rt->ops->events(d->rt, brig_sandbox_id(sb), out);
}

/* The end of a background command: its start event's fields, with how it ended. */
static void record_end(brigd *d, brig_sandbox *sb, json_t *ev, const json_t *proc,
                       const char *reason)
{
    json_t *data = json_object();
    static const char *const keep[] = {
        "command", "command_truncated", "argv", "pid", "started_at", "user", "pty", "timeout_ms"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(keep); i++) {
        json_t *v = json_object_get(ev, keep[i]);
        if (v)
            json_object_set(data, keep[i], v);
    }
    json_object_set_new(data, "background", json_true());
    json_object_set_new(data, "reason", reason ? json_string(reason) : json_null());
    if (proc) {
        static const char *const how[] = {"exit_code", "signal", "timed_out", "ended_at"};
        for (size_t i = 0; i < BRIG_ARRAY_LEN(how); i++) {
            json_t *v = json_object_get(proc, how[i]);
            json_object_set(data, how[i], v ? v : json_null());
        }
    } else { /* ended with its sandbox, or ended unseen before it */
        char at[32];
        brig_format_time(brig_now_real_ms(), at);
        json_object_set_new(data, "exit_code", json_null());
        json_object_set_new(data, "ended_at", json_string(at));
        json_object_set_new(data, "with_sandbox", json_true());
    }
    json_decref(ev);
    brig_timeline_record(d, sb, NULL, "exec.ended", data);
}

const char *brig_proc_reason(brigd *d, brig_sandbox *sb, json_t *proc)
{
    if (!json_is_false(json_object_get(proc, "running"))) {
        json_object_set_new(proc, "reason", json_null());
        return NULL;
    }
    int pid = (int)json_integer_value(json_object_get(proc, "pid"));
    brig_cmdends *c = brig_sandbox_cmdends(sb);
    brig_rt_events before, now;
    bool known = brig_cmdends_before(c, pid, &before);
    brig_sandbox_events(d, sb, &now);
    const char *reason = brig_exec_reason(
        known ? &before : NULL, &now, (int)json_integer_value(json_object_get(proc, "exit_code")),
        (int)json_integer_value(json_object_get(proc, "signal")),
        json_is_true(json_object_get(proc, "timed_out")));
    json_object_set_new(proc, "reason", json_string(reason));
    json_t *ev = known ? brig_cmdends_take(c, pid) : NULL;
    if (ev) /* the first to see it ended records it */
        record_end(d, sb, ev, proc, reason);
    return reason;
}

void brig_bg_started(brig_sandbox *sb, int pid, const json_t *ev, const brig_rt_events *before)
{
    brig_cmdends_add(brig_sandbox_cmdends(sb), pid, json_deep_copy(ev), before);
}

void brig_bg_ended_with(brigd *d, brig_sandbox *sb, const char *code)
{
    json_t *all = brig_cmdends_take_all(brig_sandbox_cmdends(sb));
    size_t i;
    json_t *ev;
    json_array_foreach(all, i, ev) record_end(d, sb, json_incref(ev), NULL, code);
    json_decref(all);
}

void brig_ends_tick(brigd *d, brig_sandbox *sb, int64_t now)
{
    int64_t oom_kills = -1, pids_max = -1;
    if (d->cgroup && d->cgroup->events)
        d->cgroup->events(brig_sandbox_id(sb), &oom_kills, &pids_max);
    brig_cmdends_oom_note(brig_sandbox_cmdends(sb), oom_kills, now);
}

const char *brig_agent_death(brigd *d, brig_sandbox *sb, char *words, size_t n)
{
    words[0] = '\0';
    if (d->rt->ops->last_words)
        d->rt->ops->last_words(d->rt, brig_sandbox_id(sb), words, n);
    brig_rt_events ev;
    brig_sandbox_events(d, sb, &ev);
    int64_t seen, rose_at;
    brig_cmdends_oom_seen(brig_sandbox_cmdends(sb), &seen, &rose_at);
    bool oom = ev.oom_kills > 0 &&
               (seen < 0 || ev.oom_kills > seen || brig_now_real_ms() - rose_at <= OOM_RECENT_MS);
    return oom ? "oom_killed" : "agent_lost";
}
