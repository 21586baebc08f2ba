/*
 * settings_table.c - one row per brigd setting: its key in the config file's [brigd]
 * section, its command-line flag (or none), its type, its default (written as the file
 * would write it), its range, where brig_config keeps it and a line of help.
 * settings.c turns the rows into defaults, parsing, --help and --print-settings.
 *
 * A new setting: a field of brig_config, a row here, a row in docs/operations.md.
 */
#include "settings_internal.h"

#include <stddef.h>

#include "money.h"
#include "util.h"

/* The offset of a field of brig_config; a field of another type than T does not compile. */
#define AT(field, T) _Generic(((brig_config *)0)->field, T : offsetof(brig_config, field))

#define OPT(k, fl, mv, field, d, h)                                                                \
    {                                                                                              \
        .key = k, .flag = fl, .metavar = mv, .type = T_STRING, .def = d, .at = AT(field, char *),  \
        .help = h                                                                                  \
    }
#define STR(k, field, d, h) OPT(k, NULL, NULL, field, d, h)
#define ENUM(k, field, d, ch, h)                                                                   \
    {                                                                                              \
        .key = k, .type = T_ENUM, .def = d, .choices = ch, .at = AT(field, char *), .help = h      \
    }
#define LIST(k, field, d, h)                                                                       \
    {                                                                                              \
        .key = k, .type = T_LIST, .def = d, .at = AT(field, char *), .help = h                     \
    }
#define NUM(t, k, field, d, lo, hi, h)                                                             \
    {                                                                                              \
        .key = k, .type = t, .def = d, .min = lo, .max = hi, .at = AT(field, int64_t), .help = h   \
    }
#define RATIO(k, field, d, lo, hi, h)                                                              \
    {                                                                                              \
        .key = k, .type = T_RATIO, .def = d, .ratio_min = lo, .max = hi, .at = AT(field, double),  \
        .help = h                                                                                  \
    }

#define DAY     86400
#define POW2(n) (INT64_C(1) << (n))

/* In docs/operations.md's order. */
const setting brig_settings[] = {
    OPT("listen", "--listen", "HOST:PORT", listen, "127.0.0.1:7070", "API address"),
    OPT("state_dir", "--state-dir", "DIR", state_dir, "/var/lib/brig",
        "database, keys and sandboxes"),
    OPT("template_cache", "--template-cache", "DIR", template_cache, "/var/cache/brig/templates",
        "built template root filesystems"),
    OPT("templates_dir", "--templates-dir", "DIR", templates_dir, EXE_DIR "/../templates",
        "template specs and the builder"),
    OPT("agent_path", "--agent", "PATH", agent_path, EXE_DIR "/brig-agent",
        "the agent binary, PID 1 of every sandbox"),
    OPT("oci_runtime", "--oci-runtime", "R", oci_runtime, "auto",
        "runc, crun, a path or auto (isolation container)"),
    OPT("runsc", "--runsc", "PATH", runsc, "auto", "gVisor's runsc or auto (isolation gvisor)"),
    ENUM("runsc_platform", runsc_platform, "systrap", "systrap|ptrace|kvm",
         "how a gVisor sandbox's calls reach its kernel"),
    ENUM("runsc_overlay", runsc_overlay, "self", "self|memory|none",
         "where gVisor keeps the root's writes"),
    ENUM("runsc_directfs", runsc_directfs, "on", "on|off",
         "gVisor's kernel opens the sandbox's files itself"),
    ENUM("microvm_accel", microvm_accel, "kvm", "kvm|tcg",
         "how microVMs run: kvm, or tcg (QEMU's emulation: slow, tests and trials)"),
    STR("microvm_kernel", microvm_kernel, "/usr/lib/brig/vm",
        "the microVMs' guest kernel (scripts/setup-vm)"),
    ENUM("microvm_memsnap", microvm_memsnap, "off", "on|off",
         "microVMs start from a memory snapshot of a booted one (per template and tariff)"),
    OPT("log_level", "--log-level", "L", log_level, "info", "debug, info, warn or error"),
    STR("default_template", default_template, "base", "template of a create without one"),
    NUM(T_SECONDS, "exec_timeout_default", exec_timeout_default_ms, "55", 1, DAY,
        "an exec's timeout when it asks for none"),
    NUM(T_SECONDS, "exec_timeout_max", exec_timeout_max_ms, "3600", 1, 7 * DAY,
        "the largest timeout an exec may ask for"),
    NUM(T_BYTES, "output_limit_bytes", output_limit_bytes, "10485760", 1024, POW2(32),
        "per stream of a buffered exec result"),
    NUM(T_BYTES, "exec_output_budget", output_budget, "1073741824", POW2(20), POW2(40),
        "memory all buffered exec results together may hold"),
    NUM(T_BYTES, "exec_output_budget_per_account", output_budget_per_account, "268435456", POW2(20),
        POW2(40), "of those, one account's"),
    NUM(T_INT, "max_connections", max_connections, "4096", 16, POW2(16),
        "API connections at once (a thread each)"),
    NUM(T_INT, "max_waiting_connections", max_waiting_connections, "256", 1, POW2(16),
        "of those, not yet authenticated"),
    NUM(T_INT, "max_waiting_per_address", max_waiting_per_address, "64", 1, POW2(16),
        "of those, from one address (IPv6: a /64)"),
    NUM(T_SECONDS, "header_timeout", header_timeout_ms, "10", 1, 3600,
        "a connection's time to send a request with a key"),
    NUM(T_SECONDS, "body_timeout", body_timeout_ms, "20", 1, 3600,
        "a JSON body's time after its request's head"),
    NUM(T_INT, "max_requests_per_account", max_requests_per_account, "256", 1, POW2(16),
        "an account's authenticated requests in flight"),
    NUM(T_BYTES, "max_file_bytes", max_file_bytes, "8589934592", 1, POW2(50),
        "the largest upload (a file or a tar stream)"),
    NUM(T_INT, "max_secrets", max_secrets, "100", 1, 10000, "secrets per sandbox"),
    NUM(T_BYTES, "max_secret_bytes", max_secret_bytes, "65536", 4, 16 * POW2(20),
        "one sandbox's secret values together"),
    NUM(T_INT, "pids_limit", pids_limit, "512", 8, POW2(22), "processes per sandbox"),
    NUM(T_INT, "pty_max", pty_max, "64", 1, 4096, "pseudo-terminals per sandbox"),
    NUM(T_MIB, "tcp_memory_mib", tcp_memory_mib, "32", 1, POW2(20),
        "TCP buffer memory per sandbox (cgroup v1)"),
    STR("default_tariff", default_tariff, "small", "tariff of a create without one"),
    ENUM("isolation_default", isolation_default, "container", "container|gvisor",
         "isolation of a create without one (a project's default wins)"),
    NUM(T_INT, "initial_credit_micro_usd", initial_credit_micro_usd, "1000000", 0, BRIG_CREDIT_MAX,
        "a new account's credit"),
    NUM(T_INT, "max_live_per_account", max_live_per_account, "20", 1, POW2(20),
        "a new account's live sandboxes"),
    NUM(T_INT, "max_sandboxes", max_sandboxes, "500", 1, POW2(20), "live sandboxes on this host"),
    RATIO("memory_overcommit", memory_overcommit, "16", 0.1, 1000,
          "live sandboxes' memory limits <= this x RAM; 0: no bound"),
    RATIO("disk_overcommit", disk_overcommit, "1", 0.001, 1000,
          "live sandboxes' disks <= this x (free space - disk_reserve_mib); 0: no bound"),
    NUM(T_MIB, "disk_reserve_mib", disk_reserve_mib, "1024", 0, POW2(40),
        "free space kept for the store and logs"),
    NUM(T_MIB, "volume_max_mib", volume_max_mib, "10240", 16, POW2(22),
        "the largest volume (its size is the kernel's bound)"),
    NUM(T_MIB, "volume_mib_per_account", volume_mib_per_account, "102400", 16, POW2(30),
        "an account's volumes together"),
    NUM(T_INT, "volume_price_micro_usd_per_gib_hour", volume_price_micro_usd_per_gib_hour, "0", 0,
        1000000000, "what a GiB of volume costs an hour (billed per second)"),
    NUM(T_INT, "pause_price_micro_usd_per_gib_s", pause_price_micro_usd_per_gib_s, "0", 0, 1000000,
        "what a paused sandbox costs per GiB of its disk and second (0: nothing)"),
    NUM(T_INT, "snapshot_price_micro_usd_per_gib_s", snapshot_price_micro_usd_per_gib_s, "0", 0,
        1000000, "what a GiB of snapshot data costs a second (0: nothing)"),
    NUM(T_SECONDS, "paused_max_age", paused_max_age_ms, "86400", 1, 365 * DAY,
        "how long a sandbox stays paused before it is deleted (paused_too_long)"),
    NUM(T_SECONDS, "create_queue_timeout", create_queue_timeout_ms, "30", 0, 3600,
        "how long a create waits for capacity"),
    NUM(T_SECONDS, "idle_timeout_default", idle_timeout_default_ms, "300", 1, 7 * DAY,
        "a sandbox's idle timeout when it asks for none"),
    NUM(T_SECONDS, "idle_timeout_max", idle_timeout_max_ms, "86400", 1, 30 * DAY,
        "the largest idle timeout"),
    NUM(T_SECONDS, "lifetime_default", lifetime_default_ms, "3600", 1, 30 * DAY,
        "a sandbox's lifetime when it asks for none"),
    NUM(T_SECONDS, "lifetime_max", lifetime_max_ms, "86400", 1, 365 * DAY, "the largest lifetime"),
    NUM(T_SECONDS, "cpu_abuse_window", cpu_abuse_window_ms, "900", 1, 7 * DAY,
        "time at >= 95% of the CPU quota before a sandbox is stopped"),
    NUM(T_SECONDS, "billing_interval", billing_interval_ms, "10", 1, 3600,
        "time between incremental charges"),
    NUM(T_SECONDS, "retention", retention_ms, "604800", 0, 365 * DAY,
        "how long an ended sandbox stays queryable"),
    NUM(T_SECONDS, "audit_retention", audit_retention_ms, "2592000", 0, 3650 * DAY,
        "how long audit timeline events are kept; 0: for ever"),
    NUM(T_SECONDS, "metrics_interval", metrics_interval_ms, "5", 1, 3600,
        "time between two samples of each sandbox's usage"),
    STR("metrics_listen", metrics_listen, NULL,
        "HOST:PORT of an unauthenticated /metrics listener; unset: none"),
    STR("net_pool", net_pool, "10.201.0.0/16", "addresses of sandbox links"),
    STR("dns_upstream", dns_upstream, NULL, "IP[:PORT] the DNS proxy forwards to"),
    STR("proxy_upstream_ca", proxy_upstream_ca, NULL,
        "a CA file the egress proxy trusts upstream besides the host's store"),
    ENUM("network", network, "on", "on|off", "off: sandboxes get loopback only"),
    ENUM("e2b_api", e2b_api, "on", "on|off", "E2B's API and envd on the listener (docs/e2b.md)"),
    NUM(T_INT, "dns_grants_max", dns_grants_max, "2048", 32, POW2(20),
        "addresses DNS answers keep open per sandbox"),
    NUM(T_INT, "dns_ttl_max", dns_ttl_max, "3600", 10, DAY,
        "seconds such an address stays open at most"),
    NUM(T_INT, "net_connections_max", net_connections_max, "1024", 16, POW2(20),
        "tracked forwarded connections per sandbox"),
    LIST("warm_pool", warm_pool, "auto",
         "auto, off, or TEMPLATE:TARIFF:COUNT[:ISOLATION][,...] (with auto: pinned beside it)"),
    NUM(T_MIB, "warm_pool_memory_mib", warm_pool_memory_mib, "0", 0, POW2(30),
        "memory limits adaptive pools may hold; 0: an eighth of the memory budget"),
    NUM(T_SECONDS, "warm_pool_idle", warm_pool_idle_ms, "600", 1, 30 * DAY,
        "an adaptive pool unused this long shrinks to nothing"),
    NUM(T_INT, "uid_base", uid_base, "10000000", 65536, POW2(31),
        "first host uid of sandbox uid ranges"),
    NUM(T_INT, "uid_ranges", uid_ranges, "4096", 1, POW2(14),
        "uid ranges of 65536 (the most live sandboxes)"),
};

const size_t brig_settings_len = BRIG_ARRAY_LEN(brig_settings);
_Static_assert(BRIG_ARRAY_LEN(brig_settings) <= BRIG_SETTINGS_MAX, "raise BRIG_SETTINGS_MAX");
