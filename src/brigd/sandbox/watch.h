/*
 * watch.h - the watch on running sandboxes' inits: an agent that dies while its
 * sandbox runs ends the sandbox at once (reason agent_lost).
 *
 * Every running sandbox's init (its agent) is in one epoll set through the runtime's
 * exit fd, EPOLLONESHOT, keyed by the sandbox's serial number rather than a pointer
 * (the sandbox may be gone when its event is read; its fd is closed, which drops it
 * from the set, when the runtime handle is released).  An init that exits while its
 * sandbox is still running died on its own: a DELETE and brigd's own stops mark it
 * deleting before they kill it.  What ends the sandbox is the caller's `lost`
 * (orchestrator.c), so the watch calls nothing above it.
 */
#ifndef BRIG_WATCH_H
#define BRIG_WATCH_H

#include "error.h"
#include "registry.h"
#include "server.h"

/* Called on the watch's thread with the id of a running sandbox whose agent died. */
typedef void (*brig_watch_lost_fn)(brigd *d, const char *id);

/* Start before reconcile (re-attached sandboxes are watched), stop before forgetting
 * them. */
int brig_watch_start(brigd *d, brig_watch_lost_fn lost, brig_error **err);
void brig_watch_stop(brigd *d);

/* Watches a sandbox that just became running (create, reconcile, resume: a restored
 * checkpoint has a new init); nothing without a watch. */
void brig_watch_add(brigd *d, brig_sandbox *sb);

#endif
