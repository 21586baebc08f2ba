/*
 * test_cgroup.c - choosing the cgroup backend: a v1 hierarchy with the needed
 * controllers is used (and its optional features detected); a host without them
 * gets the "none" backend, which refuses to start sandboxes rather than run
 * them without limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/cgroup.h"

static void touch(const char *root, const char *rel)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    mkdir(p, 0755);
    *slash = '/';
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void test_v1_with_features(void **state)
{
    (void)state;
    char root[] = "/tmp/brig-cg-XXXXXX";
    assert_non_null(mkdtemp(root));
    touch(root, "memory/memory.limit_in_bytes");
    touch(root, "memory/memory.memsw.limit_in_bytes");
    touch(root, "pids/pids.max");
    touch(root, "cpu/cpu.cfs_quota_us");
    const brig_cgroup_ops *ops = brig_cgroup_detect(root);
    assert_string_equal(ops->name, "v1");
    assert_true(ops->swap_limit);
    assert_false(ops->io_weight);
    assert_false(ops->tcp_limit);
    assert_int_equal(ops->check(NULL), 0);
    touch(root, "blkio/blkio.weight");
    assert_true(brig_cgroup_detect(root)->io_weight);
    touch(root, "memory/memory.kmem.tcp.limit_in_bytes");
    assert_true(brig_cgroup_detect(root)->tcp_limit);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

static void test_missing_controllers_refuse(void **state)
{
    (void)state;
    char root[] = "/tmp/brig-cg-XXXXXX";
    assert_non_null(mkdtemp(root));
    touch(root, "memory/memory.limit_in_bytes"); /* no pids, no cpu */
    const brig_cgroup_ops *ops = brig_cgroup_detect(root);
    assert_string_equal(ops->name, "none");
    brig_error *err = NULL;
    assert_int_equal(ops->check(&err), -1);
    assert_int_equal(err->kind, BRIG_E_UNAVAILABLE);
    assert_non_null(strstr(err->msg, "refusing to run sandboxes without limits"));
    brig_error_clear(&err);
    assert_int_equal(ops->cpu_ns("sbx_x"), -1);
    assert_string_equal(brig_cgroup_detect("/nonexistent/brig")->name, "none");
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_with_features),
        cmocka_unit_test(test_missing_controllers_refuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
