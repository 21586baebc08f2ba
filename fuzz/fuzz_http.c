/*
 * fuzz_http.c - libFuzzer target for the egress proxy's parsers
 * (src/brigd/net/httpreq.c): every byte a sandbox sends toward a host with an
 * injection rule goes through them first.
 *
 * The input is parsed as a request head whole and at every shorter length: a
 * head found in the whole input is found, identical, in every prefix that holds
 * it and in none that does not (only "not yet" or a refusal there); every span
 * lies inside the head.  It is also read as a TLS ClientHello for its SNI, whole
 * and cut short, which must name a plain lower-case host or nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/httpreq.h"

static void check_spans(const brig_http_head *h, long len)
{
    const brig_http_span *all[2] = {&h->method, &h->target};
    for (int i = 0; i < 2; i++)
        if (all[i]->off + all[i]->len > (size_t)len)
            abort();
    for (size_t i = 0; i < h->n_fields; i++)
        if (h->fields[i].name.off + h->fields[i].name.len > (size_t)len ||
            h->fields[i].value.off + h->fields[i].value.len > (size_t)len ||
            h->fields[i].name.len == 0)
            abort();
    if (h->host >= (int)h->n_fields || h->n_fields > BRIG_HTTP_HEADERS_MAX)
        abort();
}

static void check_sni(const uint8_t *data, size_t size)
{
    char name[256];
    for (size_t n = size; n + 64 >= size && n > 0; n--) {
        memset(name, 'x', sizeof(name));
        if (brig_tls_sni_parse(data, n, name) == 1) {
            size_t k = strnlen(name, sizeof(name));
            if (k == 0 || k > 253)
                abort();
            for (size_t i = 0; i < k; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
                      name[i] == '-' || name[i] == '.'))
                    abort();
        }
    }
}

static void check_response(const char *buf, size_t size)
{
    brig_http_head h;
    const char *why = NULL;
    long k = brig_http_parse_response(buf, size, &h, &why);
    if (k > 0) {
        check_spans(&h, k);
        if (h.status < 100 || h.status > 999)
            abort();
    }
    if (k < 0 && why == NULL)
        abort();
}

static void check_chunked(const char *buf, size_t size)
{
    brig_http_head h = {.chunked = true, .body_len = -1};
    brig_http_body whole, each;
    bool done = false, d1 = false;
    brig_http_body_init(&whole, &h, false);
    long k = brig_http_body_feed(&whole, buf, size, &done);
    if (k > (long)size || (k >= 0 && k < (long)size && !done))
        abort();
    brig_http_body_init(&each, &h, false);
    for (size_t i = 0; i < size; i++) {
        long one = brig_http_body_feed(&each, buf + i, 1, &d1);
        if (one < 0) {
            if (k >= 0)
                abort();
            return;
        }
        if (d1) {
            if (!done || k != (long)i + one)
                abort();
            return;
        }
    }
    if (done || k < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    /* A copy of its own size, so that any read past it is caught. */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    brig_http_head whole, part;
    const char *why = NULL;
    long k = brig_http_parse(buf, size, &whole, &why);
    if (k > 0) {
        if ((size_t)k > size)
            abort();
        check_spans(&whole, k);
    }
    if (k < 0 && why == NULL)
        abort();
    for (size_t n = 0; n < size; n++) {
        long r = brig_http_parse(buf, n, &part, &why);
        if (k > 0 && n >= (size_t)k && (r != k || memcmp(&part, &whole, sizeof(part)) != 0))
            abort();
        if (k > 0 && n < (size_t)k && r > 0)
            abort();
        if (r > 0)
            check_spans(&part, r);
    }
    check_response(buf, size);
    check_chunked(buf, size);
    check_sni(data, size);
    free(buf);
    return 0;
}
