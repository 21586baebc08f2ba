/*
 * dnsmsg.c - the DNS messages the proxy reads and writes, over ldns.  Pure
 * functions of their input (no sockets, no state): the fuzz target
 * fuzz/fuzz_dns.c and tests/unit/test_net_dns.c call them directly.
 *
 * Every message from a sandbox is hostile: it is parsed with ldns, must be one
 * standard query (QR=0, opcode QUERY) with exactly one question, and only then
 * is it forwarded (with a fresh id).  An upstream answer is accepted only
 * with the id we sent and the question we asked.
 */
#include <ctype.h>
#include <ldns/ldns.h>
#include <string.h>

#include "netshared.h"

static void name_of(const ldns_rdf *rdf, char *out, size_t cap)
{
    char *s = ldns_rdf2str(rdf);
    if (s == NULL) {
        snprintf(out, cap, "?");
        return;
    }
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '.')
        s[--n] = '\0';
    snprintf(out, cap, "%s", s);
    for (char *p = out; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    free(s);
}

/* The wire form of a name rdf, ASCII letters in lower case (DNS names compare
 * case-insensitively); 0 or -1 when it does not fit. */
static int wire_of(const ldns_rdf *rdf, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = ldns_rdf_size(rdf);
    if (ldns_rdf_get_type(rdf) != LDNS_RDF_TYPE_DNAME || n == 0 || n > cap)
        return -1;
    memcpy(out, ldns_rdf_data(rdf), n);
    /* Label by label, so that length bytes are never touched. */
    for (size_t i = 0; i < n && out[i] != 0; i += 1 + out[i])
        for (size_t k = i + 1; k <= i + out[i] && k < n; k++)
            if (out[k] >= 'A' && out[k] <= 'Z')
                out[k] = (uint8_t)(out[k] - 'A' + 'a');
    *len = n;
    return 0;
}

static void type_of(uint16_t t, char *out, size_t cap)
{
    const ldns_rr_descriptor *d = ldns_rr_descript(t);
    if (d && d->_name)
        snprintf(out, cap, "%s", d->_name);
    else
        snprintf(out, cap, "TYPE%u", (unsigned)t);
}

/* A query's header as brig accepts it before ldns reads the rest: one question, no
 * answer or authority records, at most one additional (its OPT).  More is malformed
 * (RFC 6891: one OPT at most), and ldns 1.8 leaks all but one TSIG record of the
 * additional section: a sandbox sending them would grow brigd a little with every query
 * (found by fuzz_dns). */
static bool query_shape_ok(const uint8_t *msg, size_t len)
{
    if (len < 12)
        return false;
    unsigned qd = (unsigned)msg[4] << 8 | msg[5], an = (unsigned)msg[6] << 8 | msg[7];
    unsigned ns = (unsigned)msg[8] << 8 | msg[9], ar = (unsigned)msg[10] << 8 | msg[11];
    return qd == 1 && an == 0 && ns == 0 && ar <= 1;
}

int brig_dns_parse_query(const uint8_t *msg, size_t len, brig_dns_question *q)
{
    memset(q, 0, sizeof(*q));
    if (len < 12)
        return -1;
    q->id = (uint16_t)(msg[0] << 8 | msg[1]);
    if (msg[2] & 0x80) /* a response sent to us: never answer one */
        return -1;
    ldns_pkt *p = NULL;
    if (!query_shape_ok(msg, len) || ldns_wire2pkt(&p, msg, len) != LDNS_STATUS_OK)
        return BRIG_DNS_FORMERR;
    int rc = 0;
    if (ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY) {
        rc = BRIG_DNS_NOTIMP;
        goto out;
    }
    ldns_rr_list *qs = ldns_pkt_question(p);
    if (ldns_pkt_qdcount(p) != 1 || qs == NULL || ldns_rr_list_rr_count(qs) != 1) {
        rc = BRIG_DNS_FORMERR;
        goto out;
    }
    ldns_rr *rr = ldns_rr_list_rr(qs, 0);
    if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN) {
        rc = BRIG_DNS_REFUSED;
        goto out;
    }
    name_of(ldns_rr_owner(rr), q->name, sizeof(q->name));
    if (wire_of(ldns_rr_owner(rr), q->qname, sizeof(q->qname), &q->qname_len) < 0) {
        rc = BRIG_DNS_FORMERR;
        goto out;
    }
    q->qtype = (uint16_t)ldns_rr_get_type(rr);
    type_of(q->qtype, q->type, sizeof(q->type));
    q->has_edns = ldns_pkt_edns(p);
out:
    ldns_pkt_free(p);
    return rc;
}

int brig_dns_reply(const uint8_t *msg, size_t len, int rcode, uint8_t **out, size_t *out_len)
{
    if (len < 12)
        return -1;
    ldns_pkt *q = NULL;
    ldns_pkt *r = ldns_pkt_new();
    if (r == NULL)
        return -1;
    ldns_pkt_set_id(r, (uint16_t)(msg[0] << 8 | msg[1]));
    ldns_pkt_set_qr(r, true);
    ldns_pkt_set_ra(r, true);
    ldns_pkt_set_rd(r, (msg[2] & 0x01) != 0);
    ldns_pkt_set_rcode(r, (uint8_t)rcode);
    /* The question is echoed when there is exactly one that parses. */
    if (query_shape_ok(msg, len) && ldns_wire2pkt(&q, msg, len) == LDNS_STATUS_OK &&
        ldns_pkt_qdcount(q) == 1 && ldns_pkt_get_opcode(q) == LDNS_PACKET_QUERY) {
        ldns_rr_list *qs = ldns_pkt_question(q);
        if (qs && ldns_rr_list_rr_count(qs) == 1) {
            ldns_pkt_push_rr(r, LDNS_SECTION_QUESTION, ldns_rr_clone(ldns_rr_list_rr(qs, 0)));
        }
    }
    ldns_pkt_free(q);
    int rc = ldns_pkt2wire(out, r, out_len) == LDNS_STATUS_OK ? 0 : -1;
    ldns_pkt_free(r);
    return rc;
}

int brig_dns_upstream_query(const uint8_t *msg, size_t len, uint16_t new_id, bool for_tcp,
                            uint8_t **out, size_t *out_len)
{
    if (len < 12)
        return -1;
    if (for_tcp) {
        ldns_pkt *p = NULL;
        if (!query_shape_ok(msg, len) || ldns_wire2pkt(&p, msg, len) != LDNS_STATUS_OK)
            return -1;
        if (!ldns_pkt_edns(p))
            ldns_pkt_set_edns_udp_size(p, 4096);
        ldns_pkt_set_id(p, new_id);
        int rc = ldns_pkt2wire(out, p, out_len) == LDNS_STATUS_OK ? 0 : -1;
        ldns_pkt_free(p);
        return rc;
    }
    *out = brig_xmalloc(len);
    memcpy(*out, msg, len);
    (*out)[0] = (uint8_t)(new_id >> 8);
    (*out)[1] = (uint8_t)new_id;
    *out_len = len;
    return 0;
}

int brig_dns_parse_answer(const uint8_t *msg, size_t len, uint16_t upstream_id,
                          const brig_dns_question *q, brig_dns_answer *a)
{
    memset(a, 0, sizeof(*a));
    if (len < 12 || (uint16_t)(msg[0] << 8 | msg[1]) != upstream_id || !(msg[2] & 0x80))
        return -1;
    /* Only the question and the answers matter here.  The additional section is left
     * unread (its count zeroed in a copy of the header): ldns 1.8 keeps one TSIG record
     * of it and leaks every other (found by fuzz_dns). */
    uint8_t *copy = brig_xmalloc(len);
    memcpy(copy, msg, len);
    copy[10] = copy[11] = 0;
    ldns_pkt *p = NULL;
    ldns_status st = ldns_wire2pkt(&p, copy, len);
    free(copy);
    if (st != LDNS_STATUS_OK)
        return -1;
    int rc = -1;
    ldns_rr_list *qs = ldns_pkt_question(p);
    if (ldns_pkt_qdcount(p) != 1 || qs == NULL || ldns_rr_list_rr_count(qs) != 1)
        goto out;
    ldns_rr *qr = ldns_rr_list_rr(qs, 0);
    uint8_t qname[sizeof(q->qname)];
    size_t qname_len = 0;
    if (wire_of(ldns_rr_owner(qr), qname, sizeof(qname), &qname_len) < 0 ||
        qname_len != q->qname_len || memcmp(qname, q->qname, qname_len) != 0 ||
        (uint16_t)ldns_rr_get_type(qr) != q->qtype)
        goto out;
    a->rcode = (int)ldns_pkt_get_rcode(p);
    a->truncated = ldns_pkt_tc(p);
    ldns_rr_list *an = ldns_pkt_answer(p);
    for (size_t i = 0; an && i < ldns_rr_list_rr_count(an); i++) {
        ldns_rr *rr = ldns_rr_list_rr(an, i);
        if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN || ldns_rr_rd_count(rr) < 1)
            continue;
        const ldns_rdf *rd = ldns_rr_rdf(rr, 0);
        if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A && ldns_rdf_size(rd) == 4 &&
            a->n_a < BRIG_ARRAY_LEN(a->a)) {
            memcpy(&a->a[a->n_a], ldns_rdf_data(rd), 4);
            uint32_t ttl = ldns_rr_ttl(rr);
            a->a_ttl[a->n_a++] = ttl > BRIG_NET_TTL_MAX ? BRIG_NET_TTL_MAX : (int)ttl;
        } else if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_AAAA && ldns_rdf_size(rd) == 16 &&
                   a->n_aaaa < BRIG_ARRAY_LEN(a->aaaa)) {
            memcpy(&a->aaaa[a->n_aaaa++], ldns_rdf_data(rd), 16);
        }
    }
    rc = 0;
out:
    ldns_pkt_free(p);
    return rc;
}

/* Skips the name at *pos (compressed or not); -1 when it is malformed. */
static int skip_name(const uint8_t *msg, size_t len, size_t *pos)
{
    ldns_rdf *d = NULL;
    if (ldns_wire2dname(&d, msg, len, pos) != LDNS_STATUS_OK)
        return -1;
    ldns_rdf_deep_free(d);
    return 0;
}

int brig_dns_clamp_ttls(uint8_t *msg, size_t len, uint32_t max)
{
    if (len < 12)
        return -1;
    size_t qd = (size_t)msg[4] << 8 | msg[5];
    size_t rrs = ((size_t)msg[6] << 8 | msg[7]) + ((size_t)msg[8] << 8 | msg[9]) +
                 ((size_t)msg[10] << 8 | msg[11]);
    size_t pos = 12;
    for (size_t i = 0; i < qd; i++) {
        if (skip_name(msg, len, &pos) < 0 || pos + 4 > len)
            return -1;
        pos += 4;
    }
    for (size_t i = 0; i < rrs; i++) {
        if (skip_name(msg, len, &pos) < 0 || pos + 10 > len)
            return -1;
        uint8_t *f = msg + pos; /* type, class, ttl, rdlength */
        uint32_t ttl = (uint32_t)f[4] << 24 | (uint32_t)f[5] << 16 | (uint32_t)f[6] << 8 | f[7];
        if ((f[0] << 8 | f[1]) != LDNS_RR_TYPE_OPT && ttl > max) {
            f[4] = (uint8_t)(max >> 24);
            f[5] = (uint8_t)(max >> 16);
            f[6] = (uint8_t)(max >> 8);
            f[7] = (uint8_t)max;
        }
        pos += 10 + (size_t)(f[8] << 8 | f[9]);
        if (pos > len)
            return -1;
    }
    return 0;
}

/* Whether the last labels of the wire name w (n labels at lab/lens) are the
 * policy domain d ("api.example.com"; with wildcard, w must have more). */
static bool labels_match(const char *d, bool wildcard, const uint8_t *const *lab,
                         const uint8_t *lens, size_t n)
{
    size_t k = 1;
    for (const char *p = d; *p; p++)
        k += *p == '.';
    if (wildcard ? n <= k : n != k)
        return false;
    const char *p = d;
    for (size_t i = n - k; i < n; i++) {
        size_t l = strcspn(p, ".");
        if (lens[i] != l || memcmp(lab[i], p, l) != 0)
            return false;
        p += l + (p[l] == '.');
    }
    return true;
}

bool brig_dns_name_allowed(const brig_egress *policy, const uint8_t *qname, size_t qname_len)
{
    if (policy->mode == BRIG_EGRESS_OPEN)
        return true;
    if (policy->mode != BRIG_EGRESS_ALLOWLIST)
        return false;
    /* The labels of the name; a malformed one is allowed nothing. */
    const uint8_t *lab[128];
    uint8_t lens[128];
    size_t n = 0, i = 0;
    while (i < qname_len && qname[i] != 0) {
        if (qname[i] > 63 || i + 1 + qname[i] > qname_len || n == BRIG_ARRAY_LEN(lab))
            return false;
        lab[n] = qname + i + 1;
        lens[n++] = qname[i];
        i += 1 + qname[i];
    }
    if (i + 1 != qname_len)
        return false; /* no root label, or bytes after it */
    for (size_t k = 0; k < policy->n_domains; k++) {
        const char *d = policy->domains[k];
        bool wildcard = strncmp(d, "*.", 2) == 0;
        if (labels_match(wildcard ? d + 2 : d, wildcard, lab, lens, n))
            return true;
    }
    return false;
}
