/*
 * server.h - brigd's one mutable root.  Every module that needs daemon state takes
 * a `brigd *` as its first argument; nothing else is global.
 */
#ifndef BRIG_SERVER_H
#define BRIG_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "account/admission.h"
#include "core/settings.h"
#include "runtime/runtime.h"
#include "store/store.h"

typedef struct brig_sandbox brig_sandbox;
typedef struct brig_registry brig_registry;
typedef struct brig_teardown brig_teardown;
typedef struct brig_watch brig_watch;
typedef struct brig_vault brig_vault;
typedef struct brig_net brig_net;
struct MHD_Daemon;

typedef struct brigd {
    brig_config cfg;          /* parsed at start-up, read-only afterwards */
    brig_store *store;        /* SQLite: accounts, projects, keys, sandboxes, ledger, secrets */
    brig_vault *vault;        /* seals secrets at rest */
    brig_runtime *rt;         /* the sandbox runtime driver (oci) */
    brig_net *net;            /* sandbox networking: the none flavour when off or unavailable */
    brig_admission admission; /* host capacity, shared fairly between accounts */
    brig_registry *registry;  /* live sandboxes, their uid ranges (sandbox/registry.c) */
    const struct brig_cgroup_ops *cgroup; /* the host cgroup flavour */
    struct brig_quota *exec_output;       /* memory that buffered exec results hold */
    struct brig_worker *janitor; /* idle/lifetime/CPU-abuse/billing ticks (sandbox/janitor.c) */
    struct brig_builds *builds;  /* template builds running or recently ended (build.c) */
    struct brig_pool *pool;      /* warm sandboxes ready to be claimed; NULL: no pool */
    struct brig_worker *spares;  /* closes idle sandboxes' spare agent connections (spares.c) */
    struct MHD_Daemon *http;     /* the REST API server */
    char *base_url;              /* "http://host:port" actually listened on */
    int state_lock;              /* flock on <state>/brigd.lock: one brigd per state dir */
    /* The host-side cleanup of ended sandboxes, after the caller got its answer, on a
     * few workers (sandbox/teardown.c); NULL: not started (one attempt on the spot). */
    brig_teardown *teardown;
    brig_watch *watch;          /* the watch on sandboxes' inits (sandbox/watch.c); NULL: none */
    struct brig_probes *probes; /* the janitor's idle probes in flight (sandbox/janitor.c) */
    struct brig_audit *audit;   /* the audit timeline's writer (audit/audit.c) */
    int64_t audit_pruned_at;    /* when the janitor last pruned it (ms since the epoch) */
    struct brig_usage *usage;   /* each sandbox's usage samples (sandbox/usage.c) */
    struct MHD_Daemon *metrics_http; /* the metrics_listen server; NULL: none */
    struct brig_volmounts *volumes;  /* who mounts which volume (sandbox/volmounts.c) */
    int64_t volumes_billed_at;       /* when the janitor last charged volumes (ms) */
    int64_t snapshots_billed_at;     /* ... and snapshots (ms) */
    char *ca_pem; /* the egress proxy's CA certificate (sandbox/injection.c); NULL: none */
} brigd;

#endif
