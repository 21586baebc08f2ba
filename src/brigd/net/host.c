/*
 * host.c - the host flavour's host-wide part: one brigd per network namespace
 * (a lock), the address pool, the DNS upstream, IPv4 forwarding, and the start
 * and stop of the firewall table (fw.c) and the proxy thread (proxy.c).
 *
 * Addressing: the pool (e.g. 10.201.0.0/16) is cut into /31 point-to-point
 * links.  Slot i gives the host end gw = base + 2i and the sandbox end
 * base + 2i + 1; the sandbox's default route and resolver are gw.  No bridge:
 * sandboxes never share a layer-2 segment, everything between them crosses
 * the host's forward path, where the firewall denies it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "netshared.h"

/* ---- small helpers ------------------------------------------------------ */

int brig_net_sysctl_write(const char *path, const char *value)
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

/* ---- the address pool ------------------------------------------------------ */

uint32_t brig_net_slot_gw(const brig_net_host *n, size_t slot)
{
    return htonl(n->pool_base + 2 * (uint32_t)slot);
}

uint32_t brig_net_slot_sb(const brig_net_host *n, size_t slot)
{
    return htonl(n->pool_base + 2 * (uint32_t)slot + 1);
}

/* Slots whose addresses end in .0 or .255 are skipped: legal on a /31, but
 * enough software treats them as network or broadcast addresses. */
static bool slot_usable(const brig_net_host *n, size_t slot)
{
    uint32_t g = n->pool_base + 2 * (uint32_t)slot;
    return (g & 0xff) != 0 && ((g + 1) & 0xff) != 0xff;
}

/* Next-fit: an address freed now is reused as late as possible. */
int brig_net_slot_claim(brig_net_host *n)
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

void brig_net_slot_release(brig_net_host *n, int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&n->lock);
    n->slot_used[slot] = 0;
    pthread_mutex_unlock(&n->lock);
}

static int parse_pool(brig_net_host *n, const char *pool, brig_error **err)
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

/* ---- the DNS upstream ------------------------------------------------------ */

/* "IP", "IP:PORT", "[IPv6]:PORT" or "IPv6". */
static int parse_upstream(brig_net_host *n, const char *s, brig_error **err)
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
static int upstream_from_resolv_conf(brig_net_host *n, brig_error **err)
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

/* IPv4 forwarding.  When brigd turns it on, it also confines it to sandbox
 * links (fw.c's isolation rule), and remembers that it did so in the state
 * dir, for the next start to find it on and confine it again.  *ours: the
 * forwarding is brigd's (to confine, and to turn off with the last sandbox). */
static int forwarding_on(const brig_net_host *n, bool *ours, brig_error **err)
{
    _cleanup_free_ char *marker = brig_asprintf("%s/net-forwarding", n->state_dir);
    *ours = access(marker, F_OK) == 0;
    if (read_file_char("/proc/sys/net/ipv4/ip_forward") == '1')
        return 0;
    if (brig_net_sysctl_write("/proc/sys/net/ipv4/ip_forward", "1\n") < 0)
        return brig_error_sys(err, "turn IPv4 forwarding on");
    int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    *ours = true;
    return 0;
}

/* The settings of cfg, defaults and bounds applied; the pool and the upstream
 * parsed (the upstream: configured, else $BRIG_DNS_UPSTREAM, else the host's). */
static int configure(brig_net_host *n, const brig_net_config *cfg, brig_error **err)
{
    n->state_dir = brig_xstrdup(cfg->state_dir ? cfg->state_dir : "/var/lib/brig");
    n->next_gen = arc4random() | 1;
    n->grants_max = cfg->dns_grants_max > 0 ? (size_t)cfg->dns_grants_max : BRIG_NET_GRANTS_DEFAULT;
    if (n->grants_max < BRIG_NET_GRANTS_MIN)
        n->grants_max = BRIG_NET_GRANTS_MIN;
    n->ttl_max = cfg->dns_ttl_max > 0 ? cfg->dns_ttl_max : BRIG_NET_TTL_DEFAULT;
    n->ttl_max = n->ttl_max < BRIG_NET_TTL_MIN   ? BRIG_NET_TTL_MIN
                 : n->ttl_max > BRIG_NET_TTL_MAX ? BRIG_NET_TTL_MAX
                                                 : n->ttl_max;
    if (parse_pool(n, cfg->pool ? cfg->pool : "10.201.0.0/16", err) < 0)
        return -1;
    const char *up = cfg->dns_upstream ? cfg->dns_upstream : getenv("BRIG_DNS_UPSTREAM");
    return up && *up ? parse_upstream(n, up, err) : upstream_from_resolv_conf(n, err);
}

/* Frees what brig_net_host_new made before the firewall. */
static void host_dispose(brig_net_host *n)
{
    close(n->owner_lock);
    pthread_mutex_destroy(&n->lock);
    free(n->slot_used);
    free(n->state_dir);
    free(n);
}

int brig_net_host_new(const brig_net_config *cfg, brig_net_host **out, brig_error **err)
{
    *out = NULL;
    int lock = take_owner_lock(err);
    if (lock < 0) {
        brig_error_prefix(err, "sandbox networking");
        return -1;
    }
    brig_net_host *n = brig_xcalloc(1, sizeof(*n));
    n->owner_lock = lock;
    pthread_mutex_init(&n->lock, NULL);
    bool ours = false;
    if (configure(n, cfg, err) < 0 || forwarding_on(n, &ours, err) < 0)
        goto fail;
    char pool[40], base[INET_ADDRSTRLEN];
    uint32_t b = htonl(n->pool_base);
    inet_ntop(AF_INET, &b, base, sizeof(base));
    snprintf(pool, sizeof(pool), "%s/%d", base, n->pool_prefix);
    int conns = cfg->connections_max > 0 ? cfg->connections_max : BRIG_NET_CONNS_DEFAULT;
    if (brig_fw_new(pool, ours, conns, &n->fw, err) < 0)
        goto fail;
    n->forwarding_ours = ours;
    if (brig_proxy_start(n, err) < 0)
        goto fail_fw;
    if (brig_inject_start(n, cfg, err) < 0) {
        brig_proxy_stop(n);
        goto fail_fw;
    }
    brig_info("net: pool %s, DNS upstream %s%s", pool, n->upstream_str,
              ours ? ", forwarding confined to sandbox links" : "");
    *out = n;
    return 0;
fail_fw:
    brig_fw_free(n->fw);
fail:
    brig_error_prefix(err, "sandbox networking");
    host_dispose(n);
    return -1;
}

/* Frees a list of records (after the proxy thread stopped). */
static void free_list(brig_net_sandbox *s)
{
    while (s) {
        brig_net_sandbox *next = s->next;
        brig_proxy_sandbox_free(s);
        brig_net_sandbox_free(s);
        s = next;
    }
}

void brig_net_host_free(brig_net *net)
{
    brig_net_host *n = brig_net_host_of(net);
    brig_inject_stop(n);
    brig_proxy_stop(n);
    /* Attached sandboxes keep their links and firewall elements: they stay
     * confined while brigd is down.  With none left the table goes too, and
     * forwarding, if brigd turned it on: the table's isolation rule was what
     * confined it to sandbox links. */
    if (n->sandboxes == NULL && n->fw) {
        if (n->forwarding_ours) {
            _cleanup_free_ char *marker = brig_asprintf("%s/net-forwarding", n->state_dir);
            if (brig_net_sysctl_write("/proc/sys/net/ipv4/ip_forward", "0\n") < 0)
                brig_warn("net: turn IPv4 forwarding off: %s", strerror(errno));
            else
                unlink(marker);
        }
        brig_fw_drop_table(n->fw);
    }
    free_list(n->sandboxes);
    free_list(n->graveyard);
    brig_fw_free(n->fw);
    host_dispose(n);
}
