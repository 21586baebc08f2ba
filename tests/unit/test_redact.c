/*
 * test_redact.c - the streaming redactor: values split across any chunk
 * boundary, base64 at every alignment, URL-encoded forms, overlaps, and text
 * that merely resembles a secret passing through untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "redact.h"

static brig_redactor *make(const char *name, const char *value)
{
    json_t *s = json_pack("{s:s}", name, value);
    brig_redactor *r = brig_redactor_new(s);
    json_decref(s);
    return r;
}

/* Feeds text in chunks of `chunk` bytes and returns the redacted output. */
static char *run(const brig_redactor *r, const char *text, size_t chunk)
{
    brig_redact_stream s;
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
 * it is built for every exec — and still redacts across chunk boundaries. */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
