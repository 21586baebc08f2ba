/*
 * test_frame.c - the agent protocol's framing: header encode/decode, limits,
 * blocking reads across short writes, JSON payload checks, handshake refusal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"

static void test_header_roundtrip(void **state)
{
    (void)state;
    uint8_t h[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(h, BRIG_FRAME_DATA, 2, 70000);
    assert_int_equal(h[0], 0x00);
    assert_int_equal(h[1], 0x01);
    assert_int_equal(h[2], 0x11);
    assert_int_equal(h[3], 0x70);
    brig_frame_hdr d;
    brig_error *err = NULL;
    assert_int_equal(brig_frame_decode_hdr(h, &d, &err), 0);
    assert_int_equal(d.len, 70000);
    assert_int_equal(d.type, BRIG_FRAME_DATA);
    assert_int_equal(d.chan, 2);
    assert_null(err);
}

static void expect_bad(const uint8_t h[BRIG_FRAME_HDR], const char *needle)
{
    brig_frame_hdr d;
    brig_error *err = NULL;
    assert_int_equal(brig_frame_decode_hdr(h, &d, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->kind, BRIG_E_PROTOCOL);
    assert_non_null(strstr(err->msg, needle));
    brig_error_clear(&err);
}

static void test_header_rejects(void **state)
{
    (void)state;
    uint8_t h[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(h, 9, 0, 1);
    expect_bad(h, "unknown frame type");
    brig_frame_encode_hdr(h, 0, 0, 1);
    expect_bad(h, "unknown frame type");
    brig_frame_encode_hdr(h, BRIG_FRAME_CONTROL, 0, BRIG_FRAME_MAX + 1);
    expect_bad(h, "exceeds the limit");
    brig_frame_encode_hdr(h, BRIG_FRAME_CONTROL, 0, 0xFFFFFFFFu);
    expect_bad(h, "exceeds the limit");
    brig_frame_encode_hdr(h, BRIG_FRAME_CONTROL, 3, 10);
    expect_bad(h, "channel");
    brig_frame_encode_hdr(h, BRIG_FRAME_HELLO, 0, 0);
    expect_bad(h, "empty control frame");
    brig_frame_encode_hdr(h, BRIG_FRAME_DATA, 1, 5);
    h[5] = 1;
    expect_bad(h, "flags");
    /* The largest legal frame and an empty DATA frame (EOF) are fine. */
    brig_frame_hdr d;
    brig_frame_encode_hdr(h, BRIG_FRAME_DATA, 1, BRIG_FRAME_MAX);
    assert_int_equal(brig_frame_decode_hdr(h, &d, NULL), 0);
    brig_frame_encode_hdr(h, BRIG_FRAME_DATA, 1, 0);
    assert_int_equal(brig_frame_decode_hdr(h, &d, NULL), 0);
}

static void test_json_payload(void **state)
{
    (void)state;
    json_t *j = NULL;
    brig_error *err = NULL;
    const char ok[] = "{\"op\":\"ping\"}";
    assert_int_equal(brig_frame_parse_json((const uint8_t *)ok, strlen(ok), &j, &err), 0);
    assert_string_equal(json_string_value(json_object_get(j, "op")), "ping");
    json_decref(j);
    const char *bad[] = {"[1,2]", "{\"a\":1,\"a\":2}", "{\"a\":", "\"str\"", "{} {}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = NULL;
        assert_int_equal(brig_frame_parse_json((const uint8_t *)bad[i], strlen(bad[i]), &j, &err),
                         -1);
        assert_null(j);
        assert_int_equal(err->kind, BRIG_E_PROTOCOL);
        brig_error_clear(&err);
    }
}

/* A frame written byte by byte still arrives whole; EOF is distinguished. */
static void test_read_write(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint8_t payload[3000];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 7);
    uint8_t h[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(h, BRIG_FRAME_DATA, 1, sizeof(payload));
    for (size_t i = 0; i < sizeof(h); i++)
        assert_int_equal(write(sv[0], &h[i], 1), 1);
    assert_int_equal(write(sv[0], payload, sizeof(payload)), (ssize_t)sizeof(payload));
    assert_int_equal(brig_frame_write(sv[0], BRIG_FRAME_DATA, 2, NULL, 0, NULL), 0);
    close(sv[0]);

    brig_frame f = {0};
    int eof = 0;
    assert_int_equal(brig_frame_read(sv[1], &f, &eof, NULL), 0);
    assert_int_equal(f.hdr.len, sizeof(payload));
    assert_memory_equal(f.payload, payload, sizeof(payload));
    assert_int_equal(brig_frame_read(sv[1], &f, &eof, NULL), 0);
    assert_int_equal(f.hdr.len, 0);
    assert_int_equal(f.hdr.chan, 2);
    assert_int_equal(brig_frame_read(sv[1], &f, &eof, NULL), -1);
    assert_int_equal(eof, 1);
    brig_frame_dispose(&f);
    close(sv[1]);
}

/* A header cut short is an error, not EOF. */
static void test_truncated(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint8_t h[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(h, BRIG_FRAME_CONTROL, 0, 100);
    assert_int_equal(write(sv[0], h, 5), 5);
    close(sv[0]);
    brig_frame f = {0};
    int eof = 0;
    brig_error *err = NULL;
    assert_int_equal(brig_frame_read(sv[1], &f, &eof, &err), -1);
    assert_int_equal(eof, 0);
    assert_non_null(strstr(err->msg, "inside a frame header"));
    brig_error_clear(&err);
    brig_frame_dispose(&f);
    close(sv[1]);
}

/* The client handshake relays an agent's refusal. */
static void test_hello_refused(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    json_t *e = brig_proto_error_msg("version", "no common protocol version");
    assert_int_equal(brig_frame_write_json(sv[1], BRIG_FRAME_CONTROL, e, NULL), 0);
    json_decref(e);
    brig_error *err = NULL;
    assert_int_equal(brig_proto_client_hello(sv[0], NULL, &err), -1);
    assert_non_null(strstr(err->msg, "no common protocol version"));
    brig_error_clear(&err);
    /* And accepts a good HELLO, negotiating down to its own version. */
    json_t *hello = json_pack("{s:s, s:i}", "proto", BRIG_PROTO_NAME, "version", 7);
    assert_int_equal(brig_frame_write_json(sv[1], BRIG_FRAME_HELLO, hello, NULL), 0);
    json_decref(hello);
    int v = 0;
    assert_int_equal(brig_proto_client_hello(sv[0], &v, NULL), 0);
    assert_int_equal(v, BRIG_PROTO_VERSION);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_roundtrip), cmocka_unit_test(test_header_rejects),
        cmocka_unit_test(test_json_payload),     cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_truncated),        cmocka_unit_test(test_hello_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
