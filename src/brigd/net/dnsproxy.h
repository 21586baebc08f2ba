/*
 * dnsproxy.h - what the DNS proxy's files share (proxy.c, dnsserve.c,
 * upstream.c, nflog.c): the watches of its epoll loop, a sandbox's TCP
 * connections and upstream queries in flight.  Everything here runs on the
 * proxy thread, or under n->lock (netshared.h).
 */
#ifndef BRIG_DNSPROXY_H
#define BRIG_DNSPROXY_H

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include "log.h"
#include "netshared.h"

struct mnl_socket;

typedef enum { W_WAKE, W_NFLOG, W_UDP, W_TCP_LISTEN, W_TCP_CONN, W_UPSTREAM } watch_type;

/* What an epoll event points at. */
typedef struct watch {
    watch_type type;
    brig_net_sandbox *s; /* NULL for W_WAKE, W_NFLOG */
    void *obj;           /* the brig_dns_conn or brig_dns_pending */
} watch;

/* A DNS-over-TCP connection from a sandbox. */
typedef struct brig_dns_conn {
    watch w;
    int fd;
    uint8_t buf[2 + 65535];
    size_t len;
    int64_t deadline;
    struct brig_dns_conn *next;
} brig_dns_conn;

/* A query of a sandbox in flight upstream. */
typedef struct brig_dns_pending {
    watch w;
    int fd;                        /* connected to the upstream */
    struct sockaddr_storage local; /* fd's own address (its conntrack tuple's source) */
    uint16_t client_id, upstream_id;
    brig_dns_question q;
    struct sockaddr_in client; /* UDP client */
    brig_dns_conn *conn;       /* TCP client (NULL when it went away) */
    int64_t deadline;
    uint8_t *msg; /* the sandbox's query, for a SERVFAIL on timeout */
    size_t msg_len;
    struct brig_dns_pending *next;
} brig_dns_pending;

struct brig_proxy {
    int ep;
    int wake_fd;
    struct mnl_socket *nflog;
    struct mnl_socket *ct; /* ctnetlink, for deleting the upstream queries' entries */
    watch wake_w, nflog_w;
    pthread_t thread;
    bool running;
    bool stop;
    uint64_t round;                                 /* loop rounds so far */
    uint8_t buf[65536] __attribute__((aligned(8))); /* netlink messages need it */
};

static inline void brig_proxy_watch_add(brig_proxy *p, int fd, watch *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    if (epoll_ctl(p->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        brig_warn("net: epoll add: %s", strerror(errno));
}

static inline void brig_proxy_watch_del(brig_proxy *p, int fd)
{
    epoll_ctl(p->ep, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- dnsserve.c: the sandbox side ------------------------------------------ */

/* Reads a few datagrams of the sandbox's UDP socket and handles each query. */
void brig_dnsserve_udp(brig_net_host *n, brig_net_sandbox *s);
/* Accepts a TCP connection (at most BRIG_NET_MAX_TCP per sandbox). */
void brig_dnsserve_accept(brig_net_host *n, brig_net_sandbox *s);
/* Reads from a TCP connection and handles each whole query in it. */
void brig_dnsserve_tcp(brig_net_host *n, brig_net_sandbox *s, brig_dns_conn *c);
/* An upstream socket is readable: when it holds the answer, opens what it
 * names (allowlist), logs it, passes it on and frees pq. */
void brig_dnsserve_answer(brig_net_host *n, brig_net_sandbox *s, brig_dns_pending *pq);
/* The earliest deadline of any query or connection (INT64_MAX: none), and
 * the expiry of those past theirs (a SERVFAIL, a closed connection). */
int64_t brig_dnsserve_deadline(brig_net_host *n);
void brig_dnsserve_expire(brig_net_host *n);

/* ---- upstream.c: the upstream side ----------------------------------------- */

/* Sends the sandbox's query msg (parsed as q) upstream from a socket of its
 * own and watches it; the answer goes to client (UDP) or c (TCP).  -1 when
 * it could not be sent (the caller answers SERVFAIL). */
int brig_upstream_send(brig_net_host *n, brig_net_sandbox *s, const uint8_t *msg, size_t len,
                       const brig_dns_question *q, const struct sockaddr_in *client,
                       brig_dns_conn *c);
/* Reads pq's socket into the proxy's buffer: the answer's length with *a
 * parsed, or -1 when it holds none to pq's question (keep waiting). */
ssize_t brig_upstream_read(brig_net_host *n, brig_dns_pending *pq, brig_dns_answer *a);
/* Closes pq's socket and deletes its conntrack entry; pq stays listed. */
void brig_upstream_close(brig_net_host *n, brig_dns_pending *pq);
/* Closes, unlists and frees pq. */
void brig_upstream_free(brig_net_host *n, brig_net_sandbox *s, brig_dns_pending *pq);

/* ---- nflog.c: denied packets ------------------------------------------------- */

/* A socket bound to BRIG_NET_LOG_GROUP, or NULL (warned: denied connections
 * are then not logged). */
struct mnl_socket *brig_nflog_open(void);
/* Under n->lock: turns the records waiting on nl into network-log records of
 * their sandboxes; buf (cap bytes, 8-aligned) is scratch. */
void brig_nflog_read(brig_net_host *n, struct mnl_socket *nl, uint8_t *buf, size_t cap);

#endif
