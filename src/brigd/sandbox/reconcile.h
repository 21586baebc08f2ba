/*
 * reconcile.h - start-up: brigd's registry made to agree with the store and the runtime.
 */
#ifndef BRIG_RECONCILE_H
#define BRIG_RECONCILE_H

#include "server.h"

/* Re-attaches the running sandboxes of a previous run (listed and watched again, their
 * network and capacity taken back) and destroys everything else the runtime still
 * holds: rows left creating, or whose sandbox died, are charged and marked deleted
 * (lost_on_restart; host_reboot when the host booted since the last run, told by the boot
 * id recorded in the state dir), rows left deleting keep the reason they were ending for,
 * and what the store does not know goes.  A
 * cleanup that fails is retried on the teardown.  Never fails start-up for one bad
 * sandbox.  Needs the teardown and the watch started. */
void brig_reconcile(brigd *d);

#endif
