/*
 * usertpl_reap.h - what a brigd that died during users' template builds (SIGKILL, a crash)
 * left of them, removed at the next start: the builds' sandboxes, which would otherwise be
 * re-attached as ordinary sandboxes of the account and run on (billed) until their idle
 * timeout, and the temporary directories of layers being published.  A clean stop needs
 * none of it (usertpl_build.h: brig_utpl_builds_stop).
 */
#ifndef BRIG_USERTPL_REAP_H
#define BRIG_USERTPL_REAP_H

#include <stdbool.h>

#include "server.h"

/* Marks sandbox id as a build's (on) from its create to its delete (off): a file in
 * STATE/utpl-builds/. */
void brig_utpl_build_mark(brigd *d, const char *id, bool on);

/* At start-up, after the sandboxes of the previous run were re-attached and before any
 * build can start: ends the marked sandboxes (lost_on_restart) and removes the layers'
 * temporary directories (STATE/templates/ACCOUNT/.KEY-tmp_…). */
void brig_utpl_builds_reap(brigd *d);

#endif
