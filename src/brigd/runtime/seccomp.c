/*
 * seccomp.c - the sandbox's system-call allow-list.
 *
 * Default action: EPERM.  The allowed set is what Docker's default profile
 * allows a container without CAP_SYS_ADMIN, minus the calls below, which are
 * refused because they widen the kernel attack surface and a sandboxed program
 * does not need them:
 *   io_uring_setup/enter/register  a large, often-patched kernel interface
 *   io_setup, io_submit...         native AIO answers ENOSYS (as on a kernel without
 *                                  CONFIG_AIO, so libaio users fall back to threads):
 *                                  its event budget, fs.aio-max-nr, is one host-wide
 *                                  pool; a single io_setup(65536) in one sandbox left
 *                                  every other sandbox and the host with EAGAIN
 *   open_by_handle_at              file handles bypass path-based confinement
 *                                  (the "shocker" escape)
 *   keyctl, add_key, request_key   the kernel keyring is not namespaced
 *   bpf, perf_event_open           kernel programs, performance counters
 *   userfaultfd                    a classic exploitation primitive
 *   kexec_*, *_module, acct, quotactl, lookup_dcookie, syslog, iopl, ioperm,
 *   clock_settime/settimeofday/adjtimex writes, reboot, swapon/swapoff,
 *   mount, umount2, pivot_root, setns, unshare, fsopen/fsmount/open_tree,
 *   move_mount, mount_setattr, sethostname, setdomainname
 * and, by argument:
 *   clone with any CLONE_NEW* flag (no new namespaces, in particular no new
 *   user namespace: unprivileged user namespaces expose kernel code that
 *   normally needs CAP_SYS_ADMIN)
 *   clone3 answers ENOSYS, so libc falls back to clone, whose flags we can see
 *   socket and socketpair of AF_VSOCK answer EAFNOSUPPORT (below)
 *   personality only with the harmless values Docker allows
 * ptrace and process_vm_* stay allowed: the pid and user namespaces confine
 * them to the sandbox's own processes, and debuggers need them.
 *
 * One ABI only: x86-64.  The i386 ABI (int $0x80, and SYSENTER/SYSCALL32 from a
 * 32-bit code segment) multiplexes calls: socketcall(SYS_SOCKET, args) carries
 * socket's arguments in memory, where seccomp cannot look, so libseccomp made the
 * rule for socket(family != AF_VSOCK) one for socketcall(SYS_SOCKET, any family) -
 * with SCMP_ARCH_X86 listed, `int $0x80` opened the AF_VSOCK socket that x86-64's
 * socket() refused (ipc(2) multiplexes SysV IPC the same way).  x32 (the x86-64
 * call numbers with bit 30 set) has nothing a sandbox needs either.  An
 * architecture missing from "architectures" gets libseccomp's bad-arch action,
 * which runc leaves at SECCOMP_RET_KILL_THREAD; the agent adds a filter that makes
 * it kill the whole process (agent.md), so any foreign-ABI call ends its process
 * with SIGSYS, as if the kernel had no such ABI.
 *
 * Arguments are compared as 64-bit values, but the kernel truncates an int
 * argument to its low 32 bits: a rule "family != AF_VSOCK" let socket(AF_VSOCK |
 * 1 << 32) through, and the kernel made a vsock socket.  So the family rules
 * enumerate what is allowed (exact 64-bit values: upper bits zero) and refuse the
 * rest, never "allow all but".
 */
#include "seccomp.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

static const char *const allowed[] = {"accept",
                                      "accept4",
                                      "access",
                                      "alarm",
                                      "arch_prctl",
                                      "bind",
                                      "brk",
                                      "capget",
                                      "capset",
                                      "chdir",
                                      "chmod",
                                      "chown",
                                      "chroot",
                                      "clock_getres",
                                      "clock_gettime",
                                      "clock_nanosleep",
                                      "close",
                                      "close_range",
                                      "connect",
                                      "copy_file_range",
                                      "creat",
                                      "dup",
                                      "dup2",
                                      "dup3",
                                      "epoll_create",
                                      "epoll_create1",
                                      "epoll_ctl",
                                      "epoll_pwait",
                                      "epoll_pwait2",
                                      "epoll_wait",
                                      "eventfd",
                                      "eventfd2",
                                      "execve",
                                      "execveat",
                                      "exit",
                                      "exit_group",
                                      "faccessat",
                                      "faccessat2",
                                      "fadvise64",
                                      "fallocate",
                                      "fanotify_mark",
                                      "fchdir",
                                      "fchmod",
                                      "fchmodat",
                                      "fchown",
                                      "fchownat",
                                      "fcntl",
                                      "fdatasync",
                                      "fgetxattr",
                                      "flistxattr",
                                      "flock",
                                      "fork",
                                      "fremovexattr",
                                      "fsetxattr",
                                      "fstat",
                                      "fstatfs",
                                      "fsync",
                                      "ftruncate",
                                      "futex",
                                      "futex_waitv",
                                      "futimesat",
                                      "getcpu",
                                      "getcwd",
                                      "getdents",
                                      "getdents64",
                                      "getegid",
                                      "geteuid",
                                      "getgid",
                                      "getgroups",
                                      "getitimer",
                                      "getpeername",
                                      "getpgid",
                                      "getpgrp",
                                      "getpid",
                                      "getppid",
                                      "getpriority",
                                      "getrandom",
                                      "getresgid",
                                      "getresuid",
                                      "getrlimit",
                                      "get_robust_list",
                                      "getrusage",
                                      "getsid",
                                      "getsockname",
                                      "getsockopt",
                                      "get_thread_area",
                                      "gettid",
                                      "gettimeofday",
                                      "getuid",
                                      "getxattr",
                                      "inotify_add_watch",
                                      "inotify_init",
                                      "inotify_init1",
                                      "inotify_rm_watch",
                                      "ioctl",
                                      "ioprio_get",
                                      "ioprio_set",
                                      "kill",
                                      "landlock_add_rule",
                                      "landlock_create_ruleset",
                                      "landlock_restrict_self",
                                      "lchown",
                                      "lgetxattr",
                                      "link",
                                      "linkat",
                                      "listen",
                                      "listxattr",
                                      "llistxattr",
                                      "lremovexattr",
                                      "lseek",
                                      "lsetxattr",
                                      "lstat",
                                      "madvise",
                                      "membarrier",
                                      "memfd_create",
                                      "mincore",
                                      "mkdir",
                                      "mkdirat",
                                      "mknod",
                                      "mknodat",
                                      "mlock",
                                      "mlock2",
                                      "mlockall",
                                      "mmap",
                                      "modify_ldt",
                                      "mprotect",
                                      "mq_getsetattr",
                                      "mq_notify",
                                      "mq_open",
                                      "mq_timedreceive",
                                      "mq_timedsend",
                                      "mq_unlink",
                                      "mremap",
                                      "msgctl",
                                      "msgget",
                                      "msgrcv",
                                      "msgsnd",
                                      "msync",
                                      "munlock",
                                      "munlockall",
                                      "munmap",
                                      "name_to_handle_at",
                                      "nanosleep",
                                      "newfstatat",
                                      "open",
                                      "openat",
                                      "openat2",
                                      "pause",
                                      "pidfd_open",
                                      "pidfd_send_signal",
                                      "pipe",
                                      "pipe2",
                                      "pkey_alloc",
                                      "pkey_free",
                                      "pkey_mprotect",
                                      "poll",
                                      "ppoll",
                                      "prctl",
                                      "pread64",
                                      "preadv",
                                      "preadv2",
                                      "prlimit64",
                                      "process_mrelease",
                                      "process_vm_readv",
                                      "process_vm_writev",
                                      "pselect6",
                                      "ptrace",
                                      "pwrite64",
                                      "pwritev",
                                      "pwritev2",
                                      "read",
                                      "readahead",
                                      "readlink",
                                      "readlinkat",
                                      "readv",
                                      "recvfrom",
                                      "recvmmsg",
                                      "recvmsg",
                                      "remap_file_pages",
                                      "removexattr",
                                      "rename",
                                      "renameat",
                                      "renameat2",
                                      "restart_syscall",
                                      "rmdir",
                                      "rseq",
                                      "rt_sigaction",
                                      "rt_sigpending",
                                      "rt_sigprocmask",
                                      "rt_sigqueueinfo",
                                      "rt_sigreturn",
                                      "rt_sigsuspend",
                                      "rt_sigtimedwait",
                                      "rt_tgsigqueueinfo",
                                      "sched_getaffinity",
                                      "sched_getattr",
                                      "sched_getparam",
                                      "sched_get_priority_max",
                                      "sched_get_priority_min",
                                      "sched_getscheduler",
                                      "sched_rr_get_interval",
                                      "sched_setaffinity",
                                      "sched_setattr",
                                      "sched_setparam",
                                      "sched_setscheduler",
                                      "sched_yield",
                                      "seccomp",
                                      "select",
                                      "semctl",
                                      "semget",
                                      "semop",
                                      "semtimedop",
                                      "sendfile",
                                      "sendmmsg",
                                      "sendmsg",
                                      "sendto",
                                      "setfsgid",
                                      "setfsuid",
                                      "setgid",
                                      "setgroups",
                                      "setitimer",
                                      "setpgid",
                                      "setpriority",
                                      "setregid",
                                      "setresgid",
                                      "setresuid",
                                      "setreuid",
                                      "setrlimit",
                                      "set_robust_list",
                                      "setsid",
                                      "setsockopt",
                                      "set_thread_area",
                                      "set_tid_address",
                                      "setuid",
                                      "setxattr",
                                      "shmat",
                                      "shmctl",
                                      "shmdt",
                                      "shmget",
                                      "shutdown",
                                      "sigaltstack",
                                      "signalfd",
                                      "signalfd4",
                                      "splice",
                                      "stat",
                                      "statfs",
                                      "statx",
                                      "symlink",
                                      "symlinkat",
                                      "sync",
                                      "sync_file_range",
                                      "syncfs",
                                      "sysinfo",
                                      "tee",
                                      "tgkill",
                                      "time",
                                      "timer_create",
                                      "timer_delete",
                                      "timer_getoverrun",
                                      "timer_gettime",
                                      "timer_settime",
                                      "timerfd_create",
                                      "timerfd_gettime",
                                      "timerfd_settime",
                                      "times",
                                      "tkill",
                                      "truncate",
                                      "umask",
                                      "uname",
                                      "unlink",
                                      "unlinkat",
                                      "utime",
                                      "utimensat",
                                      "utimes",
                                      "vfork",
                                      "vmsplice",
                                      "wait4",
                                      "waitid",
                                      "write",
                                      "writev",
                                      NULL};

#define CLONE_NS_FLAGS                                                                             \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |     \
     CLONE_NEWCGROUP)

static json_t *names(const char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* {"names":[name], "action":"SCMP_ACT_ALLOW", "args":[{index, value, op}]} */
static json_t *allow_if(const char *name, int index, json_int_t value, json_int_t value2,
                        const char *op)
{
    return json_pack("{s:[s], s:s, s:[{s:i, s:I, s:I, s:s}]}", "names", name, "action",
                     "SCMP_ACT_ALLOW", "args", "index", index, "value", value, "valueTwo", value2,
                     "op", op);
}

/* {index, value, op}: one comparison of a rule's "args". */
static json_t *arg_cmp(int index, json_int_t value, const char *op)
{
    return json_pack("{s:i, s:I, s:s}", "index", index, "value", value, "op", op);
}

/* socket/socketpair by address family (argument 0).  Allowed: every family the
 * kernel may have but AF_VSOCK, as exact values.  Refused with EAFNOSUPPORT, what a
 * kernel without the family answers: AF_VSOCK (the host's vsock space is not
 * namespaced: a sandbox could bind ports of the hypervisor's channels) and every
 * value from AF_MAX up, which includes any family with upper bits set (the kernel
 * would truncate them away).  EAFNOSUPPORT rather than EPERM: programs that probe
 * for vsock treat it as "no vsock here" and go on.  Several comparisons of one
 * argument in one rule are alternatives (runc adds one libseccomp rule each). */
static json_t *family_rule(const char *name, const char *action)
{
    json_t *args = json_array();
    bool allow = strcmp(action, "SCMP_ACT_ALLOW") == 0;
    if (allow) {
        json_array_append_new(args, arg_cmp(0, AF_VSOCK, "SCMP_CMP_LT"));
        for (int f = AF_VSOCK + 1; f < AF_MAX; f++)
            json_array_append_new(args, arg_cmp(0, f, "SCMP_CMP_EQ"));
    } else {
        json_array_append_new(args, arg_cmp(0, AF_VSOCK, "SCMP_CMP_EQ"));
        json_array_append_new(args, arg_cmp(0, AF_MAX, "SCMP_CMP_GE"));
    }
    json_t *rule = json_pack("{s:[s], s:s, s:o}", "names", name, "action", action, "args", args);
    if (!allow)
        json_object_set_new(rule, "errnoRet", json_integer(EAFNOSUPPORT));
    return rule;
}

json_t *brig_seccomp_profile(void)
{
    json_t *rules = json_array();
    json_array_append_new(
        rules, json_pack("{s:o, s:s}", "names", names(allowed), "action", "SCMP_ACT_ALLOW"));
    /* clone: only without namespace flags.  For SCMP_CMP_MASKED_EQ the OCI
     * "value" is the mask and "valueTwo" the result: (flags & CLONE_NS_FLAGS) == 0.
     * (The other way round, mask 0, every clone matched: clone(CLONE_NEWUSER)
     * was allowed; tests/security/test_attack_syscalls.py checks it is not.) */
    json_array_append_new(rules, allow_if("clone", 0, CLONE_NS_FLAGS, 0, "SCMP_CMP_MASKED_EQ"));
    json_array_append_new(rules, json_pack("{s:[s], s:s, s:i}", "names", "clone3", "action",
                                           "SCMP_ACT_ERRNO", "errnoRet", ENOSYS));
    static const char *const no_aio[] = {"io_setup",     "io_destroy",    "io_submit", "io_cancel",
                                         "io_getevents", "io_pgetevents", NULL};
    json_array_append_new(rules, json_pack("{s:o, s:s, s:i}", "names", names(no_aio), "action",
                                           "SCMP_ACT_ERRNO", "errnoRet", ENOSYS));
    json_array_append_new(rules, family_rule("socket", "SCMP_ACT_ALLOW"));
    json_array_append_new(rules, family_rule("socket", "SCMP_ACT_ERRNO"));
    json_array_append_new(rules, family_rule("socketpair", "SCMP_ACT_ALLOW"));
    json_array_append_new(rules, family_rule("socketpair", "SCMP_ACT_ERRNO"));
    static const json_int_t personas[] = {0, 8, 0x20000, 0x20008, 0xffffffff};
    for (size_t i = 0; i < sizeof(personas) / sizeof(personas[0]); i++)
        json_array_append_new(rules, allow_if("personality", 0, personas[i], 0, "SCMP_CMP_EQ"));
    /* x86-64 alone: every other ABI is refused as a whole (see the top). */
    return json_pack("{s:s, s:i, s:[s], s:o}", "defaultAction", "SCMP_ACT_ERRNO", "defaultErrnoRet",
                     EPERM, "architectures", "SCMP_ARCH_X86_64", "syscalls", rules);
}
