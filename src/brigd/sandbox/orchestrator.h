/*
 * orchestrator.h - a sandbox's life: create, delete (and brigd's own stops), a new
 * lifetime.  Each is a checklist of calls into the modules below it (registry, pool,
 * secrets, the runtime driver, attach, watch, teardown), in a fixed order; a create
 * that fails at any step ends the way a deleted sandbox does.
 */
#ifndef BRIG_ORCHESTRATOR_H
#define BRIG_ORCHESTRATOR_H

#include <jansson.h>
#include <stdint.h>

#include "account/auth.h"
#include "error.h"
#include "server.h"
#include "volmounts.h"

typedef struct brig_sandbox_opts {
    const char *template;       /* NULL: the configured default */
    const char *tariff;         /* NULL: the configured default */
    const char *project_id;     /* NULL: the caller's project */
    const char *isolation;      /* "container", "gvisor"; NULL: the default */
    json_t *env;                /* object of strings or NULL (borrowed) */
    json_t *secrets;            /* {"NAME": "value"} or NULL (borrowed) */
    json_t *secret_refs;        /* ["NAME"] of project secrets, or NULL (borrowed) */
    int64_t idle_timeout_ms;    /* 0: the default */
    int64_t max_lifetime_ms;    /* 0: the default */
    const brig_volset *volumes; /* checked (brig_volset_parse), or NULL: none */
    const char *snapshot;       /* start from this snapshot (snapshots.h), or NULL */
    bool snapshot_memory;       /* and restore its memory (a fork's: fork.h) */
    const char *on_idle;        /* "pause", "delete"; NULL: its project's default */
    bool host_layer;  /* its writes in the host's writable layer (runtime.h): a build's, and a
                       * gVisor sandbox's that can be snapshotted ("snapshots": true) */
    bool egress_none; /* it reaches nothing, whatever its project's egress policy says */
} brig_sandbox_opts;

/* Admits (limits, host capacity) and creates a sandbox, waiting until it is ready;
 * returns its JSON. */
int brig_sandbox_create(brigd *d, const brig_caller *c, const brig_sandbox_opts *opts, json_t **out,
                        brig_error **err);

/* Ending a sandbox: its processes are sent SIGKILL, its final charge made and its row
 * marked deleted at once; the host-side cleanup follows on the teardown (teardown.h).
 * Deletes a sandbox the caller may see (reason: "deleted_by_api"...), waiting up to 2 s
 * for its processes to die. */
int brig_sandbox_delete(brigd *d, const brig_caller *c, const char *id, const char *reason,
                        brig_error **err);
/* Same, by id, for brigd itself (the janitor, --destroy-all): waits for nothing.
 * -1 when no running sandbox has that id. */
int brig_sandbox_stop(brigd *d, const char *id, const char *reason);
/* The watch's verdict (watch.h): the sandbox's agent died on its own. */
void brig_sandbox_agent_lost(brigd *d, const char *id);

/* Extends a sandbox's lifetime to now + ms (within the server maximum). */
int brig_sandbox_set_timeout(brigd *d, const brig_caller *c, const char *id, int64_t ms,
                             json_t **out, brig_error **err);

#endif
