/*
 * net_internal.h - what the files of src/brigd/net/ share, and nothing else
 * includes.  The module is split by concern:
 *
 *   net.c     orchestrator: brig_net_* (net.h), the address pool, the registry
 *             of attached sandboxes, their network logs
 *   rtnl.c    rtnetlink over libmnl: veth pair, addresses, routes, links
 *   fw.c      nftables over libnftables: the host-wide table and each
 *             sandbox's set elements
 *   dnsmsg.c  DNS message handling over ldns (pure: no sockets; fuzzed)
 *   proxy.c   the event loop thread: DNS proxy sockets, upstream queries,
 *             NFLOG records of denied packets
 *
 * Locking: brig_net.lock guards the registry, every sandbox's mutable fields
 * and the proxy's state; brig_net.fw_lock guards the nftables context.  Order:
 * lock, then fw_lock.  Netlink work runs with neither held.
 */
#ifndef BRIG_NET_INTERNAL_H
#define BRIG_NET_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net.h"
#include "util.h"

#define BRIG_NET_IFPREFIX            "brg"  /* host-side links: "brg" + 12 hex digits */
#define BRIG_NET_PEER_IF             "eth0" /* the sandbox's end */
#define BRIG_NET_TABLE               "brig" /* nftables table (family inet) */
#define BRIG_NET_LOG_GROUP           17010  /* NFLOG group of denied packets */
#define BRIG_NET_LOG_MAX             1000   /* records kept per sandbox */
#define BRIG_NET_TTL_MIN             10     /* seconds an answered address stays open, at least */
#define BRIG_NET_TTL_MAX             86400  /* ... and at most */
#define BRIG_NET_MAX_QUERIES         64     /* upstream queries in flight per sandbox */
#define BRIG_NET_MAX_TCP             8      /* DNS-over-TCP connections per sandbox */
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
int brig_netns_configure(int netns_fd, uint32_t sb, uint32_t gw, brig_error **err);

/* ---- fw.c -------------------------------------------------------------- */

typedef struct brig_fw brig_fw;

/* Creates (or atomically replaces) the table.  pool is "a.b.c.d/len";
 * isolate_forward adds a rule that drops forwarding between non-sandbox links
 * (used when brigd itself had to turn IPv4 forwarding on). */
int brig_fw_new(const char *pool, bool isolate_forward, brig_fw **out, brig_error **err);
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

/* Adds / removes every static element of a sandbox (one transaction). */
int brig_fw_sandbox_add(brig_fw *fw, const brig_fw_sandbox *s, brig_error **err);
int brig_fw_sandbox_del(brig_fw *fw, const brig_fw_sandbox *s, brig_error **err);
/* Replaces the policy elements (old -> new) in one transaction. */
int brig_fw_sandbox_update(brig_fw *fw, const brig_fw_sandbox *old, const brig_fw_sandbox *new_,
                           brig_error **err);
/* Opens daddr (network order) for the sandbox's link for ttl seconds. */
int brig_fw_grant(brig_fw *fw, const char *ifname, const uint32_t *addrs, const int *ttls, size_t n,
                  brig_error **err);
/* Best effort: removes grants and the log rate-limit element of a link. */
void brig_fw_revoke(brig_fw *fw, const char *ifname, const uint32_t *addrs, size_t n);
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

typedef struct brig_dns_question {
    uint16_t id;
    char name[1024]; /* lower case, no trailing dot; escapes as ldns prints them */
    char type[16];   /* "A", "AAAA", "TXT", "TYPE65280" ... */
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

/* Whether name (lower case, no trailing dot) is allowed by the policy's
 * domains: exact match, or "*.example.org" matching any name that ends with
 * ".example.org" (not example.org itself). */
bool brig_dns_name_allowed(const brig_egress *policy, const char *name);

/* ---- policy.c (module-internal helpers) -------------------------------- */

/* Deep copy of a policy (dst is overwritten). */
void brig_egress_copy(brig_egress *dst, const brig_egress *src);
/* The IPv4 CIDRs of a policy, normalised (host bits cleared) and with those
 * inside another one dropped.  *addrs and *lens are malloc'd. */
size_t brig_egress_cidrs4(const brig_egress *e, uint32_t **addrs, int **lens);

/* ---- proxy.c ----------------------------------------------------------- */

typedef struct brig_proxy brig_proxy;

int brig_proxy_start(brig_net *n, brig_error **err);
void brig_proxy_stop(brig_net *n);
/* Under n->lock: opens the sandbox's DNS sockets on its gateway address and
 * watches them; closes and forgets them. */
int brig_proxy_add(brig_net *n, brig_net_sandbox *s, brig_error **err);
void brig_proxy_remove(brig_net *n, brig_net_sandbox *s);
/* Frees the proxy's part of a sandbox (fds left open are closed). */
void brig_proxy_sandbox_free(brig_net_sandbox *s);
/* Wakes the loop (to free the graveyard soon). */
void brig_proxy_wake(brig_net *n);

/* ---- net.c (shared with proxy.c) ---------------------------------------- */

typedef struct brig_net_grant {
    uint32_t addr;      /* network order */
    int64_t expires_ms; /* CLOCK_MONOTONIC */
    char *name;         /* the query name that opened it */
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

    /* DNS proxy (proxy.c) */
    int udp_fd, tcp_fd;
    void *udp_watch, *tcp_watch;
    struct brig_dns_pending *queries; /* in flight upstream */
    int n_queries;
    struct brig_dns_conn *conns; /* accepted TCP connections */
    int n_conns;

    /* addresses the DNS proxy opened (allowlist) */
    brig_net_grant *grants;
    size_t n_grants, cap_grants;

    /* network log: ring of JSON records */
    json_t **log;
    size_t log_start, log_len;

    brig_net_sandbox *next; /* registry list, then graveyard */
};

struct brig_net {
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

    pthread_mutex_t lock;
    pthread_mutex_t fw_lock;
    brig_fw *fw;
    uint32_t next_gen;

    brig_net_sandbox *sandboxes; /* attached */
    brig_net_sandbox *graveyard; /* detached, freed by the proxy thread */

    brig_proxy *proxy;
};

/* Under n->lock: appends a record to the sandbox's log (takes ownership). */
void brig_net_log_add(brig_net_sandbox *s, json_t *rec);
/* Under n->lock: the sandbox attached to host link ifindex, or NULL. */
brig_net_sandbox *brig_net_by_ifindex(brig_net *n, int ifindex);
/* Under n->lock: records grants the DNS proxy made (and opens them). */
void brig_net_grant_add(brig_net *n, brig_net_sandbox *s, const char *name,
                        const brig_dns_answer *a);
/* Frees a detached sandbox (proxy thread, or brig_net_free). */
void brig_net_sandbox_free(brig_net_sandbox *s);
/* "2026-12-01T10:00:00.123Z" of now. */
json_t *brig_net_time_now(void);

#endif
