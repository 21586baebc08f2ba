/*
 * build.h - template builds in the background.
 *
 * A build runs the builder (templates/build --cache CACHE --force NAME, see
 * template.h) as a child process in a process group of its own, supervised by a
 * thread of its own that collects the child's output (stdout and stderr) and its
 * end; nobody waits for it on an HTTP thread.  At most one build of a template
 * runs at a time: asking for a build while one of the same template runs hands
 * back the running one, unless the template's key changed since it started
 * (BRIG_E_CONFLICT: that build will not make the rootfs a new sandbox uses).
 *
 * A build's record (state, times, the builder's output) lives in brigd's memory:
 * a finished one for BRIG_BUILD_KEEP_MS after its end, and only the newest
 * BRIG_BUILD_KEEP of them.  Nothing of it is stored: a build is a child of this
 * brigd, which stops its running builders when it shuts down (they clean up
 * after themselves, see docs/templates.md), so after a restart there is no build
 * to report on and an old id is not found.  What a build leaves behind is in the
 * template cache itself (GET /v1/templates: key, built).
 *
 * Locking: one mutex per registry guards the list and every record's fields; the
 * lookups hand out counted references (brig_build_put) that stay valid after the
 * registry forgot the record.
 */
#ifndef BRIG_BUILD_H
#define BRIG_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "server.h"
#include "util.h"

#define BRIG_BUILD_KEEP    16                 /* finished records kept at most */
#define BRIG_BUILD_KEEP_MS (60LL * 60 * 1000) /* ... for this long after their end */
#define BRIG_BUILD_LOG_MAX (1u << 20)         /* output bytes kept per build (the newest) */
#define BRIG_BUILD_STOP_MS 10000              /* SIGTERM to SIGKILL at shutdown */

typedef struct brig_builds brig_builds;
typedef struct brig_build brig_build;

typedef enum brig_build_state {
    BRIG_BUILD_RUNNING,
    BRIG_BUILD_SUCCEEDED,
    BRIG_BUILD_FAILED,
} brig_build_state;

/* "running", "succeeded", "failed". */
const char *brig_build_state_name(brig_build_state s);

/* A copy of a record at one moment (brig_build_info_dispose). */
typedef struct brig_build_info {
    char id[40];       /* "bld_" + 26 base32 characters */
    char template[64]; /* the template's name */
    char key[17];      /* the cache key it builds */
    brig_build_state state;
    char *error;        /* failed: why, one line (owned); NULL otherwise */
    int64_t started_ms; /* real time */
    int64_t ended_ms;   /* real time; 0 while running */
    uint64_t log_bytes; /* output bytes so far, dropped ones included */
    brig_buf tail;      /* the last tail_max bytes of output or less, from a line start */
} brig_build_info;

/* Creates d->builds (at start-up, before the API serves). */
void brig_builds_init(brigd *d);
/* Refuses new builds (BRIG_E_UNAVAILABLE), stops the running builders (SIGTERM to
 * their process groups, SIGKILL after BRIG_BUILD_STOP_MS) and waits for their
 * threads: their records end as failed.  Then waits (BRIG_BUILD_STOP_MS at most)
 * until nobody else holds a record: the followers sent the end.  Call before the
 * HTTP server stops, which closes every connection. */
void brig_builds_stop(brigd *d);
/* Frees d->builds once nobody uses it (after the HTTP server stopped). */
void brig_builds_free(brigd *d);

/* Starts a build of template `name` (BRIG_E_NOT_FOUND: no such template), or finds
 * the one of it that runs (*started false).  *out is a reference for the caller. */
int brig_build_start(brigd *d, const char *name, brig_build **out, bool *started, brig_error **err);
/* The build `id` of template `name` (a reference), or BRIG_E_NOT_FOUND. */
int brig_build_get(brigd *d, const char *name, const char *id, brig_build **out, brig_error **err);
void brig_build_put(brig_build *b);

/* A snapshot of b with the last tail_max bytes of its output (0: none). */
void brig_build_info_get(brig_build *b, size_t tail_max, brig_build_info *out);
void brig_build_info_dispose(brig_build_info *info);

/* Appends up to max bytes of b's output from absolute offset *pos to out and
 * advances *pos.  Where output before *pos's window was dropped (more than
 * BRIG_BUILD_LOG_MAX since), *dropped gets how many bytes were skipped (else 0).
 * When nothing is there yet and the build runs, waits up to wait_ms for more.
 * Returns true once the build has ended and everything up to its end was read. */
bool brig_build_read(brig_build *b, uint64_t *pos, size_t max, int64_t wait_ms, brig_buf *out,
                     uint64_t *dropped);

#endif
