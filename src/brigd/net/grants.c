/*
 * grants.c - DNS grants: under an allowlist policy, the addresses an answer
 * of the sandbox's DNS proxy named are opened in the firewall (fw.c's
 * allow_dns) for the answer's TTL, before the answer reaches the sandbox.
 * A sandbox holds at most n->grants_max of them (the least recently answered
 * make room); a policy change or a detach closes those no longer allowed, in
 * chunks of BRIG_NET_REVOKE_CHUNK so that no nftables transaction is long.
 *
 * The grants of a sandbox are kept least recently answered first: pruning
 * and removals keep the order, and an answered address moves to the end.
 */
#include <string.h>

#include "log.h"
#include "netshared.h"

static void grant_dispose(brig_net_grant *g)
{
    free(g->qname);
    g->qname = NULL;
}

void brig_net_grants_dispose(brig_net_sandbox *s)
{
    for (size_t i = 0; i < s->n_grants; i++)
        grant_dispose(&s->grants[i]);
    free(s->grants);
    s->grants = NULL;
    s->n_grants = s->cap_grants = 0;
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

void brig_net_grant_add(brig_net_host *n, brig_net_sandbox *s, const brig_dns_question *q,
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
    int rc = brig_fw_grant(n->fw, s->ifname, addrs, ttls, na, evict, ne, &err);
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

uint32_t *brig_net_grants_take(brig_net_sandbox *s, const brig_egress *p, size_t *n_out)
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
static void grants_reopen(brig_net_host *n, brig_net_sandbox *s, const uint32_t *addrs, size_t na)
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
    int rc = brig_fw_grant(n->fw, s->ifname, again, ttls, k, NULL, 0, &err);
    if (rc < 0) {
        brig_warn("net: %s: reopen DNS grants: %s", s->id, err->msg);
        brig_error_clear(&err);
    }
}

/* Closes addresses taken by brig_net_grants_take, BRIG_NET_REVOKE_CHUNK per
 * transaction, under the firewall's lock alone, which whoever waits for it gets
 * between two chunks (it is FIFO): other sandboxes' DNS and attaches go on
 * meanwhile.  live: s is still attached, and its DNS may open one of these
 * addresses again (for a name the new policy allows) while a chunk closes it:
 * such ones are opened again after the chunk.  No caller holds a lock. */
void brig_net_grants_close(brig_net_host *n, brig_net_sandbox *s, const uint32_t *addrs, size_t na,
                           bool live)
{
    for (size_t i = 0; i < na; i += BRIG_NET_REVOKE_CHUNK) {
        size_t m = na - i < BRIG_NET_REVOKE_CHUNK ? na - i : BRIG_NET_REVOKE_CHUNK;
        brig_error *err = NULL;
        int rc = brig_fw_revoke(n->fw, s->ifname, addrs + i, m, &err);
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
