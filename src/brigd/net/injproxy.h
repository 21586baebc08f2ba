/*
 * injproxy.h - what the egress proxy's files share (inject.c, injconn.c,
 * injtls.c).  A connection runs on a thread of its own with blocking sockets and
 * timeouts; it holds a reference to its sandbox's rules (brig_inj_cfg), never the
 * sandbox's record, and reaches the record (policy, log) only by id under n->lock.
 */
#ifndef BRIG_INJPROXY_H
#define BRIG_INJPROXY_H

#include <stdatomic.h>

#include "httpreq.h"
#include "netshared.h"

#define BRIG_INJ_CONNS_MAX    64    /* connections in flight per sandbox */
#define BRIG_INJ_IO_TIMEOUT   30000 /* ms a connection may wait for either side */
#define BRIG_INJ_IDLE_TIMEOUT 15000 /* ms a kept-alive connection waits for its next request */
#define BRIG_INJ_REQUESTS_MAX 1000  /* requests one sandbox connection may carry */

/* A sandbox's rules, as brig_net_set_inject gave them (deep copies); shared by
 * its connections, freed with the last reference. */
typedef struct brig_inj_cfg {
    atomic_int refs;
    atomic_int active; /* connections in flight */
    char *sandbox_id;
    brig_inject_rule *rules;
    size_t n_rules;
    brig_inject_secret *secrets;
    size_t n_secrets;
} brig_inj_cfg;

/* One proxied connection from a sandbox. */
typedef struct brig_inj_conn {
    brig_net_host *n;
    brig_inj_cfg *cfg;                 /* a reference */
    int fd;                            /* the sandbox's end */
    int up;                            /* upstream; -1 until connected (set under n->lock) */
    struct sockaddr_in dst;            /* where the sandbox was going (SO_ORIGINAL_DST) */
    bool tls;                          /* came in on the HTTPS port (or a CONNECT) */
    bool resolved;                     /* dst is the proxy's own answer for a CONNECT's host */
    struct brig_injtls *tls_state;     /* the proxy's (NULL: HTTPS is relayed only) */
    void *ssl[2];                      /* SSL of the sandbox's side, the upstream's; NULL: plain */
    struct brig_inj_conn *prev, *next; /* the injector's list (stop shuts them down) */
} brig_inj_conn;

typedef struct brig_injtls brig_injtls;

/* Patterns looked for in a byte stream that arrives in pieces: bytes are held back
 * until no pattern can start in them any more (injflow.c). */
typedef struct brig_inj_scan {
    const char *pat[64];
    size_t len[64];
    const char *name[64];
    size_t n, maxlen;
    char *buf;
    size_t used, cap;
} brig_inj_scan;

/* What injconn.c hands injflow.c for one exchange, and what it says back. */
typedef struct brig_inj_exchange {
    bool no_body;                /* a HEAD request: its response has no body */
    bool closing;                /* the sandbox's connection ends after this exchange */
    bool retry_ok;               /* a kept upstream connection, a request without a body: its
                                    end before any answer is left to the caller (retry) */
    bool retry;                  /* out: that happened; nothing reached the sandbox */
    brig_inj_scan *mask, *guard; /* values masked coming back; placeholders refused going out */
    bool keep;                   /* out: the sandbox's connection may carry another request */
    bool keep_up;                /* out: and the upstream's too */
} brig_inj_exchange;

/* ---- injpolicy.c (for the connections) ----------------------------------------------- */

/* Whether the sandbox's egress policy lets it reach dst (what the firewall's
 * egress chain would decide for a forwarded connection); name (may be NULL): the
 * host the proxy resolved to dst itself (a CONNECT), which an allowlist may name. */
bool brig_inject_allows(brig_net_host *n, const char *sandbox_id, const struct sockaddr_in *dst,
                        const char *name);
/* Whether brigd's DNS upstream answers an A record addr for host (a plain-HTTP
 * request that is to get a secret must go to the rule host's own address). */
bool brig_inject_resolves_to(brig_net_host *n, const char *host, uint32_t addr);
/* The first address brigd's DNS upstream gives for host (network order), false when none
 * (a CONNECT's target). */
bool brig_inject_resolve(brig_net_host *n, const char *host, uint32_t *addr);
/* Appends rec (owned) to the sandbox's network log (and the audit timeline). */
void brig_inject_log(brig_net_host *n, const char *sandbox_id, json_t *rec);
/* Drops a reference to a sandbox's rules (NULL: nothing). */
void brig_inject_cfg_unref(brig_inj_cfg *c);
/* The sandbox's rules now (a new reference), or NULL when it has none any more. */
brig_inj_cfg *brig_inject_cfg_now(brig_net_host *n, const char *sandbox_id);

/* ---- injconn.c ----------------------------------------------------------------------- */

/* Serves c to the end, then closes its sockets (c and its reference stay the caller's). */
void brig_injconn_serve(brig_inj_conn *c);
/* The rule of cfg for host (lower case, no port), or NULL. */
const brig_inject_rule *brig_inject_rule_for(const brig_inj_cfg *cfg, const char *host);

/* ---- injflow.c ----------------------------------------------------------------------- */

void brig_inj_scan_add(brig_inj_scan *s, const char *pat, const char *name);
/* Appends data; masks (mask) every pattern now whole in the buffer, or reports the
 * first one's name in *hit.  Returns how many leading bytes may go out. */
size_t brig_inj_scan_feed(brig_inj_scan *s, const char *data, size_t len, bool mask,
                          const char **hit);
/* Drops the k leading bytes (sent). */
void brig_inj_scan_drop(brig_inj_scan *s, size_t k);
void brig_inj_scan_dispose(brig_inj_scan *s);

/* An answer of the proxy's own to the sandbox: status and {"error": msg}; the
 * connection then closes. */
void brig_injflow_answer(brig_inj_conn *c, int status, const char *msg);

/* Relays the request's body (its start: buf[head_len, *got)) and the response, both
 * framed, after injconn.c sent the request head; the bytes read past the request
 * (the next one's start) are left at buf's start, their count in *got, and
 * x->keep, x->keep_up say what may carry on.  -1 when the connection must end. */
int brig_injflow_run(brig_inj_conn *c, brig_inj_exchange *x, const brig_http_head *req, char *buf,
                     size_t head_len, size_t *got);

/* ---- injtls.c ------------------------------------------------------------------------ */

/* The proxy's TLS state from cfg's CA (*out NULL when cfg has none: HTTPS is then
 * relayed, never intercepted); BRIG_E_INVALID when the CA or upstream_ca do not load. */
int brig_injtls_new(const brig_net_config *cfg, brig_injtls **out, brig_error **err);
void brig_injtls_free(brig_injtls *t);
/* Peeks the server name of the ClientHello waiting on fd (nothing consumed): 1 and
 * out, 0 when it has none or is no TLS, -1 when the peer went away or was too slow. */
int brig_injtls_sni(int fd, char out[256]);
/* The sandbox side's handshake with a leaf for host (c->ssl[0]); -1 when it fails. */
int brig_injtls_accept(brig_inj_conn *c, const char *host);
/* The upstream side's handshake on c->up, verified for host (c->ssl[1]); -1 with
 * *why (malloc'd) when it fails. */
int brig_injtls_connect(brig_inj_conn *c, const char *host, char **why);
/* Frees both sides' SSL (the sockets stay). */
void brig_injtls_close(brig_inj_conn *c);
/* Frees one side's SSL (the socket stays). */
void brig_injtls_close_side(brig_inj_conn *c, int side);
/* A side's read (0: the sandbox's, 1: upstream): bytes, 0 at its end, -1 on an error
 * or timeout, -2 when TLS read only a record without data (poll again). */
ssize_t brig_injio_read(brig_inj_conn *c, int side, void *b, size_t n);
/* Writes all of b to a side; -1 on failure. */
int brig_injio_write(brig_inj_conn *c, int side, const void *b, size_t n);
/* Whether TLS holds read data of a side that poll cannot see. */
bool brig_injio_pending(brig_inj_conn *c, int side);

#endif
