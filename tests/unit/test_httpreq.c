/*
 * test_httpreq.c - the egress proxy's HTTP framing (src/brigd/net/httpreq.c):
 * response heads, Connection tokens, and where a body ends (a length, chunked
 * framing fed whole and byte by byte, to the connection's end, none).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "net/httpreq.h"

static void test_response_head(void **state)
{
    (void)state;
    const char *r = "HTTP/1.1 200 OK fine\r\nContent-Length: 5\r\nConnection: keep-alive, Close\r\n"
                    "\r\nhello";
    brig_http_head h;
    const char *why = NULL;
    long k = brig_http_parse_response(r, strlen(r), &h, &why);
    assert_int_equal(k, (long)(strstr(r, "hello") - r));
    assert_int_equal(h.status, 200);
    assert_int_equal(h.body_len, 5);
    assert_true(brig_http_has_token(r, &h, "connection", "close"));
    assert_false(brig_http_has_token(r, &h, "connection", "upgrade"));
    assert_int_equal(brig_http_parse_response(r, 10, &h, &why), 0);
    const char *bad[] = {"HTTP/2.0 200 OK\r\n\r\n", "HTTP/1.1 20x OK\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                         "HTTP/1.1 099 x\r\n\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(brig_http_parse_response(bad[i], strlen(bad[i]), &h, &why), -1);
        assert_non_null(why);
    }
    /* a request's parser refuses a response and the other way round */
    assert_int_equal(brig_http_parse(r, strlen(r), &h, &why), -1);
}

/* Feeds body whole and byte by byte: both end at the same place. */
static long body_end(const brig_http_head *h, bool no_body, const char *d, size_t n)
{
    brig_http_body a, b;
    bool done = false;
    brig_http_body_init(&a, h, no_body);
    long k = brig_http_body_feed(&a, d, n, &done);
    if (k < 0 || !done)
        return k < 0 ? -1 : -2;
    brig_http_body_init(&b, h, no_body);
    for (size_t i = 0; i < n; i++) {
        long one = brig_http_body_feed(&b, d + i, 1, &done);
        if (one < 0)
            return -3;
        if (done)
            return (long)i + one == k ? k : -4;
    }
    return -5;
}

static void test_chunked(void **state)
{
    (void)state;
    brig_http_head h = {.chunked = true, .body_len = -1};
    const char *c =
        "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nT: x\r\n\r\nGET /";
    assert_int_equal(body_end(&h, false, c, strlen(c)), (long)(strstr(c, "GET") - c));
    const char *simple = "0\r\n\r\n";
    assert_int_equal(body_end(&h, false, simple, 5), 5);
    const char *bad[] = {"x\r\n", "5\r\nhelloXX", "5\nhello\r\n", "0\r\nT: x\n\r\n",
                         "1234567890abcdef0\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(body_end(&h, false, bad[i], strlen(bad[i])), -1);
    /* not whole yet */
    assert_int_equal(body_end(&h, false, "5\r\nhel", 6), -2);
}

static void test_lengths(void **state)
{
    (void)state;
    brig_http_head len = {.body_len = 3}, none = {.body_len = -1},
                   resp = {.body_len = -1, .status = 200};
    assert_int_equal(body_end(&len, false, "abcdef", 6), 3);
    assert_int_equal(body_end(&len, true, "abcdef", 6), 0);  /* a response to HEAD */
    assert_int_equal(body_end(&none, false, "GET /", 5), 0); /* a request without a body */
    brig_http_body b;
    bool done = true;
    brig_http_body_init(&b, &resp, false); /* a response without a length: to the end */
    assert_true(brig_http_body_to_close(&b));
    assert_int_equal(brig_http_body_feed(&b, "abc", 3, &done), 3);
    assert_false(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_head),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
