/*
 * oci_pause.c - pausing a sandbox (docs/snapshots.md): the runtime's own pause and
 * resume.  runc freezes the container's cgroup (v1 freezer.state, v2 cgroup.freeze);
 * runsc stops its sandbox's tasks inside gVisor's kernel.  Either way every process
 * stops where it is and its memory stays resident, and the runtime's state says
 * "paused", which is how a restarted brigd finds a paused sandbox again (attach).
 */
#include <jansson.h>
#include <string.h>

#include "log.h"
#include "oci_internal.h"
#include "spawn.h"

/* The runtime's status of sandbox id ("running", "paused", ...) into buf; -1 when the
 * runtime knows none. */
static int status_of(oci *o, brig_isolation iso, const char *id, char *buf, size_t n)
{
    brig_buf out = {0};
    int st = 0;
    const char *args[] = {"state", id, NULL};
    int rc = brig_oci_run_runtime(o, iso, args, &out, &st, NULL);
    json_t *j = rc == 0 && st == 0 && out.data ? json_loads(out.data, 0, NULL) : NULL;
    brig_buf_dispose(&out);
    const char *s = json_string_value(json_object_get(j, "status"));
    if (s)
        snprintf(buf, n, "%s", s);
    json_decref(j);
    return s ? 0 : -1;
}

/* `<runtime> verb id`, unless the sandbox is in state `done` already (idempotent). */
static int switch_to(brig_runtime *rt, brig_rt_sandbox *sb, const char *verb, const char *done,
                     brig_error **err)
{
    oci *o = rt->priv;
    char now[32];
    if (status_of(o, sb->iso, sb->id, now, sizeof(now)) < 0)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "sandbox %s is not running", sb->id);
    if (strcmp(now, done) == 0)
        return 0;
    const char *args[] = {verb, sb->id, NULL};
    return brig_oci_run(o, sb->iso, args, err);
}

int brig_oci_pause(brig_runtime *rt, brig_rt_sandbox *sb, const char **memory, brig_error **err)
{
    oci *o = rt->priv;
    bool checkpoint = memory && *memory && strcmp(*memory, "checkpoint") == 0;
    if (memory)
        *memory = "resident";
    if (sb->iso == BRIG_ISO_GVISOR && brig_gvisor_checkpointed(o, sb->id)) {
        if (memory)
            *memory = "checkpoint";
        return 0; /* paused already, its memory on disk */
    }
    if (checkpoint && sb->iso != BRIG_ISO_GVISOR)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a %s sandbox cannot checkpoint its memory (only gvisor can): "
                              "pause it without \"memory\" to freeze it, memory resident",
                              brig_isolation_name(sb->iso));
    if (!checkpoint)
        return switch_to(rt, sb, "pause", "paused", err);
    /* A frozen sandbox first goes on (its agent must close its connections itself). */
    if (switch_to(rt, sb, "resume", "running", err) < 0 || brig_gvisor_checkpoint(o, sb, err) < 0)
        return -1;
    *memory = "checkpoint";
    return 0;
}

int brig_oci_resume(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    if (sb->iso == BRIG_ISO_GVISOR && brig_gvisor_checkpointed(rt->priv, sb->id))
        return sb->killed ? 0 : brig_gvisor_restore(rt, sb, err); /* killed: none to thaw */
    return switch_to(rt, sb, "resume", "running", err);
}

int brig_oci_paused(brig_runtime *rt, const char *id)
{
    oci *o = rt->priv;
    if (brig_gvisor_checkpointed(o, id))
        return 1;
    brig_isolation iso = brig_gvisor_has(o, id) ? BRIG_ISO_GVISOR : BRIG_ISO_CONTAINER;
    char now[32];
    if (status_of(o, iso, id, now, sizeof(now)) < 0)
        return -1;
    return strcmp(now, "paused") == 0;
}
