/*
 * settings.c - defaults, INI file and flags (see settings.h).
 *
 * The INI file has one [brigd] section whose keys are the long flag names with
 * '_' for '-':  listen, state_dir, template_cache, templates_dir, agent_path,
 * oci_runtime, default_template, exec_timeout_default, exec_timeout_max
 * (seconds), output_limit_bytes, exec_output_budget, exec_output_budget_per_account,
 * max_file_bytes, max_secrets, max_secret_bytes, pids_limit, pty_max, tcp_memory_mib, uid_base,
 * uid_ranges, max_connections, max_waiting_connections, max_waiting_per_address, header_timeout,
 * body_timeout (seconds), max_requests_per_account,
 * default_tariff, log_level, initial_credit_micro_usd, max_live_per_account, max_sandboxes,
 * memory_overcommit and disk_overcommit (ratios), disk_reserve_mib, and in
 * seconds: create_queue_timeout, idle_timeout_default, idle_timeout_max, lifetime_default,
 * lifetime_max, cpu_abuse_window, billing_interval, retention; and for sandbox networking
 * net_pool, dns_upstream, network, dns_grants_max, dns_ttl_max (seconds),
 * net_connections_max. Tariffs are sections [tariff.NAME] with vcpus, memory_mib, disk_mib and
 * price_micro_usd_per_second; small, medium and large exist by default.
 */
#include "settings.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "money.h"
#include "util.h"

static void set_str(char **slot, const char *v)
{
    free(*slot);
    *slot = brig_xstrdup(v);
}

static int parse_int(const char *v, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

/* Applies one key = value; returns 0 or -1 with *err set. */
static int apply(brig_config *cfg, const char *key, const char *v, brig_error **err)
{
    struct {
        const char *name;
        char **slot;
    } strs[] = {
        {"listen", &cfg->listen},
        {"state_dir", &cfg->state_dir},
        {"template_cache", &cfg->template_cache},
        {"templates_dir", &cfg->templates_dir},
        {"agent_path", &cfg->agent_path},
        {"oci_runtime", &cfg->oci_runtime},
        {"default_template", &cfg->default_template},
        {"log_level", &cfg->log_level},
        {"default_tariff", &cfg->default_tariff},
        {"net_pool", &cfg->net_pool},
        {"dns_upstream", &cfg->dns_upstream},
        {"network", &cfg->network},
        {"warm_pool", &cfg->warm_pool},
    };
    struct {
        const char *name;
        int64_t *slot;
        int64_t min, max, scale;
    } ints[] = {
        {"exec_timeout_default", &cfg->exec_timeout_default_ms, 1, 86400, 1000},
        {"exec_timeout_max", &cfg->exec_timeout_max_ms, 1, 7 * 86400, 1000},
        {"output_limit_bytes", &cfg->output_limit_bytes, 1024, INT64_C(1) << 32, 1},
        {"exec_output_budget", &cfg->output_budget, 1 << 20, INT64_C(1) << 40, 1},
        {"exec_output_budget_per_account", &cfg->output_budget_per_account, 1 << 20,
         INT64_C(1) << 40, 1},
        {"max_connections", &cfg->max_connections, 16, 1 << 16, 1},
        {"max_waiting_connections", &cfg->max_waiting_connections, 1, 1 << 16, 1},
        {"max_waiting_per_address", &cfg->max_waiting_per_address, 1, 1 << 16, 1},
        {"header_timeout", &cfg->header_timeout_ms, 1, 3600, 1000},
        {"body_timeout", &cfg->body_timeout_ms, 1, 3600, 1000},
        {"max_requests_per_account", &cfg->max_requests_per_account, 1, 1 << 16, 1},
        {"max_file_bytes", &cfg->max_file_bytes, 1, INT64_C(1) << 50, 1},
        {"max_secrets", &cfg->max_secrets, 1, 10000, 1},
        {"max_secret_bytes", &cfg->max_secret_bytes, 4, 16 << 20, 1},
        {"pids_limit", &cfg->pids_limit, 8, 1 << 22, 1},
        {"pty_max", &cfg->pty_max, 1, 4096, 1},
        {"tcp_memory_mib", &cfg->tcp_memory_mib, 1, 1 << 20, 1},
        {"uid_base", &cfg->uid_base, 65536, INT64_C(1) << 31, 1},
        {"uid_ranges", &cfg->uid_ranges, 1, 1 << 14, 1},
        {"initial_credit_micro_usd", &cfg->initial_credit_micro_usd, 0, BRIG_CREDIT_MAX, 1},
        {"max_live_per_account", &cfg->max_live_per_account, 1, 1 << 20, 1},
        {"max_sandboxes", &cfg->max_sandboxes, 1, 1 << 20, 1},
        {"disk_reserve_mib", &cfg->disk_reserve_mib, 0, INT64_C(1) << 40, 1},
        {"create_queue_timeout", &cfg->create_queue_timeout_ms, 0, 3600, 1000},
        {"idle_timeout_default", &cfg->idle_timeout_default_ms, 1, 7 * 86400, 1000},
        {"idle_timeout_max", &cfg->idle_timeout_max_ms, 1, 30 * 86400, 1000},
        {"lifetime_default", &cfg->lifetime_default_ms, 1, 30 * 86400, 1000},
        {"lifetime_max", &cfg->lifetime_max_ms, 1, 365 * 86400, 1000},
        {"cpu_abuse_window", &cfg->cpu_abuse_window_ms, 1, 7 * 86400, 1000},
        {"billing_interval", &cfg->billing_interval_ms, 1, 3600, 1000},
        {"retention", &cfg->retention_ms, 0, 365 * 86400, 1000},
        {"dns_grants_max", &cfg->dns_grants_max, 32, 1 << 20, 1},
        {"dns_ttl_max", &cfg->dns_ttl_max, 10, 86400, 1},
        {"net_connections_max", &cfg->net_connections_max, 16, 1 << 20, 1},
    };
    struct {
        const char *name;
        double *slot, min;
    } ratios[] = {
        {"memory_overcommit", &cfg->memory_overcommit, 0.1},
        {"disk_overcommit", &cfg->disk_overcommit, 0.001},
    };
    for (size_t i = 0; i < BRIG_ARRAY_LEN(ratios); i++) {
        if (strcmp(key, ratios[i].name) != 0)
            continue;
        char *end = NULL;
        double r = strtod(v, &end);
        if (end == v || *end != '\0' || !(r == 0 || (r >= ratios[i].min && r <= 1000)))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "%s: '%s' is not 0 (no bound) or a ratio in [%g, 1000]", key, v,
                                  ratios[i].min);
        *ratios[i].slot = r;
        return 0;
    }
    for (size_t i = 0; i < BRIG_ARRAY_LEN(strs); i++) {
        if (strcmp(key, strs[i].name) == 0) {
            if (*v == '\0')
                return brig_error_set(err, BRIG_E_INVALID, 0, "%s must not be empty", key);
            set_str(strs[i].slot, v);
            return 0;
        }
    }
    for (size_t i = 0; i < BRIG_ARRAY_LEN(ints); i++) {
        if (strcmp(key, ints[i].name) == 0) {
            int64_t n;
            if (parse_int(v, ints[i].min, ints[i].max, &n) < 0)
                return brig_error_set(err, BRIG_E_INVALID, 0,
                                      "%s: '%s' is not an integer in [%lld, %lld]", key, v,
                                      (long long)ints[i].min, (long long)ints[i].max);
            *ints[i].slot = n * ints[i].scale;
            return 0;
        }
    }
    return brig_error_set(err, BRIG_E_INVALID, 0, "unknown setting '%s'", key);
}

struct ini_ctx {
    brig_config *cfg;
    brig_error **err;
};

const brig_tariff *brig_config_tariff(const brig_config *cfg, const char *name)
{
    for (int i = 0; name && i < cfg->n_tariffs; i++)
        if (strcmp(cfg->tariffs[i].name, name) == 0)
            return &cfg->tariffs[i];
    return NULL;
}

/* [tariff.NAME]: vcpus, memory_mib, disk_mib, price_micro_usd_per_second.  A
 * section for an existing name changes it; a new name adds a tariff. */
static int apply_tariff(brig_config *cfg, const char *tname, const char *key, const char *v,
                        brig_error **err)
{
    size_t n = strlen(tname);
    if (n == 0 || n >= sizeof(cfg->tariffs[0].name) ||
        strspn(tname, "abcdefghijklmnopqrstuvwxyz"
                      "0123456789-_") != n)
        return brig_error_set(err, BRIG_E_INVALID, 0, "bad tariff name '%s'", tname);
    brig_tariff *t = (brig_tariff *)brig_config_tariff(cfg, tname);
    if (t == NULL) {
        if (cfg->n_tariffs == BRIG_MAX_TARIFFS)
            return brig_error_set(err, BRIG_E_INVALID, 0, "at most %d tariffs", BRIG_MAX_TARIFFS);
        t = &cfg->tariffs[cfg->n_tariffs++];
        *t = (brig_tariff){.vcpus = 1, .memory_mib = 512, .disk_mib = 2048};
        snprintf(t->name, sizeof(t->name), "%s", tname);
    }
    if (strcmp(key, "vcpus") == 0) {
        char *end = NULL;
        double d = strtod(v, &end);
        if (end == v || *end != '\0' || !(d >= 0.01 && d <= 1024))
            return brig_error_set(err, BRIG_E_INVALID, 0, "vcpus: '%s' is not in [0.01, 1024]", v);
        t->vcpus = d;
        return 0;
    }
    struct {
        const char *name;
        int64_t *slot, min, max;
    } ints[] = {
        {"memory_mib", &t->memory_mib, 16, 1 << 22},
        {"disk_mib", &t->disk_mib, 64, 1 << 24},
        {"price_micro_usd_per_second", &t->price_micro_usd, 0, INT64_C(1) << 40},
    };
    for (size_t i = 0; i < BRIG_ARRAY_LEN(ints); i++) {
        if (strcmp(key, ints[i].name) == 0) {
            if (parse_int(v, ints[i].min, ints[i].max, ints[i].slot) < 0)
                return brig_error_set(err, BRIG_E_INVALID, 0, "%s: '%s' is not in [%lld, %lld]",
                                      key, v, (long long)ints[i].min, (long long)ints[i].max);
            return 0;
        }
    }
    return brig_error_set(err, BRIG_E_INVALID, 0, "unknown tariff setting '%s'", key);
}

/* warm_pool = TEMPLATE:TARIFF:COUNT[,…] (after the tariffs are known). */
static int parse_warm_pool(brig_config *cfg, brig_error **err)
{
    _cleanup_free_ char *s = brig_xstrdup(cfg->warm_pool);
    char *save = NULL;
    cfg->n_pool = 0;
    for (char *item = strtok_r(s, ", ", &save); item; item = strtok_r(NULL, ", ", &save)) {
        char tmpl[64], tariff[32];
        int n = 0, used = 0;
        if (sscanf(item, "%63[^:]:%31[^:]:%d%n", tmpl, tariff, &n, &used) != 3 ||
            item[used] != '\0' || n < 0 || n > 1000)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "warm_pool: '%s' is not TEMPLATE:TARIFF:COUNT", item);
        if (brig_config_tariff(cfg, tariff) == NULL)
            return brig_error_set(err, BRIG_E_INVALID, 0, "warm_pool: no tariff '%s'", tariff);
        if (cfg->n_pool == (int)BRIG_ARRAY_LEN(cfg->pool))
            return brig_error_set(err, BRIG_E_INVALID, 0, "warm_pool: at most %zu entries",
                                  BRIG_ARRAY_LEN(cfg->pool));
        snprintf(cfg->pool[cfg->n_pool].template, sizeof(cfg->pool[0].template), "%s", tmpl);
        snprintf(cfg->pool[cfg->n_pool].tariff, sizeof(cfg->pool[0].tariff), "%s", tariff);
        cfg->pool[cfg->n_pool++].count = n;
    }
    return 0;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *c = user;
    if (strncmp(section, "tariff.", 7) == 0)
        return apply_tariff(c->cfg, section + 7, name, value, c->err) == 0;
    if (strcmp(section, "brigd") != 0)
        return brig_error_set(c->err, BRIG_E_INVALID, 0, "unknown section [%s]", section), 0;
    return apply(c->cfg, name, value, c->err) == 0;
}

/* Directory of the running executable, for defaults next to it. */
static char *exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0)
        return brig_xstrdup(".");
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    return brig_xstrdup(buf);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: brigd [--listen HOST:PORT] [--state-dir DIR] [--config FILE]\n"
               "             [--template-cache DIR] [--templates-dir DIR] [--agent PATH]\n"
               "             [--oci-runtime auto|runc|crun|runsc|PATH] [--log-level LEVEL]\n"
               "             [--ready-fd N]\n"
               "       brigd --destroy-all [--state-dir DIR] [--config FILE]\n"
               "Runs the brig sandbox daemon.  --destroy-all ends every live sandbox of\n"
               "the state dir (a brigd must not be serving it) and exits.\n"
               "See docs/operations.md.\n");
}

int brig_config_load(brig_config *cfg, int argc, char **argv, brig_error **err)
{
    memset(cfg, 0, sizeof(*cfg));
    _cleanup_free_ char *dir = exe_dir();
    cfg->listen = brig_xstrdup("127.0.0.1:7070");
    cfg->state_dir = brig_xstrdup("/var/lib/brig");
    cfg->template_cache = brig_xstrdup("/var/cache/brig/templates");
    cfg->templates_dir = brig_asprintf("%s/../templates", dir);
    cfg->agent_path = brig_asprintf("%s/brig-agent", dir);
    cfg->oci_runtime = brig_xstrdup("auto");
    cfg->default_template = brig_xstrdup("base");
    cfg->log_level = brig_xstrdup("info");
    cfg->exec_timeout_default_ms = 55000;
    cfg->exec_timeout_max_ms = 3600 * 1000;
    cfg->output_limit_bytes = 10 << 20;
    cfg->output_budget = INT64_C(1) << 30;
    cfg->output_budget_per_account = 256 << 20;
    cfg->max_connections = 4096;
    cfg->max_waiting_connections = 256;
    cfg->max_waiting_per_address = 64;
    cfg->header_timeout_ms = 10000;
    cfg->body_timeout_ms = 20000;
    cfg->max_requests_per_account = 256;
    cfg->max_file_bytes = INT64_C(8) << 30;
    cfg->max_secrets = 100;
    cfg->max_secret_bytes = 65536;
    cfg->pids_limit = 512;
    cfg->pty_max = 64;
    cfg->tcp_memory_mib = 32;
    static const brig_tariff defaults[] = {
        {"small", 1, 512, 2048, 10},
        {"medium", 2, 2048, 8192, 40},
        {"large", 4, 8192, 32768, 160},
    };
    memcpy(cfg->tariffs, defaults, sizeof(defaults));
    cfg->n_tariffs = (int)BRIG_ARRAY_LEN(defaults);
    cfg->default_tariff = brig_xstrdup("small");
    cfg->initial_credit_micro_usd = 1000000;
    cfg->max_live_per_account = 20;
    cfg->max_sandboxes = 500;
    cfg->memory_overcommit = 16;
    cfg->disk_overcommit = 1;
    cfg->disk_reserve_mib = 1024;
    cfg->create_queue_timeout_ms = 30000;
    cfg->idle_timeout_default_ms = 300000;
    cfg->idle_timeout_max_ms = 86400000;
    cfg->lifetime_default_ms = 3600000;
    cfg->lifetime_max_ms = 86400000;
    cfg->cpu_abuse_window_ms = 900000;
    cfg->billing_interval_ms = 10000;
    cfg->retention_ms = INT64_C(7) * 86400000;
    cfg->net_pool = brig_xstrdup("10.201.0.0/16");
    cfg->dns_grants_max = 2048;
    cfg->dns_ttl_max = 3600;
    cfg->net_connections_max = 1024;
    cfg->network = brig_xstrdup("on");
    cfg->warm_pool = brig_xstrdup("");
    cfg->uid_base = 10000000;
    cfg->uid_ranges = 4096;
    cfg->ready_fd = -1;

    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"state-dir", required_argument, NULL, 's'},
        {"config", required_argument, NULL, 'c'},
        {"template-cache", required_argument, NULL, 't'},
        {"templates-dir", required_argument, NULL, 'T'},
        {"agent", required_argument, NULL, 'a'},
        {"oci-runtime", required_argument, NULL, 'r'},
        {"log-level", required_argument, NULL, 'L'},
        {"ready-fd", required_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"print-routes", no_argument, NULL, 'P'},
        {"destroy-all", no_argument, NULL, 'D'},
        {NULL, 0, NULL, 0},
    };
    /* Pass 1: --config, --help, --version; the file goes under the flags. */
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 1;
        }
        if (c == 'V') {
            printf("brigd %s\n", BRIG_VERSION);
            return 1;
        }
        if (c == 'P')
            cfg->print_routes = 1;
        if (c == 'D')
            cfg->destroy_all = 1;
        if (c == '?')
            return brig_error_set(err, BRIG_E_INVALID, 0, "unknown or incomplete option '%s'",
                                  argv[optind - 1]);
        if (c == 'c') {
            struct ini_ctx ctx = {cfg, err};
            int r = ini_parse(optarg, ini_cb, &ctx);
            if (r != 0) {
                if (err && *err)
                    brig_error_prefix(err, "%s line %d", optarg, r);
                else if (r < 0)
                    brig_error_set(err, BRIG_E_INVALID, errno, "cannot read config %s", optarg);
                else
                    brig_error_set(err, BRIG_E_INVALID, 0, "%s line %d: syntax error", optarg, r);
                return -1;
            }
        }
    }
    if (optind < argc)
        return brig_error_set(err, BRIG_E_INVALID, 0, "unexpected argument '%s'", argv[optind]);
    /* Pass 2: everything else. */
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (c) {
        case 'l':
            key = "listen";
            break;
        case 's':
            key = "state_dir";
            break;
        case 't':
            key = "template_cache";
            break;
        case 'T':
            key = "templates_dir";
            break;
        case 'a':
            key = "agent_path";
            break;
        case 'r':
            key = "oci_runtime";
            break;
        case 'L':
            key = "log_level";
            break;
        case 'R': {
            int64_t fd;
            if (parse_int(optarg, 0, INT_MAX, &fd) < 0)
                return brig_error_set(err, BRIG_E_INVALID, 0, "--ready-fd: bad descriptor");
            cfg->ready_fd = (int)fd;
            continue;
        }
        default:
            continue;
        }
        if (apply(cfg, key, optarg, err) < 0)
            return -1;
    }
    if (cfg->idle_timeout_default_ms > cfg->idle_timeout_max_ms ||
        cfg->lifetime_default_ms > cfg->lifetime_max_ms)
        return brig_error_set(err, BRIG_E_INVALID, 0, "a default exceeds its maximum");
    if (parse_warm_pool(cfg, err) < 0)
        return -1;
    if (strcmp(cfg->network, "on") != 0 && strcmp(cfg->network, "off") != 0)
        return brig_error_set(err, BRIG_E_INVALID, 0, "network must be on or off");
    if (brig_config_tariff(cfg, cfg->default_tariff) == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0, "default_tariff '%s' is not a tariff",
                              cfg->default_tariff);
    if (cfg->uid_base + cfg->uid_ranges * 65536 > (INT64_C(1) << 32) - 2)
        return brig_error_set(err, BRIG_E_INVALID, 0, "uid_base + uid_ranges * 65536 exceeds 2^32");
    if (cfg->exec_timeout_default_ms > cfg->exec_timeout_max_ms)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "exec_timeout_default exceeds exec_timeout_max");
    /* The pool's reserve for authenticated requests, and a share that fits the whole. */
    if (cfg->max_waiting_connections >= cfg->max_connections)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_waiting_connections must be below max_connections (the rest "
                              "is kept for authenticated requests)");
    if (cfg->max_waiting_per_address > cfg->max_waiting_connections)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_waiting_per_address exceeds max_waiting_connections");
    if (cfg->max_requests_per_account > cfg->max_connections)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_requests_per_account exceeds max_connections");
    if (cfg->output_budget_per_account > cfg->output_budget)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "exec_output_budget_per_account exceeds exec_output_budget");
    return 0;
}

void brig_config_dispose(brig_config *cfg)
{
    free(cfg->listen);
    free(cfg->state_dir);
    free(cfg->template_cache);
    free(cfg->templates_dir);
    free(cfg->agent_path);
    free(cfg->oci_runtime);
    free(cfg->default_template);
    free(cfg->log_level);
    free(cfg->default_tariff);
    free(cfg->net_pool);
    free(cfg->dns_upstream);
    free(cfg->network);
    free(cfg->warm_pool);
    memset(cfg, 0, sizeof(*cfg));
}
