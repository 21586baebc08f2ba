/*
 * fuzz_dns.c - libFuzzer target for the DNS proxy's message handling
 * (src/brigd/net/dnsmsg.c): every byte a sandbox sends to its resolver, and
 * every byte an upstream answers, goes through these functions first.
 *
 * Byte 0 picks the question's type and the policy mode; the rest is the
 * message, read as a query (parse, name check, refusal, upstream rewrite for
 * UDP and TCP), as an answer to the query it parsed to (or to a fixed one),
 * and as an answer whose TTLs are clamped in place.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/netshared.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    uint8_t sel = data[0];
    const uint8_t *msg = data + 1;
    size_t len = size - 1;

    brig_dns_question q;
    int rc = brig_dns_parse_query(msg, len, &q);
    const char *domains[] = {"allowed.test", "*.wild.test"};
    brig_egress e = {
        .mode = (brig_egress_mode)(sel % 3), .domains = (char **)domains, .n_domains = 2};
    if (rc == 0)
        (void)brig_dns_name_allowed(&e, q.qname, q.qname_len);
    /* The name check also takes any bytes as a wire name. */
    (void)brig_dns_name_allowed(&e, msg, len < BRIG_DNS_NAME_MAX ? len : BRIG_DNS_NAME_MAX);
    uint8_t *out = NULL;
    size_t out_len = 0;
    if (brig_dns_reply(msg, len, rc > 0 ? rc : BRIG_DNS_REFUSED, &out, &out_len) == 0)
        free(out);
    out = NULL;
    if (brig_dns_upstream_query(msg, len, 0x1234, (sel & 4) != 0, &out, &out_len) == 0)
        free(out);
    if (rc != 0) {
        memset(&q, 0, sizeof(q));
        strcpy(q.name, "allowed.test");
        static const uint8_t wire[] = "\x07"
                                      "allowed"
                                      "\x04"
                                      "test";
        memcpy(q.qname, wire, sizeof(wire)); /* with the terminating 0: the root label */
        q.qname_len = sizeof(wire);
        strcpy(q.type, "A");
        q.qtype = (sel & 8) ? 28 : 1;
    }
    brig_dns_answer a;
    uint16_t id = len >= 2 ? (uint16_t)(msg[0] << 8 | msg[1]) : 0;
    (void)brig_dns_parse_answer(msg, len, id, &q, &a);
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, msg, len);
    (void)brig_dns_clamp_ttls(copy, len, (sel & 16) ? 0 : 3600);
    free(copy);
    return 0;
}
