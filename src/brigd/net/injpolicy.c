/*
 * injpolicy.c - what the egress proxy's connections ask of the module (injconn.c):
 * the sandbox's egress policy applied to a proxied connection the way fw.c's
 * egress chain applies it to a forwarded one (the proxy's own connections leave
 * from the host, so the firewall never sees them), brigd's DNS upstream's answer
 * for a rule's host, the network log, and the sandbox's rules as they are now.
 */
#include <arpa/inet.h>
#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "injproxy.h"

static bool in4(uint32_t h, uint32_t net, int len)
{
    uint32_t mask = len == 0 ? 0 : 0xffffffffu << (32 - len);
    return (h & mask) == (net & mask);
}

static bool port_ok(const brig_egress *p, int port)
{
    for (size_t i = 0; i < p->n_ports; i++)
        if (p->ports[i] == port)
            return true;
    return p->n_ports == 0;
}

/* Whether the allowlist names host (a CONNECT's target: the sandbox did not ask its
 * DNS for it, so no answer granted the address). */
static bool name_allowed(const brig_egress *p, const char *host)
{
    uint8_t wire[256];
    size_t k = 0;
    for (const char *l = host; *l;) {
        size_t n = strcspn(l, ".");
        if (n == 0 || n > 63 || k + 1 + n + 1 > sizeof(wire))
            return false;
        wire[k++] = (uint8_t)n;
        memcpy(wire + k, l, n);
        k += n;
        l += n + (l[n] == '.');
    }
    wire[k++] = 0;
    return brig_dns_name_allowed(p, wire, k);
}

/* fw.c's egress chain, for one address and port (host order); name: the host the
 * proxy resolved itself (NULL: none), which the allowlist may name. */
static bool policy_allows(brig_net_host *n, brig_net_sandbox *s, uint32_t h, int port,
                          const char *name)
{
    static const struct {
        uint32_t net;
        int len;
    } always[] = {{0x00000000, 8},  {0x7f000000, 8},  {0xa9fe0000, 16},
                  {0x646464c8, 32}, {0xc0000000, 24}, {0xe0000000, 3}},
      priv[] = {
          {0x0a000000, 8}, {0x64400000, 10}, {0xac100000, 12}, {0xc0a80000, 16}, {0xc6120000, 15}};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(always); i++)
        if (in4(h, always[i].net, always[i].len))
            return false;
    if (in4(h, n->pool_base, n->pool_prefix))
        return false;
    uint32_t *addrs = NULL;
    int *lens = NULL;
    size_t k = brig_egress_cidrs4(&s->policy, &addrs, &lens);
    bool cidr = false;
    for (size_t i = 0; i < k && !cidr; i++)
        cidr = in4(h, ntohl(addrs[i]), lens[i]);
    free(addrs);
    free(lens);
    if (cidr)
        return port_ok(&s->policy, port);
    for (size_t i = 0; i < BRIG_ARRAY_LEN(priv); i++)
        if (in4(h, priv[i].net, priv[i].len))
            return false;
    if (s->policy.mode == BRIG_EGRESS_OPEN)
        return true;
    if (s->policy.mode != BRIG_EGRESS_ALLOWLIST)
        return false;
    int64_t now = brig_now_mono_ms();
    for (size_t i = 0; i < s->n_grants; i++)
        if (ntohl(s->grants[i].addr) == h && s->grants[i].expires_ms > now)
            return port_ok(&s->policy, port);
    return name && name_allowed(&s->policy, name) && port_ok(&s->policy, port);
}

bool brig_inject_allows(brig_net_host *n, const char *sandbox_id, const struct sockaddr_in *dst,
                        const char *name)
{
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = brig_net_find_id(n, sandbox_id);
    bool ok = s && policy_allows(n, s, ntohl(dst->sin_addr.s_addr), ntohs(dst->sin_port), name);
    pthread_mutex_unlock(&n->lock);
    return ok;
}

/* The A records brigd's DNS upstream gives for host (at most max, network order);
 * how many. */
static size_t a_records(brig_net_host *n, const char *host, uint32_t *out, size_t max)
{
    if (n->upstream.ss_family != AF_INET)
        return 0;
    const struct sockaddr_in *u = (const struct sockaddr_in *)&n->upstream;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &u->sin_addr, ip, sizeof(ip));
    ldns_resolver *r = ldns_resolver_new();
    ldns_rdf *ns = ldns_rdf_new_frm_str(LDNS_RDF_TYPE_A, ip);
    ldns_rdf *name = ldns_dname_new_frm_str(host);
    size_t k = 0;
    if (r && ns && name && ldns_resolver_push_nameserver(r, ns) == LDNS_STATUS_OK) {
        ldns_resolver_set_port(r, ntohs(u->sin_port));
        ldns_resolver_set_timeout(r, (struct timeval){3, 0});
        ldns_resolver_set_retry(r, 1);
        ldns_pkt *p = ldns_resolver_query(r, name, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
        ldns_rr_list *a =
            p ? ldns_pkt_rr_list_by_type(p, LDNS_RR_TYPE_A, LDNS_SECTION_ANSWER) : NULL;
        for (size_t i = 0; a && i < ldns_rr_list_rr_count(a) && k < max; i++) {
            ldns_rdf *d = ldns_rr_rdf(ldns_rr_list_rr(a, i), 0);
            if (d && ldns_rdf_size(d) == 4)
                memcpy(&out[k++], ldns_rdf_data(d), 4);
        }
        ldns_rr_list_deep_free(a);
        ldns_pkt_free(p);
    }
    ldns_rdf_deep_free(ns);
    ldns_rdf_deep_free(name);
    if (r)
        ldns_resolver_deep_free(r);
    return k;
}

bool brig_inject_resolves_to(brig_net_host *n, const char *host, uint32_t addr)
{
    uint32_t a[16];
    size_t k = a_records(n, host, a, BRIG_ARRAY_LEN(a));
    for (size_t i = 0; i < k; i++)
        if (a[i] == addr)
            return true;
    return false;
}

bool brig_inject_resolve(brig_net_host *n, const char *host, uint32_t *addr)
{
    return a_records(n, host, addr, 1) == 1;
}

void brig_inject_log(brig_net_host *n, const char *sandbox_id, json_t *rec)
{
    json_object_set_new(rec, "time", brig_net_time_now());
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = brig_net_find_id(n, sandbox_id);
    if (s)
        brig_net_log_add(s, rec);
    else
        json_decref(rec);
    pthread_mutex_unlock(&n->lock);
}

/* ---- rules ---------------------------------------------------------------------------- */

void brig_inject_cfg_unref(brig_inj_cfg *c)
{
    if (c == NULL || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    for (size_t i = 0; i < c->n_rules; i++) {
        for (size_t k = 0; k < c->rules[i].n_headers; k++) {
            free((char *)c->rules[i].headers[k].name);
            free((char *)c->rules[i].headers[k].value);
        }
        free((void *)c->rules[i].headers);
        free((char *)c->rules[i].host);
    }
    for (size_t i = 0; i < c->n_secrets; i++) {
        char *v = (char *)c->secrets[i].value;
        explicit_bzero(v, strlen(v));
        free(v);
        free((char *)c->secrets[i].name);
        free((char *)c->secrets[i].placeholder);
    }
    free(c->rules);
    free(c->secrets);
    free(c->sandbox_id);
    free(c);
}

brig_inj_cfg *brig_inject_cfg_now(brig_net_host *n, const char *sandbox_id)
{
    pthread_mutex_lock(&n->lock);
    brig_net_sandbox *s = brig_net_find_id(n, sandbox_id);
    brig_inj_cfg *c = s ? s->inj : NULL;
    if (c)
        atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&n->lock);
    return c;
}
