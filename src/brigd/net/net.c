/*
 * net.c - sandbox networking, the orchestrator behind net.h.
 *
 * Addressing: the pool (e.g. 10.201.0.0/16) is cut into /31 point-to-point
 * links.  Slot i gives the host end gw = base + 2i and the sandbox end
 * base + 2i + 1; the sandbox's default route and resolver are gw.  No bridge:
 * sandboxes never share a layer-2 segment, everything between them crosses
 * the host's forward path, where the firewall denies it.
 *
 * Attach, in order (each step's failure unwinds the ones before):
 *   1. claim a slot                        (lock)
 *   2. veth brgXXXXXXXXXXXX <-> eth0, the peer created inside the sandbox's
 *      namespace; host end: IPv6 off, gw/31, up          (rtnl.c)
 *   3. inside the namespace: lo up, eth0 sb/31, IPv6 off, up, default route
 *      (short-lived thread, rtnl.c)
 *   4. firewall elements: anti-spoof, DNS to gw, mode, CIDRs, ports,
 *      generation                                        (fw.c, one transaction)
 *   5. DNS proxy sockets on gw:53 (UDP, TCP); register     (proxy.c, lock)
 * Until step 4 the sandbox has no firewall element, so all its traffic is
 * dropped: a half-attached sandbox is an offline one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "net_internal.h"

/* ---- small helpers ------------------------------------------------------ */

json_t *brig_net_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char b[40];
    size_t k = strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(b + k, sizeof(b) - k, ".%03ldZ", ts.tv_nsec / 1000000);
    return json_string(b);
}

/* "brg" + 12 hex digits of a 64-bit FNV-1a hash of the id: predictable (the
 * next start finds the link again), 15 characters (IFNAMSIZ - 1). */
static void ifname_of(const char *id, char out[16])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    snprintf(out, 16, BRIG_NET_IFPREFIX "%012llx", (unsigned long long)(h & 0xffffffffffffull));
}

static bool is_our_ifname(const char *name)
{
    if (strncmp(name, BRIG_NET_IFPREFIX, 3) != 0 || strlen(name) != 15)
        return false;
    for (const char *p = name + 3; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static int write_file(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = brig_write_full(fd, value, strlen(value));
    close(fd);
    return rc;
}

static int read_file_char(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char c = 0;
    ssize_t r = read(fd, &c, 1);
    close(fd);
    return r == 1 ? c : -1;
}

static uint32_t slot_gw(const brig_net *n, size_t slot)
{
    return htonl(n->pool_base + 2 * (uint32_t)slot);
}

static uint32_t slot_sb(const brig_net *n, size_t slot)
{
    return htonl(n->pool_base + 2 * (uint32_t)slot + 1);
}

/* Slots whose addresses end in .0 or .255 are skipped: legal on a /31, but
 * enough software treats them as network or broadcast addresses. */
static bool slot_usable(const brig_net *n, size_t slot)
{
    uint32_t g = n->pool_base + 2 * (uint32_t)slot;
    return (g & 0xff) != 0 && ((g + 1) & 0xff) != 0xff;
}

/* Next-fit: an address freed now is reused as late as possible. */
static int slot_claim(brig_net *n)
{
    for (size_t k = 0; k < n->n_slots; k++) {
        size_t i = (n->slot_cursor + k) % n->n_slots;
        if (!n->slot_used[i] && slot_usable(n, i)) {
            n->slot_used[i] = 1;
            n->slot_cursor = (i + 1) % n->n_slots;
            return (int)i;
        }
    }
    return -1;
}

static int parse_pool(brig_net *n, const char *pool, brig_error **err)
{
    char addr[32];
    const char *slash = strchr(pool, '/');
    if (slash == NULL || (size_t)(slash - pool) >= sizeof(addr))
        return brig_error_set(err, BRIG_E_INVALID, 0, "network pool '%s' is not a.b.c.d/len", pool);
    memcpy(addr, pool, (size_t)(slash - pool));
    addr[slash - pool] = '\0';
    uint32_t a;
    char *end = NULL;
    long len = strtol(slash + 1, &end, 10);
    if (inet_pton(AF_INET, addr, &a) != 1 || *end != '\0' || len < 8 || len > 29)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "network pool '%s' must be an IPv4 a.b.c.d/8 .. /29", pool);
    n->pool_prefix = (int)len;
    n->pool_base = ntohl(a) & (0xffffffffu << (32 - len));
    n->n_slots = ((size_t)1 << (32 - len)) / 2;
    n->slot_used = brig_xcalloc(n->n_slots, 1);
    return 0;
}

/* "IP", "IP:PORT", "[IPv6]:PORT" or "IPv6". */
static int parse_upstream(brig_net *n, const char *s, brig_error **err)
{
    char host[48];
    int port = 53;
    const char *colon = strrchr(s, ':');
    memset(&n->upstream, 0, sizeof(n->upstream));
    if (s[0] == '[') {
        const char *close_b = strchr(s, ']');
        if (close_b == NULL || (size_t)(close_b - s - 1) >= sizeof(host))
            goto bad;
        memcpy(host, s + 1, (size_t)(close_b - s - 1));
        host[close_b - s - 1] = '\0';
        if (close_b[1] == ':')
            port = atoi(close_b + 2);
    } else if (colon && strchr(s, ':') == colon) {
        if ((size_t)(colon - s) >= sizeof(host))
            goto bad;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        port = atoi(colon + 1);
    } else {
        snprintf(host, sizeof(host), "%s", s);
    }
    if (port < 1 || port > 65535)
        goto bad;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&n->upstream;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&n->upstream;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        n->upstream_len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        n->upstream_len = sizeof(*v6);
    } else {
        goto bad;
    }
    snprintf(n->upstream_str, sizeof(n->upstream_str), "%s port %d", host, port);
    return 0;
bad:
    return brig_error_set(err, BRIG_E_INVALID, 0, "DNS upstream '%.64s' is not IP[:PORT]", s);
}

/* The first nameserver of the host's /etc/resolv.conf. */
static int upstream_from_resolv_conf(brig_net *n, brig_error **err)
{
    FILE *f = fopen("/etc/resolv.conf", "re");
    if (f == NULL)
        return brig_error_sys(err, "read /etc/resolv.conf for the DNS upstream");
    char line[256], ns[128];
    int rc = -1;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, " nameserver %127s", ns) == 1) {
            rc = parse_upstream(n, ns, err);
            break;
        }
    }
    fclose(f);
    if (rc < 0 && (err == NULL || *err == NULL))
        brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "/etc/resolv.conf names no nameserver");
    return rc;
}

/* ---- the network log ---------------------------------------------------- */

void brig_net_log_add(brig_net_sandbox *s, json_t *rec)
{
    if (s->log == NULL)
        s->log = brig_xcalloc(BRIG_NET_LOG_MAX, sizeof(json_t *));
    if (s->log_len == BRIG_NET_LOG_MAX) {
        json_decref(s->log[s->log_start]);
        s->log[s->log_start] = rec;
        s->log_start = (s->log_start + 1) % BRIG_NET_LOG_MAX;
    } else {
        s->log[(s->log_start + s->log_len++) % BRIG_NET_LOG_MAX] = rec;
    }
}

json_t *brig_net_log(brig_net *n, brig_net_sandbox *s)
{
    json_t *a = json_array();
    if (n == NULL || s == NULL)
        return a;
    pthread_mutex_lock(&n->lock);
    for (size_t i = 0; i < s->log_len; i++)
        json_array_append_new(a, json_deep_copy(s->log[(s->log_start + i) % BRIG_NET_LOG_MAX]));
    pthread_mutex_unlock(&n->lock);
    return a;
}

brig_net_sandbox *brig_net_by_ifindex(brig_net *n, int ifindex)
{
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next)
        if (s->ifindex == ifindex)
            return s;
    return NULL;
}

/* ---- the firewall lock ------------------------------------------------------ */

/* First come, first served.  Nobody holding it ever waits for n->lock (the
 * order is n->lock, then this), so a holder of n->lock may wait for it. */

static void fw_acquire(brig_net *n)
{
    pthread_mutex_lock(&n->fw_lock.m);
    uint64_t ticket = n->fw_lock.next++;
    while (ticket != n->fw_lock.serving)
        pthread_cond_wait(&n->fw_lock.turn, &n->fw_lock.m);
    pthread_mutex_unlock(&n->fw_lock.m);
}

static void fw_release(brig_net *n)
{
    pthread_mutex_lock(&n->fw_lock.m);
    n->fw_lock.serving++;
    pthread_cond_broadcast(&n->fw_lock.turn);
    pthread_mutex_unlock(&n->fw_lock.m);
}

/* ---- DNS grants ----------------------------------------------------------- */

/* Grants are kept least recently answered first: pruning and removals keep the
 * order, and an answered address moves to the end. */

static void grant_dispose(brig_net_grant *g)
{
    free(g->qname);
    g->qname = NULL;
}

static void grants_prune(brig_net_sandbox *s, int64_t now)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n_grants; i++) {
        if (s->grants[i].expires_ms > now)
            s->grants[k++] = s->grants[i];
        else
            grant_dispose(&s->grants[i]);
    }
    s->n_grants = k;
}

static bool addr_in(uint32_t a, const uint32_t *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == a)
            return true;
    return false;
}

static bool granted(const brig_net_sandbox *s, uint32_t a)
{
    for (size_t i = 0; i < s->n_grants; i++)
        if (s->grants[i].addr == a)
            return true;
    return false;
}

void brig_net_grant_add(brig_net *n, brig_net_sandbox *s, const brig_dns_question *q,
                        const brig_dns_answer *a)
{
    /* The policy may have changed while the query was upstream. */
    if (s->policy.mode != BRIG_EGRESS_ALLOWLIST ||
        !brig_dns_name_allowed(&s->policy, q->qname, q->qname_len))
        return;
    /* The answer's addresses, each once (its longest TTL), within bounds. */
    uint32_t addrs[BRIG_ARRAY_LEN(a->a)];
    int ttls[BRIG_ARRAY_LEN(a->a)];
    size_t na = 0;
    for (size_t i = 0; i < a->n_a; i++) {
        int t = a->a_ttl[i] < BRIG_NET_TTL_MIN ? BRIG_NET_TTL_MIN : a->a_ttl[i];
        t = t > n->ttl_max ? n->ttl_max : t;
        size_t k = 0;
        while (k < na && addrs[k] != a->a[i])
            k++;
        if (k == na) {
            addrs[na] = a->a[i];
            ttls[na++] = t;
        } else if (t > ttls[k]) {
            ttls[k] = t;
        }
    }
    if (na == 0)
        return;
    int64_t now = brig_now_mono_ms();
    grants_prune(s, now);
    /* Room for the new ones: the least recently answered others go. */
    size_t fresh = 0;
    for (size_t i = 0; i < na; i++)
        fresh += !granted(s, addrs[i]);
    size_t over = s->n_grants + fresh > n->grants_max ? s->n_grants + fresh - n->grants_max : 0;
    uint32_t evict[BRIG_ARRAY_LEN(a->a)];
    size_t ne = 0;
    for (size_t i = 0; i < s->n_grants && ne < over && ne < BRIG_ARRAY_LEN(evict); i++)
        if (!addr_in(s->grants[i].addr, addrs, na))
            evict[ne++] = s->grants[i].addr;

    brig_error *err = NULL;
    fw_acquire(n);
    int rc = brig_fw_grant(n->fw, s->ifname, addrs, ttls, na, evict, ne, &err);
    fw_release(n);
    if (rc < 0) {
        brig_warn("net: %s: open DNS answers of %s: %s", s->id, q->name, err->msg);
        brig_error_clear(&err);
        return;
    }
    /* The kernel now holds: the others in their order, then this answer's. */
    size_t k = 0;
    for (size_t i = 0; i < s->n_grants; i++) {
        brig_net_grant *g = &s->grants[i];
        if (addr_in(g->addr, addrs, na) || addr_in(g->addr, evict, ne))
            grant_dispose(g);
        else
            s->grants[k++] = *g;
    }
    s->n_grants = k;
    if (s->n_grants + na > s->cap_grants) {
        s->cap_grants = s->n_grants + na > 2 * s->cap_grants ? s->n_grants + na : 2 * s->cap_grants;
        s->grants = brig_xrealloc(s->grants, s->cap_grants * sizeof(*s->grants));
    }
    for (size_t i = 0; i < na; i++) {
        /* The element's timeout was replaced by this one (fw.c). */
        brig_net_grant *g = &s->grants[s->n_grants++];
        g->addr = addrs[i];
        g->expires_ms = now + (int64_t)ttls[i] * 1000;
        g->qname = brig_xmalloc(q->qname_len);
        memcpy(g->qname, q->qname, q->qname_len);
        g->qname_len = q->qname_len;
    }
}

/* Under n->lock: takes the grants the policy p no longer allows (all when p
 * is NULL) out of s; their addresses are returned (malloc'd) for
 * grants_close. */
static uint32_t *grants_take(brig_net_sandbox *s, const brig_egress *p, size_t *n_out)
{
    grants_prune(s, brig_now_mono_ms());
    uint32_t *addrs = brig_xcalloc(s->n_grants + 1, sizeof(uint32_t));
    size_t na = 0, k = 0;
    for (size_t i = 0; i < s->n_grants; i++) {
        brig_net_grant *g = &s->grants[i];
        if (p && p->mode == BRIG_EGRESS_ALLOWLIST &&
            brig_dns_name_allowed(p, g->qname, g->qname_len)) {
            s->grants[k++] = *g;
            continue;
        }
        addrs[na++] = g->addr;
        grant_dispose(g);
    }
    s->n_grants = k;
    *n_out = na;
    return addrs;
}

/* Under n->lock: opens again, for their remaining time, the addresses among
 * addrs that s holds grants for (its DNS answered them again while they were
 * being closed). */
static void grants_reopen(brig_net *n, brig_net_sandbox *s, const uint32_t *addrs, size_t na)
{
    uint32_t again[BRIG_NET_REVOKE_CHUNK];
    int ttls[BRIG_NET_REVOKE_CHUNK];
    size_t k = 0;
    int64_t now = brig_now_mono_ms();
    for (size_t i = 0; i < s->n_grants; i++) {
        const brig_net_grant *g = &s->grants[i];
        if (k < BRIG_ARRAY_LEN(again) && g->expires_ms > now && addr_in(g->addr, addrs, na)) {
            again[k] = g->addr;
            ttls[k++] = (int)((g->expires_ms - now + 999) / 1000);
        }
    }
    if (k == 0)
        return;
    brig_error *err = NULL;
    fw_acquire(n);
    int rc = brig_fw_grant(n->fw, s->ifname, again, ttls, k, NULL, 0, &err);
    fw_release(n);
    if (rc < 0) {
        brig_warn("net: %s: reopen DNS grants: %s", s->id, err->msg);
        brig_error_clear(&err);
    }
}

/* Closes addresses taken by grants_take, BRIG_NET_REVOKE_CHUNK per
 * transaction, under the firewall lock alone, which whoever waits for it gets
 * between two chunks (it is FIFO): other sandboxes' DNS and attaches go on
 * meanwhile.  live: s is still attached, and its DNS may open one of these
 * addresses again (for a name the new policy allows) while a chunk closes it:
 * such ones are opened again after the chunk.  No caller holds a lock. */
static void grants_close(brig_net *n, brig_net_sandbox *s, uint32_t *addrs, size_t na, bool live)
{
    for (size_t i = 0; i < na; i += BRIG_NET_REVOKE_CHUNK) {
        size_t m = na - i < BRIG_NET_REVOKE_CHUNK ? na - i : BRIG_NET_REVOKE_CHUNK;
        brig_error *err = NULL;
        fw_acquire(n);
        int rc = brig_fw_revoke(n->fw, s->ifname, addrs + i, m, &err);
        fw_release(n);
        if (rc < 0) {
            brig_warn("net: %s: close DNS grants: %s", s->id, err->msg);
            brig_error_clear(&err);
        }
        if (live) {
            /* The proxy opens a grant under n->lock and records it before
             * letting go: whatever it opened during the chunk is in s now. */
            pthread_mutex_lock(&n->lock);
            grants_reopen(n, s, addrs + i, m);
            pthread_mutex_unlock(&n->lock);
        }
    }
}

/* ---- host-wide ------------------------------------------------------------- */

/* One brigd manages sandbox networking per network namespace: its table, links
 * and log group are per namespace, and a second one would replace the first's
 * firewall.  The lock goes with the process (a crash releases it). */
static int take_owner_lock(brig_error **err)
{
    struct stat ns;
    if (stat("/proc/self/ns/net", &ns) < 0)
        return brig_error_sys(err, "stat /proc/self/ns/net");
    if (mkdir("/run/brig", 0700) < 0 && errno != EEXIST)
        return brig_error_sys(err, "mkdir /run/brig");
    char path[64];
    snprintf(path, sizeof(path), "/run/brig/net-%llu.lock", (unsigned long long)ns.st_ino);
    return brig_lock_exclusive(
        path, "another brigd manages sandbox networking in this network namespace", err);
}

int brig_net_new(const brig_net_config *cfg, brig_net **out, brig_error **err)
{
    *out = NULL;
    _cleanup_free_ char *marker = NULL;
    int lock = take_owner_lock(err);
    if (lock < 0) {
        brig_error_prefix(err, "sandbox networking");
        return -1;
    }
    brig_net *n = brig_xcalloc(1, sizeof(*n));
    n->owner_lock = lock;
    pthread_mutex_init(&n->lock, NULL);
    pthread_mutex_init(&n->fw_lock.m, NULL);
    pthread_cond_init(&n->fw_lock.turn, NULL);
    n->state_dir = brig_xstrdup(cfg->state_dir ? cfg->state_dir : "/var/lib/brig");
    n->next_gen = arc4random() | 1;
    n->grants_max = cfg->dns_grants_max > 0 ? (size_t)cfg->dns_grants_max : BRIG_NET_GRANTS_DEFAULT;
    if (n->grants_max < BRIG_NET_GRANTS_MIN)
        n->grants_max = BRIG_NET_GRANTS_MIN;
    n->ttl_max = cfg->dns_ttl_max > 0 ? cfg->dns_ttl_max : BRIG_NET_TTL_DEFAULT;
    n->ttl_max = n->ttl_max < BRIG_NET_TTL_MIN   ? BRIG_NET_TTL_MIN
                 : n->ttl_max > BRIG_NET_TTL_MAX ? BRIG_NET_TTL_MAX
                                                 : n->ttl_max;
    int conns = cfg->connections_max > 0 ? cfg->connections_max : BRIG_NET_CONNS_DEFAULT;
    if (parse_pool(n, cfg->pool ? cfg->pool : "10.201.0.0/16", err) < 0)
        goto fail;
    /* The upstream: configured, else $BRIG_DNS_UPSTREAM, else the host's. */
    const char *up = cfg->dns_upstream ? cfg->dns_upstream : getenv("BRIG_DNS_UPSTREAM");
    if ((up && *up ? parse_upstream(n, up, err) : upstream_from_resolv_conf(n, err)) < 0)
        goto fail;

    /* IPv4 forwarding.  When brigd turns it on, it also confines it to
     * sandbox links (fw.c's isolation rule), and remembers that it did so in
     * the state dir, for the next start to find it on and confine it again. */
    marker = brig_asprintf("%s/net-forwarding", n->state_dir);
    bool ours = access(marker, F_OK) == 0;
    int fwd = read_file_char("/proc/sys/net/ipv4/ip_forward");
    if (fwd != '1') {
        if (write_file("/proc/sys/net/ipv4/ip_forward", "1\n") < 0) {
            brig_error_sys(err, "turn IPv4 forwarding on");
            goto fail;
        }
        int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        ours = true;
    }
    char pool[40], base[INET_ADDRSTRLEN];
    uint32_t b = htonl(n->pool_base);
    inet_ntop(AF_INET, &b, base, sizeof(base));
    snprintf(pool, sizeof(pool), "%s/%d", base, n->pool_prefix);
    if (brig_fw_new(pool, ours, conns, &n->fw, err) < 0)
        goto fail;
    n->forwarding_ours = ours;
    if (brig_proxy_start(n, err) < 0)
        goto fail_fw;
    brig_info("net: pool %s, DNS upstream %s%s", pool, n->upstream_str,
              ours ? ", forwarding confined to sandbox links" : "");
    *out = n;
    return 0;
fail_fw:
    brig_fw_free(n->fw);
fail:
    brig_error_prefix(err, "sandbox networking");
    close(n->owner_lock);
    pthread_mutex_destroy(&n->lock);
    pthread_mutex_destroy(&n->fw_lock.m);
    pthread_cond_destroy(&n->fw_lock.turn);
    free(n->slot_used);
    free(n->state_dir);
    free(n);
    return -1;
}

void brig_net_sandbox_free(brig_net_sandbox *s)
{
    if (s == NULL)
        return;
    brig_proxy_sandbox_free(s);
    for (size_t i = 0; i < s->n_grants; i++)
        grant_dispose(&s->grants[i]);
    free(s->grants);
    for (size_t i = 0; i < s->log_len; i++)
        json_decref(s->log[(s->log_start + i) % BRIG_NET_LOG_MAX]);
    free(s->log);
    brig_egress_dispose(&s->policy);
    free(s->id);
    free(s);
}

void brig_net_free(brig_net *n)
{
    if (n == NULL)
        return;
    brig_proxy_stop(n);
    /* Attached sandboxes keep their links and firewall elements: they stay
     * confined while brigd is down.  With none left the table goes too, and
     * forwarding, if brigd turned it on: the table's isolation rule was what
     * confined it to sandbox links. */
    if (n->sandboxes == NULL && n->fw) {
        if (n->forwarding_ours) {
            _cleanup_free_ char *marker = brig_asprintf("%s/net-forwarding", n->state_dir);
            if (write_file("/proc/sys/net/ipv4/ip_forward", "0\n") < 0)
                brig_warn("net: turn IPv4 forwarding off: %s", strerror(errno));
            else
                unlink(marker);
        }
        brig_fw_drop_table(n->fw);
    }
    while (n->sandboxes) {
        brig_net_sandbox *s = n->sandboxes;
        n->sandboxes = s->next;
        brig_net_sandbox_free(s);
    }
    while (n->graveyard) {
        brig_net_sandbox *s = n->graveyard;
        n->graveyard = s->next;
        brig_net_sandbox_free(s);
    }
    brig_fw_free(n->fw);
    pthread_mutex_destroy(&n->lock);
    pthread_mutex_destroy(&n->fw_lock.m);
    pthread_cond_destroy(&n->fw_lock.turn);
    free(n->slot_used);
    free(n->state_dir);
    close(n->owner_lock);
    free(n);
}

/* ---- one sandbox ------------------------------------------------------------- */

static brig_fw_sandbox fw_view(const brig_net_sandbox *s, const brig_egress *p, uint32_t gen)
{
    return (brig_fw_sandbox){
        .ifname = s->ifname, .addr = s->addr, .gw = s->gw, .policy = p, .gen = gen};
}

static brig_net_sandbox *find_id(brig_net *n, const char *id)
{
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static brig_net_sandbox *sandbox_new(brig_net *n, const char *id, const brig_egress *policy)
{
    brig_net_sandbox *s = brig_xcalloc(1, sizeof(*s));
    s->id = brig_xstrdup(id);
    ifname_of(id, s->ifname);
    s->slot = -1;
    s->udp_fd = s->tcp_fd = -1;
    brig_egress_copy(&s->policy, policy);
    s->gen = n->next_gen;
    n->next_gen += 2; /* stays odd, so never 0 */
    return s;
}

/* Steps 4 and 5 of attach (and all of reattach's host work after the link is
 * found): firewall, DNS sockets, registration. */
static int sandbox_activate(brig_net *n, brig_net_sandbox *s, brig_error **err)
{
    brig_fw_sandbox v = fw_view(s, &s->policy, s->gen);
    fw_acquire(n);
    int rc = brig_fw_sandbox_add(n->fw, &v, err);
    fw_release(n);
    if (rc < 0)
        return -1;
    pthread_mutex_lock(&n->lock);
    rc = find_id(n, s->id) ? brig_error_set(err, BRIG_E_CONFLICT, 0, "already attached")
                           : brig_proxy_add(n, s, err);
    if (rc == 0) {
        s->next = n->sandboxes;
        n->sandboxes = s;
    }
    pthread_mutex_unlock(&n->lock);
    if (rc < 0) {
        fw_acquire(n);
        brig_fw_sandbox_del(n->fw, &v, NULL);
        fw_release(n);
    }
    return rc;
}

static void slot_release(brig_net *n, int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&n->lock);
    n->slot_used[slot] = 0;
    pthread_mutex_unlock(&n->lock);
}

int brig_net_attach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                    brig_net_sandbox **out, char **resolv_conf, brig_error **err)
{
    *out = NULL;
    if (resolv_conf)
        *resolv_conf = NULL;
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = sandbox_new(n, sandbox_id, policy);
    s->slot = slot_claim(n);
    pthread_mutex_unlock(&n->lock);
    if (s->slot < 0) {
        brig_net_sandbox_free(s);
        return brig_error_set(err, BRIG_E_LIMIT, 0, "the sandbox network pool is exhausted");
    }
    s->gw = slot_gw(n, (size_t)s->slot);
    s->addr = slot_sb(n, (size_t)s->slot);

    brig_rtnl *r = NULL;
    if (brig_rtnl_open(&r, err) < 0)
        goto fail_slot;
    if (brig_rtnl_veth_add(r, s->ifname, BRIG_NET_PEER_IF, netns_fd, err) < 0)
        goto fail_rtnl;
    s->ifindex = (int)if_nametoindex(s->ifname);
    if (s->ifindex == 0) {
        brig_error_sys(err, "find link %s", s->ifname);
        goto fail_link;
    }
    /* IPv6 off on the host end before it is up: no link-local address, no
     * router advertisement accepted from the sandbox (the firewall drops
     * IPv6 from sandbox links as well). */
    char path[96];
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", s->ifname);
    if (write_file(path, "1\n") < 0 && errno != ENOENT) {
        brig_error_sys(err, "turn IPv6 off on %s", s->ifname);
        goto fail_link;
    }
    if (brig_rtnl_addr_add(r, s->ifindex, s->gw, 31, err) < 0 ||
        brig_rtnl_link_up(r, s->ifindex, err) < 0)
        goto fail_link;
    if (brig_netns_configure(netns_fd, s->addr, s->gw, err) < 0)
        goto fail_link;
    if (sandbox_activate(n, s, err) < 0)
        goto fail_link;
    brig_rtnl_close(r);
    if (resolv_conf) {
        char g[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &s->gw, g, sizeof(g));
        *resolv_conf = brig_asprintf("nameserver %s\noptions timeout:2 attempts:2\n", g);
    }
    *out = s;
    return 0;

fail_link:
    brig_rtnl_link_del(r, s->ifname, NULL);
fail_rtnl:
    brig_rtnl_close(r);
fail_slot:
    slot_release(n, s->slot);
    brig_error_prefix(err, "attach network of %s", sandbox_id);
    brig_net_sandbox_free(s);
    return -1;
}

int brig_net_reattach(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                      brig_net_sandbox **out, brig_error **err)
{
    (void)netns_fd; /* the namespace side survived with the sandbox */
    *out = NULL;
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = sandbox_new(n, sandbox_id, policy);
    pthread_mutex_unlock(&n->lock);
    s->ifindex = (int)if_nametoindex(s->ifname);
    if (s->ifindex == 0) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "reattach network of %s: link %s is gone",
                       sandbox_id, s->ifname);
        brig_net_sandbox_free(s);
        return -1;
    }
    brig_rtnl *r = NULL;
    uint32_t gw = 0;
    int rc = brig_rtnl_open(&r, err);
    if (rc == 0)
        rc = brig_rtnl_addr_get(r, s->ifindex, &gw, err);
    brig_rtnl_close(r);
    uint32_t g = ntohl(gw);
    if (rc == 0 && (g < n->pool_base || (g - n->pool_base) / 2 >= n->n_slots || (g & 1)))
        rc = brig_error_set(err, BRIG_E_INVALID, 0, "link %s is outside the pool", s->ifname);
    if (rc == 0) {
        pthread_mutex_lock(&n->lock);
        size_t slot = (g - n->pool_base) / 2;
        if (n->slot_used[slot])
            rc = brig_error_set(err, BRIG_E_CONFLICT, 0, "address of %s in use", s->ifname);
        else
            n->slot_used[slot] = 1, s->slot = (int)slot;
        pthread_mutex_unlock(&n->lock);
    }
    if (rc == 0) {
        s->gw = gw;
        s->addr = htonl(g + 1);
        rc = sandbox_activate(n, s, err);
        if (rc < 0)
            slot_release(n, s->slot);
    }
    if (rc < 0) {
        brig_error_prefix(err, "reattach network of %s", sandbox_id);
        brig_net_sandbox_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

int brig_net_set_policy(brig_net *n, brig_net_sandbox *s, const brig_egress *policy,
                        brig_error **err)
{
    uint32_t *revoked = NULL;
    size_t n_revoked = 0;
    pthread_mutex_lock(&n->lock);
    uint32_t gen = n->next_gen;
    n->next_gen += 2;
    brig_fw_sandbox old = fw_view(s, &s->policy, s->gen), new_ = fw_view(s, policy, gen);
    fw_acquire(n);
    int rc = brig_fw_sandbox_update(n->fw, &old, &new_, err);
    fw_release(n);
    if (rc == 0) {
        /* Connections marked with the old generation are re-checked against
         * the new policy at their next packet (fw.c, chain egress).  From
         * here on the proxy opens only what the new policy allows. */
        brig_egress_dispose(&s->policy);
        brig_egress_copy(&s->policy, policy);
        s->gen = gen;
        revoked = grants_take(s, policy, &n_revoked);
    } else {
        brig_error_prefix(err, "apply egress policy to %s", s->id);
    }
    pthread_mutex_unlock(&n->lock);
    grants_close(n, s, revoked, n_revoked, true);
    free(revoked);
    return rc;
}

/* Under n->lock: takes s out of the registry and the proxy. */
static void unregister(brig_net *n, brig_net_sandbox *s)
{
    brig_net_sandbox **pp = &n->sandboxes;
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    s->next = NULL;
    brig_proxy_remove(n, s);
    s->dead = true; /* events already fetched for it are skipped */
}

void brig_net_forget(brig_net *n, brig_net_sandbox *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&n->lock);
    unregister(n, s);
    if (s->slot >= 0)
        n->slot_used[s->slot] = 0;
    s->next = n->graveyard;
    n->graveyard = s;
    pthread_mutex_unlock(&n->lock);
    brig_proxy_wake(n);
}

static void detach(brig_net *n, brig_net_sandbox *s, bool del_link);

void brig_net_detach(brig_net *n, brig_net_sandbox *s)
{
    detach(n, s, true);
}

void brig_net_release(brig_net *n, brig_net_sandbox *s)
{
    detach(n, s, false);
}

/* del_link: remove the host end (and with it the pair) now; without it, the
 * sandbox's namespace is already gone and the kernel removes the pair itself,
 * in the background (a synchronous delete waits ~20 ms for the network stack).
 * The address slot is reusable at once either way: allocation moves on through
 * the pool, so a slot comes round again long after its old link went. */
static void detach(brig_net *n, brig_net_sandbox *s, bool del_link)
{
    if (s == NULL)
        return;
    size_t n_revoked = 0;
    pthread_mutex_lock(&n->lock);
    unregister(n, s);
    _cleanup_free_ uint32_t *revoked = grants_take(s, NULL, &n_revoked);
    pthread_mutex_unlock(&n->lock);

    /* Unregistered, s is this thread's alone: no lock but the firewall's. */
    brig_error *err = NULL;
    brig_fw_sandbox v = fw_view(s, &s->policy, s->gen);
    fw_acquire(n);
    if (brig_fw_sandbox_del(n->fw, &v, &err) < 0) {
        brig_warn("net: detach %s: %s", s->id, err->msg);
        brig_error_clear(&err);
    }
    fw_release(n);
    grants_close(n, s, revoked, n_revoked, false);

    brig_rtnl *r = NULL;
    if (del_link && brig_rtnl_open(&r, &err) == 0)
        brig_rtnl_link_del(r, s->ifname, &err); /* takes the peer with it */
    if (err) {
        brig_warn("net: detach %s: %s", s->id, err->msg);
        brig_error_clear(&err);
    }
    brig_rtnl_close(r);

    pthread_mutex_lock(&n->lock);
    if (s->slot >= 0)
        n->slot_used[s->slot] = 0;
    s->next = n->graveyard; /* freed by the proxy thread after its batch */
    n->graveyard = s;
    pthread_mutex_unlock(&n->lock);
    brig_proxy_wake(n);
}

struct cleanup_ctx {
    brig_net *n;
    brig_rtnl *r;
    char (*live)[16];
    size_t n_live;
};

static void cleanup_link(const char *name, void *arg)
{
    struct cleanup_ctx *c = arg;
    if (!is_our_ifname(name))
        return;
    for (size_t i = 0; i < c->n_live; i++)
        if (strcmp(c->live[i], name) == 0)
            return;
    pthread_mutex_lock(&c->n->lock);
    bool attached = false;
    for (brig_net_sandbox *s = c->n->sandboxes; s && !attached; s = s->next)
        attached = strcmp(s->ifname, name) == 0;
    pthread_mutex_unlock(&c->n->lock);
    if (attached)
        return;
    brig_error *err = NULL;
    if (brig_rtnl_link_del(c->r, name, &err) < 0) {
        brig_warn("net: cleanup: %s", err->msg);
        brig_error_clear(&err);
    } else {
        brig_info("net: removed link %s of a sandbox that no longer exists", name);
    }
}

void brig_net_cleanup(brig_net *n, char *const *live_ids, size_t n_live)
{
    /* Firewall elements need no sweep: brig_net_new replaced the table, so it
     * holds only what this run attached.  Links (and with them the sandbox
     * ends and their addresses) are what outlives a crash. */
    struct cleanup_ctx c = {.n = n, .n_live = n_live};
    c.live = brig_xcalloc(n_live + 1, sizeof(*c.live));
    for (size_t i = 0; i < n_live; i++)
        ifname_of(live_ids[i], c.live[i]);
    brig_error *err = NULL;
    if (brig_rtnl_open(&c.r, &err) == 0)
        brig_rtnl_links(c.r, BRIG_NET_IFPREFIX, cleanup_link, &c, &err);
    if (err) {
        brig_warn("net: cleanup: %s", err->msg);
        brig_error_clear(&err);
    }
    brig_rtnl_close(c.r);
    free(c.live);
}
