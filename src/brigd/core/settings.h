/*
 * settings.h - brigd's configuration: defaults, an optional INI file (libinih) and
 * command-line overrides, in that order.  Read-only once brigd has started.  Every
 * setting is one row of the table in settings.c.
 */
#ifndef BRIG_SETTINGS_H
#define BRIG_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* What a sandbox may use, and what a second of it costs. */
typedef struct brig_tariff {
    char name[32];
    double vcpus;            /* CPU quota in CPUs */
    int64_t memory_mib;      /* memory limit (no swap) */
    int64_t disk_mib;        /* writable layer */
    int64_t price_micro_usd; /* per second of life */
} brig_tariff;

#define BRIG_MAX_TARIFFS 16

/* The settings of brigd, filled by brig_config_load.  Each field's key, flag, default,
 * range and unit are its row in settings.c's table (also `brigd --print-settings`);
 * the comments here say only what the field holds. */
typedef struct brig_config {
    char *listen;         /* "HOST:PORT" of the API */
    char *state_dir;      /* the store, keys and sandboxes */
    char *template_cache; /* built root filesystems */
    char *templates_dir;  /* template specs + builder */
    char *agent_path;     /* the brig-agent binary */
    char *oci_runtime;    /* "auto" | "runc" | "crun" | a path */
    char *runsc;          /* "auto" | a path */
    char *runsc_platform; /* "systrap" | "ptrace" | "kvm" */
    char *runsc_overlay;  /* "self" | "memory" | "none": where the root's writes live */
    char *runsc_directfs; /* "on" | "off" */
    char *microvm_accel;  /* "kvm" | "tcg": how isolation "microvm" runs (tcg: emulated) */
    char *microvm_kernel; /* the guest kernel's directory (scripts/setup-vm) */
    char *default_template;
    char *microvm_memsnap; /* "on" | "off": microVMs start from memory snapshots */
    int64_t exec_timeout_default_ms;
    int64_t exec_timeout_max_ms;           /* per-call ceiling */
    int64_t output_limit_bytes;            /* per stream of a buffered exec result */
    int64_t output_budget;                 /* bytes all buffered exec results hold */
    int64_t output_budget_per_account;     /* of those, one account's */
    int64_t max_connections;               /* API connections (a thread each) */
    int64_t max_waiting_connections;       /* of those, not authenticated */
    int64_t max_waiting_per_address;       /* of those, from one address (IPv6: /64) */
    int64_t header_timeout_ms;             /* a waiting connection's deadline */
    int64_t body_timeout_ms;               /* a JSON body's deadline after its head */
    int64_t max_requests_per_account;      /* authenticated requests in flight */
    int64_t max_file_bytes;                /* largest upload (file or tar) */
    int64_t max_secrets;                   /* secrets per sandbox */
    int64_t max_secret_bytes;              /* their values together, per sandbox */
    int64_t pids_limit;                    /* per sandbox */
    int64_t pty_max;                       /* ptys per sandbox (its devpts max=) */
    int64_t tcp_memory_mib;                /* TCP buffer memory per sandbox (cgroup v1) */
    int64_t uid_base;                      /* first host uid of sandbox ranges */
    int64_t uid_ranges;                    /* how many 65536-id ranges (max live sandboxes) */
    brig_tariff tariffs[BRIG_MAX_TARIFFS]; /* [tariff.NAME] sections; small/medium/large */
    int n_tariffs;
    char *default_tariff;
    char *isolation_default; /* "container" | "gvisor": a create's without one (a project's wins) */
    int64_t initial_credit_micro_usd; /* a new account's credit */
    int64_t max_live_per_account;     /* live sandboxes per account */
    int64_t max_sandboxes;            /* live sandboxes on this host */
    double memory_overcommit;         /* live sandboxes' memory limits <= this x RAM; 0: no bound */
    double disk_overcommit;   /* live sandboxes' disks <= this x (the state dir's free space at
                                 start - disk_reserve_mib); 0: no bound */
    int64_t disk_reserve_mib; /* free space kept for the store and logs; creates are refused
                                 while the state dir's file system has less */
    int64_t volume_max_mib;   /* the largest volume */
    int64_t volume_mib_per_account;              /* an account's volumes together */
    int64_t volume_price_micro_usd_per_gib_hour; /* what volumes cost (0: nothing) */
    int64_t pause_price_micro_usd_per_gib_s;     /* a paused sandbox's (0: nothing) */
    int64_t snapshot_price_micro_usd_per_gib_s;  /* a snapshot's data (0: nothing) */
    int64_t paused_max_age_ms;       /* a paused sandbox is deleted after this (paused_too_long) */
    int64_t create_queue_timeout_ms; /* how long a create waits for host capacity */
    int64_t idle_timeout_default_ms;
    int64_t idle_timeout_max_ms;
    int64_t lifetime_default_ms;
    int64_t lifetime_max_ms;
    int64_t cpu_abuse_window_ms;
    int64_t billing_interval_ms; /* incremental charges */
    int64_t retention_ms;        /* ended sandboxes stay queryable */
    int64_t audit_retention_ms;  /* audit events are kept (0: for ever) */
    int64_t metrics_interval_ms; /* between two usage samples of a sandbox */
    char *metrics_listen;        /* HOST:PORT of the unauthenticated /metrics; NULL: none */
    char *net_pool;              /* sandbox link addresses */
    char *dns_upstream;          /* "IP:PORT" of the DNS proxy's upstream; NULL: the host's */
    char *proxy_upstream_ca;     /* CA file the egress proxy trusts upstream too; NULL: none */
    int64_t dns_grants_max;      /* addresses DNS answers keep open per sandbox */
    int64_t dns_ttl_max;         /* seconds one stays open at most */
    int64_t net_connections_max; /* tracked forwarded connections per sandbox */
    char *network;               /* "on" | "off": sandbox networking */
    char *e2b_api;               /* "on" | "off": E2B's API (api/e2b_*.c) */
    char *warm_pool; /* "auto", "off" or "TEMPLATE:TARIFF:COUNT[:ISOLATION],…" (TEMPLATE:
                      * a built-in one, or ACCOUNT/NAME:TAG, a user's) */
    bool pool_auto;  /* warm_pool has "auto": adaptive pools beside pinned ones */
    int64_t warm_pool_memory_mib; /* adaptive pools' memory limits at most; 0: derived */
    int64_t warm_pool_idle_ms;    /* an adaptive pool unused this long shrinks away */
    struct {
        char template[128]; /* a built-in template, or ACCOUNT/NAME:TAG */
        char tariff[32];
        char isolation[16]; /* "container" (when not given) or "gvisor" */
        int count;
    } pool[16]; /* warm_pool, parsed */
    int n_pool;
    int print_routes; /* --print-routes: print the route table and exit */
    int destroy_all;  /* --destroy-all: end every live sandbox of the state dir and exit */
    int ready_fd;     /* --ready-fd: write "ready ADDR\n" here when listening; -1 */
    char *log_level;  /* debug | info | warn | error */
} brig_config;

/* The tariff called name, or NULL. */
const brig_tariff *brig_config_tariff(const brig_config *cfg, const char *name);

/* Fills defaults, then applies the INI file named by `--config` (if any), then the
 * other command-line flags, then checks the settings that bound each other.  Returns 1
 * when the caller should exit 0 (--help, --version or --print-settings was printed), 0
 * to run, -1 on a usage error (message in *err).  Free with brig_config_dispose, in
 * every case. */
int brig_config_load(brig_config *cfg, int argc, char **argv, brig_error **err);

void brig_config_dispose(brig_config *cfg);

#endif
