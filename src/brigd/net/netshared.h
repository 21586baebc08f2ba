/*
 * netshared.h - what the files of src/brigd/net/ share, and nothing else
 * includes (but the unit tests of the pure parts).  A header without a .c, as
 * are nettypes.h (net.h's types), dnsproxy.h (the DNS proxy's files) and
 * injproxy.h (the egress proxy's): so a file of net/ depends on the files it
 * calls, never on the facade net.c.  The module is split by concern; each file
 * calls only ones listed below it:
 *
 *   net.c       the facade behind net.h: brig_net_* through a table of
 *               operations; the "none" flavour (networking off or
 *               unavailable) and the "host" flavour's table
 *   attach.c    host flavour, one sandbox: attach, reattach, policy change,
 *               detach, leftovers' cleanup
 *   host.c      host flavour, host-wide: the one-brigd-per-netns lock, the
 *               address pool, the DNS upstream, IPv4 forwarding, start and
 *               stop of the firewall table and the proxy thread
 *   proxy.c     the one thread: an epoll loop over every sandbox's DNS
 *               sockets, the upstream queries and NFLOG; the graveyard
 *   dnsserve.c  the proxy's sandbox side: UDP and TCP port 53, the policy's
 *               verdict, replies, opening what an answer names (dnsproxy.h)
 *   upstream.c  the proxy's upstream side: one socket per query in flight,
 *               answers read and checked, their conntrack entries deleted
 *   nflog.c     NFLOG: denied packets into the network log
 *   inject.c    the egress proxy of credential injection: its rules per
 *               sandbox, listeners on the gateway, the accept thread
 *               (injproxy.h)
 *   injconn.c   one proxied connection: the request head (httpreq.c), the
 *               rule's headers, refusals
 *   injflow.c   one exchange of it: bodies framed, the relay with redaction
 *   injpolicy.c the policy's verdict for a proxied connection, the DNS check
 *               of a rule's host, the log (for injconn.c)
 *   injtls.c    TLS of the proxy: the brig CA's leaf certificates, upstream
 *               verification
 *   registry.c  a sandbox's record, its conntrack generation, lookups
 *   grants.c    DNS grants (addresses an allowlist answer opened): adding,
 *               revoking in chunks, reopening
 *   netlog.c    a sandbox's network log (a ring of JSON records)
 *   fw.c        nftables over libnftables: the host-wide table and each
 *               sandbox's set elements; one transaction at a time (FIFO)
 *   rtnl.c      rtnetlink over libmnl: veth pair, addresses, routes, links
 *   dnsmsg.c    DNS message handling over ldns (pure: no sockets; fuzzed)
 *   policy.c    egress policies: JSON, copies, normalised CIDRs
 *   httpreq.c   HTTP/1.x heads and body framing, strictly (pure; fuzzed)
 *
 * Locking (host flavour): brig_net_host.lock guards the registry, every
 * sandbox's mutable fields and the proxy's state; fw.c's own lock (first come,
 * first served) guards the nftables context for the length of one transaction,
 * inside each brig_fw_* call.  Order: lock, then fw.c's lock; nobody holding
 * fw.c's lock waits for anything.  Netlink work runs with neither held.  Every
 * nftables transaction is bounded (a sandbox's DNS grants are capped, and
 * revoking them goes in chunks, fw.c's lock let go in between and n->lock held
 * only to take the grants and to check them after each chunk), so neither lock
 * is held long, whatever a sandbox does: the proxy thread, which serves every
 * sandbox's DNS, and attach both wait on them.
 */
#ifndef BRIG_NETSHARED_H
#define BRIG_NETSHARED_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nettypes.h"
#include "util.h"

#define BRIG_NET_IFPREFIX            "brg"  /* host-side links: "brg" + 12 hex digits */
#define BRIG_NET_PEER_IF             "eth0" /* the sandbox's end */
#define BRIG_NET_TABLE               "brig" /* nftables table (family inet) */
#define BRIG_NET_LOG_GROUP           17010  /* NFLOG group of denied packets */
#define BRIG_NET_LOG_MAX             1000   /* records kept per sandbox */
#define BRIG_NET_TTL_MIN             10     /* seconds an answered address stays open, at least */
#define BRIG_NET_TTL_MAX             86400  /* ... and at most (dns_ttl_max's ceiling) */
#define BRIG_NET_TTL_DEFAULT         3600   /* dns_ttl_max's default */
#define BRIG_NET_INJECT_HTTP_PORT    15080  /* the egress proxy's ports on each gateway */
#define BRIG_NET_INJECT_TLS_PORT     15443
#define BRIG_NET_GRANTS_DEFAULT      2048 /* dns_grants_max's default */
#define BRIG_NET_GRANTS_MIN          32   /* ... at least one whole answer */
#define BRIG_NET_CONNS_DEFAULT       1024 /* net_connections_max's default */
#define BRIG_NET_REVOKE_CHUNK        64   /* grants revoked per nftables transaction */
#define BRIG_NET_MAX_QUERIES         64   /* upstream queries in flight per sandbox */
#define BRIG_NET_MAX_TCP             8    /* DNS-over-TCP connections per sandbox */
#define BRIG_NET_ANSWERS_PER_ROUND   1    /* upstream answers per sandbox per loop round */
#define BRIG_NET_UPSTREAM_TIMEOUT_MS 4000

/* ---- rtnl.c ------------------------------------------------------------ */

typedef struct brig_rtnl brig_rtnl;

/* A netlink route socket in the calling thread's network namespace. */
int brig_rtnl_open(brig_rtnl **out, brig_error **err);
void brig_rtnl_close(brig_rtnl *r);
/* Creates veth host_if <-> peer_if with the peer created directly inside the
 * namespace netns_fd. */
int brig_rtnl_veth_add(brig_rtnl *r, const char *host_if, const char *peer_if, int netns_fd,
                       brig_error **err);
int brig_rtnl_link_up(brig_rtnl *r, int ifindex, brig_error **err);
/* IPv6 off on a link: no link-local address, no router solicitation. */
int brig_rtnl_link_no_ipv6(brig_rtnl *r, int ifindex, brig_error **err);
int brig_rtnl_addr_add(brig_rtnl *r, int ifindex, uint32_t addr, int prefix, brig_error **err);
int brig_rtnl_route_default(brig_rtnl *r, int ifindex, uint32_t gw, brig_error **err);
/* Deletes a link by name; 0 also when it does not exist. */
int brig_rtnl_link_del(brig_rtnl *r, const char *ifname, brig_error **err);
/* First IPv4 address of a link (network order) or -1. */
int brig_rtnl_addr_get(brig_rtnl *r, int ifindex, uint32_t *addr, brig_error **err);
/* Calls fn for each link whose name starts with prefix. */
int brig_rtnl_links(brig_rtnl *r, const char *prefix, void (*fn)(const char *name, void *arg),
                    void *arg, brig_error **err);
/* Runs the in-namespace half of attach: lo up, peer_if addressed sb/31 and
 * up, IPv6 off, default route via gw.  Runs on a short-lived thread that joins
 * netns_fd; the caller's namespaces never change. */
/* The counters of link ifname (the host's end of a sandbox's pair). */
struct rtnl_link_stats64;
int brig_rtnl_link_stats(brig_rtnl *r, const char *ifname, struct rtnl_link_stats64 *out,
                         brig_error **err);
int brig_netns_configure(int netns_fd, uint32_t sb, uint32_t gw, brig_error **err);

/* ---- fw.c -------------------------------------------------------------- */

/* Every brig_fw_* call that changes the table is one transaction, run under
 * the context's lock, first come first served (a revocation's chunks let
 * every waiter in between two of them); callers need no lock of their own. */
typedef struct brig_fw brig_fw;

/* Creates (or atomically replaces) the table.  pool is "a.b.c.d/len";
 * isolate_forward adds a rule that drops forwarding between non-sandbox links
 * (used when brigd itself had to turn IPv4 forwarding on); connections_max is
 * how many tracked forwarded connections one sandbox may hold. */
int brig_fw_new(const char *pool, bool isolate_forward, int connections_max, brig_fw **out,
                brig_error **err);
/* Leaves the table in place (sandboxes stay firewalled while brigd is down). */
void brig_fw_free(brig_fw *fw);
/* Removes the table (tests, and a host giving networking up). */
void brig_fw_drop_table(brig_fw *fw);

/* The firewall state of one sandbox, as fw.c needs it. */
typedef struct brig_fw_sandbox {
    const char *ifname;
    uint32_t addr, gw; /* network order */
    const brig_egress *policy;
    uint32_t gen; /* conntrack mark of its connections (never 0) */
} brig_fw_sandbox;

/* Adds / removes every static element of a sandbox (one transaction); the
 * removal takes the elements the packet path added for its link too. */
int brig_fw_sandbox_add(brig_fw *fw, const brig_fw_sandbox *s, brig_error **err);
int brig_fw_sandbox_del(brig_fw *fw, const brig_fw_sandbox *s, brig_error **err);
/* Replaces the policy elements (old -> new) in one transaction. */
int brig_fw_sandbox_update(brig_fw *fw, const brig_fw_sandbox *old, const brig_fw_sandbox *new_,
                           brig_error **err);
/* One transaction: closes the n_evict addresses evict (present or not), then
 * opens the n addresses addrs (network order) for the sandbox's link for
 * ttls[i] seconds each (an open one gets the new timeout). */
int brig_fw_grant(brig_fw *fw, const char *ifname, const uint32_t *addrs, const int *ttls, size_t n,
                  const uint32_t *evict, size_t n_evict, brig_error **err);
/* One transaction: closes addresses of a link, whether or not they are still
 * there (timed out).  Its cost grows with n: the caller bounds n. */
int brig_fw_revoke(brig_fw *fw, const char *ifname, const uint32_t *addrs, size_t n,
                   brig_error **err);
/* Sends (on) or stops sending the link's TCP 80/443 to the egress proxy. */
int brig_fw_inject(brig_fw *fw, const char *ifname, bool on, brig_error **err);
/* Runs a command list; for tests and cleanup. */
int brig_fw_run(brig_fw *fw, const char *cmds, brig_error **err);

/* ---- dnsmsg.c ---------------------------------------------------------- */

enum {
    BRIG_DNS_NOERROR = 0,
    BRIG_DNS_FORMERR = 1,
    BRIG_DNS_SERVFAIL = 2,
    BRIG_DNS_NXDOMAIN = 3,
    BRIG_DNS_NOTIMP = 4,
    BRIG_DNS_REFUSED = 5
};

#define BRIG_DNS_NAME_MAX 255 /* a name in wire format, root label included */

typedef struct brig_dns_question {
    uint16_t id;
    char name[1024]; /* lower case, no trailing dot; escapes as ldns prints them (logs only) */
    uint8_t qname[BRIG_DNS_NAME_MAX]; /* the name in wire format, ASCII lower case: what the
                                         policy is checked against */
    size_t qname_len;
    char type[16]; /* "A", "AAAA", "TXT", "TYPE65280" ... */
    uint16_t qtype;
    bool has_edns;
} brig_dns_question;

/* Parses a query.  Returns 0, or a DNS rcode to answer with (FORMERR,
 * NOTIMP) when it is not one standard query with one question; -1 when the
 * message is too broken to answer at all (drop it). */
int brig_dns_parse_query(const uint8_t *msg, size_t len, brig_dns_question *q);

/* Builds a reply with rcode and no records to the query msg (its id and
 * question copied).  *out is malloc'd (caller frees).  -1 when it cannot. */
int brig_dns_reply(const uint8_t *msg, size_t len, int rcode, uint8_t **out, size_t *out_len);

/* The query to send upstream: msg with its id replaced; when for_tcp and the
 * query has no EDNS, an EDNS OPT advertising 4096 bytes is added so that long
 * answers come back whole over UDP.  *out is malloc'd. */
int brig_dns_upstream_query(const uint8_t *msg, size_t len, uint16_t new_id, bool for_tcp,
                            uint8_t **out, size_t *out_len);

typedef struct brig_dns_answer {
    int rcode;
    size_t n_a;
    uint32_t a[32]; /* A records (network order) */
    int a_ttl[32];
    size_t n_aaaa;
    struct in6_addr aaaa[16];
    bool truncated;
} brig_dns_answer;

/* Parses an upstream answer and checks it answers q (id upstream_id, same
 * name and type).  -1 when it does not (or is malformed). */
int brig_dns_parse_answer(const uint8_t *msg, size_t len, uint16_t upstream_id,
                          const brig_dns_question *q, brig_dns_answer *a);

/* Lowers every record's TTL above max to max, in place (the message keeps
 * its length; OPT records are left alone).  -1 when msg is malformed (it may
 * then be changed in part). */
int brig_dns_clamp_ttls(uint8_t *msg, size_t len, uint32_t max);

/* Whether the name qname (wire format, qname_len bytes, ASCII lower case) is
 * allowed by the policy's domains, compared label by label: exact match, or
 * "*.example.org" matching any name with more labels whose last ones are
 * example and org (not example.org itself).  A label holding a dot never
 * matches: policy labels have none. */
bool brig_dns_name_allowed(const brig_egress *policy, const uint8_t *qname, size_t qname_len);

/* ---- policy.c (module-internal helpers) -------------------------------- */

/* Deep copy of a policy (dst is overwritten). */
void brig_egress_copy(brig_egress *dst, const brig_egress *src);
/* The IPv4 CIDRs of a policy, normalised (host bits cleared) and with those
 * inside another one dropped.  *addrs and *lens are malloc'd. */
size_t brig_egress_cidrs4(const brig_egress *e, uint32_t **addrs, int **lens);

/* ---- net.c: the backend's operations ------------------------------------ */

/* One flavour of the backend: the operations behind net.h's functions, with
 * the same contracts.  net.c calls none of them with s == NULL (a sandbox
 * without a network: nothing to do). */
typedef struct brig_net_ops {
    const char *name; /* "host" | "none" */
    int (*attach)(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                  brig_net_sandbox **out, char **resolv_conf, brig_error **err);
    int (*reattach)(brig_net *n, const char *sandbox_id, int netns_fd, const brig_egress *policy,
                    brig_net_sandbox **out, brig_error **err);
    int (*set_policy)(brig_net *n, brig_net_sandbox *s, const brig_egress *policy,
                      brig_error **err);
    void (*forget)(brig_net *n, brig_net_sandbox *s);
    void (*detach)(brig_net *n, brig_net_sandbox *s);
    void (*release)(brig_net *n, brig_net_sandbox *s);
    void (*cleanup)(brig_net *n, char *const *live_ids, size_t n_live);
    json_t *(*log)(brig_net *n, brig_net_sandbox *s);
    void (*free)(brig_net *n);
} brig_net_ops;

/* What every flavour's state starts with. */
struct brig_net {
    const brig_net_ops *ops;
};

/* ---- the host flavour's state ------------------------------------------- */

typedef struct brig_net_host brig_net_host;
typedef struct brig_proxy brig_proxy; /* proxy.c */

typedef struct brig_net_grant {
    uint32_t addr;      /* network order */
    int64_t expires_ms; /* CLOCK_MONOTONIC */
    uint8_t *qname;     /* the query name that opened it (wire format) */
    size_t qname_len;
} brig_net_grant;

struct brig_net_sandbox {
    char *id;
    char ifname[16];
    int ifindex;
    int slot;           /* index in the pool */
    uint32_t addr, gw;  /* network order */
    brig_egress policy; /* own copy */
    uint32_t gen;       /* conntrack mark generation */
    bool dead;          /* detached; freed by the proxy thread */

    /* DNS proxy (proxy.c, dnsserve.c, upstream.c) */
    int udp_fd, tcp_fd;
    void *udp_watch, *tcp_watch;
    struct brig_dns_pending *queries; /* in flight upstream */
    int n_queries;
    struct brig_dns_conn *conns; /* accepted TCP connections */
    int n_conns;
    uint64_t round;    /* the proxy loop's round in which ... */
    int round_answers; /* ... this many of its upstream answers were handled */

    /* addresses the DNS proxy opened (allowlist), least recently answered
     * first; at most brig_net_host.grants_max (the oldest make room) */
    brig_net_grant *grants;
    size_t n_grants, cap_grants;

    /* network log: ring of JSON records (netlog.c), each also handed to the hook */
    brig_net_log_hook log_hook;
    void *log_hook_ctx;
    json_t **log;
    size_t log_start, log_len;

    /* credential injection (inject.c): its rules (NULL: none), its listeners */
    struct brig_inj_cfg *inj;
    int inj_fd[2]; /* HTTP, HTTPS; -1: none */

    brig_net_sandbox *next; /* registry list, then graveyard */
};

struct brig_net_host {
    brig_net base;        /* ops: net.c's host table */
    int owner_lock;       /* flock on /run/brig/net-<netns inode>.lock: one brigd per netns */
    bool forwarding_ours; /* brigd turned IPv4 forwarding on (state dir marker) */
    char *state_dir;
    uint32_t pool_base; /* host order */
    int pool_prefix;
    size_t n_slots;
    uint8_t *slot_used;
    size_t slot_cursor;
    struct sockaddr_storage upstream;
    socklen_t upstream_len;
    char upstream_str[96];

    brig_net_log_hook log_hook; /* each new network log record goes to it too */
    void *log_hook_ctx;

    size_t grants_max; /* DNS grants per sandbox (dns_grants_max) */
    int ttl_max;       /* seconds a grant lasts at most (dns_ttl_max) */

    pthread_mutex_t lock;
    brig_fw *fw;
    uint32_t next_gen;

    brig_net_sandbox *sandboxes; /* attached */
    brig_net_sandbox *graveyard; /* detached, freed by the proxy thread */

    brig_proxy *proxy;
    struct brig_injector *injector; /* inject.c */
};

/* The host flavour's state of a brig_net whose ops are the host table. */
static inline brig_net_host *brig_net_host_of(brig_net *n)
{
    return (brig_net_host *)n;
}

/* ---- attach.c (the host table's per-sandbox operations) ------------------ */

int brig_net_host_attach(brig_net *net, const char *sandbox_id, int netns_fd,
                         const brig_egress *policy, brig_net_sandbox **out, char **resolv_conf,
                         brig_error **err);
int brig_net_host_reattach(brig_net *net, const char *sandbox_id, int netns_fd,
                           const brig_egress *policy, brig_net_sandbox **out, brig_error **err);
int brig_net_host_set_policy(brig_net *net, brig_net_sandbox *s, const brig_egress *policy,
                             brig_error **err);
void brig_net_host_forget(brig_net *net, brig_net_sandbox *s);
void brig_net_host_detach(brig_net *net, brig_net_sandbox *s);
void brig_net_host_release(brig_net *net, brig_net_sandbox *s);
void brig_net_host_cleanup(brig_net *net, char *const *live_ids, size_t n_live);

/* ---- host.c ---------------------------------------------------------------- */

/* Host-wide set-up (brig_net_new's work); *out's ops are left for net.c to set. */
int brig_net_host_new(const brig_net_config *cfg, brig_net_host **out, brig_error **err);
/* Host-wide tear-down (brig_net_free's). */
void brig_net_host_free(brig_net *net);
/* Under n->lock: claims a free address slot (next fit), or -1 when the pool is
 * exhausted; frees one (-1: none).  slot_release takes the lock itself. */
int brig_net_slot_claim(brig_net_host *n);
void brig_net_slot_release(brig_net_host *n, int slot);
/* The host end (gateway) and the sandbox end of a slot's /31, network order. */
uint32_t brig_net_slot_gw(const brig_net_host *n, size_t slot);
uint32_t brig_net_slot_sb(const brig_net_host *n, size_t slot);
/* Writes value to a /proc/sys file; -1 with errno. */
int brig_net_sysctl_write(const char *path, const char *value);

/* ---- registry.c -------------------------------------------------------------- */

/* "brg" + 12 hex digits of a hash of the id: the host end's name. */
void brig_net_ifname_of(const char *id, char out[16]);
/* Whether a link name has that shape. */
bool brig_net_is_our_ifname(const char *name);
/* Under n->lock: the next conntrack mark generation (odd, so never 0). */
uint32_t brig_net_gen_next(brig_net_host *n);
/* Under n->lock: a new record for sandbox id under (a copy of) policy, with a
 * fresh generation and no slot; not registered. */
brig_net_sandbox *brig_net_sandbox_new(brig_net_host *n, const char *id, const brig_egress *policy);
/* Frees a record in no list whose proxy part is gone (brig_proxy_sandbox_free)
 * or was never made. */
void brig_net_sandbox_free(brig_net_sandbox *s);
/* Under n->lock: the attached sandbox of that id / on host link ifindex, or NULL. */
brig_net_sandbox *brig_net_find_id(brig_net_host *n, const char *id);
brig_net_sandbox *brig_net_by_ifindex(brig_net_host *n, int ifindex);

/* ---- grants.c ------------------------------------------------------------------ */

/* Under n->lock: opens the A records of the answer a to q for the sandbox
 * (when its policy still allows q's name), each for its TTL within
 * [BRIG_NET_TTL_MIN, n->ttl_max], closing its least recently answered
 * addresses beyond n->grants_max. */
void brig_net_grant_add(brig_net_host *n, brig_net_sandbox *s, const brig_dns_question *q,
                        const brig_dns_answer *a);
/* Under n->lock: takes the grants the policy p no longer allows (all when p
 * is NULL) out of s; their addresses are returned (malloc'd) for
 * brig_net_grants_close. */
uint32_t *brig_net_grants_take(brig_net_sandbox *s, const brig_egress *p, size_t *n_out);
/* With no lock held: closes addresses taken by brig_net_grants_take in chunks;
 * live: s is still attached (what its DNS opened again meanwhile is reopened). */
void brig_net_grants_close(brig_net_host *n, brig_net_sandbox *s, const uint32_t *addrs, size_t na,
                           bool live);
/* Frees s's grants (no firewall work). */
void brig_net_grants_dispose(brig_net_sandbox *s);

/* ---- netlog.c ------------------------------------------------------------------- */

/* "2026-12-01T10:00:00.123Z" of now. */
json_t *brig_net_time_now(void);
/* Under n->lock: appends a record to the sandbox's log (takes ownership). */
void brig_net_log_add(brig_net_sandbox *s, json_t *rec);
/* Under n->lock: appends a DNS record: the question, the verdict, the rcode,
 * the answer's addresses (a may be NULL), "udp" or "tcp". */
void brig_net_log_dns(brig_net_sandbox *s, const brig_dns_question *q, bool allowed, int rcode,
                      const brig_dns_answer *a, const char *proto);
/* The host table's log operation (takes n->lock). */
json_t *brig_net_host_log(brig_net *net, brig_net_sandbox *s);
/* Frees s's log. */
void brig_net_log_dispose(brig_net_sandbox *s);

/* ---- proxy.c --------------------------------------------------------------------- */

int brig_proxy_start(brig_net_host *n, brig_error **err);
void brig_proxy_stop(brig_net_host *n);
/* Under n->lock: opens the sandbox's DNS sockets on its gateway address and
 * watches them; closes and forgets them. */
int brig_proxy_add(brig_net_host *n, brig_net_sandbox *s, brig_error **err);
void brig_proxy_remove(brig_net_host *n, brig_net_sandbox *s);
/* Frees the proxy's part of a sandbox (fds left open are closed). */
void brig_proxy_sandbox_free(brig_net_sandbox *s);
/* Wakes the loop (to free the graveyard soon). */
void brig_proxy_wake(brig_net_host *n);

/* ---- inject.c ---------------------------------------------------------------------- */

/* Starts / stops the egress proxy's accept thread (stop waits for no connection). */
int brig_inject_start(brig_net_host *n, const brig_net_config *cfg, brig_error **err);
void brig_inject_stop(brig_net_host *n);
/* Sets s's rules (brig_net_set_inject). */
int brig_inject_set(brig_net_host *n, brig_net_sandbox *s, const brig_inject *inj,
                    brig_error **err);
/* Adds (or renews) a credential g for s's rules, until g->expires_ms (brig_net_inject_grant). */
int brig_inject_grant(brig_net_host *n, brig_net_sandbox *s, const brig_inject_secret *g,
                      brig_error **err);
/* Ends s's grant of name that expires at expires_ms, now (brig_net_inject_end). */
void brig_inject_end(brig_net_host *n, brig_net_sandbox *s, const char *name, int64_t expires_ms,
                     const char *reason);
/* Under n->lock: closes s's listeners and drops its rules (connections in flight
 * keep their own reference and end on their own).  Every record leaves the registry
 * through here (attach.c's unregister, or brig_inject_stop at shutdown). */
void brig_inject_remove(brig_net_host *n, brig_net_sandbox *s);

#endif
