/*
 * server.h - brigd's one mutable root.  Every module that needs daemon state takes
 * a `brigd *` as its first argument; nothing else is global.
 */
#ifndef BRIG_SERVER_H
#define BRIG_SERVER_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "runtime/runtime.h"
#include "store.h"

typedef struct brig_sandbox brig_sandbox;
struct MHD_Daemon;

typedef struct brigd {
    brig_config cfg;         /* parsed at start-up, read-only afterwards */
    brig_store *store;       /* SQLite: accounts, keys, sandboxes */
    brig_runtime *rt;        /* the sandbox runtime driver (oci) */
    pthread_mutex_t lock;    /* guards `sandboxes` and every sandbox's state/refs */
    brig_sandbox *sandboxes; /* live sandboxes (creating/running), newest first */
    int n_sandboxes;         /* length of that list */
    uint8_t *uid_used;       /* uid_ranges flags: range i (uid_base + i * 65536) taken; lock */
    const struct brig_cgroup_ops *cgroup; /* the host cgroup flavour */
    struct MHD_Daemon *http;              /* the REST API server */
    char *base_url;                       /* "http://host:port" actually listened on */
} brigd;

#endif
