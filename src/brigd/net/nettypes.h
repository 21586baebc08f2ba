/*
 * nettypes.h - the types of net.h's interface, and the functions of it that
 * net/'s own files define (policy.c, injtls.c) rather than the facade net.c.
 * A header without a .c: net/'s files (netshared.h) use these without
 * depending on net.c, which stands above them all and only calls down.
 * Everything outside net/ includes net.h, which includes this.
 */
#ifndef BRIG_NETTYPES_H
#define BRIG_NETTYPES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

typedef struct brig_net brig_net;                 /* host-wide state */
typedef struct brig_net_sandbox brig_net_sandbox; /* one sandbox's network */

typedef enum { BRIG_EGRESS_OPEN, BRIG_EGRESS_ALLOWLIST, BRIG_EGRESS_NONE } brig_egress_mode;

/* A project's egress policy (docs/network.md). */
typedef struct brig_egress {
    brig_egress_mode mode;
    char **domains; /* allowlist: "api.example.com", "*.example.org" */
    size_t n_domains;
    char **cidrs; /* allowlist: "203.0.113.0/24", "2001:db8::/32" */
    size_t n_cidrs;
    int *ports; /* allowlist: destination ports (none: any) */
    size_t n_ports;
} brig_egress;

/* Parses {"mode":"open"} / {"mode":"allowlist","domains":[…],"cidrs":[…],"ports":[…]} /
 * {"mode":"none"}; BRIG_E_INVALID with a clear message otherwise. */
int brig_egress_from_json(json_t *j, brig_egress *out, brig_error **err);
json_t *brig_egress_to_json(const brig_egress *e);
void brig_egress_dispose(brig_egress *e);

typedef struct brig_net_config {
    const char *state_dir;    /* for anything the module must persist across restarts */
    const char *pool;         /* address pool for sandbox links, e.g. "10.201.0.0/16" (the
                                 default when NULL); cut into one /31 per sandbox */
    const char *dns_upstream; /* "IP" or "IP:PORT" the DNS proxy forwards to; NULL: the
                                 environment's BRIG_DNS_UPSTREAM, else the first nameserver
                                 of the host's /etc/resolv.conf */
    int dns_grants_max;       /* addresses DNS answers keep open per sandbox (allowlist);
                                 0: 2048; at least 32 */
    int dns_ttl_max;          /* seconds such an address stays open at most, and the TTL
                                 answers tell the sandbox at most; 0: 3600; 10 .. 86400 */
    int connections_max;      /* tracked forwarded connections per sandbox; 0: 1024 */
    const char *ca_cert_pem;  /* the egress proxy's CA (brig_net_ca_make); NULL: HTTPS */
    const char *ca_key_pem;   /* toward injected hosts is relayed, never intercepted */
    const char *upstream_ca;  /* a CA file the proxy trusts upstream besides the host's
                                 store (tests: their own CA); NULL: none */
} brig_net_config;

/* Called with each record as it enters a sandbox's network log (the audit timeline
 * takes them: net/ never calls up).  It runs on the proxy thread with the module's
 * lock held: it must be quick and must not call net/; rec is lent. */
typedef void (*brig_net_log_hook)(void *ctx, const char *sandbox_id, const json_t *rec);

/* ---- credential injection (docs/secrets.md): net.h's brig_net_set_inject --------- */

typedef struct brig_inject_secret {
    const char *name;
    const char *value;       /* the real value */
    const char *placeholder; /* what the sandbox holds in its place */
    int64_t expires_ms;      /* CLOCK_REALTIME ms after which it is not injected; 0: never */
    bool expiry_logged;      /* net's own (under its lock): the expiry was recorded */
} brig_inject_secret;

typedef struct brig_inject_header {
    const char *name;
    const char *value; /* may hold {{secret:NAME}} */
} brig_inject_header;

typedef struct brig_inject_rule {
    const char *host; /* "api.example.com" or "*.example.com" (lower case) */
    const brig_inject_header *headers;
    size_t n_headers;
} brig_inject_rule;

typedef struct brig_inject {
    const brig_inject_rule *rules;
    size_t n_rules;
    const brig_inject_secret *secrets;
    size_t n_secrets;
} brig_inject;

/* A new CA for the egress proxy (EC P-256, self-signed, 10 years): PEM texts, malloc'd
 * (the caller seals the key and wipes it). */
int brig_net_ca_make(char **cert_pem, char **key_pem, brig_error **err);

#endif
