/*
 * test_redact.c - the streaming redactor: values split across any chunk
 * boundary, base64 at every alignment, URL-encoded forms, overlaps, and text
 * that merely resembles a secret passing through untouched; same-length masks,
 * the DNS twin, and linear costs (build and stream).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "vault/redact.h"

static brig_redactor *make(const char *name, const char *value)
{
    json_t *s = json_pack("{s:s}", name, value);
    brig_redactor *r = brig_redactor_new(s);
    json_decref(s);
    return r;
}

/* Feeds text in chunks of `chunk` bytes and returns the redacted output. */
static char *run_mode(const brig_redactor *r, const char *text, size_t chunk, bool mask)
{
    brig_redact_stream s;
    if (mask)
        brig_redact_init_mask(&s, r);
    else
        brig_redact_init(&s, r);
    brig_buf out = {0};
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += chunk)
        brig_redact_feed(&s, (const uint8_t *)text + i, n - i < chunk ? n - i : chunk, &out);
    brig_redact_flush(&s, &out);
    brig_redact_dispose(&s);
    brig_buf_append(&out, "", 0);
    return out.data;
}

static char *run(const brig_redactor *r, const char *text, size_t chunk)
{
    return run_mode(r, text, chunk, false);
}

static void test_every_split(void **state)
{
    (void)state;
    brig_redactor *r = make("TOKEN", "s3cr3t-VALUE-42");
    const char *text = "before s3cr3t-VALUE-42 after s3cr3t-VALUE-4 end";
    for (size_t chunk = 1; chunk <= strlen(text); chunk++) {
        char *o = run(r, text, chunk);
        assert_string_equal(o, "before [REDACTED:TOKEN] after s3cr3t-VALUE-4 end");
        free(o);
    }
    brig_redactor_free(r);
}

static void test_base64_alignments(void **state)
{
    (void)state;
    const char *secret = "hunter2-is-not-a-password";
    brig_redactor *r = make("PW", secret);
    for (size_t pad = 0; pad < 6; pad++) {
        /* "KEY=<secret>" with `pad` bytes before it, base64-encoded as a whole. */
        char raw[128];
        memset(raw, 'x', pad);
        snprintf(raw + pad, sizeof(raw) - pad, "KEY=%s\n", secret);
        char b64[256];
        sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)raw, strlen(raw),
                          sodium_base64_VARIANT_ORIGINAL);
        char *o = run(r, b64, 7);
        if (strstr(o, "[REDACTED:PW]") == NULL)
            fail_msg("pad %zu: %s not redacted: %s", pad, b64, o);
        free(o);
    }
    brig_redactor_free(r);
}

static void test_urlencoded_and_short(void **state)
{
    (void)state;
    brig_redactor *r = make("Q", "a b&c=d/e?f");
    char *o = run(r, "GET /?q=a%20b%26c%3Dd%2Fe%3Ff HTTP/1.1", 3);
    assert_non_null(strstr(o, "[REDACTED:Q]"));
    free(o);
    o = run(r, "lower a%20b%26c%3dd%2fe%3ff too", 5);
    assert_non_null(strstr(o, "[REDACTED:Q]"));
    free(o);
    brig_redactor_free(r);
    /* 4..7-byte values: the value itself, no encodings (they would be noise). */
    r = make("PIN", "9931");
    o = run(r, "pin 9931, b64 OTkzMQ==", 2);
    assert_string_equal(o, "pin [REDACTED:PIN], b64 OTkzMQ==");
    free(o);
    brig_redactor_free(r);
}

static void test_many_secrets_and_lookalikes(void **state)
{
    (void)state;
    json_t *s =
        json_pack("{s:s, s:s, s:s}", "A", "alpha-secret", "B", "beta-secret-longer", "C", "zzzz");
    brig_redactor *r = brig_redactor_new(s);
    json_decref(s);
    char *o = run(r, "alpha-secre alpha-secret beta-secret-longer zzz zzzz zzzzz", 4);
    assert_string_equal(o, "alpha-secre [REDACTED:A] [REDACTED:B] zzz [REDACTED:C] "
                           "[REDACTED:C]z");
    free(o);
    /* Binary around a value. */
    const char bin[] = "\x00\xff"
                       "alpha-secret"
                       "\x01";
    brig_redact_stream st;
    brig_redact_init(&st, r);
    brig_buf out = {0};
    brig_redact_feed(&st, (const uint8_t *)bin, sizeof(bin) - 1, &out);
    brig_redact_flush(&st, &out);
    brig_redact_dispose(&st);
    assert_int_equal(out.len, 2 + strlen("[REDACTED:A]") + 1);
    assert_memory_equal(out.data + 2, "[REDACTED:A]", 12);
    brig_buf_dispose(&out);
    brig_redactor_free(r);
    /* No secrets: no redactor, output passes unchanged. */
    json_t *none = json_object();
    assert_null(brig_redactor_new(none));
    json_decref(none);
    o = run(NULL, "anything at all", 3);
    assert_string_equal(o, "anything at all");
    free(o);
}

/* Line breaks inside an encoded value (base64 -w76, PEM) do not hide it. */
static void test_wrapped_lines(void **state)
{
    (void)state;
    const char *secret = "tok_9f8e7d6c5b4a3f2e1d0c";
    brig_redactor *r = make("TOKEN", secret);
    char raw[256];
    snprintf(raw, sizeof(raw), "PWD=/root\nHOME=/root\nLANG=C.UTF-8\nTOKEN=%s\nTERM=dumb\n",
             secret);
    char b64[512];
    sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)raw, strlen(raw),
                      sodium_base64_VARIANT_ORIGINAL);
    /* Wrap every 20 characters, like base64(1) does at 76. */
    char wrapped[1024];
    size_t m = 0;
    for (size_t i = 0; b64[i]; i++) {
        wrapped[m++] = b64[i];
        if (i % 20 == 19)
            wrapped[m++] = '\n';
    }
    wrapped[m] = 0;
    for (size_t chunk = 1; chunk < 40; chunk += 7) {
        char *o = run(r, wrapped, chunk);
        assert_non_null(strstr(o, "[REDACTED:TOKEN]"));
        free(o);
    }
    /* Ordinary line breaks pass through unchanged. */
    char *o = run(r, "a\nb\r\n\nc", 2);
    assert_string_equal(o, "a\nb\r\n\nc");
    free(o);
    /* A flood of line breaks inside a partial match is bounded, not held forever. */
    char flood[2000];
    memcpy(flood, "tok_9f8e", 8);
    memset(flood + 8, '\n', sizeof(flood) - 9);
    flood[sizeof(flood) - 1] = 0;
    brig_redact_stream s;
    brig_redact_init(&s, r);
    brig_buf out = {0};
    brig_redact_feed(&s, (const uint8_t *)flood, strlen(flood), &out);
    assert_true(out.len > 1000);
    brig_redact_flush(&s, &out);
    brig_redact_dispose(&s);
    brig_buf_dispose(&out);
    brig_redactor_free(r);
}

/* The largest secret value the API takes (64 KiB): its automaton (the value, two
 * base64 alphabets at three offsets, URL-encoded) stays small and quick to build —
 * it is built once per sandbox and kept — and still redacts across chunk boundaries. */
static void test_largest_secret_is_cheap(void **state)
{
    (void)state;
    size_t n = 64 * 1024;
    char *value = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        value[i] = (char)('a' + (i * 7 + i / 26) % 26); /* no short period */
    value[n] = '\0';
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    brig_redactor *r = make("BIG", value);
    getrusage(RUSAGE_SELF, &after);
    /* A dense table per state took ~500 MB here; the sparse trie a few MB (more
     * under ASan, whose allocator pads). */
    assert_true(after.ru_maxrss - before.ru_maxrss < 128 * 1024); /* KiB */
    size_t tn = n + 20;
    char *text = malloc(tn + 1);
    memcpy(text, "before ", 7);
    memcpy(text + 7, value, n);
    memcpy(text + 7 + n, " after\n", 8);
    text[7 + n + 7] = '\0';
    char *out = run(r, text, 4093);
    assert_string_equal(out, "before [REDACTED:BIG] after\n");
    free(out);
    free(text);
    brig_redactor_free(r);
    free(value);
}

/* Masks (downloads): the match's own length, the marker cut to fit or '*' alone, line
 * breaks where they were; a stream without a secret is unchanged. */
static void test_masks(void **state)
{
    (void)state;
    brig_redactor *r = make("TOKEN", "tok_9f8e7d6c5b4a3f2e1d0c");
    for (size_t chunk = 1; chunk < 30; chunk += 4) {
        char *o = run_mode(r, "a tok_9f8e7d6c5b4a3f2e1d0c b", chunk, true);
        assert_string_equal(o, "a [REDACTED:TOKEN]******** b");
        free(o);
        /* A line break inside the (wrapped) value stays in its place. */
        o = run_mode(r, "tok_9f8e7d6c5b\n4a3f2e1d0c!", chunk, true);
        assert_string_equal(o, "[REDACTED:TOKE\nN]********!");
        free(o);
        o = run_mode(r, "nothing here\n\x01\xff", chunk, true);
        assert_string_equal(o, "nothing here\n\x01\xff");
        free(o);
    }
    brig_redactor_free(r);
    r = make("PIN", "9931");
    char *o = run_mode(r, "pin 9931.", 3, true);
    assert_string_equal(o, "pin ****.");
    free(o);
    brig_redactor_free(r);
}

/* The DNS twin: names are lower-cased on their way into the log and a value may be split
 * into labels; the twin folds case and ignores dots, and keeps the first name. */
static void test_dns_twin(void **state)
{
    (void)state;
    json_t *s = json_pack("{s:s, s:s}", "TOKEN", "Tok-ABCdef-123456", "SHORT", "Zq.Wx");
    brig_redactor *r = brig_redactor_new(s);
    json_decref(s);
    brig_redactor *dns = brig_redactor_dns(r);
    assert_non_null(dns);
    assert_ptr_equal(dns, brig_redactor_dns(r)); /* built once */
    char *o = run(dns, "tok-abcdef-123456.evil.test", 5);
    assert_string_equal(o, "[REDACTED:TOKEN].evil.test");
    free(o);
    o = run(dns, "tok-abc.def-12.3456.evil.test", 2);
    assert_string_equal(o, "[REDACTED:TOKEN].evil.test");
    free(o);
    /* Its base64, lower-cased: "Tok-ABCdef-123456" is VG9rLUFCQ2RlZi0xMjM0NTY= */
    o = run(dns, "vg9rlufcq2rlzi0xmjm0nty.x.test", 7);
    assert_string_equal(o, "[REDACTED:TOKEN]y.x.test"); /* the last digit depends on padding */
    free(o);
    o = run(dns, "zq.wx.example zqwx", 1);
    assert_string_equal(o, "[REDACTED:SHORT].example [REDACTED:SHORT]");
    free(o);
    /* The original stays case-sensitive and dots count there. */
    o = run(r, "tok-abcdef-123456 Tok-ABC.def-123456", 4);
    assert_string_equal(o, "tok-abcdef-123456 Tok-ABC.def-123456");
    free(o);
    brig_redactor_free(r);
}

/* References: the last one frees; JSON strings are redacted in place. */
static void test_refs_and_json(void **state)
{
    (void)state;
    brig_redactor *r = make("TOKEN", "tok_9f8e7d6c5b4a3f2e1d0c");
    assert_ptr_equal(brig_redactor_ref(r), r);
    brig_redactor_free(r);
    json_t *j = json_pack("{s:[{s:s, s:i}], s:s}", "entries", "name", "x-tok_9f8e7d6c5b4a3f2e1d0c",
                          "size", 3, "other", "plain");
    brig_redact_json(r, j);
    json_t *e = json_array_get(json_object_get(j, "entries"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "name")), "x-[REDACTED:TOKEN]");
    assert_int_equal(json_integer_value(json_object_get(e, "size")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "other")), "plain");
    json_decref(j);
    assert_null(brig_redactor_ref(NULL));
    brig_redactor_free(r);
}

static double build_cpu_seconds(int n)
{
    json_t *s = json_object();
    for (int i = 0; i < n; i++) {
        char name[16], value[16];
        snprintf(name, sizeof(name), "S%05d", i);
        snprintf(value, sizeof(value), "v%07d", i);
        json_object_set_new(s, name, json_string(value));
    }
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    brig_redactor *r = brig_redactor_new(s);
    getrusage(RUSAGE_SELF, &b);
    brig_redactor_free(r);
    json_decref(s);
    return (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec) +
           (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec) / 1e6;
}

/* Building is linear in the patterns: four times the secrets cost about four times the time
 * (every pattern compared with every other made it sixteen: 95 s for 40,000 secrets). */
static void test_build_is_linear(void **state)
{
    (void)state;
    double small = build_cpu_seconds(5000), big = build_cpu_seconds(20000);
    /* CPU time, not wall time; the floor keeps a tiny `small` from making a large ratio. */
    assert_true(big < 8 * (small > 0.02 ? small : 0.02));
}

/* A stream costs O(1) a byte also when output keeps almost matching a long value (the held
 * bytes used to move on every byte: quadratic in the value's length). */
static void test_near_misses_are_linear(void **state)
{
    (void)state;
    size_t n = 32 * 1024;
    char *value = malloc(n + 1);
    memset(value, 'a', n);
    value[n - 1] = 'b';
    value[n] = '\0';
    brig_redactor *r = make("LONG", value);
    size_t tn = 4 * n;
    char *text = malloc(tn + 1);
    memset(text, 'a', tn);
    text[tn] = '\0';
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    char *o = run(r, text, 4096);
    getrusage(RUSAGE_SELF, &b);
    assert_int_equal(strlen(o), tn);
    double secs = (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec) +
                  (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec) / 1e6;
    /* 128 KiB of output; moving 32 KiB per byte took minutes. */
    assert_true(secs < 5);
    free(o);
    free(text);
    free(value);
    brig_redactor_free(r);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_base64_alignments),
        cmocka_unit_test(test_urlencoded_and_short),
        cmocka_unit_test(test_many_secrets_and_lookalikes),
        cmocka_unit_test(test_wrapped_lines),
        cmocka_unit_test(test_largest_secret_is_cheap),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_dns_twin),
        cmocka_unit_test(test_refs_and_json),
        cmocka_unit_test(test_build_is_linear),
        cmocka_unit_test(test_near_misses_are_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
