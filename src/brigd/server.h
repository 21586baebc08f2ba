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

#define BRIG_TEARDOWN_WORKERS 4

typedef struct brig_sandbox brig_sandbox;
typedef struct brig_reservation brig_reservation;
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
    pthread_mutex_t lock;     /* guards `sandboxes`, `reserving`, every sandbox's
                                 state/refs/lifecycle fields and uid_used */
    brig_sandbox *sandboxes;  /* live sandboxes (creating/running), newest first */
    int n_sandboxes;          /* length of that list */
    struct brig_reservation *reserving; /* creates counted against their account's
                                           concurrency limit, not listed yet (sandbox.c) */
    int ops_inflight;       /* API requests using a sandbox right now (creates included) */
    int64_t ops_idle_since; /* mono ms: when the last of them ended (or a pool claim) */
    uint8_t *uid_used;      /* uid_ranges flags: range i (uid_base + i * 65536) taken */
    const struct brig_cgroup_ops *cgroup; /* the host cgroup flavour */
    struct brig_quota *exec_output;       /* memory that buffered exec results hold */
    pthread_t janitor; /* idle/lifetime/CPU-abuse/billing ticks (sandbox/janitor.c) */
    pthread_mutex_t janitor_lock;
    pthread_cond_t janitor_cond;
    bool janitor_stop; /* guarded by janitor_lock */
    bool janitor_running;
    /* Template builds running or recently ended (sandbox/build.c). */
    struct brig_builds *builds;
    struct brig_pool *pool;  /* warm sandboxes ready to be claimed; NULL: no pool */
    struct MHD_Daemon *http; /* the REST API server */
    char *base_url;          /* "http://host:port" actually listened on */
    int state_lock;          /* flock on <state>/brigd.lock: one brigd per state dir */
    /* The host-side cleanup of ended sandboxes, after the caller got its answer, on a
     * few workers, each attempt bounded and retried with backoff (sandbox.c): */
    pthread_t teardown[BRIG_TEARDOWN_WORKERS];
    int teardown_workers; /* how many of them run */
    pthread_mutex_t teardown_lock;
    pthread_cond_t teardown_cond; /* (monotonic) work queued or due; the queue went idle */
    brig_sandbox *teardown_queue; /* waiting for their next attempt (not the ones a worker has) */
    int teardown_pending;         /* queued or being torn down */
    bool teardown_stop; /* shutdown: one last attempt each, then left for the next start */
    /* The watch on every running sandbox's init (sandbox.c): its death ends the sandbox. */
    pthread_t watcher;
    int watch_epfd;        /* epoll over the inits' exit fds; -1 when not started */
    int watch_wake;        /* eventfd that stops the watcher; -1 when not started */
    uint64_t watch_serial; /* the last key handed out (guarded by lock) */
    bool watch_running;
    struct brig_probes *probes; /* the janitor's idle probes in flight (sandbox/janitor.c) */
} brigd;

#endif
