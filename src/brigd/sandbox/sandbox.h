/*
 * sandbox.h - what the layers above (api/, main.c) use of sandbox/: include this one.
 *
 * sandbox/ in modules, each calling only the ones below it:
 *   orchestrator  create (a checklist), delete and brigd's own stops, a new lifetime
 *   pause         pausing and resuming (the driver's freeze)
 *   fork          N sandboxes from one's file system now (a snapshot, then creates)
 *   snapshots     an account's snapshots: a sandbox's file system to start new ones from
 *   view          the API's JSON of sandboxes; why a request's sandbox went away
 *   janitor       lifetimes, idleness, CPU abuse, billing ticks
 *   reconcile     start-up: the registry made to agree with the store and the runtime
 *   pool          warm sandboxes, started ahead of demand
 *   teardown      the host side of ended sandboxes, retried until done
 *   watch         an agent that dies ends its sandbox (agent_lost)
 *   attach        a sandbox's network
 *   timeline      its audit timeline: recording its events, reading them back
 *   usage         what it uses, sampled into a ring; its black box once ended
 *   secrets       its secrets, their redactor, the environment of its commands
 *   spares        agent connections opened ahead of use (brig_sandbox_connect)
 *   registry      the one owner of live sandboxes: borrowing, state, uid ranges
 *   template      the root filesystems sandboxes start from
 *   volumes       a project's volumes; volmounts: which sandbox mounts which
 */
#ifndef BRIG_SANDBOX_H
#define BRIG_SANDBOX_H

#include "attach.h"
#include "fork.h"
#include "orchestrator.h"
#include "pause.h"
#include "registry.h"
#include "secrets.h"
#include "snapshots.h"
#include "spares.h"
#include "timeline.h"
#include "usage.h"
#include "view.h"
#include "volumes.h"

#endif
