"""Attacks that only a kernel in user space stops: kernel features the container
mode's seccomp allow-list lets through to the host's kernel (sockets of every family it
has, netlink, event and timer descriptors, inotify, memfds, native AIO), or that gVisor
implements where a container gets EPERM (user namespaces, and mounts in them; session
keyrings; /dev/fuse and /dev/net/tun).  Under gVisor each one is answered by gVisor's
kernel: the test proves it from the host (sectest.host_view: the sandbox's host
processes hold no new namespace, kernel object, device, socket or mount; host-wide
counters do not move), and reads the filter under which runsc's own processes reach the
host's kernel.

gvisor only: in container mode these calls reach the host's kernel by design (the
shared kernel, docs/security.md "What the OCI driver cannot stop"); the container-mode
attacks on them are in the other files."""

import json
import os
import secrets

import pytest

import sectest
import test_tenant_kernel as tk
from sectest import background, py_program, wait_output

pytestmark = pytest.mark.isolation("gvisor")


def _sockets(state_dir, sid):
    """The host kernel's sockets in the sandbox's network namespace, by table (TCP,
    UDP, raw, packet, netlink; IPv4 and IPv6): under gVisor only runsc's own."""
    n = {}
    for t in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6", "packet", "netlink"):
        with open(f"/proc/{sectest.init_pid(state_dir, sid)}/net/{t}") as f:
            n[t] = len(f.readlines()) - 1
    return n


def _host_links(state_dir, sid):
    """The network interfaces of the sandbox's host network namespace."""
    with open(f"/proc/{sectest.init_pid(state_dir, sid)}/net/dev") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


def _aio_nr():
    with open("/proc/sys/fs/aio-nr") as f:
        return int(f.read())


def _hold(sec, sid, body):
    """Runs an attack program that keeps what it made until its stdin closes; returns
    its JSON and a function that ends it."""
    prog = py_program(body + "\nprint(json.dumps(out), flush=True)\nsys.stdin.read()\n")
    pid = background(sec.api, sid, argv=["python3", "-c", prog])
    line = wait_output(sec.api, sid, pid, "}\n", timeout=60)

    def end():
        sec.api.ok("POST", f"/v1/sandboxes/{sid}/processes/{pid}/stdin/close", expect=(204,))
    return json.loads(line.strip().splitlines()[-1]), end


SOCKETS = r"""
keep = []
def hold(*a):
    try:
        keep.append(socket.socket(*a)); return 'OK'
    except OSError as e:
        return errno.errorcode[e.errno]
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(64); keep.append(srv)
for i in range(16):  # TCP pairs over the sandbox's loopback, data queued both ways
    c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()
    c.send(b'x' * 65536); s.send(b'y' * 65536); keep += [c, s]
for fam, typ in ((socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET6, socket.SOCK_DGRAM),
                 (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_UNIX, socket.SOCK_DGRAM)):
    for i in range(4):
        hold(fam, typ)
keep += list(socket.socketpair()) * 1
out['ping'] = hold(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
out['netlink_route'] = hold(socket.AF_NETLINK, socket.SOCK_RAW, 0)
out['held'] = len(keep)
# Families and netlink protocols outside gVisor's: none may open.
unusual = {'alg': (38, 5, 0), 'key': (15, 3, 2), 'packet': (17, 3, 0x300), 'rds': (21, 5, 0),
           'tipc': (30, 4, 0), 'can': (29, 3, 1), 'bluetooth': (31, 3, 1), 'xdp': (44, 3, 0),
           'kcm': (41, 2, 0), 'llc': (26, 2, 0), 'smc': (43, 1, 0), 'vsock': (40, 1, 0),
           'x25': (9, 5, 0), 'appletalk': (5, 2, 0), 'ieee802154': (36, 2, 0), 'nfc': (39, 2, 0),
           'qipcrtr': (42, 2, 0), 'mctp': (45, 2, 0), 'ax25': (3, 2, 0), 'ipx': (4, 2, 0),
           'sctp': (2, 1, 132), 'dccp': (2, 6, 33), 'l2tp': (2, 2, 115),
           'nl_sock_diag': (16, 3, 4), 'nl_xfrm': (16, 3, 6), 'nl_netfilter': (16, 3, 12),
           'nl_generic': (16, 3, 16), 'nl_uevent': (16, 3, 15), 'nl_audit': (16, 3, 9),
           'nl_connector': (16, 3, 11), 'nl_rdma': (16, 3, 20)}
out['unusual'] = {k: hold(*v) for k, v in unusual.items()}
"""


def test_sockets_never_become_host_sockets(sec):
    """Fifty sockets of the families a program uses (TCP pairs with data queued, UDP,
    IPv6, unix, ICMP echo, route netlink) live in gVisor's network stack: the host
    kernel's socket tables of the sandbox's network namespace do not change, and the
    host's socket memory does not carry their buffers.  Some thirty unusual families and netlink protocols (the
    kernel's crypto API, PF_KEY, packet, RDS, TIPC, CAN, Bluetooth, XDP, KCM, SCTP,
    DCCP, L2TP, netfilter, xfrm, uevents...), a classic source of kernel bugs, do not
    open at all."""
    sid = sec.sandbox()
    before, host = _sockets(sec.daemon.state_dir, sid), sec.host_view(sid)
    links = _host_links(sec.daemon.state_dir, sid)
    out, end = _hold(sec, sid, SOCKETS)
    try:
        during = _sockets(sec.daemon.state_dir, sid)
        assert out["held"] >= 50 and out["ping"] == "OK" and out["netlink_route"] == "OK", out
        assert during == before, (before, during, out["held"])
        sectest.host_view_kept(host, sec.host_view(sid))
        assert _host_links(sec.daemon.state_dir, sid) == links
    finally:
        end()
    # gVisor implements uevent netlink itself (it sends no events): the tables above hold.
    assert {k for k, v in out["unusual"].items() if v == "OK"} <= {"nl_uevent"}, out["unusual"]


def test_user_namespace_privileges_stay_in_gvisor(sec):
    """In a container a new user namespace is refused (it would open kernel code that
    needs CAP_SYS_ADMIN to every sandbox).  gVisor implements user namespaces: root of
    one may mount tmpfs, proc and sysfs and make a network namespace, all in gVisor's
    kernel.  The host sees none of it: no new namespace or mount for the sandbox's host
    processes (their mount table is the same, and no host mount names the directory),
    no new interface in its network namespace."""
    sid = sec.sandbox()
    host, links = sec.host_view(sid), _host_links(sec.daemon.state_dir, sid)
    where = f"/mnt/brig-gv-{secrets.token_hex(6)}"
    out, end = _hold(sec, sid, f"""
out['unshare'] = sc({sectest.NR['unshare']}, {sectest.CLONE_NEWUSER | sectest.CLONE_NEWNS |
                                               sectest.CLONE_NEWNET})
for fs in ('tmpfs', 'proc', 'sysfs'):
    os.makedirs({where!r} + '/' + fs, exist_ok=True)
    out[fs] = sc({sectest.NR['mount']}, fs.encode(), ({where!r} + '/' + fs).encode(),
                 fs.encode(), 0, None)
if out['tmpfs'] == 0:
    open({where!r} + '/tmpfs/f', 'w').write('in gvisor')
""")
    try:
        assert out["unshare"] == 0 and out["tmpfs"] == 0, out  # gVisor's own, as documented
        sectest.host_view_kept(host, sec.host_view(sid))
        with open("/proc/self/mountinfo") as f:
            assert where not in f.read()
        assert _host_links(sec.daemon.state_dir, sid) == links
    finally:
        end()


KERNEL_OBJECTS = r"""
import fcntl, signal
keep = []
libc.eventfd.restype = libc.timerfd_create.restype = libc.inotify_init1.restype = ctypes.c_int
out['eventfd'] = libc.eventfd(0, 0)
out['timerfd'] = libc.timerfd_create(1, 0)
mask = ctypes.create_string_buffer(struct.pack('<Q', 1 << 9), 8)
out['signalfd'] = sc(289, -1, mask, 8, 0)
out['epoll'] = sc(291, 0)
out['inotify'] = libc.inotify_init1(0)
out['memfd'] = sc(319, b'brig', 0)
ctx = ctypes.c_ulong(0)
out['aio'] = sc(206, 4096, ctypes.byref(ctx))
out['keyring'] = sc(250, 1, b'brig-attack')
out['fanotify'] = sc(300, 0, 0)
out['userfaultfd'] = sc(323, 0)
out['io_uring'] = sc(425, 8, ctypes.create_string_buffer(120))
attr = ctypes.create_string_buffer(struct.pack('<IIQ', 1, 128, 0) + b'\0' * 112)
out['perf'] = sc(298, attr, 0, -1, -1, 0)
out['bpf'] = sc(321, 0, ctypes.create_string_buffer(struct.pack('<IIII', 2, 4, 8, 16) + b'\0' * 112), 128)
try:
    fuse = os.open('/dev/fuse', os.O_RDWR); out['fuse'] = 'OK'
except OSError as e:
    out['fuse'] = errno.errorcode[e.errno]
try:
    tun = os.open('/dev/net/tun', os.O_RDWR)
    ifr = struct.pack('16sH', b'brigtun0', 0x0001 | 0x1000) + b'\0' * 22  # IFF_TUN|IFF_NO_PI
    fcntl.ioctl(tun, 0x400454ca, ifr)  # TUNSETIFF
    out['tun'] = 'OK'
except OSError as e:
    out['tun'] = errno.errorcode[e.errno]
out['links'] = sorted(n for _, n in socket.if_nameindex())
"""


def test_kernel_objects_stay_in_gvisor(sec):
    """Event, timer and signal descriptors, epoll, inotify, memfds, a native AIO
    context of 4096 events, a session keyring, FUSE's device and TUN's (an interface
    needs CAP_NET_ADMIN there too): gVisor makes them all in its own kernel.  Held open, none is a host kernel object of the
    sandbox's host processes; the host's AIO pool (fs.aio-nr), its key count for the
    Sentry's uid and the interfaces of the sandbox's network namespace do not change.
    The calls gVisor lacks (fanotify, userfaultfd, io_uring without --iouring, perf
    events, bpf) are refused."""
    sid = sec.sandbox()
    uid = sectest.host_uid(sec.init_pid(sid))
    host, links = sec.host_view(sid), _host_links(sec.daemon.state_dir, sid)
    aio, keys = _aio_nr(), tk_key_users(uid)
    out, end = _hold(sec, sid, KERNEL_OBJECTS)
    try:
        made = ("eventfd", "timerfd", "signalfd", "epoll", "inotify", "memfd", "keyring")
        assert all(isinstance(out[k], int) and out[k] >= 0 for k in made), out
        assert out["aio"] == 0 and out["fuse"] == "OK", out
        assert out["tun"] == "EPERM" and "brigtun0" not in out["links"], out  # CAP_NET_ADMIN
        assert {k: out[k] for k in ("fanotify", "userfaultfd", "io_uring", "perf", "bpf")} == {
            "fanotify": "ENOSYS", "userfaultfd": "ENOSYS", "io_uring": "ENOSYS",
            "perf": "ENODEV", "bpf": "EPERM"}, out
        sectest.host_view_kept(host, sec.host_view(sid))
        assert _aio_nr() == aio
        # No more host keys for the Sentry's uid (fewer is fine: another brigd's sandbox
        # of the same id range, as in a test run beside this one, may end meanwhile).
        assert _key_count(tk_key_users(uid)) <= _key_count(keys), (keys, tk_key_users(uid))
        assert _host_links(sec.daemon.state_dir, sid) == links
    finally:
        end()


def _key_count(entry):
    return int(entry[0]) if entry else 0


def tk_key_users(uid):
    with open("/proc/key-users") as f:
        for line in f:
            if line.split(":")[0].strip() == str(uid):
                return line.split(":", 1)[1].split()[:2]
    return None


def test_proc_and_sys_are_gvisors(sec):
    """/proc and /sys are gVisor's: no host path (a container's mountinfo names brigd's
    state directory), no host kernel version, log, module or network interface, and
    the memory reported is the sandbox's own limit, not the host's."""
    sid = sec.sandbox()
    state = os.path.realpath(sec.daemon.state_dir)
    out, _ = sec.py(sid, """
def rd(p):
    try:
        with open(p, 'rb') as f: return f.read().decode(errors='replace')
    except OSError as e: return errno.errorcode[e.errno]
text = {p: rd(p) for p in ('/proc/self/mountinfo', '/proc/1/mountinfo', '/proc/mounts',
                           '/proc/version', '/proc/cmdline', '/proc/modules', '/proc/meminfo',
                           '/proc/self/cgroup', '/proc/net/dev', '/proc/self/environ')}
buf = ctypes.create_string_buffer(1 << 16)
n = sc(103, 3, buf, 1 << 16)
text['syslog'] = buf.raw[:n].decode(errors='replace') if isinstance(n, int) else n
out['text'] = text
try:
    out['sys_module'] = os.listdir('/sys/module')
except OSError as e:
    out['sys_module'] = []
out['net'] = sorted(n for _, n in socket.if_nameindex())
""")
    text = out["text"]
    blob = "\n".join(text.values())
    assert state not in blob and "/brig/" not in text["/proc/self/cgroup"].replace(":/", ""), blob
    release = os.uname().release
    assert release not in blob, f"the host's kernel release {release} shows in the sandbox"
    with open("/proc/cmdline") as f:
        assert f.read().strip() not in blob
    assert text["/proc/modules"] == "ENOENT", out
    assert not set(out["sys_module"]) & set(os.listdir("/sys/module")), out["sys_module"]
    assert set(out["net"]) <= {"lo", "eth0"}, out["net"]
    mem_kib = int(next(line for line in text["/proc/meminfo"].splitlines()
                       if line.startswith("MemTotal")).split()[1])
    with open("/proc/meminfo") as f:
        host_kib = int(f.readline().split()[1])
    assert mem_kib < host_kib, (mem_kib, host_kib)


# What runsc's own processes may ask the host's kernel: their seccomp filter, read from
# the host and evaluated for the calls the container mode's profile refuses.  (mknodat
# is the Sentry's for FIFOs and sockets of its direct file access; a device node needs
# CAP_MKNOD, which none of runsc's processes has.)
SENTRY_REFUSES = dict(tk.REFUSED_X86_64, execve=59, execveat=322, ptrace=101,
                      process_vm_readv=310, process_vm_writev=311, io_setup=206, chroot=161,
                      mknod=133, setuid=105, setgid=106, kill=62, tkill=200)


def test_runscs_host_filter_refuses_the_kernels_risky_calls(sec):
    """The host sees only runsc's own system calls, through runsc's seccomp filter: read
    from the Sentry (runsc's sandbox process, the sandbox's "kernel") and from a stub
    process that runs a program of the sandbox, it refuses (kills, traps into the Sentry,
    or fails) every call the container profile refuses — io_uring, keyrings, bpf, perf,
    userfaultfd, modules, mounts, namespaces, the clock — and execve, ptrace, setuid,
    kill: so even a compromised Sentry reaches the host kernel only through its short
    list (memory, futexes, files and sockets it already holds)."""
    sid = sec.sandbox()
    stub_pid = background(sec.api, sid, argv=["sleep", "600"])
    sentry = sec.init_pid(sid)
    stubs = [p for p in sectest.host_pids(sec.daemon.state_dir, sid)
             if p != sentry and p not in sectest._gofers(sec.daemon.state_dir, sid)]
    assert stubs, "no stub process of the sandbox's programs on the host"
    checked = {}
    for name, pid in (("sentry", sentry), ("stub", stubs[-1]),
                      ("gofer", sectest._gofers(sec.daemon.state_dir, sid)[0])):
        f = tk.Filter(pid)
        allowed = [n for n, nr in SENTRY_REFUSES.items()
                   if any(f.verdict(tk.AUDIT_ARCH_X86_64, nr, *args) == "ALLOW"
                          for args in ((), (0x10000000,), (1, 1, 0)))]
        checked[name] = allowed
        # The interpreter is not just saying no: runsc's own processes may read or wait on
        # a futex (a stub traps everything its program asks into the Sentry).
        assert name == "stub" or any(f.verdict(tk.AUDIT_ARCH_X86_64, nr) == "ALLOW"
                                     for nr in (0, 202)), name
    assert checked == {"sentry": [], "stub": [], "gofer": []}, checked
    sec.api.ok("POST", f"/v1/sandboxes/{sid}/processes/{stub_pid}/signal", {"signal": "KILL"},
               expect=(204,))
