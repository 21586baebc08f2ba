/*
 * nfset.c - set elements through netlink (nfset.h).
 *
 * One transaction is one sendmsg: a batch (begin, one message per run of elements of the
 * same set and verb, end), each message asking for an acknowledgement.  The kernel handles
 * the batch inside that sendmsg and queues one answer per message (an error for a message
 * aborts the whole batch), so the answers are read until all have come or one was an
 * error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "nfset.h"
#include "util.h"

struct brig_nfset {
    struct mnl_socket *nl;
    uint32_t seq; /* the next message's number */
    char table[32];
};

static void field(brig_nfkey *k, const void *v, size_t len)
{
    size_t slot = (len + 3) & ~(size_t)3;
    if (k->len + slot > sizeof(k->b))
        abort(); /* a key wider than any set of fw.c's: a bug */
    memset(k->b + k->len, 0, slot);
    memcpy(k->b + k->len, v, len);
    k->len = (uint8_t)(k->len + slot);
}

void brig_nfkey_ifname(brig_nfkey *k, const char *ifname)
{
    char name[IFNAMSIZ] = {0};
    strncpy(name, ifname, sizeof(name) - 1);
    field(k, name, sizeof(name));
}

void brig_nfkey_ip4(brig_nfkey *k, uint32_t addr_be)
{
    field(k, &addr_be, sizeof(addr_be));
}

void brig_nfkey_port(brig_nfkey *k, uint16_t port)
{
    uint16_t be = htons(port);
    field(k, &be, sizeof(be));
}

void brig_nfkey_mark(brig_nfkey *k, uint32_t mark)
{
    field(k, &mark, sizeof(mark));
}

int brig_nfset_open(const char *table, brig_nfset **out, brig_error **err)
{
    brig_nfset *s = brig_xcalloc(1, sizeof(*s));
    snprintf(s->table, sizeof(s->table), "%s", table);
    s->nl = mnl_socket_open(NETLINK_NETFILTER);
    if (s->nl == NULL || mnl_socket_bind(s->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int e = errno;
        brig_nfset_close(s);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, e, "nftables: netlink socket");
    }
    /* Answers carry only the header of the message they answer. */
    int on = 1;
    mnl_socket_setsockopt(s->nl, NETLINK_CAP_ACK, &on, sizeof(on));
    /* Never wait forever for an answer the kernel does not send. */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(mnl_socket_get_fd(s->nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    s->seq = (uint32_t)time(NULL);
    *out = s;
    return 0;
}

void brig_nfset_close(brig_nfset *s)
{
    if (s == NULL)
        return;
    if (s->nl)
        mnl_socket_close(s->nl);
    free(s);
}

static struct nftnl_set_elem *elem_of(const brig_nfelem *e)
{
    struct nftnl_set_elem *x = nftnl_set_elem_alloc();
    if (x == NULL)
        abort();
    nftnl_set_elem_set(x, NFTNL_SET_ELEM_KEY, e->key.b, e->key.len);
    if (e->key_end.len)
        nftnl_set_elem_set(x, NFTNL_SET_ELEM_KEY_END, e->key_end.b, e->key_end.len);
    if (e->data == BRIG_NFDATA_MARK) {
        nftnl_set_elem_set(x, NFTNL_SET_ELEM_DATA, &e->mark, sizeof(e->mark));
    } else if (e->data == BRIG_NFDATA_JUMP) {
        nftnl_set_elem_set_u32(x, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
        nftnl_set_elem_set_str(x, NFTNL_SET_ELEM_CHAIN, e->chain);
    }
    if (e->timeout_s && !e->del)
        nftnl_set_elem_set_u64(x, NFTNL_SET_ELEM_TIMEOUT, (uint64_t)e->timeout_s * 1000);
    return x;
}

/* One message for elems[i..j) (same set, same verb). */
static void message(brig_nfset *s, struct mnl_nlmsg_batch *b, const brig_nfelem *elems, size_t i,
                    size_t j)
{
    struct nftnl_set *set = nftnl_set_alloc();
    if (set == NULL)
        abort();
    nftnl_set_set_str(set, NFTNL_SET_TABLE, s->table);
    nftnl_set_set_str(set, NFTNL_SET_NAME, elems[i].set);
    nftnl_set_set_u32(set, NFTNL_SET_FAMILY, NFPROTO_INET);
    for (size_t k = i; k < j; k++)
        nftnl_set_elem_add(set, elem_of(&elems[k]));
    uint16_t type = elems[i].del ? NFT_MSG_DELSETELEM : NFT_MSG_NEWSETELEM;
    uint16_t flags = (elems[i].del ? 0 : NLM_F_CREATE) | NLM_F_ACK;
    struct nlmsghdr *nlh =
        nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), type, NFPROTO_INET, flags, s->seq++);
    nftnl_set_elems_nlmsg_build_payload(nlh, set);
    nftnl_set_free(set);
    mnl_nlmsg_batch_next(b);
}

/* Reads the answers to the messages numbered [lo, hi): 0, or the first error's errno and
 * the number of the message it answers.  An answer outside the batch is a late one of an
 * earlier transaction that stopped waiting: skipped. */
static int answers(brig_nfset *s, uint32_t lo, uint32_t hi, uint32_t *failed)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    int first = 0;
    uint32_t got = 0;
    while (got < hi - lo) {
        ssize_t r = recv(mnl_socket_get_fd(s->nl), buf, sizeof(buf), first ? MSG_DONTWAIT : 0);
        if (r < 0)
            return first ? first : errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno;
        int left = (int)r;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
            /* Unsigned differences: numbers may wrap.  The batch's begin (lo - 1) and end
             * (hi) are answered only when the whole batch is refused. */
            uint32_t k = h->nlmsg_seq - (lo - 1);
            if (h->nlmsg_type != NLMSG_ERROR || k > hi - lo + 1)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (k >= 1 && k <= hi - lo)
                got++;
            if (e->error && !first) {
                first = -e->error;
                *failed = k >= 1 && k <= hi - lo ? h->nlmsg_seq : lo;
            }
        }
    }
    return first;
}

/* The end of the run of elements from i on that one message carries: same set, same verb. */
static size_t run_end(const brig_nfelem *elems, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && elems[j].del == elems[i].del && strcmp(elems[j].set, elems[i].set) == 0)
        j++;
    return j;
}

/* The k-th message's first element. */
static const brig_nfelem *group(const brig_nfelem *elems, size_t n, uint32_t k)
{
    size_t i = 0;
    for (uint32_t m = 0; m < k && i < n; m++)
        i = run_end(elems, n, i);
    return &elems[i < n ? i : 0];
}

int brig_nfset_apply(brig_nfset *s, const brig_nfelem *elems, size_t n, brig_error **err)
{
    if (n == 0)
        return 0;
    /* Enough for the largest element message nftnl builds, per element and per message. */
    size_t size = 2 * MNL_SOCKET_BUFFER_SIZE + n * 256;
    char *buf = brig_xmalloc(size);
    struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, size);
    nftnl_batch_begin(mnl_nlmsg_batch_current(b), s->seq++);
    mnl_nlmsg_batch_next(b);
    uint32_t lo = s->seq;
    for (size_t i = 0, j; i < n; i = j) {
        j = run_end(elems, n, i);
        message(s, b, elems, i, j);
    }
    uint32_t hi = s->seq;
    nftnl_batch_end(mnl_nlmsg_batch_current(b), s->seq++);
    mnl_nlmsg_batch_next(b);
    int rc = 0;
    uint32_t failed = lo;
    if (mnl_socket_sendto(s->nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b)) < 0) {
        rc = brig_error_set(err, BRIG_E_INTERNAL, errno, "nftables: send");
    } else {
        int e = answers(s, lo, hi, &failed);
        const brig_nfelem *g = e ? group(elems, n, failed - lo) : NULL;
        if (g)
            rc = brig_error_set(err, BRIG_E_INTERNAL, e, "nftables: %s elements of %s",
                                g->del ? "delete" : "add", g->set);
    }
    mnl_nlmsg_batch_stop(b);
    free(buf);
    return rc;
}
