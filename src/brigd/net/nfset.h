/*
 * nfset.h - elements of one nftables table's sets and maps, added and deleted in one
 * netlink transaction through libnftnl.  libnftables parses text and, before each
 * command, dumps the table's chains, sets and elements into its cache (ten round trips to
 * the kernel); a sandbox's attach, policy change, DNS grant and detach only touch elements
 * whose sets fw.c created at start-up, so they are built as netlink messages directly.
 *
 * An element's key is built field by field, laid out as nftables lays out a concatenation:
 * each field in a 4-byte aligned slot (an ifname 16 bytes, an IPv4 address and a mark 4, a
 * port 2 in network order then 2 bytes of padding).  A mark is in host byte order, as
 * nftables keeps the meta mark.
 */
#ifndef BRIG_NFSET_H
#define BRIG_NFSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define BRIG_NFKEY_MAX 24

typedef struct brig_nfkey {
    uint8_t b[BRIG_NFKEY_MAX];
    uint8_t len;
} brig_nfkey;

void brig_nfkey_ifname(brig_nfkey *k, const char *ifname);
void brig_nfkey_ip4(brig_nfkey *k, uint32_t addr_be);
void brig_nfkey_port(brig_nfkey *k, uint16_t port);
void brig_nfkey_mark(brig_nfkey *k, uint32_t mark);

typedef enum { BRIG_NFDATA_NONE, BRIG_NFDATA_MARK, BRIG_NFDATA_JUMP } brig_nfdata_kind;

typedef struct brig_nfelem {
    const char *set;         /* static: a set of the table */
    brig_nfkey key, key_end; /* key_end.len 0: not an interval */
    brig_nfdata_kind data;
    uint32_t mark;     /* BRIG_NFDATA_MARK */
    const char *chain; /* BRIG_NFDATA_JUMP: static */
    uint32_t timeout_s;
    bool del;
} brig_nfelem;

typedef struct brig_nfset brig_nfset;

/* A netlink socket for table (family inet); one caller at a time (fw.c's lock). */
int brig_nfset_open(const char *table, brig_nfset **out, brig_error **err);
void brig_nfset_close(brig_nfset *s);

/* Adds and deletes elems[0..n) in one transaction: all of them or none.  An add of an
 * element that is there already changes nothing but its timeout; a delete of one that is
 * not there fails (ENOENT) and with it the whole transaction, as in nft. */
int brig_nfset_apply(brig_nfset *s, const brig_nfelem *elems, size_t n, brig_error **err);

#endif
