/*
 * test_id.c - identifiers and keys: format, validity checks, uniqueness, hashing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/id.h"

static void test_format(void **state)
{
    (void)state;
    char id[BRIG_ID_MAX];
    brig_id_new("sbx", id);
    assert_int_equal(strlen(id), 4 + 26);
    assert_memory_equal(id, "sbx_", 4);
    assert_true(brig_id_valid("sbx", id));
    assert_false(brig_id_valid("acc", id));
    for (const char *p = id + 4; *p; p++)
        assert_non_null(strchr("abcdefghijklmnopqrstuvwxyz234567", *p));
}

static void test_invalid(void **state)
{
    (void)state;
    assert_false(brig_id_valid("sbx", NULL));
    assert_false(brig_id_valid("sbx", ""));
    assert_false(brig_id_valid("sbx", "sbx_"));
    assert_false(brig_id_valid("sbx", "sbx_aaaaaaaaaaaaaaaaaaaaaaaaa"));   /* 25 */
    assert_false(brig_id_valid("sbx", "sbx_aaaaaaaaaaaaaaaaaaaaaaaaaaa")); /* 27 */
    assert_false(brig_id_valid("sbx", "sbx_aaaaaaaaaaaaaaaaaaaaaaaaa1"));  /* 1 not base32 */
    assert_false(brig_id_valid("sbx", "sbx_../../../../../../etc/passwd"));
    assert_true(brig_id_valid("sbx", "sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* 10000 ids, no duplicates, and every character position varies. */
static void test_unique(void **state)
{
    (void)state;
    enum { N = 10000 };
    char(*ids)[BRIG_ID_MAX] = calloc(N, BRIG_ID_MAX);
    for (int i = 0; i < N; i++)
        brig_id_new("sbx", ids[i]);
    int varies[30] = {0};
    for (int i = 1; i < N; i++)
        for (int c = 4; c < 30; c++)
            varies[c] |= ids[i][c] != ids[0][c];
    for (int c = 4; c < 30; c++)
        assert_true(varies[c]);
    qsort(ids, N, BRIG_ID_MAX, cmp);
    for (int i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

static void test_keys(void **state)
{
    (void)state;
    char *a = brig_key_new(), *b = brig_key_new();
    assert_int_equal(strlen(a), 5 + 43);
    assert_memory_equal(a, "brig_", 5);
    assert_string_not_equal(a, b);
    char ha[65], ha2[65], hb[65];
    brig_key_hash(a, ha);
    brig_key_hash(a, ha2);
    brig_key_hash(b, hb);
    assert_int_equal(strlen(ha), 64);
    assert_string_equal(ha, ha2);
    assert_string_not_equal(ha, hb);
    assert_null(strstr(ha, a + 5)); /* the hash does not contain the key */
    free(a);
    free(b);
}

static void test_sha256(void **state)
{
    (void)state;
    /* SHA-256("abc") = ba7816bf8f01cfea... */
    const void *parts[] = {"a", "bc"};
    size_t lens[] = {1, 2};
    char out[17];
    brig_sha256_hex16(parts, lens, 2, out);
    assert_string_equal(out, "ba7816bf8f01cfea");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format), cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_unique), cmocka_unit_test(test_keys),
        cmocka_unit_test(test_sha256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
