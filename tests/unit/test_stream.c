/*
 * test_stream.c - output chunks to NDJSON events: text stays text across chunk
 * boundaries that split a UTF-8 character, binary becomes base64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "api/stream.h"

static void test_cut(void **state)
{
    (void)state;
    const uint8_t e_acute[] = {'a', 0xC3, 0xA9};    /* "aé" */
    assert_int_equal(brig_utf8_cut(e_acute, 3), 3); /* complete */
    assert_int_equal(brig_utf8_cut(e_acute, 2), 1); /* lead byte only */
    const uint8_t euro[] = {'x', 0xE2, 0x82, 0xAC}; /* "x€" */
    assert_int_equal(brig_utf8_cut(euro, 4), 4);
    assert_int_equal(brig_utf8_cut(euro, 3), 1);
    assert_int_equal(brig_utf8_cut(euro, 2), 1);
    const uint8_t emoji[] = {0xF0, 0x9F, 0x98, 0x80}; /* U+1F600 */
    assert_int_equal(brig_utf8_cut(emoji, 4), 4);
    assert_int_equal(brig_utf8_cut(emoji, 3), 0);
    assert_int_equal(brig_utf8_cut(emoji, 1), 0);
    const uint8_t junk[] = {'a', 0xFF};
    assert_int_equal(brig_utf8_cut(junk, 2), 2); /* not a lead byte: nothing to wait for */
    assert_int_equal(brig_utf8_cut((const uint8_t *)"", 0), 0);
}

/* Parses the NDJSON lines in b into an array. */
static json_t *lines(brig_buf *b)
{
    json_t *arr = json_array();
    char *save = NULL;
    for (char *l = strtok_r(b->data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(l, 0, NULL);
        assert_non_null(j);
        json_array_append_new(arr, j);
    }
    return arr;
}

static void test_split_character_is_kept_whole(void **state)
{
    (void)state;
    brig_ndjson nj;
    memset(&nj, 0, sizeof(nj));
    brig_buf out = {0};
    const uint8_t a[] = {'c', 'a', 'f', 0xC3};
    const uint8_t b[] = {0xA9, '!', '\n'};
    brig_ndjson_data(&nj, BRIG_CHAN_STDOUT, a, sizeof(a), &out);
    brig_ndjson_data(&nj, BRIG_CHAN_STDOUT, b, sizeof(b), &out);
    brig_ndjson_eof(&nj, BRIG_CHAN_STDOUT, &out);
    json_t *ev = lines(&out);
    assert_int_equal(json_array_size(ev), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "data")), "caf");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 1), "data")),
                        "\xC3\xA9!\n");
    assert_null(json_object_get(json_array_get(ev, 1), "encoding"));
    json_decref(ev);
    brig_buf_dispose(&out);
}

static void test_binary_is_base64_and_channels_apart(void **state)
{
    (void)state;
    brig_ndjson nj;
    memset(&nj, 0, sizeof(nj));
    brig_buf out = {0};
    const uint8_t bin[] = {0xFF, 0x00, 'a'};
    brig_ndjson_data(&nj, BRIG_CHAN_STDERR, bin, sizeof(bin), &out);
    /* A dangling lead byte at EOF is flushed, as base64. */
    const uint8_t lead[] = {'o', 'k', 0xE2};
    brig_ndjson_data(&nj, BRIG_CHAN_STDOUT, lead, sizeof(lead), &out);
    brig_ndjson_eof(&nj, BRIG_CHAN_STDOUT, &out);
    json_t *ev = lines(&out);
    assert_int_equal(json_array_size(ev), 3);
    json_t *e0 = json_array_get(ev, 0);
    assert_string_equal(json_string_value(json_object_get(e0, "type")), "stderr");
    assert_string_equal(json_string_value(json_object_get(e0, "encoding")), "base64");
    assert_string_equal(json_string_value(json_object_get(e0, "data")), "/wBh");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 1), "data")), "ok");
    json_t *e2 = json_array_get(ev, 2);
    assert_string_equal(json_string_value(json_object_get(e2, "encoding")), "base64");
    assert_string_equal(json_string_value(json_object_get(e2, "data")), "4g==");
    json_decref(ev);
    brig_buf_dispose(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_split_character_is_kept_whole),
        cmocka_unit_test(test_binary_is_base64_and_channels_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
