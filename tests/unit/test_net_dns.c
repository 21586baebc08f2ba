/*
 * test_net_dns.c - the DNS proxy's pure logic (src/brigd/net/dnsmsg.c) and
 * the policy helpers: name matching with wildcards on wire-format labels,
 * query validation, refusals that echo the question, upstream id rewriting,
 * answers accepted only for the question asked, TTL clamping, CIDR
 * normalisation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "net/netshared.h"

/* A query for name/type with id 0x1234 and RD set; returns its length. */
static size_t make_query(uint8_t *b, const char *name, uint16_t type)
{
    uint8_t hdr[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(b, hdr, 12);
    size_t n = 12;
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        b[n++] = (uint8_t)l;
        memcpy(b + n, p, l);
        n += l;
        p += l + (dot ? 1 : 0);
    }
    b[n++] = 0;
    b[n++] = (uint8_t)(type >> 8);
    b[n++] = (uint8_t)type;
    b[n++] = 0;
    b[n++] = 1; /* IN */
    return n;
}

/* The answer to make_query(name, A) with id and one A record. */
static size_t make_answer(uint8_t *b, const char *name, uint16_t id, const char *addr, uint32_t ttl)
{
    size_t n = make_query(b, name, 1);
    b[0] = (uint8_t)(id >> 8);
    b[1] = (uint8_t)id;
    b[2] = 0x81;
    b[3] = 0x80;
    b[7] = 1; /* ANCOUNT */
    uint8_t rr[] = {0xc0,
                    0x0c,
                    0,
                    1,
                    0,
                    1,
                    (uint8_t)(ttl >> 24),
                    (uint8_t)(ttl >> 16),
                    (uint8_t)(ttl >> 8),
                    (uint8_t)ttl,
                    0,
                    4};
    memcpy(b + n, rr, sizeof(rr));
    n += sizeof(rr);
    inet_pton(AF_INET, addr, b + n);
    return n + 4;
}

static brig_egress allow(const char **domains, size_t n)
{
    brig_egress e = {.mode = BRIG_EGRESS_ALLOWLIST};
    e.domains = (char **)domains;
    e.n_domains = n;
    return e;
}

/* Whether the name made of the labels (NULL-terminated list) is allowed. */
static bool allowed_labels(const brig_egress *e, const char *const *labels)
{
    uint8_t w[BRIG_DNS_NAME_MAX];
    size_t n = 0;
    for (; *labels; labels++) {
        size_t l = strlen(*labels);
        assert_true(n + 1 + l < sizeof(w));
        w[n++] = (uint8_t)l;
        memcpy(w + n, *labels, l);
        n += l;
    }
    w[n++] = 0;
    return brig_dns_name_allowed(e, w, n);
}

/* The same for a name whose labels are split at its dots. */
static bool allowed(const brig_egress *e, const char *name)
{
    char buf[256];
    const char *labels[64];
    size_t k = 0;
    snprintf(buf, sizeof(buf), "%s", name);
    for (char *save = NULL, *l = strtok_r(buf, ".", &save); l; l = strtok_r(NULL, ".", &save))
        labels[k++] = l;
    labels[k] = NULL;
    return allowed_labels(e, labels);
}

static void test_name_allowed(void **state)
{
    (void)state;
    const char *d[] = {"api.example.com", "*.example.org"};
    brig_egress e = allow(d, 2);
    assert_true(allowed(&e, "api.example.com"));
    assert_false(allowed(&e, "x.api.example.com"));
    assert_false(allowed(&e, "example.com"));
    assert_true(allowed(&e, "a.example.org"));
    assert_true(allowed(&e, "a.b.example.org"));
    assert_false(allowed(&e, "example.org"));
    assert_false(allowed(&e, "badexample.org"));
    assert_false(allowed(&e, "example.org.evil.test"));
    brig_egress open = {.mode = BRIG_EGRESS_OPEN}, none = {.mode = BRIG_EGRESS_NONE};
    assert_true(allowed(&open, "anything.test"));
    assert_false(allowed(&none, "api.example.com"));
}

static void test_name_allowed_wire_labels(void **state)
{
    (void)state;
    const char *d[] = {"*.rt.test", "api.example.com"};
    brig_egress e = allow(d, 2);
    /* A dot inside a label: presented "pubdot\.rt.test", two labels, not below rt.test. */
    assert_false(allowed_labels(&e, (const char *[]){"pubdot.rt", "test", NULL}));
    assert_true(allowed_labels(&e, (const char *[]){"pubdot", "rt", "test", NULL}));
    assert_false(allowed_labels(&e, (const char *[]){"x", "rt.test", NULL}));
    assert_false(allowed_labels(&e, (const char *[]){"api.example", "com", NULL}));
    assert_false(allowed_labels(&e, (const char *[]){"api", "example.com", NULL}));
    assert_false(allowed_labels(&e, (const char *[]){"api.example.com", NULL}));
    /* other bytes a presentation form would escape: any first label is below rt.test */
    assert_true(allowed_labels(&e, (const char *[]){"x\\", "rt", "test", NULL}));
    assert_false(allowed_labels(&e, (const char *[]){"rt\\.test", NULL}));
    /* malformed wire names are allowed nothing */
    const uint8_t no_root[] = {3,   'a', 'p', 'i', 7, 'e', 'x', 'a',
                               'm', 'p', 'l', 'e', 3, 'c', 'o', 'm'};
    assert_false(brig_dns_name_allowed(&e, no_root, sizeof(no_root)));
    const uint8_t trailing[] = {1, 'x', 2, 'r', 't', 4, 't', 'e', 's', 't', 0, 0};
    assert_false(brig_dns_name_allowed(&e, trailing, sizeof(trailing)));
    assert_true(brig_dns_name_allowed(&e, trailing, sizeof(trailing) - 1));
    const uint8_t pointer[] = {1, 'x', 0xc0, 0x0c};
    assert_false(brig_dns_name_allowed(&e, pointer, sizeof(pointer)));
    assert_false(brig_dns_name_allowed(&e, (const uint8_t *)"", 0));

    /* from a query on the wire: the dotted label survives parsing */
    uint8_t b[64] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t n = 12;
    const uint8_t name[] = {9,   'P', 'u', 'b', 'd', 'o', 't', '.',
                            'R', 'T', 4,   'T', 'E', 'S', 'T', 0};
    memcpy(b + n, name, sizeof(name));
    n += sizeof(name);
    const uint8_t tail[] = {0, 1, 0, 1};
    memcpy(b + n, tail, sizeof(tail));
    n += sizeof(tail);
    brig_dns_question q;
    assert_int_equal(brig_dns_parse_query(b, n, &q), 0);
    assert_string_equal(q.name, "pubdot\\.rt.test");
    assert_int_equal(q.qname_len, sizeof(name));
    assert_memory_equal(q.qname, "\x09pubdot.rt\x04test", sizeof(name));
    assert_false(brig_dns_name_allowed(&e, q.qname, q.qname_len));
    n = make_query(b, "X.Rt.TEST", 1);
    assert_int_equal(brig_dns_parse_query(b, n, &q), 0);
    assert_true(brig_dns_name_allowed(&e, q.qname, q.qname_len));
}

static void test_parse_query(void **state)
{
    (void)state;
    uint8_t b[512];
    size_t n = make_query(b, "API.Example.COM", 1);
    brig_dns_question q;
    assert_int_equal(brig_dns_parse_query(b, n, &q), 0);
    assert_string_equal(q.name, "api.example.com");
    assert_string_equal(q.type, "A");
    assert_int_equal(q.id, 0x1234);
    n = make_query(b, "x.test", 16);
    assert_int_equal(brig_dns_parse_query(b, n, &q), 0);
    assert_string_equal(q.type, "TXT");
    /* two questions: FORMERR; a response: dropped; short: dropped */
    b[5] = 2;
    assert_int_equal(brig_dns_parse_query(b, n, &q), BRIG_DNS_FORMERR);
    b[5] = 1;
    b[2] |= 0x80;
    assert_int_equal(brig_dns_parse_query(b, n, &q), -1);
    assert_int_equal(brig_dns_parse_query(b, 5, &q), -1);
    /* opcode STATUS: NOTIMP */
    n = make_query(b, "x.test", 1);
    b[2] = 0x10;
    assert_int_equal(brig_dns_parse_query(b, n, &q), BRIG_DNS_NOTIMP);
}

static void test_refusal(void **state)
{
    (void)state;
    uint8_t b[512];
    size_t n = make_query(b, "secret.evil.test", 1);
    uint8_t *out = NULL;
    size_t out_len = 0;
    assert_int_equal(brig_dns_reply(b, n, BRIG_DNS_REFUSED, &out, &out_len), 0);
    assert_int_equal(out[0], 0x12);
    assert_int_equal(out[1], 0x34);
    assert_true(out[2] & 0x80);        /* QR */
    assert_int_equal(out[3] & 0xf, 5); /* REFUSED */
    assert_int_equal(out[5], 1);       /* the question is echoed */
    assert_int_equal(out_len, n);
    assert_memory_equal(out + 12, b + 12, n - 12);
    free(out);
}

static void test_upstream_and_answer(void **state)
{
    (void)state;
    uint8_t b[512], a[512];
    size_t n = make_query(b, "ok.test", 1);
    uint8_t *up = NULL;
    size_t up_len = 0;
    assert_int_equal(brig_dns_upstream_query(b, n, 0xbeef, false, &up, &up_len), 0);
    assert_int_equal(up_len, n);
    assert_int_equal(up[0], 0xbe);
    assert_int_equal(up[1], 0xef);
    free(up);
    /* for TCP clients an EDNS OPT record is added */
    assert_int_equal(brig_dns_upstream_query(b, n, 0xbeef, true, &up, &up_len), 0);
    assert_int_equal(up_len, n + 11);
    free(up);

    brig_dns_question q;
    assert_int_equal(brig_dns_parse_query(b, n, &q), 0);
    brig_dns_answer ans;
    size_t an = make_answer(a, "ok.test", 0xbeef, "198.51.100.7", 300);
    assert_int_equal(brig_dns_parse_answer(a, an, 0xbeef, &q, &ans), 0);
    assert_int_equal(ans.n_a, 1);
    assert_int_equal(ans.a_ttl[0], 300);
    char s[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &ans.a[0], s, sizeof(s));
    assert_string_equal(s, "198.51.100.7");
    /* wrong id, wrong name: not ours */
    assert_int_equal(brig_dns_parse_answer(a, an, 0xbeee, &q, &ans), -1);
    an = make_answer(a, "other.test", 0xbeef, "198.51.100.7", 300);
    assert_int_equal(brig_dns_parse_answer(a, an, 0xbeef, &q, &ans), -1);
    /* huge TTLs are capped */
    an = make_answer(a, "ok.test", 0xbeef, "198.51.100.7", 0x7fffffff);
    assert_int_equal(brig_dns_parse_answer(a, an, 0xbeef, &q, &ans), 0);
    assert_int_equal(ans.a_ttl[0], BRIG_NET_TTL_MAX);
}

static void test_clamp_ttls(void **state)
{
    (void)state;
    uint8_t a[512];
    size_t an = make_answer(a, "ok.test", 0xbeef, "198.51.100.7", 604800);
    /* a second record with a short TTL, and an OPT record whose "TTL" holds flags */
    const uint8_t more[] = {0xc0, 0x0c, 0, 1, 0,  1,    0, 0,    0,    60,   0,    4, 198, 51,
                            100,  8,    0, 0, 41, 0x10, 0, 0xff, 0xff, 0xff, 0xff, 0, 0};
    memcpy(a + an, more, sizeof(more));
    an += sizeof(more);
    a[7] = 2;  /* ANCOUNT */
    a[11] = 1; /* ARCOUNT */
    uint8_t before[512];
    memcpy(before, a, an);
    assert_int_equal(brig_dns_clamp_ttls(a, an, 3600), 0);
    size_t ttl1 = an - sizeof(more) - 10; /* the first record's TTL field */
    assert_int_equal(a[ttl1] << 24 | a[ttl1 + 1] << 16 | a[ttl1 + 2] << 8 | a[ttl1 + 3], 3600);
    /* nothing else changed */
    assert_memory_equal(a, before, ttl1);
    assert_memory_equal(a + ttl1 + 4, before + ttl1 + 4, an - ttl1 - 4);
    brig_dns_question q;
    uint8_t b[512];
    size_t n = make_query(b, "ok.test", 1);
    assert_int_equal(brig_dns_parse_query(b, n, &q), 0);
    brig_dns_answer ans;
    a[0] = 0xbe;
    assert_int_equal(brig_dns_parse_answer(a, an, 0xbeef, &q, &ans), 0);
    assert_int_equal(ans.n_a, 2);
    assert_int_equal(ans.a_ttl[0], 3600);
    assert_int_equal(ans.a_ttl[1], 60);
    /* truncated or lying counts: -1, never past the end */
    assert_int_equal(brig_dns_clamp_ttls(a, an - 1, 3600), -1);
    a[7] = 9;
    assert_int_equal(brig_dns_clamp_ttls(a, an, 3600), -1);
    assert_int_equal(brig_dns_clamp_ttls(a, 5, 3600), -1);
}

static void test_garbage(void **state)
{
    (void)state;
    uint8_t b[300];
    srand(7);
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(rand() % (int)sizeof(b));
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)rand();
        brig_dns_question q;
        (void)brig_dns_parse_query(b, n, &q);
        uint8_t *out = NULL;
        size_t out_len = 0;
        if (brig_dns_reply(b, n, BRIG_DNS_REFUSED, &out, &out_len) == 0)
            free(out);
        brig_dns_answer a;
        (void)brig_dns_parse_answer(b, n, 0, &q, &a);
        (void)brig_dns_clamp_ttls(b, n, 60);
        const char *d[] = {"*.x.test"};
        brig_egress e = allow(d, 1);
        (void)brig_dns_name_allowed(&e, b, n < BRIG_DNS_NAME_MAX ? n : BRIG_DNS_NAME_MAX);
    }
}

static void test_cidrs(void **state)
{
    (void)state;
    char *c[] = {"10.1.2.3/8",     "10.5.0.0/16",   "203.0.113.0/24",
                 "203.0.113.0/24", "2001:db8::/32", "192.0.2.1"};
    brig_egress e = {.mode = BRIG_EGRESS_ALLOWLIST, .cidrs = c, .n_cidrs = 6};
    uint32_t *addrs;
    int *lens;
    size_t n = brig_egress_cidrs4(&e, &addrs, &lens);
    assert_int_equal(n, 3);
    char s[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addrs[0], s, sizeof(s));
    assert_string_equal(s, "10.0.0.0");
    assert_int_equal(lens[0], 8);
    inet_ntop(AF_INET, &addrs[1], s, sizeof(s));
    assert_string_equal(s, "203.0.113.0");
    inet_ntop(AF_INET, &addrs[2], s, sizeof(s));
    assert_string_equal(s, "192.0.2.1");
    assert_int_equal(lens[2], 32);
    free(addrs);
    free(lens);
}

static void test_policy_json(void **state)
{
    (void)state;
    json_t *j = json_loads("{\"mode\":\"allowlist\",\"domains\":[\"A.Example.com\",\"*.x.org\"],"
                           "\"cidrs\":[\"203.0.113.0/24\"],\"ports\":[443]}",
                           0, NULL);
    brig_egress e, c;
    brig_error *err = NULL;
    assert_int_equal(brig_egress_from_json(j, &e, &err), 0);
    brig_egress_copy(&c, &e);
    brig_egress_dispose(&e);
    assert_string_equal(c.domains[0], "a.example.com");
    assert_int_equal(c.ports[0], 443);
    json_t *back = brig_egress_to_json(&c);
    assert_string_equal(json_string_value(json_object_get(back, "mode")), "allowlist");
    json_decref(back);
    brig_egress_dispose(&c);
    json_decref(j);
    j = json_loads("{\"mode\":\"allowlist\",\"domains\":[\"*\"]}", 0, NULL);
    assert_int_equal(brig_egress_from_json(j, &e, &err), -1);
    assert_non_null(err);
    brig_error_clear(&err);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_allowed),
        cmocka_unit_test(test_name_allowed_wire_labels),
        cmocka_unit_test(test_parse_query),
        cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_upstream_and_answer),
        cmocka_unit_test(test_clamp_ttls),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_cidrs),
        cmocka_unit_test(test_policy_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
