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
#include "error.h"
#include "server.h"

#define BRIG_UTPL_STEP_MS     (30LL * 60 * 1000) /* a step's time limit */
#define BRIG_UTPL_TAIL        4096               /* output bytes kept per step */
#define BRIG_UTPL_PER_ACCOUNT 100                /* templates (name:tag) an account may have */

/* Builds the template body declares for caller c, or finds it built (the same key: the
 * same spec on the same parent).  0 and *out (the template; "cached" says whether it was
 * built before); 1 and *out (a failed step: which, its exit code and output's tail);
 * -1 and *err (a bad spec, an unknown parent, the sandbox could not be made...). */
int brig_utpl_build(brigd *d, const brig_caller *c, json_t *body, json_t **out, brig_error **err);

/* At shutdown, before the HTTP server stops: refuses new builds and stops the sandboxes
 * of those that run (their requests answer 503, nothing of them is kept). */
void brig_utpl_builds_stop(brigd *d);

#endif
