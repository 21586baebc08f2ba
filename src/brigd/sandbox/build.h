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

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "server.h"
#include "util.h"

#define BRIG_BUILD_KEEP     16                 /* finished records kept at most, per account */
#define BRIG_BUILD_KEEP_ALL 128                /* ... and in all */
#define BRIG_BUILD_KEEP_MS  (60LL * 60 * 1000) /* ... for this long after their end */
#define BRIG_BUILD_LOG_MAX  (1u << 20)         /* output bytes kept per build (the newest) */
#define BRIG_BUILD_STOP_MS  10000              /* SIGTERM to SIGKILL at shutdown */

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
    char account[40];  /* "" for the operator's builds */
    char template[64]; /* the template's name (a user's: "name:tag") */
    char key[17];      /* the cache key it builds */
    char sandbox[40];  /* a user's build: its sandbox, once made ("" otherwise) */
    brig_build_state state;
    char *error;        /* failed: why, one line (owned); NULL otherwise */
    int error_kind;     /* failed: a brig_err_kind */
    json_t *result;     /* a user's build, ended: its outcome (owned copy; NULL: none) */
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
/* The build `id` of template `name` run for `account` ("": the operator's), a reference,
 * or BRIG_E_NOT_FOUND (another account's is never found). */
int brig_build_get(brigd *d, const char *account, const char *name, const char *id,
                   brig_build **out, brig_error **err);
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

/* ---- builds that a function of brigd's runs (templates declared by users) ----------
 * The record is the same (followed, kept, trimmed alike, per account); fn(b, arg) runs
 * on a thread of its own that the record owns (joined like a builder's), appends the
 * output with brig_build_log and ends with brig_build_end as its very last use of b.
 * It must end once brigd stops: brig_builds_stop waits for it. */
typedef void (*brig_build_fn)(brig_build *b, void *arg);

/* Lists a running build of template `name` (key) of `account` and starts fn; *out: a
 * reference for the caller.  BRIG_E_UNAVAILABLE while brigd shuts down. */
int brig_build_run(brigd *d, const char *account, const char *name, const char *key,
                   brig_build_fn fn, void *arg, brig_build **out, brig_error **err);
void brig_build_log(brig_build *b, const char *p, size_t n);
void brig_build_logf(brig_build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void brig_build_set_sandbox(brig_build *b, const char *id);
/* Ends b: succeeded when error is NULL, else failed with error (a line) of error_kind;
 * result (taken, may be NULL) is kept with the record. */
void brig_build_end(brig_build *b, int error_kind, const char *error, json_t *result);
/* Waits until b ended. */
void brig_build_wait(brig_build *b);

#endif
