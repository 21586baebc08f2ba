/*
 * usertpl_build.h - building a template declared by a user (usertpl.h), inside a sandbox
 * of its parent: a normal sandbox of the caller's project (its limits, its egress policy,
 * billed as any), never on the host.  The uploaded files are written and the steps run
 * through its agent (apt, pip and npm packages first, then "run", each a shell command as
 * root in the workdir with the spec's env); when every step exited 0 the sandbox's
 * writable layer over its parent becomes the template's layer (runtime/layer.h), stored
 * by key under the account.  The sandbox is deleted either way.
 */
#ifndef BRIG_USERTPL_BUILD_H
#define BRIG_USERTPL_BUILD_H

#include <jansson.h>

#include "account/auth.h"
#include "build.h"
#include "error.h"
#include "server.h"

#define BRIG_UTPL_STEP_MS     (30LL * 60 * 1000) /* a step's time limit */
#define BRIG_UTPL_TAIL        4096               /* output bytes kept per step */
#define BRIG_UTPL_PER_ACCOUNT 100                /* templates (name:tag) an account may have */

/* Starts building the template body declares for caller c, or finds it built (the same
 * key: the same spec on the same parent).  0 and *out: built before (the template,
 * "cached": true), nothing to do; 2 and *rec: the build runs on a thread of its own
 * (build.h; *rec a reference), its output logged as it comes ("==> step N (kind): …"
 * lines, each step's output, "==> step N: exit code C (T ms)"), and its record ends
 * succeeded with the template ("cached": false) as result, or failed: with a step that
 * failed, the failure's answer as result (which step, its exit code and output's tail);
 * without a result, error and error_kind say why (the sandbox could not be made...).
 * -1 and *err: a bad spec, an unknown parent, too many templates... */
int brig_utpl_build_start(brigd *d, const brig_caller *c, json_t *body, json_t **out,
                          brig_build **rec, brig_error **err);

/* At shutdown, before the HTTP server stops: refuses new builds and stops the sandboxes
 * of those that run (their requests answer 503, nothing of them is kept). */
void brig_utpl_builds_stop(brigd *d);

#endif
