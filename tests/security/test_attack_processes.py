"""Attacks on processes and identities: seeing, signalling and tracing the host's
and other sandboxes' processes, the sandbox's own agent (PID 1), uid confusion
between two sandboxes, reaching brigd's API key or the agent's socket, and
IPC / abstract unix sockets shared with the host."""

import os
import secrets
import socket

import pytest

import brigtest
import sectest
from sectest import NR, host_uid, init_pid


def test_host_and_other_sandbox_processes_invisible(sec, daemon):
    """Scanning /proc (listing it, and probing every pid number below 65536): only the sandbox's own
    processes exist — not brigd, not the test runner, not the host sentinel, not
    the bystander sandbox's background process (whose command line carries a
    token)."""
    v = sec.victim
    sid = sec.sandbox()
    out, _ = sec.py(sid, """
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
cmdlines = []
for p in pids:
    try: cmdlines.append(open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())
    except OSError: pass
out['pids'] = pids
out['cmdlines'] = cmdlines
pid_max = '/proc/sys/kernel/pid_max'  # gVisor has none: its pids stay below 1 << 16 here
scan = range(1, min(int(open(pid_max).read()) if os.path.exists(pid_max) else 1 << 16, 1 << 16))
out['by_number'] = [n for n in scan if os.path.exists(f'/proc/{n}')]
""")
    text = "\n".join(out["cmdlines"])
    assert v.token not in text and "brigd" not in text and "pytest" not in text, text
    assert out["pids"][0] == 1 and len(out["pids"]) < 10, out["pids"]
    assert out["by_number"] == out["pids"]
    for host_pid in (daemon.proc.pid, os.getpid(), sec.sentinel.pid, v.init_pid):
        # A host pid number may exist in the sandbox only as one of its own processes.
        assert host_pid not in out["by_number"] or host_pid < 10


@pytest.mark.gvisor_finding("G6: kill -9 of every pid from inside ends the sandbox's own agent "
                            "connection under gVisor")
def test_kill_every_pid(sec, daemon):
    """kill -9 on every pid number below 65536, kill(-1), and killing the pid
    numbers of brigd, the host sentinel and the bystander's init: only the sandbox's
    own processes die (its PID 1, the agent, ignores signals from inside); ESRCH for
    the rest; brigd, the sentinel and the bystander live on, and the sandbox still
    runs commands."""
    sid = sec.sandbox()
    targets = [daemon.proc.pid, sec.sentinel.pid, sec.victim.init_pid, os.getpid()]
    out, _ = sec.py(sid, f"""
import signal
me = os.getpid()
hits = []
for n in {targets!r}:
    out[f'host_{{n}}'] = err(os.kill, n, 0) if n > 64 else 'skipped'
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid_max = '/proc/sys/kernel/pid_max'
scan = range(1, min(int(open(pid_max).read()) if os.path.exists(pid_max) else 1 << 16, 1 << 16))
for n in list(scan) + {targets!r}:
    if n in (me, os.getppid()):
        continue
    if err(os.kill, n, 9) == 'OK':
        hits.append(n)
out['hits'] = hits
out['minus_one'] = err(os.kill, -1, 15)
""")
    assert all(out[f"host_{n}"] in ("ESRCH", "skipped") for n in targets), out
    assert 1 in out["hits"]  # PID 1 exists; the kernel drops the signal for it
    assert max(out["hits"]) < 64, out["hits"]  # all of them the sandbox's own, low pids
    assert sec.sh(sid, "echo still-here")["stdout"] == "still-here\n"
    assert daemon.proc.poll() is None and sec.sentinel.poll() is None


def test_trace_and_pidfd_host_pids(sec, daemon):
    """ptrace(PTRACE_ATTACH), pidfd_open, process_vm_readv and /proc/<pid>/mem on the
    host pid numbers of brigd, the sentinel and the bystander's init: ESRCH / ENOENT
    (the pid namespace has no such process)."""
    sid = sec.sandbox()
    targets = [n for n in (daemon.proc.pid, sec.sentinel.pid, sec.victim.init_pid) if n > 64]
    out, _ = sec.py(sid, f"""
buf = ctypes.create_string_buffer(64)
iov = ctypes.create_string_buffer(struct.pack('<QQ', ctypes.addressof(buf), 64))
for n in {targets!r}:
    out[f'ptrace_{{n}}'] = sc({NR['ptrace']}, 16, n, 0, 0)
    out[f'pidfd_{{n}}'] = sc({NR['pidfd_open']}, n, 0)
    out[f'vm_{{n}}'] = sc({NR['process_vm_readv']}, n, iov, 1, iov, 1, 0)
    out[f'mem_{{n}}'] = err(open, f'/proc/{{n}}/mem', 'rb')
""")
    for k, v in out.items():  # gVisor has no pidfd_open (ENOSYS)
        want = "ENOENT" if k.startswith("mem_") else "ESRCH"
        assert v == (sec.mode(want, "ENOSYS") if k.startswith("pidfd_") else want), (k, v)
    assert len(out) == 4 * len(targets) and targets


def test_other_sandbox_files_via_proc(sec):
    """Reading the bystander sandbox's marker through /proc/<pid>/root/root/marker for
    every pid, through the host path of its root file system, and by searching the
    whole visible file system for its content: nothing."""
    v = sec.victim
    sid = sec.sandbox()
    vroot = os.path.join(sec.daemon.state_dir, "sandboxes", v.id, "rootfs", "root", "marker")
    out, _ = sec.py(sid, f"""
res = set()
for p in [p for p in os.listdir('/proc') if p.isdigit()] + ['self']:
    res.add(err(open, f'/proc/{{p}}/root/root/marker'))
out['proc'] = sorted(res)
out['host_path'] = err(open, {vroot!r})
found = []
for d, dirs, files in os.walk('/'):
    if d in ('/proc', '/sys', '/dev'):
        dirs[:] = []
        continue
    for f in files:
        p = os.path.join(d, f)
        try:
            if (os.path.isfile(p) and os.path.getsize(p) < 1 << 20
                    and {v.marker.encode()!r} in open(p, 'rb').read()):
                found.append(p)
        except OSError:
            pass
out['found'] = found
""", timeout=60)
    # ENOENT: this sandbox has no /root/marker of its own; EACCES: a process (the
    # agent, once it is not dumpable) whose root link the sandbox may not follow.
    assert "ENOENT" in out["proc"] and set(out["proc"]) <= {"ENOENT", "EACCES"}, out
    assert out["host_path"] == "ENOENT" and out["found"] == []


def test_uid_separation_between_sandboxes(sec, daemon, isolation):
    """Two sandboxes run as different, unprivileged host uids (root inside = the
    sandbox's base uid, never 0), as seen from the host in /proc/<hostpid>/status
    (under gVisor: runsc's kernel, and its gofer); a private file sandbox A writes
    is, on the host, owned by A's uid and neither readable nor writable by B's uid.
    Under gVisor the root's own writes live in its overlay's file store (a file on
    the sandbox's disk, no more readable by B), and /tmp's in files of their own."""
    a, b = sec.sandbox("minimal"), sec.sandbox("minimal")
    ua, ub = host_uid(init_pid(daemon.state_dir, a)), host_uid(init_pid(daemon.state_dir, b))
    assert ua != ub and ua >= 65536 and ub >= 65536, (ua, ub)
    assert abs(ua - ub) >= 65536  # disjoint 65536-id ranges
    for p in (init_pid(daemon.state_dir, a), init_pid(daemon.state_dir, b)):
        uids = sectest.proc_status(p, "Uid")
        gids = sectest.proc_status(p, "Gid")
        assert len(set(uids)) == 1 and len(set(gids)) == 1 and uids[0] == gids[0], (uids, gids)
    where = "tmp/a-private" if isolation == "gvisor" else "a-private"
    assert sec.sh(a, f"umask 077; echo a-private > /{where}")["exit_code"] == 0
    sb = os.path.join(daemon.state_dir, "sandboxes", a)
    paths = [os.path.join(sb, "rootfs", where), os.path.join(sb, "disk", "upper", where)]
    for p in paths:
        assert os.stat(p).st_uid == ua
    if isolation == "gvisor":
        for p in sectest.host_pids(daemon.state_dir, a):  # the Sentry, its stubs, the gofer
            assert set(sectest.proc_status(p, "Uid")) == {str(ua)}, p
        store = os.path.join(sb, "disk", "upper", f".gvisor.filestore.{a}")
        assert os.stat(store).st_mode & 0o077 == 0, oct(os.stat(store).st_mode)
        paths.append(store)
    assert sectest.as_uid(ub, paths) == {p: ("EACCES", "EACCES") for p in paths}


def test_world_readable_files_of_another_sandbox_on_the_host(sec, daemon):
    """Defence in depth for a process that leaves its mount namespace but keeps its
    uid: sandbox B's host uid must not read even the world-readable files of sandbox
    A (their default mode, 0644) through A's directories on the host."""
    a, b = sec.sandbox("minimal"), sec.sandbox("minimal")
    ub = host_uid(init_pid(daemon.state_dir, b))
    assert sec.sh(a, "echo a-public > /a-public")["exit_code"] == 0
    paths = [os.path.join(daemon.state_dir, "sandboxes", a, "rootfs", "a-public"),
             os.path.join(daemon.state_dir, "sandboxes", a, "disk", "upper", "a-public"),
             os.path.join(daemon.state_dir, "sandboxes", a, "rootfs", "etc", "passwd")]
    res = sectest.as_uid(ub, paths)
    assert all(v[1] == "EACCES" for v in res.values()), res  # never writable
    assert all(v[0] == "EACCES" for v in res.values()), res


def test_api_key_unreachable(sec, daemon):
    """brigd's admin key: in no process's environment (every /proc/<pid>/environ of
    the sandbox, agent included), in no file of the sandbox's file system, and its
    state directory (admin.key, brig.db) is not reachable by any path."""
    key = daemon.key
    sid = sec.sandbox()
    out, _ = sec.py(sid, f"""
envs = {{}}
for p in [p for p in os.listdir('/proc') if p.isdigit()]:
    try: envs[p] = open(f'/proc/{{p}}/environ', 'rb').read().decode(errors='replace')
    except OSError as e: envs[p] = errno.errorcode[e.errno]
out['envs'] = envs
out['state_dir'] = [err(os.stat, {daemon.state_dir!r} + f) for f in ('', '/admin.key', '/brig.db')]
hits = []
for d, dirs, files in os.walk('/'):
    if d in ('/proc', '/sys'):
        dirs[:] = []
        continue
    for f in files:
        p = os.path.join(d, f)
        try:
            if (os.path.isfile(p) and os.path.getsize(p) < 64 << 20
                    and {key.encode()!r} in open(p, 'rb').read()):
                hits.append(p)
        except OSError:
            pass
    for n in files + dirs:
        if n in ('admin.key', 'brig.db'):
            hits.append(os.path.join(d, n))
out['hits'] = hits
""", timeout=60)
    assert out["hits"] == [] and out["state_dir"] == ["ENOENT"] * 3, out
    for pid, env in out["envs"].items():
        assert key not in env and "brig_" not in env and "BRIG" not in env, (pid, env)


@pytest.mark.isolation("container")  # under gVisor the socket is a path inside by design
def test_agent_socket_unreachable(sec, daemon):  # (docs/security.md, gVisor: "The agent's socket")
    """The agent's socket has no path inside the sandbox: no unix socket in the file
    system, connecting to the host's socket path fails (ENOENT), and re-opening or
    connecting through the agent's /proc/1/fd/3 fails too (ENXIO / ECONNREFUSED);
    pidfd_getfd to steal the descriptor is refused (EPERM)."""
    host_sock = os.path.join(daemon.state_dir, "sandboxes", sec.victim.id, "agent.sock")
    assert os.path.exists(host_sock)
    sid = sec.sandbox()
    out, _ = sec.py(sid, f"""
import stat
socks = []
for d, dirs, files in os.walk('/'):
    if d in ('/proc', '/sys'):
        dirs[:] = []
        continue
    for n in files:
        try:
            if stat.S_ISSOCK(os.lstat(os.path.join(d, n)).st_mode): socks.append(os.path.join(d, n))
        except OSError: pass
out['socks'] = socks
def conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try: s.connect(path); return 'OK'
    except OSError as e: return errno.errorcode[e.errno]
    finally: s.close()
out['host_path'] = conn({host_sock!r})
out['own_host_path'] = conn({os.path.join(daemon.state_dir, "sandboxes", sid, "agent.sock")!r})
out['proc_fd3'] = conn('/proc/1/fd/3')
out['open_fd3'] = err(open, '/proc/1/fd/3', 'rb')
out['getfd'] = sc({NR['pidfd_getfd']}, sc({NR['pidfd_open']}, 1, 0), 3, 0)
""")
    assert out["socks"] == [], out
    assert out["host_path"] == "ENOENT" and out["own_host_path"] == "ENOENT", out
    assert out["proc_fd3"] in ("ECONNREFUSED", "ENOENT", "ENOTSOCK", "EACCES"), out
    assert out["open_fd3"] in ("ENXIO", "EACCES") and out["getfd"] == "EPERM", out


def test_agent_log_reopen(sec, daemon, isolation):
    """The agent's stdout/stderr are its log file on the host (<state>/sandboxes/<id>/
    agent.log, 0600 root): re-opening it through /proc/1/fd/1 for writing or reading
    is refused (EACCES), and the host file does not change.  Under gVisor (whose /proc
    lets the sandbox's root reopen a non-dumpable process's fds: finding G1) the agent
    holds none of it once ready: its fds 0-2 are /dev/null, and a megabyte written
    through them never reaches the host file."""
    sid = sec.sandbox()
    log = os.path.join(daemon.state_dir, "sandboxes", sid, "agent.log")
    before = sectest.file_digest(log)
    out, _ = sec.py(sid, """
out['append'] = err(lambda: open('/proc/1/fd/1', 'ab').write(b'forged log line\\n' * 65536))
out['read'] = err(lambda: open('/proc/1/fd/2', 'rb').read(100))
out['truncate'] = err(os.truncate, '/proc/1/fd/1', 0)
def link(i):
    try:
        return os.readlink(f'/proc/1/fd/{i}')
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
out['links'] = [link(i) for i in (0, 1, 2)]
""")
    if isolation == "gvisor":
        assert out["links"] == ["/dev/null"] * 3, out
    else:
        assert {k: out[k] for k in ("append", "read", "truncate")} == \
            {"append": "EACCES", "read": "EACCES", "truncate": "EACCES"}, out
    assert sectest.file_digest(log) == before


AGENT_FINDING = (
    "finding: sandbox code (root in the sandbox) can ptrace its own PID 1, brig-agent "
    "(and its forked helpers): same uid, and the agent stays dumpable. It can stop the "
    "agent (exec then answers 503 after 10 s), or inject system calls into it; the agent "
    "holds the host file agent.log open for writing, so the sandbox can write without "
    "bound to the host's disk outside its 2 GiB layer. Fix in brig-agent: "
    "prctl(PR_SET_DUMPABLE, 0) at start (inherited by its forks, reset by execve for "
    "commands); defence in depth in brigd: the agent's stdout/stderr a pipe brigd reads "
    "with a bound, not a host file")


@pytest.mark.parametrize("how", ["ptrace_attach", "proc_mem", "process_vm_readv"])
def test_tamper_with_the_agent(sec, how):
    """Taking control of PID 1 (brig-agent): PTRACE_ATTACH (then detached at once, so
    the sandbox stays usable), opening /proc/1/mem for writing, reading its memory
    with process_vm_readv.  Must be refused (EPERM/EACCES): the agent is the
    sandbox's connection to brigd and holds host descriptors."""
    sid = sec.sandbox()
    out, _ = sec.py(sid, f"""
if {how!r} == 'ptrace_attach':
    r = sc({NR['ptrace']}, 16, 1, 0, 0)
    if r == 0:
        os.waitpid(1, 0x40000000)
        sc({NR['ptrace']}, 17, 1, 0, 0)
    out['r'] = 'OK' if r == 0 else r
elif {how!r} == 'proc_mem':
    out['r'] = err(lambda: open('/proc/1/mem', 'r+b'))
else:
    buf = ctypes.create_string_buffer(64)
    try:
        lo = int(open('/proc/1/maps').read().split('-')[0], 16)
    except OSError:
        lo = 0x400000  # maps unreadable: try the usual start of a static binary
    liov = struct.pack('<QQ', ctypes.addressof(buf), 64)
    riov = struct.pack('<QQ', lo, 64)
    r = sc({NR['process_vm_readv']}, 1, ctypes.create_string_buffer(liov), 1,
           ctypes.create_string_buffer(riov), 1, 0)
    out['r'] = 'OK' if isinstance(r, int) and r > 0 else r
""")
    assert sec.sh(sid, "echo alive")["stdout"] == "alive\n"
    assert out["r"] in ("EPERM", "EACCES"), out


INJECT = r"""
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        'r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags '
        'rsp ss fs_base gs_base ds es fs gs').split()]
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def pt(req, pid, addr=0, data=0):
    ctypes.set_errno(0)
    r = libc.ptrace(req, pid, addr, data)
    if r == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), 'ptrace')
    return r
def regs(pid, set_to=None):
    r = set_to if set_to is not None else Regs()
    pt(13 if set_to is not None else 12, pid, 0, ctypes.addressof(r))
    return r
def inject_write(pid, fd, msg, reps):
    pt(16, pid)                                   # PTRACE_ATTACH
    os.waitpid(pid, 0x40000000)
    saved = Regs.from_buffer_copy(regs(pid))
    assert (pt(1, pid, saved.rip - 2) & 0xffff) == 0x050f  # stopped right after `syscall`
    buf = (saved.rsp - 65536) & ~0xf
    data = msg + b'\0' * (-len(msg) % 8)
    for i in range(0, len(data), 8):
        pt(5, pid, buf + i, struct.unpack('<q', data[i:i + 8])[0])  # PTRACE_POKEDATA
    total = 0
    for _ in range(reps):
        r = Regs.from_buffer_copy(saved)
        r.rax, r.rdi, r.rsi, r.rdx = 1, fd, buf, len(msg)  # write(fd, buf, len)
        r.rip, r.orig_rax = saved.rip - 2, (1 << 64) - 1
        regs(pid, r)
        pt(9, pid)                                # PTRACE_SINGLESTEP over `syscall`
        os.waitpid(pid, 0x40000000)
        total += ctypes.c_longlong(regs(pid).rax).value
    regs(pid, saved)
    pt(17, pid)                                   # PTRACE_DETACH
    return total
"""


def test_host_file_write_through_the_agent(sec, daemon):
    """Injecting write(2) calls into the agent (ptrace) to write through its stdout,
    which is the host file <state>/sandboxes/<id>/agent.log: a way to write to the
    host's disk outside the sandbox's bounded layer.  The host log must not receive
    the bytes."""
    sid = sec.sandbox()
    log = os.path.join(daemon.state_dir, "sandboxes", sid, "agent.log")
    size_before = os.path.getsize(log)
    token = f"written-from-the-sandbox-{secrets.token_hex(8)}\n"
    out, _ = sec.py(sid, INJECT + f"""
try:
    out['wrote'] = inject_write(1, 1, {token.encode()!r}, 256)
except OSError as e:
    out['wrote'] = errno.errorcode[e.errno]
""")
    assert sec.sh(sid, "echo alive")["stdout"] == "alive\n"  # the agent survived either way
    with open(log, "rb") as f:
        grown = f.read()[size_before:]
    assert token.encode() not in grown, (
        f"the sandbox wrote {out['wrote']} bytes into the host file {log}")
    assert out["wrote"] in ("EPERM", "EACCES"), out


@pytest.mark.gvisor_finding("G4: SIGSTOP from inside stops the agent (PID 1) under gVisor")
def test_stop_the_agent(sec):
    """Stopping PID 1 from inside: SIGSTOP is ignored for a namespace's init, but a
    ptrace attach by a tracer that then exits leaves it stopped, so the sandbox no
    longer answers.  The sandbox must keep answering (and in any case must delete:
    the `sec` fixture checks that)."""
    sid = sec.sandbox()
    out, _ = sec.py(sid, f"""
out['sigstop'] = err(os.kill, 1, 19)
out['attach'] = sc({NR['ptrace']}, 16, 1, 0, 0)
""")
    assert out["sigstop"] == "OK"

    def state():
        with open(f"/proc/{sec.init_pid(sid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    # Seen from the host: the agent must not be left stopped (T) or traced (t).
    try:
        brigtest.wait_for(lambda: state() not in ("T", "t"), timeout=2, what="agent running")
    except AssertionError:
        raise AssertionError(f"the sandbox stopped its own agent (state {state()}): {out}")
    r = sec.api.request("POST", f"/v1/sandboxes/{sid}/exec", {"argv": ["true"]}, timeout=30)
    assert r.status == 200, (r.status, r.body, out)


def test_sysv_ipc_and_mqueue_isolated(sec):
    """SysV shared memory, message queues, semaphores and a POSIX message queue made
    in the sandbox with well-known keys: not visible in the host's IPC namespace
    (/proc/sysvipc/*) nor in the bystander sandbox."""
    key = 0x0b419000 + secrets.randbelow(0xfff)
    sid = sec.sandbox()
    out, _ = sec.py(sid, f"""
libc.shmget.restype = ctypes.c_int
out['shm'] = libc.shmget({key}, 4096, 0o1666)
out['msg'] = libc.msgget({key}, 0o1666)
out['sem'] = libc.semget({key}, 1, 0o1666)
try:  # gVisor mounts no mqueue file system
    fd = os.open('/dev/mqueue/brig-attack', os.O_CREAT | os.O_RDWR, 0o666); os.close(fd)
    out['mq'] = os.listdir('/dev/mqueue')
except FileNotFoundError:
    out['mq'] = 'ENOENT'
""")
    assert out["shm"] >= 0 and out["msg"] >= 0 and out["sem"] >= 0
    assert out["mq"] == sec.mode(["brig-attack"], "ENOENT"), out
    for f in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{f}") as fh:
            keys = [int(line.split()[0]) for line in fh.read().splitlines()[1:]]
        assert key not in keys, f
    r = sec.victim.api.exec(sec.victim.id,
                            "cat /proc/sysvipc/shm /proc/sysvipc/msg; ls /dev/mqueue")
    assert str(key) not in r["stdout"] and "brig-attack" not in r["stdout"], r


def test_abstract_unix_socket_of_the_host(sec):
    """A host service listening on an abstract unix socket (the containerd-shim
    escape, CVE-2020-15257): unreachable from the sandbox (ECONNREFUSED: abstract
    names belong to the network namespace); the host listener gets no connection."""
    name = f"brig-sec-{secrets.token_hex(6)}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\0" + name)
    srv.listen(8)
    srv.setblocking(False)
    try:
        out, _ = sec.py(sec.sandbox(), f"""
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out['r'] = err(s.connect, '\\0' + {name!r})
""")
        assert out["r"] == "ECONNREFUSED", out
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()
