/*
 * test_seccomp.c - the sandboxes' system-call filter as brigd compiles it for the agent
 * (runtime/seccomp.c): loaded into a child of the test, it refuses what the profile
 * refuses, with the profile's errno, answers ENOSYS for calls newer than the profile,
 * and lets the rest through.  The security suite attacks the same filter in real
 * sandboxes; this checks the compilation itself, in a second.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/seccomp.h"

/* In a child under the filter: 0 when every check holds, else the failed check's number. */
static int checks(void)
{
    static const struct {
        long nr, a0, a1, want_errno; /* want_errno 0: the call works */
    } calls[] = {
        {SYS_getpid, 0, 0, 0},
        {SYS_keyctl, 0, 0, EPERM},              /* refused by name */
        {SYS_unshare, CLONE_NEWUSER, 0, EPERM}, /* not in the list */
        {SYS_io_setup, 1, 0, ENOSYS},           /* refused with the rule's errno */
        {SYS_clone3, 0, 0, ENOSYS},             /* ditto: libc falls back to clone */
        {SYS_socket, AF_VSOCK, SOCK_STREAM, EAFNOSUPPORT},
        {SYS_socket, AF_VSOCK | (1L << 32), SOCK_STREAM, EAFNOSUPPORT}, /* upper bits */
        {1000, 0, 0, ENOSYS},                                           /* newer than the profile */
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        errno = 0;
        long r = syscall(calls[i].nr, calls[i].a0, calls[i].a1, 0, 0, 0);
        if (calls[i].want_errno == 0 ? r < 0 : (r != -1 || errno != calls[i].want_errno))
            return (int)i + 1;
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0); /* an allowed family works */
    if (s < 0)
        return 100;
    close(s);
    return 0;
}

static void test_compiled_filter_refuses_and_allows(void **state)
{
    (void)state;
    json_t *profile = brig_seccomp_profile();
    brig_error *err = NULL;
    int fd = -1;
    assert_int_equal(brig_seccomp_compile(profile, &fd, &err), 0);
    json_decref(profile);
    static struct sock_filter code[BPF_MAXINSNS];
    ssize_t got = pread(fd, code, sizeof(code), 0);
    assert_true(got > 0 && got % (ssize_t)sizeof(code[0]) == 0);
    /* sealed: no sandbox's agent, nor anyone else, can change it */
    assert_int_equal(pwrite(fd, "x", 1, 0), -1);
    close(fd);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sock_fprog prog = {.len = (unsigned short)(got / (ssize_t)sizeof(code[0])),
                                  .filter = code};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
            _exit(99);
        _exit(checks());
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_filter_refuses_and_allows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
