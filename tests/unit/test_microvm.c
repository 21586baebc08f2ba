/*
 * test_microvm.c - the microVM driver's pure parts: the volumes' kernel command line
 * (microvm_vol.c) and the QMP client (microvm_qmp.c) against a scripted QEMU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/microvm_internal.h"

static void test_vols_cmdline(void **state)
{
    (void)state;
    brig_vm_vol v[2] = {{-1, -1, false, "/data"}, {-1, -1, true, "/my dir/\xc3\xa9%x"}};
    brig_error *err = NULL;
    char *s = brig_vm_vols_cmdline(v, 2, &err);
    assert_non_null(s);
    assert_string_equal(s, " brig.vol=0:rw:/data brig.vol=1:ro:/my%20dir/%C3%A9%25x");
    free(s);
    s = brig_vm_vols_cmdline(v, 0, &err);
    assert_string_equal(s, "");
    free(s);
    char long_path[256];
    memset(long_path, ' ', sizeof(long_path) - 1); /* each byte 3 on the command line */
    long_path[0] = '/';
    long_path[255] = '\0';
    brig_vm_vol many[8];
    for (int i = 0; i < 8; i++)
        many[i] = (brig_vm_vol){-1, -1, false, long_path};
    assert_null(brig_vm_vols_cmdline(many, 8, &err));
    assert_non_null(err);
    assert_int_equal(err->kind, BRIG_E_INVALID);
    brig_error_clear(&err);
}

/* A scripted QEMU: the greeting, an event, then an answer to each command. */
typedef struct fake {
    int listen_fd;
    const char *status;
    char got[512];
} fake;

static void *fake_qemu(void *arg)
{
    fake *f = arg;
    int c = accept(f->listen_fd, NULL, NULL);
    if (c < 0)
        return NULL;
    const char *hello = "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n";
    if (write(c, hello, strlen(hello)) < 0)
        goto out;
    char buf[512];
    size_t have = 0;
    for (int answered = 0; answered < 2;) {
        ssize_t r = read(c, buf + have, sizeof(buf) - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            size_t used = strlen(f->got);
            snprintf(f->got + used, sizeof(f->got) - used, "%s;", buf);
            char reply[256];
            snprintf(reply, sizeof(reply),
                     "{\"timestamp\": {}, \"event\": \"STOP\"}\r\n{\"return\": {%s%s%s}}\r\n",
                     answered ? "\"status\": \"" : "", answered ? f->status : "",
                     answered ? "\", \"running\": false" : "");
            if (write(c, reply, strlen(reply)) < 0)
                goto out;
            answered++;
            have -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have + 1);
        }
    }
out:
    close(c);
    return NULL;
}

static void test_qmp(void **state)
{
    (void)state;
    char dir[] = "/tmp/brig-test-qmp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    brig_error *err = NULL;
    fake f = {.status = "paused"};
    f.listen_fd = brig_vm_qmp_listen(dir, &err);
    assert_true(f.listen_fd >= 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fake_qemu, &f), 0);
    char status[32];
    assert_int_equal(brig_vm_qmp(dir, "query-status", status, sizeof(status), &err), 0);
    pthread_join(t, NULL);
    assert_string_equal(status, "paused");
    assert_string_equal(f.got,
                        "{\"execute\":\"qmp_capabilities\"};{\"execute\":\"query-status\"};");
    /* No QEMU listening any more: the VM is gone. */
    close(f.listen_fd);
    assert_int_equal(brig_vm_qmp(dir, "stop", NULL, 0, &err), -1);
    assert_int_equal(err->kind, BRIG_E_UNAVAILABLE);
    brig_error_clear(&err);
    char sock[64];
    snprintf(sock, sizeof(sock), "%s/" BRIG_VM_QMP_SOCK, dir);
    unlink(sock);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vols_cmdline),
        cmocka_unit_test(test_qmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
