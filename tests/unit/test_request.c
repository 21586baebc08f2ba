/*
 * test_request.c - validation of exec request bodies: every malformed body gets
 * a 400-kind error naming the problem; good bodies are taken as given.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "api/validate.h"

#define DEF 55000
#define MAX 3600000

static void expect_invalid(const char *body, const char *needle)
{
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    brig_exec_req req;
    brig_error *err = NULL;
    assert_int_equal(brig_request_exec(j, DEF, MAX, &req, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->kind, BRIG_E_INVALID);
    if (strstr(err->msg, needle) == NULL)
        fail_msg("'%s': message '%s' lacks '%s'", body, err->msg, needle);
    brig_error_clear(&err);
    json_decref(j);
}

static void test_rejects(void **state)
{
    (void)state;
    expect_invalid("{}", "exactly one of");
    expect_invalid("{\"cmd\":\"ls\",\"argv\":[\"ls\"]}", "exactly one of");
    expect_invalid("{\"cmd\":\"\"}", "'cmd' must be");
    expect_invalid("{\"cmd\":5}", "'cmd' must be");
    expect_invalid("{\"argv\":[]}", "'argv' must be");
    expect_invalid("{\"argv\":\"ls\"}", "'argv' must be");
    expect_invalid("{\"argv\":[\"ls\",1]}", "'argv' must be");
    expect_invalid("{\"argv\":[\"\"]}", "argv[0]");
    expect_invalid("{\"cmd\":\"ls\",\"cwd\":\"tmp\"}", "absolute");
    expect_invalid("{\"cmd\":\"ls\",\"cwd\":7}", "absolute");
    expect_invalid("{\"cmd\":\"ls\",\"env\":[\"A=1\"]}", "'env' must be");
    expect_invalid("{\"cmd\":\"ls\",\"env\":{\"A\":1}}", "must be a string");
    expect_invalid("{\"cmd\":\"ls\",\"env\":{\"A=B\":\"1\"}}", "invalid env name");
    expect_invalid("{\"cmd\":\"ls\",\"env\":{\"\":\"1\"}}", "invalid env name");
    expect_invalid("{\"cmd\":\"ls\",\"timeout\":-1}", "'timeout'");
    expect_invalid("{\"cmd\":\"ls\",\"timeout\":\"5\"}", "'timeout'");
    expect_invalid("{\"cmd\":\"ls\",\"timeout\":3601}", "'timeout'");
    expect_invalid("{\"cmd\":\"ls\",\"timout\":5}", "unknown field 'timout'");
}

static void test_accepts(void **state)
{
    (void)state;
    json_t *j = json_loads("{\"argv\":[\"ls\",\"-l\"],\"cwd\":\"/tmp\",\"env\":{\"A\":\"x y\"},"
                           "\"timeout\":1.5}",
                           0, NULL);
    brig_exec_req req;
    assert_int_equal(brig_request_exec(j, DEF, MAX, &req, NULL), 0);
    assert_non_null(req.argv);
    assert_null(req.cmd);
    assert_string_equal(req.cwd, "/tmp");
    assert_int_equal(req.timeout_ms, 1500);
    assert_string_equal(json_string_value(json_object_get(req.env, "A")), "x y");
    json_decref(j);

    j = json_loads("{\"cmd\":\"echo hi | wc -c\"}", 0, NULL);
    assert_int_equal(brig_request_exec(j, DEF, MAX, &req, NULL), 0);
    assert_string_equal(req.cmd, "echo hi | wc -c");
    assert_int_equal(req.timeout_ms, DEF);
    assert_null(req.cwd);
    json_decref(j);

    j = json_loads("{\"cmd\":\"sleep 1\",\"timeout\":0}", 0, NULL);
    assert_int_equal(brig_request_exec(j, DEF, MAX, &req, NULL), 0);
    assert_int_equal(req.timeout_ms, 0); /* no timeout */
    json_decref(j);
}

static void test_only_fields(void **state)
{
    (void)state;
    static const char *const allowed[] = {"template", NULL};
    json_t *j = json_loads("{\"template\":\"base\"}", 0, NULL);
    assert_int_equal(brig_request_only_fields(j, allowed, NULL), 0);
    json_decref(j);
    j = json_loads("{\"templat\":\"base\"}", 0, NULL);
    brig_error *err = NULL;
    assert_int_equal(brig_request_only_fields(j, allowed, &err), -1);
    assert_non_null(strstr(err->msg, "templat"));
    brig_error_clear(&err);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_accepts),
        cmocka_unit_test(test_only_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
