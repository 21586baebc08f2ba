/*
 * test_log.c - log records (src/common/log.c): a message is escaped into one line
 * (no newline, carriage return, escape or other control byte, nothing above ASCII
 * raw), cut at the record's size, and one key's flood passes at its burst while
 * another key's records still pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static void test_escape(void **state)
{
    (void)state;
    char out[128];
    const char in[] = "a\nb\rc\td\\e\x1b[2J\x7f\xc3\xa9";
    size_t used = brig_log_escape(out, sizeof(out), in, sizeof(in) - 1);
    assert_int_equal(used, sizeof(in) - 1);
    assert_string_equal(out, "a\\nb\\rc\\td\\\\e\\x1b[2J\\x7f\\xc3\\xa9");
    /* Never half an escape: "\x1b" does not fit in 3 bytes and a NUL. */
    used = brig_log_escape(out, 4, "ab\x1b", 3);
    assert_int_equal(used, 2);
    assert_string_equal(out, "ab");
}

/* Runs fn with stderr going to a file; returns what it wrote (caller frees). */
static char *capture(void (*fn)(void))
{
    char path[] = "/tmp/brig-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    dup2(saved, 2);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = calloc(1, (size_t)n + 1);
    assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
    close(fd);
    return buf;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void forged(void)
{
    brig_log(BRIG_LOG_WARN, "tar: %s", "x\n2031-01-01T00:00:00.000Z brigd info: forged\n");
    char big[3 * BRIG_LOG_LINE_MAX];
    memset(big, '\n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    brig_log(BRIG_LOG_WARN, "%s", big);
}

static void test_one_record_one_line(void **state)
{
    (void)state;
    char *out = capture(forged);
    assert_int_equal(count(out, "\n"), 2);
    assert_non_null(strstr(out, "tar: x\\n2031-01-01T00:00:00.000Z brigd info: forged\\n\n"));
    const char *second = strchr(out, '\n') + 1;
    assert_true(strlen(second) <= BRIG_LOG_LINE_MAX);
    assert_non_null(strstr(second, "...[cut]\n"));
    free(out);
}

static void flood(void)
{
    brig_log_set_key("sandbox sbx_flood");
    for (int i = 0; i < 200; i++)
        brig_log(BRIG_LOG_WARN, "flood %d", i);
    brig_log_set_key(NULL);
    brig_log_keyed("sandbox sbx_other", BRIG_LOG_WARN, "other");
    brig_log(BRIG_LOG_WARN, "unkeyed");
}

static void test_rate_limit_per_key(void **state)
{
    (void)state;
    char *out = capture(flood);
    int passed = count(out, " flood ");
    /* The burst, and the few the rate adds while the loop runs. */
    assert_true(passed >= BRIG_LOG_BURST && passed <= BRIG_LOG_BURST + 3);
    assert_int_equal(count(out, "other\n"), 1);
    assert_int_equal(count(out, "unkeyed\n"), 1);
    free(out);
}

int main(void)
{
    brig_log_init("test", BRIG_LOG_DEBUG);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_one_record_one_line),
        cmocka_unit_test(test_rate_limit_per_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
