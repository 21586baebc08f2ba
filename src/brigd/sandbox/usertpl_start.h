/*
 * usertpl_start.h - a sandbox of a user's template with a start command (usertpl.h):
 * the command started in the background as the create's last step, and the create's
 * answer held until the ready check passes (a command that exits 0, or a TCP port that
 * something listens on inside the sandbox), polled every READY_POLL_MS up to the
 * template's ready timeout.
 */
#ifndef BRIG_USERTPL_START_H
#define BRIG_USERTPL_START_H

#include "error.h"
#include "registry.h"
#include "server.h"
#include "usertpl.h"

/* Starts run->start in sb (borrowed) and waits for its ready check; -1 and *err
 * (BRIG_E_UNAVAILABLE: it never became ready) otherwise. */
int brig_utpl_start(brigd *d, brig_sandbox *sb, const brig_utpl_run *run, brig_error **err);
/* The same in a sandbox the runtime runs that is nobody's yet (a warm pool's), with env
 * (borrowed, may be NULL) as the start command's and the ready check's environment. */
int brig_utpl_start_rt(brigd *d, brig_rt_sandbox *rt, const brig_utpl_run *run, json_t *env,
                       brig_error **err);

#endif
