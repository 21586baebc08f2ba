/*
 * main.c - brigd: start-up in a fixed order, serve until SIGTERM/SIGINT, shut down.
 *
 * Start-up order (each step's failure ends start-up with a message):
 *   signals blocked + subreaper + reaper thread (before any other thread exists)
 *   -> config -> state dir (and its lock) -> store -> runtime driver -> network
 *   -> reconcile sandboxes of a previous run -> HTTP server -> first admin key
 *   -> "ready".  --destroy-all stops after reconcile: it ends every sandbox.
 * On shutdown, running sandboxes are left alone: the next start re-attaches them.
 */
#include <errno.h>
#include <malloc.h>
#include <sodium.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "api/routes.h"
#include "audit/audit.h"
#include "account/bootstrap.h"
#include "runtime/cgroup.h"
#include "core/settings.h"
#include "api/http.h"
#include "sandbox/build.h"
#include "sandbox/injection.h"
#include "sandbox/janitor.h"
#include "sandbox/pool.h"
#include "sandbox/usertpl_build.h"
#include "sandbox/reconcile.h"
#include "sandbox/usertpl_reap.h"
#include "sandbox/teardown.h"
#include "sandbox/timeline.h"
#include "sandbox/watch.h"
#include "net/net.h"
#include "vault/vault.h"
#include "log.h"
#include "runtime/spawn.h"
#include "account/quota.h"
#include "sandbox/sandbox.h"
#include "server.h"

static brig_log_level parse_level(const char *s)
{
    if (strcmp(s, "debug") == 0)
        return BRIG_LOG_DEBUG;
    if (strcmp(s, "warn") == 0)
        return BRIG_LOG_WARN;
    if (strcmp(s, "error") == 0)
        return BRIG_LOG_ERROR;
    return BRIG_LOG_INFO;
}

/* Each sandbox holds a few descriptors in brigd (pidfd, directory, agent
 * connections): raise the soft limit to the hard one. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The host's open-file table is one pool for every sandbox: its kernel default
 * (one file per 10 KiB of RAM) lets two sandboxes exhaust it within their memory
 * limits.  Raised as systemd does, so each sandbox's memory cgroup is the bound. */
static void tune_host(void)
{
    static const char path[] = "/proc/sys/fs/file-max", want[] = "9223372036854775807";
    char cur[32] = "";
    FILE *f = fopen(path, "re");
    if (f) {
        if (fgets(cur, sizeof(cur), f) == NULL)
            cur[0] = '\0';
        fclose(f);
    }
    if (strtoll(cur, NULL, 10) >= INT64_MAX)
        return;
    f = fopen(path, "we");
    if (f == NULL || fputs(want, f) < 0 || fclose(f) != 0) {
        brig_warn("cannot raise fs.file-max (%s): sandboxes share a small file table", path);
        return;
    }
    brig_info("raised fs.file-max to %s (was %lld)", want, strtoll(cur, NULL, 10));
}

/* The first integer in a /proc file, or -1. */
static long long proc_ll(const char *path)
{
    char buf[32] = "";
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    if (fgets(buf, sizeof(buf), f) == NULL)
        buf[0] = '\0';
    fclose(f);
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    return end == buf ? -1 : v;
}

#define PTY_MAX_KERNEL (1 << 20) /* NR_UNIX98_PTY_MAX: the most kernel.pty.max takes */

/* The host's pty pool is one for every devpts instance: kernel.pty.max ptys, of which
 * the last kernel.pty.reserve only the host's own /dev/pts may take.  Each sandbox's
 * instance holds at most pty_max (its devpts max=, oci.c); the pool is raised (never
 * lowered) so that max_sandboxes full instances fit in it: no sandbox can take
 * another's ptys.  A pty is kernel memory charged to the sandbox that opened it. */
static int size_pty_pool(const brig_config *cfg, brig_error **err)
{
    static const char path[] = "/proc/sys/kernel/pty/max";
    long long cur = proc_ll(path), reserve = proc_ll("/proc/sys/kernel/pty/reserve");
    if (cur < 0 || reserve < 0) {
        brig_warn("no %s: cannot size the host's pty pool for the sandboxes", path);
        return 0;
    }
    long long want = reserve + (long long)cfg->max_sandboxes * cfg->pty_max;
    if (want > PTY_MAX_KERNEL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_sandboxes (%lld) x pty_max (%lld) + kernel.pty.reserve (%lld) "
                              "is more ptys than the kernel has (%d): lower pty_max or "
                              "max_sandboxes",
                              (long long)cfg->max_sandboxes, (long long)cfg->pty_max, reserve,
                              PTY_MAX_KERNEL);
    if (cur >= want)
        return 0;
    FILE *f = fopen(path, "we");
    if (f == NULL || fprintf(f, "%lld", want) < 0 || fclose(f) != 0) {
        brig_warn("cannot raise kernel.pty.max to %lld (%s): sandboxes share a pool of %lld "
                  "ptys and may take each other's",
                  want, path, cur - reserve);
        return 0;
    }
    brig_info("raised kernel.pty.max to %lld (was %lld): %lld sandboxes x %lld ptys + %lld "
              "reserved for the host",
              want, cur, (long long)cfg->max_sandboxes, (long long)cfg->pty_max, reserve);
    return 0;
}

/* TCP buffers of every sandbox come from one host-wide budget, net.ipv4.tcp_mem (in
 * pages; past its second value every TCP socket of the host is under pressure).  Each
 * sandbox keeps at most 2 x tcp_memory_mib (runtime/cgroup.c, sandbox/janitor.c): says whether one
 * account's sandboxes together stay below that pressure point. */
static void check_tcp_budget(const brig_config *cfg, const brig_cgroup_ops *cg)
{
    long long pages[3] = {-1, -1, -1};
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_mem", "re");
    if (f) {
        if (fscanf(f, "%lld %lld %lld", &pages[0], &pages[1], &pages[2]) != 3)
            pages[1] = -1;
        fclose(f);
    }
    long long pressure_mib = pages[1] < 0 ? -1 : pages[1] * sysconf(_SC_PAGESIZE) / (1 << 20);
    long long account_mib = (long long)cfg->max_live_per_account * 2 * cfg->tcp_memory_mib;
    if (strcmp(cg->name, "v1") == 0 && !cg->tcp_limit)
        brig_warn("cgroup v1 without memory.kmem.tcp: sandboxes' TCP buffers are not bounded");
    else if (cg->tcp_limit && pressure_mib >= 0 && account_mib > pressure_mib)
        brig_warn("max_live_per_account x 2 x tcp_memory_mib = %lld MiB of TCP buffers, more "
                  "than the host's TCP pressure point (net.ipv4.tcp_mem, %lld MiB): one "
                  "account could slow every TCP socket of the host; lower tcp_memory_mib",
                  account_mib, pressure_mib);
}

/* One brigd per state dir: a second one would reconcile the first one's
 * sandboxes as leftovers and destroy them.  The lock lives as long as brigd. */
static int lock_state_dir(const char *dir, brig_error **err)
{
    _cleanup_free_ char *path = brig_asprintf("%s/brigd.lock", dir);
    _cleanup_free_ char *held = brig_asprintf("another brigd is using state dir %s", dir);
    return brig_lock_exclusive(path, held, err);
}

/* How long --destroy-all waits for the host-side cleanups. */
#define DESTROY_ALL_WAIT_MS 60000

/* --destroy-all: every sandbox the store calls live goes, as a DELETE would
 * take it (processes, mounts, network, final charge), with reason
 * destroyed_by_operator. */
static int destroy_all(brigd *d)
{
    size_t n = 0;
    char **ids = brig_registry_ids(d, &n);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (brig_sandbox_stop(d, ids[i], "destroyed_by_operator") < 0)
            failed++;
        free(ids[i]);
    }
    free(ids);
    /* Every sandbox's processes are dead within seconds, unless stuck in the kernel.  The
     * drain also counts the cleanups of leftovers the start found (not among the n). */
    int unfinished = brig_teardown_drain(d, DESTROY_ALL_WAIT_MS);
    brig_info("destroy-all: %zu live sandboxes stopped (%d refused), %d cleanups unfinished", n,
              failed, unfinished);
    return failed + unfinished;
}

/* What the memory limits of live sandboxes may add up to: memory_overcommit x
 * the host's RAM (0: no bound). */
static int64_t memory_budget_mib(const brig_config *cfg)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (cfg->memory_overcommit <= 0 || pages <= 0 || page <= 0)
        return 0;
    int64_t ram_mib = (int64_t)pages * page / (1024 * 1024);
    int64_t budget = (int64_t)((double)ram_mib * cfg->memory_overcommit);
    brig_info("memory budget: %lld MiB (%.2f x %lld MiB of RAM)", (long long)budget,
              cfg->memory_overcommit, (long long)ram_mib);
    return budget > 0 ? budget : 1;
}

/* What the disks of live sandboxes may add up to: disk_overcommit x (the state
 * dir's free space now - disk_reserve_mib) (0: no bound).  Measured once, at
 * start: the space written by re-attached sandboxes is already gone from it,
 * and they are held at their whole disk besides (it errs on the safe side). */
static int64_t disk_budget_mib(const brig_config *cfg)
{
    struct statvfs st;
    if (cfg->disk_overcommit <= 0)
        return 0;
    if (statvfs(cfg->state_dir, &st) < 0) {
        brig_warn("disk budget: statvfs %s: %s; disks are not bounded", cfg->state_dir,
                  strerror(errno));
        return 0;
    }
    int64_t free_mib = (int64_t)(((uint64_t)st.f_bavail * st.f_frsize) >> 20);
    int64_t budget = (int64_t)((double)(free_mib - cfg->disk_reserve_mib) * cfg->disk_overcommit);
    brig_info("disk budget: %lld MiB (%.3f x (%lld MiB free in %s - %lld MiB reserve))",
              (long long)budget, cfg->disk_overcommit, (long long)free_mib, cfg->state_dir,
              (long long)cfg->disk_reserve_mib);
    if (budget <= 0)
        brig_warn("disk budget: the state dir's file system has no room above its reserve; "
                  "no sandbox can be created");
    return budget > 0 ? budget : 1;
}

/* The settings (core/settings.c: defaults, --config FILE, the flags); what only prints
 * (--help, --version, --print-settings, --print-routes) is done here.  Returns -1 to
 * run, else the exit status: 0, or 2 on a usage error. */
static int configure(brig_config *cfg, int argc, char **argv)
{
    brig_error *err = NULL;
    int r = brig_config_load(cfg, argc, argv, &err);
    if (r < 0) {
        fprintf(stderr, "brigd: %s (see brigd --help)\n", err->msg);
        brig_error_clear(&err);
        return 2;
    }
    if (r > 0)
        return 0;
    if (cfg->print_routes) {
        /* The route table is the truth the OpenAPI document is checked against; E2B's
         * routes are E2B's API (docs/e2b.md), not brig's. */
        for (const brig_route *rt = brig_api_routes; rt->method; rt++)
            if (!(rt->flags & (ROUTE_E2B | ROUTE_CONNECT)))
                printf("%s %s\n", rt->method, rt->pattern);
        return 0;
    }
    return -1;
}

/* The runtime driver, from the settings. */
static int runtime_open(brigd *d, brig_error **err)
{
    brig_runtime_config rc = {.state_dir = d->cfg.state_dir,
                              .agent_path = d->cfg.agent_path,
                              .oci_runtime = d->cfg.oci_runtime,
                              .runsc = d->cfg.runsc,
                              .runsc_platform = d->cfg.runsc_platform,
                              .runsc_overlay = d->cfg.runsc_overlay,
                              .runsc_directfs = strcmp(d->cfg.runsc_directfs, "on") == 0,
                              .cgroup = d->cgroup,
                              .pty_max = d->cfg.pty_max,
                              .tcp_memory_mib = d->cfg.tcp_memory_mib,
                              .microvm_accel = d->cfg.microvm_accel,
                              .microvm_kernel = d->cfg.microvm_kernel,
                              .microvm_memsnap = strcmp(d->cfg.microvm_memsnap, "on") == 0};
    return brig_runtime_mux_new(&rc, &d->rt, err);
}

/* Networking is optional: without it sandboxes keep an isolated namespace with
 * loopback only (no egress at all), never an unfiltered one.  So is the egress proxy's
 * CA: one that does not open (another master key: docs/operations.md) leaves HTTPS to
 * hosts with injection rules relayed untouched (their placeholders reach them, never the
 * secrets), said in the log; HTTP injection and everything else work. */
static void net_open(brigd *d)
{
    _cleanup_free_ char *ca_key = NULL;
    brig_error *cerr = NULL;
    if (strcmp(d->cfg.network, "off") != 0 &&
        brig_injection_ca(d, &d->ca_pem, &ca_key, &cerr) < 0) {
        brig_err("egress proxy: no CA, so no HTTPS credential injection: %s", cerr->msg);
        brig_error_clear(&cerr);
    }
    brig_net_config nc = {.state_dir = d->cfg.state_dir,
                          .pool = d->cfg.net_pool,
                          .dns_upstream = d->cfg.dns_upstream,
                          .dns_grants_max = (int)d->cfg.dns_grants_max,
                          .dns_ttl_max = (int)d->cfg.dns_ttl_max,
                          .connections_max = (int)d->cfg.net_connections_max,
                          .ca_cert_pem = d->ca_pem,
                          .ca_key_pem = ca_key,
                          .upstream_ca = d->cfg.proxy_upstream_ca};
    brig_error *nerr = NULL;
    if (strcmp(d->cfg.network, "off") == 0) {
        brig_info("networking off (network = off): sandboxes have loopback only");
        d->net = brig_net_none();
    } else if (brig_net_new(&nc, &d->net, &nerr) < 0) {
        brig_warn("networking off: %s", nerr->msg);
        brig_error_clear(&nerr);
        d->net = brig_net_none();
    }
    if (ca_key)
        explicit_bzero(ca_key, strlen(ca_key));
}

static int run(brigd *d, int sigfd, brig_error **err)
{
    /* 0711: sandbox roots live below it and a sandbox's root is an unprivileged
     * host uid that must be able to traverse to them (but not list them). */
    if ((mkdir(d->cfg.state_dir, 0711) < 0 && errno != EEXIST) || chmod(d->cfg.state_dir, 0711) < 0)
        return brig_error_sys(err, "create state dir %s", d->cfg.state_dir);
    d->state_lock = lock_state_dir(d->cfg.state_dir, err);
    if (d->state_lock < 0)
        return -1;
    tune_host();
    if (size_pty_pool(&d->cfg, err) < 0)
        return -1;
    d->cgroup = brig_cgroup_detect("/sys/fs/cgroup");
    brig_info("cgroups: %s (swap limit: %s, I/O weight: %s, TCP buffer limit: %s)", d->cgroup->name,
              d->cgroup->swap_limit ? "yes" : "no", d->cgroup->io_weight ? "yes" : "no",
              d->cgroup->tcp_limit ? "yes" : "no");
    check_tcp_budget(&d->cfg, d->cgroup);
    brig_registry_init(d);
    _cleanup_free_ char *db = brig_asprintf("%s/brig.db", d->cfg.state_dir);
    if (brig_store_open(&d->store, db, err) < 0)
        return -1;
    if (brig_vault_open(&d->vault, d->cfg.state_dir, err) < 0)
        return -1;
    if (runtime_open(d, err) < 0)
        return -1;
    net_open(d);
    brig_admission_init(&d->admission, d->cfg.max_sandboxes, memory_budget_mib(&d->cfg),
                        disk_budget_mib(&d->cfg));
    d->exec_output = brig_quota_new(d->cfg.output_budget, d->cfg.output_budget_per_account);
    if (brig_audit_start(d->store, &d->audit, err) < 0)
        return -1;
    brig_timeline_init(d); /* before reconcile re-attaches networks: their DNS is recorded */
    if (brig_teardown_start(d, err) < 0 || brig_watch_start(d, brig_sandbox_agent_lost, err) < 0)
        return -1;
    brig_reconcile(d);
    brig_utpl_builds_reap(d); /* a dead brigd's builds: their sandboxes, half-published layers */
    if (d->cfg.destroy_all)
        return destroy_all(d) == 0
                   ? 0
                   : brig_error_set(err, BRIG_E_INTERNAL, 0, "destroy-all: some sandboxes remain");
    if (brig_janitor_start(d, err) < 0 || brig_pool_start(d, err) < 0 ||
        brig_spares_start(d, err) < 0)
        return -1;
    brig_builds_init(d);
    if (brig_http_start(d, brig_api_routes, brig_api_explain, err) < 0 ||
        api_metrics_listen(d, err) < 0)
        return -1;
    if (brig_bootstrap_run(d, err) < 0)
        return -1;
    brig_info("listening on %s (state %s, %d sandboxes re-attached)", d->base_url, d->cfg.state_dir,
              brig_registry_size(d));
    if (d->cfg.ready_fd >= 0) {
        _cleanup_free_ char *line = brig_asprintf("ready %s\n", d->base_url);
        (void)!write(d->cfg.ready_fd, line, strlen(line));
        close(d->cfg.ready_fd);
    }
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof(si)) < 0 && errno == EINTR)
        ;
    brig_info("signal %u: shutting down", si.ssi_signo);
    return 0;
}

int main(int argc, char **argv)
{
    brigd d;
    memset(&d, 0, sizeof(d));
    d.state_lock = -1;
    brig_error *err = NULL;
    brig_log_init("brigd", BRIG_LOG_INFO);
    /* Large buffers (exec output, bodies) from mmap, returned to the host when freed: a
     * fixed threshold, because glibc's adaptive one climbs to 32 MiB after the first
     * large free and then keeps them in per-thread heaps that do not shrink. */
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    if (sodium_init() < 0) {
        fprintf(stderr, "brigd: libsodium cannot initialise\n");
        return 1;
    }
    /* Before any thread: SIGCHLD belongs to the reaper, SIGTERM/SIGINT to us. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    int sigfd = signalfd(-1, &stop, SFD_CLOEXEC);

    int r = configure(&d.cfg, argc, argv);
    if (r >= 0) {
        brig_config_dispose(&d.cfg);
        close(sigfd);
        return r;
    }
    brig_log_init("brigd", parse_level(d.cfg.log_level));
    if (geteuid() != 0)
        brig_warn("not running as root: creating sandboxes will fail");
    raise_nofile();
    if (sigfd < 0 || brig_proc_init(&err) < 0) {
        if (err == NULL)
            brig_error_sys(&err, "signalfd");
        r = -1;
    } else {
        r = run(&d, sigfd, &err);
    }
    if (r < 0) {
        brig_err("%s", err->msg);
        brig_error_clear(&err);
    }
    brig_utpl_builds_stop(&d);          /* users' builds: their sandboxes end, their requests */
    brig_builds_stop(&d);               /* builds end as failed: their followers' streams end */
    brig_audit_stop_followers(d.audit); /* so do the timelines' */
    api_metrics_unlisten(&d);
    brig_http_stop(&d);
    brig_builds_free(&d);
    brig_watch_stop(&d);
    brig_janitor_stop(&d);
    brig_spares_stop(&d);     /* before the registry: it holds references while it trims */
    brig_pool_stop(&d);       /* warm sandboxes belong to nobody: they go */
    brig_teardown_stop(&d);   /* what was deleted is cleaned up before we exit */
    brig_volumes_stop(&d);    /* after the teardown: it lets go of volumes */
    brig_audit_stop(d.audit); /* the last events stored; before its resolver's registry goes */
    brig_registry_free(&d);   /* the live ones are forgotten: the next start re-attaches them */
    brig_net_free(d.net);
    brig_audit_free(d.audit);
    brig_runtime_free(d.rt);
    brig_vault_close(d.vault);
    free(d.ca_pem);
    if (d.store)
        brig_admission_dispose(&d.admission);
    brig_store_close(d.store);
    brig_quota_free(d.exec_output);
    brig_proc_shutdown();
    free(d.base_url);
    brig_config_dispose(&d.cfg);
    if (d.state_lock >= 0)
        close(d.state_lock);
    close(sigfd);
    return r < 0 ? 1 : 0;
}
