/*
 * registry.c - the host flavour's record of one sandbox's network (struct
 * brig_net_sandbox in netshared.h) and the registry of attached ones:
 * making and freeing a record, its link name, its conntrack generation,
 * lookups by id and by host link.  The list itself (n->sandboxes, then
 * n->graveyard) is linked and unlinked by attach.c and emptied by the proxy
 * thread, all under n->lock.
 */
#include <stdio.h>
#include <string.h>

#include "netshared.h"

/* "brg" + 12 hex digits of a 64-bit FNV-1a hash of the id: predictable (the
 * next start finds the link again), 15 characters (IFNAMSIZ - 1). */
void brig_net_ifname_of(const char *id, char out[16])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    snprintf(out, 16, BRIG_NET_IFPREFIX "%012llx", (unsigned long long)(h & 0xffffffffffffull));
}

bool brig_net_is_our_ifname(const char *name)
{
    if (strncmp(name, BRIG_NET_IFPREFIX, 3) != 0 || strlen(name) != 15)
        return false;
    for (const char *p = name + 3; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

uint32_t brig_net_gen_next(brig_net_host *n)
{
    uint32_t gen = n->next_gen;
    n->next_gen += 2; /* stays odd, so never 0 */
    return gen;
}

brig_net_sandbox *brig_net_sandbox_new(brig_net_host *n, const char *id, const brig_egress *policy)
{
    brig_net_sandbox *s = brig_xcalloc(1, sizeof(*s));
    s->id = brig_xstrdup(id);
    brig_net_ifname_of(id, s->ifname);
    s->slot = -1;
    s->udp_fd = s->tcp_fd = -1;
    s->inj_fd[0] = s->inj_fd[1] = -1;
    brig_egress_copy(&s->policy, policy);
    s->gen = brig_net_gen_next(n);
    s->log_hook = n->log_hook;
    s->log_hook_ctx = n->log_hook_ctx;
    return s;
}

void brig_net_sandbox_free(brig_net_sandbox *s)
{
    if (s == NULL)
        return;
    brig_net_grants_dispose(s);
    brig_net_log_dispose(s);
    brig_egress_dispose(&s->policy);
    free(s->id);
    free(s);
}

brig_net_sandbox *brig_net_find_id(brig_net_host *n, const char *id)
{
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

brig_net_sandbox *brig_net_by_ifindex(brig_net_host *n, int ifindex)
{
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next)
        if (s->ifindex == ifindex)
            return s;
    return NULL;
}
