"""Attacks on the host's files: /proc/<pid>/root and cwd games, `..`, /sys and
/proc/sys writes (including the classic kernel-helper hijacks: core_pattern,
modprobe, uevent_helper, release_agent), device nodes, mknod, symlinks and `..`
in uploads and tar archives, downloads that follow symlinks out, leaked
descriptors as a working directory, poisoning the shared template and the agent
binary.  The host's marker files (a world-readable and a private one in a
world-writable directory) are the target; `sec` checks they are unchanged."""

import hashlib
import io
import os
import tarfile
import urllib.parse

import pytest

import brigtest
import sectest
from sectest import NR


def files_url(sid, route="files", **q):
    return f"/v1/sandboxes/{sid}/{route}?{urllib.parse.urlencode(q)}"


def test_proc_root_and_cwd_links(sec):
    """/proc/<pid>/root, /proc/<pid>/cwd and /proc/self/root/.. for every pid the
    sandbox can see: all lead to the sandbox's own root; the host's marker files are
    not found through any of them (ENOENT), and a write through them creates nothing
    on the host."""
    h = sec.host
    out, _ = sec.py(sec.sandbox(), f"""
pids = [p for p in os.listdir('/proc') if p.isdigit()] + ['self', 'thread-self']
res = {{}}
for p in pids:
    for link in ('root', 'cwd'):
        base = f'/proc/{{p}}/{{link}}'
        for rel in ({h.public!r}, '/..' * 12 + {h.public!r}, {h.private!r}):
            res[base + rel] = err(open, base + rel)
    pwn = f'/proc/{{p}}/root' + {h.dir!r} + '/pwn'
    res[pwn] = err(lambda: open(pwn, 'w'))
out['results'] = sorted(set(res.values()))
targets = {{}}
for p in pids:
    if p.isdigit():
        try:
            targets[p] = os.readlink(f'/proc/{{p}}/root')
        except PermissionError:  # the agent and its handlers are not dumpable
            targets[p] = 'EACCES'
out['targets'] = targets
out['n'] = len(res)
""")
    # ENOENT: the link leads to the sandbox's own root; EACCES: the agent's own
    # /proc entries (it is not dumpable) do not open at all.
    assert set(out["results"]) <= {"ENOENT", "EACCES"} and "ENOENT" in out["results"], out
    assert set(out["targets"].values()) <= {"/", "EACCES"} and "/" in out["targets"].values()
    assert out["targets"]["1"] == "EACCES"
    assert out["n"] >= 20


def test_dotdot_and_absolute_paths(sec):
    """The host's marker files by absolute path, by a long `..` chain, and through
    /proc/self/fd of an O_PATH descriptor of / followed by `..`: ENOENT; creating
    the host's marker directory and files inside the sandbox makes sandbox files,
    not host ones."""
    h = sec.host
    sid = sec.sandbox()
    out, _ = sec.py(sid, f"""
out['abs'] = err(open, {h.public!r})
out['dotdot'] = err(open, '/tmp/' + '../' * 40 + {h.public!r}.lstrip('/'))
fd = os.open('/', os.O_PATH)
out['fd_path'] = err(open, f'/proc/self/fd/{{fd}}/..' + {h.public!r})
os.makedirs({h.dir!r}, exist_ok=True)
open({h.dir!r} + '/pwn', 'w').write('from the sandbox')
open({h.public!r}, 'w').write('overwritten from the sandbox')
out['listing'] = sorted(os.listdir({h.dir!r}))
""")
    assert out["abs"] == out["dotdot"] == out["fd_path"] == "ENOENT", out
    assert out["listing"] == ["public.txt", "pwn"]
    # The sandbox's own copy of the path is separate; `sec` checks the host's.
    assert not os.path.exists(os.path.join(h.dir, "pwn"))


@pytest.mark.parametrize("target", ["hostdir", "root", "dotdot", "proc1root"])
def test_upload_through_symlink(sec, target):
    """PUT /files through a symlink the sandbox planted (pointing at the host's
    marker directory, at /, at a `..` chain, at /proc/1/root): the file lands inside
    the sandbox (readable back through the same path), never on the host."""
    h = sec.host
    link = {"hostdir": h.dir, "root": "/", "dotdot": "../../../../../../..",
            "proc1root": "/proc/1/root"}[target]
    sid = sec.sandbox("minimal")
    r = sec.sh(sid, f"mkdir -p /root/up && ln -s '{link}' /root/up/esc")
    assert r["exit_code"] == 0, r
    rel = "pwn" if target == "hostdir" else h.dir.lstrip("/") + "/pwn"
    path = f"/root/up/esc/{rel}"
    r = sec.api.request("PUT", files_url(sid, path=path), b"planted by a sandbox")
    assert r.status in (204, 403, 404), r.body
    if r.status == 204:
        assert sec.api.get_file(sid, path) == b"planted by a sandbox"
    assert not os.path.exists(os.path.join(h.dir, "pwn"))
    # The public marker through the same link: the sandbox has no such file.
    pub = "public.txt" if target == "hostdir" else h.public.lstrip("/")
    assert sec.api.request("GET", files_url(sid, path=f"/root/up/esc/{pub}")).status in (403, 404)


def _tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, arg in entries:
            info = tarfile.TarInfo(name)
            data = None
            if kind == "file":
                data = arg
                info.size = len(arg)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, arg
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, arg
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("blk", "chr"):
                info.type = tarfile.BLKTYPE if kind == "blk" else tarfile.CHRTYPE
                info.devmajor, info.devminor = arg
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


@pytest.mark.parametrize("template", ["minimal", "base"])  # busybox tar, GNU tar
def test_tar_upload_escapes(sec, template):
    """PUT /files/tar with entries that climb out (`../../..` to the host's marker
    directory, an absolute path), a symlink to the host directory followed by a file
    written through it, a hard link to the host's private marker: nothing reaches the
    host, whatever the template's tar does with them."""
    h = sec.host
    rel = h.dir.lstrip("/")
    archive = _tar([
        ("../../../../../../../" + rel + "/dotdot", "file", b"x"),
        (h.dir + "/absolute", "file", b"x"),
        ("esc", "symlink", h.dir),
        ("esc/through-symlink", "file", b"x"),
        ("up", "symlink", "../../../../../../.."),
        ("up/" + rel + "/through-dotdot-link", "file", b"x"),
        ("hard", "hardlink", h.private),
    ])
    sid = sec.sandbox(template)
    r = sec.api.request("PUT", files_url(sid, "files/tar", path="/root/t"), archive)
    assert r.status in (204, 400), r.body
    assert sorted(os.listdir(h.dir)) == ["private.txt", "public.txt", "sub"]
    # Whatever was extracted is the sandbox's: no host content anywhere in it.
    r = sec.sh(sid, f"cat /root/t/hard 2>/dev/null; grep -r '{h.secret}' / "
                    "--exclude-dir=proc --exclude-dir=sys 2>/dev/null; true")
    assert h.secret not in r["stdout"], r


@pytest.mark.isolation("container")  # gVisor makes the nodes in its own file system, as in
def test_tar_upload_device_nodes(sec):  # test_mknod_devices; its variant here is to be written
    """A tar with block and character device entries (the host's disk, /dev/mem,
    /dev/kmsg): mknod is refused, no device node appears in the sandbox."""
    archive = _tar([("sda", "blk", (8, 0)), ("vda", "blk", (254, 0)), ("mem", "chr", (1, 1)),
                    ("kmsg", "chr", (1, 11)), ("ok.txt", "file", b"fine")])
    sid = sec.sandbox()
    r = sec.api.request("PUT", files_url(sid, "files/tar", path="/root/devs"), archive)
    assert r.status == 400 and b"Operation not permitted" in r.body, r.body
    r = sec.sh(sid, "find / -xdev \\( -type b -o -type c \\) -print; "
                    "cat /root/devs/ok.txt")
    assert r["stdout"] == "fine", r  # no device node anywhere on the sandbox's disk


def test_download_through_symlinks(sec, isolation):
    """GET /files through symlinks out (to the host's marker file, through /proc/1/root)
    and of the agent's own descriptors (/proc/self/fd/1 is the agent's log, a host
    file): 404 or 403, never host content.  Under gVisor the agent's descriptors are
    /dev/null once it is ready (finding G1): 400, not a regular file."""
    h = sec.host
    sid = sec.sandbox("minimal")
    r = sec.sh(sid, f"ln -s '{h.public}' /root/l1 && ln -s '/proc/1/root{h.private}' /root/l2 "
                    f"&& ln -s /proc/1/fd/1 /root/l3")
    assert r["exit_code"] == 0, r
    statuses = {}
    for p in ("/root/l1", "/root/l2", "/root/l3", h.public, "/proc/self/fd/1", "/proc/1/fd/2",
              "/proc/self/fd/0", f"/proc/self/root{h.private}"):
        r = sec.api.request("GET", files_url(sid, path=p))
        statuses[p] = r.status
        assert h.secret.encode() not in r.body
        assert b"brigd" not in r.body and b"runc" not in r.body  # no log content
    assert set(statuses.values()) <= {400, 403, 404}, statuses  # 400: not a regular file
    own_fd = 403 if isolation == "container" else 400
    assert statuses["/proc/self/fd/1"] == own_fd and statuses["/root/l3"] == own_fd, statuses


def test_tar_download_through_symlinks(sec):
    """GET /files/tar of a directory whose entries are symlinks to the host's marker
    directory and to /, and of a path that is itself such a symlink: the archive holds
    the symlinks (or the sandbox's own files), never host content."""
    h = sec.host
    sid = sec.sandbox("minimal")
    sec.sh(sid, f"mkdir -p /root/d && ln -s '{h.dir}' /root/d/hostdir && ln -s / /root/d/root "
                f"&& ln -s '{h.dir}' /root/top")
    r = sec.api.request("GET", files_url(sid, "files/tar", path="/root/d"))
    assert r.status == 200 and h.secret.encode() not in r.body, r.body[:200]
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        kinds = {m.name.lstrip("./"): m.type for m in tar.getmembers() if m.name.strip("./")}
    assert kinds == {"hostdir": tarfile.SYMTYPE, "root": tarfile.SYMTYPE}, kinds
    # The link itself as the directory: the host directory does not exist in the sandbox.
    r = sec.api.request("GET", files_url(sid, "files/tar", path="/root/top"))
    assert r.status in (400, 404) and h.secret.encode() not in r.body, (r.status, r.body[:200])


@pytest.mark.parametrize("path", [
    "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/panic",
    "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname", "/proc/sys/fs/binfmt_misc/register",
    "/proc/sys/kernel/sysrq", "/proc/sysrq-trigger"])
def test_proc_sys_writes(sec, path):
    """Writes to /proc/sys (the classic core_pattern and modprobe helper hijacks, a
    panic, dropping the host's caches, binfmt_misc) and /proc/sysrq-trigger: refused
    (EROFS: read-only, or ENOENT/EACCES where the kernel lacks the file), and the
    host's value is unchanged.  gVisor's /proc/sys is its own and refuses the writes
    (EPERM), but for its own hostname and sysrq-trigger (which it ignores): the host's
    values stay."""
    payload = {"/proc/sys/kernel/core_pattern": "|/tmp/pwn %p",
               "/proc/sys/kernel/modprobe": "/tmp/pwn",
               "/proc/sys/fs/binfmt_misc/register": ":pwn:E::pwn::/tmp/pwn:",
               "/proc/sysrq-trigger": "h"}.get(path, "1")
    host_before = None
    if os.path.isfile(path) and path not in ("/proc/sysrq-trigger", "/proc/sys/vm/drop_caches",
                                             "/proc/sys/fs/binfmt_misc/register"):
        with open(path) as f:
            host_before = f.read()
    out, _ = sec.py(sec.sandbox(), f"""
out['r'] = err(lambda: open({path!r}, 'w').write({payload!r}))
""")
    if sec.gvisor:
        own = ("/proc/sys/kernel/hostname", "/proc/sysrq-trigger")
        assert out["r"] == ("OK" if path in own else "EPERM") or out["r"] == "ENOENT", out
    else:
        assert out["r"] in ("EROFS", "ENOENT", "EACCES"), out
    if not sec.gvisor and os.path.exists(path) and path.startswith(("/proc/sys/kernel",
                                                                      "/proc/sys/vm")):
        assert out["r"] == "EROFS", out  # the file exists, the mount refuses the write
    if host_before is not None:
        with open(path) as f:
            assert f.read() == host_before


@pytest.mark.parametrize("path", [
    "/sys/kernel/uevent_helper", "/sys/kernel/mm/ksm/run", "/sys/class/net/lo/mtu",
    "/sys/power/state", "/sys/kernel/profiling", "/sys/block/loop0/loop/backing_file"])
def test_sys_writes(sec, path):
    """Writes to /sys (the uevent_helper hijack, KSM, a network device, power state,
    a loop device): EROFS — /sys is mounted read-only — or ENOENT; host unchanged.
    gVisor's /sys has most of them not at all (ENOENT), the rest read-only."""
    host_before = None
    if os.path.isfile(path):
        try:
            with open(path) as f:
                host_before = f.read()
        except OSError:
            pass
    out, _ = sec.py(sec.sandbox(), f"""
out['r'] = err(lambda: open({path!r}, 'w').write('/tmp/pwn'))
""")
    assert out["r"] in ("EROFS", "ENOENT"), out
    if path.endswith("backing_file"):
        # loop0 may be re-used by another sandbox meanwhile: the check is only that
        # the sandbox's write did not land.
        if os.path.exists(path):
            with open(path) as f:
                assert "/tmp/pwn" not in f.read()
        return
    if os.path.exists(path):
        assert out["r"] in sec.mode(("EROFS",), ("ENOENT", "EROFS")), out
    if host_before is not None:
        with open(path) as f:
            assert f.read() == host_before


def test_cgroup_escape(sec):
    """The cgroup file system: raising the sandbox's own memory, pids and CPU limits,
    making a child cgroup, setting release_agent / notify_on_release (the classic
    escape), moving into the root cgroup: all refused (EROFS: the hierarchies are
    mounted read-only; the cgroup namespace roots them at the sandbox's own cgroup),
    and the limits seen from the host are unchanged."""
    sid = sec.sandbox()
    mem = "memory/memory.limit_in_bytes"
    host = {f: open(f"/sys/fs/cgroup/{f.split('/')[0]}/brig/{sid}/{f.split('/')[1]}").read()
            for f in (mem, "pids/pids.max", "cpu/cpu.cfs_quota_us")}
    out, _ = sec.py(sid, f"""
w = lambda p, v: err(lambda: open(p, 'w').write(v))
out['mem'] = w('/sys/fs/cgroup/{mem}', '-1')
out['pids'] = w('/sys/fs/cgroup/pids/pids.max', 'max')
out['cpu'] = w('/sys/fs/cgroup/cpu/cpu.cfs_quota_us', '-1')
out['mkdir'] = err(os.mkdir, '/sys/fs/cgroup/memory/escape')
out['release_agent'] = w('/sys/fs/cgroup/memory/release_agent', '/tmp/pwn')
out['notify'] = w('/sys/fs/cgroup/memory/notify_on_release', '1')
out['procs'] = w('/sys/fs/cgroup/memory/cgroup.procs', str(os.getpid()))
out['cgroup'] = open('/proc/self/cgroup').read()
""")
    cg = out.pop("cgroup")
    if sec.gvisor:  # gVisor's cgroupfs is its own: its writes leave the host's alone
        assert out.pop("release_agent") == out.pop("notify") == "EPERM", out
    else:
        assert out.pop("release_agent") in ("EROFS", "EACCES")
        assert out == {k: "EROFS" for k in out} and len(out) == 6, out
        assert all(line.endswith(":/") for line in cg.split()), cg  # rooted at its own
    for f, v in host.items():
        with open(f"/sys/fs/cgroup/{f.split('/')[0]}/brig/{sid}/{f.split('/')[1]}") as fh:
            assert fh.read() == v, f
    with open(f"/sys/fs/cgroup/memory/brig/{sid}/notify_on_release") as fh:
        assert fh.read().strip() == "0"


@pytest.mark.parametrize("node", ["sda", "vda", "mem", "kmem", "port", "kmsg", "loop0",
                                  "loop-control", "mapper/control", "fuse", "net/tun", "kvm"])
def test_device_nodes_absent(sec, node):
    """Host device nodes (disks, memory, I/O ports, the kernel log, loop devices,
    device-mapper, FUSE, TUN, KVM) do not exist in /dev; the sandbox's devices are
    the standard character devices only.  gVisor adds two devices of its own kernel,
    /dev/fuse and /dev/net/tun (they open, in gVisor): the sandbox's host processes then
    hold no host device."""
    sid = sec.sandbox()
    host = sec.host_view(sid)
    out, _ = sec.py(sid, f"""
out['r'] = err(os.open, '/dev/{node}', os.O_RDWR)
out['dev'] = sorted(os.listdir('/dev'))
""")
    gvisors = {"fuse", "net"} if sec.gvisor else set()
    assert out["r"] == ("OK" if node.split("/")[0] in gvisors else "ENOENT"), out
    assert set(out["dev"]) <= {"console", "core", "fd", "full", "mqueue", "null", "ptmx", "pts",
                               "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom",
                               "zero"} | gvisors, out["dev"]
    sectest.host_view_kept(host, sec.host_view(sid))


@pytest.mark.parametrize("kind,major,minor", [("blk", 8, 0), ("blk", 254, 0), ("blk", 7, 0),
                                              ("chr", 1, 1), ("chr", 1, 11), ("chr", 10, 200)])
def test_mknod_devices(sec, kind, major, minor):
    """mknod of a host block device (disk, virtio disk, loop) or character device
    (/dev/mem, /dev/kmsg, /dev/net/tun): EPERM (no CAP_MKNOD; the devices cgroup
    would refuse opening it too); no node is created.  FIFOs stay allowed.  Under gVisor
    /tmp is the sandbox's disk through runsc's gofer, which refuses device nodes (EPERM);
    where gVisor makes one in its own file system it opens no host device (ENXIO/ENODEV:
    gVisor has no such device), and the sandbox's host processes hold none either way."""
    mode = 0o60600 if kind == "blk" else 0o20600
    sid = sec.sandbox()
    host = sec.host_view(sid)
    out, _ = sec.py(sid, f"""
out['r'] = sc({NR['mknod']}, b'/tmp/node', {mode}, {(major << 8) | minor})
out['exists'] = os.path.lexists('/tmp/node')
out['open'] = err(os.open, '/tmp/node', os.O_RDWR) if out['exists'] else 'ENOENT'
out['fifo'] = err(os.mkfifo, '/tmp/fifo')
""")
    if sec.gvisor:
        assert out["r"] in (0, "EPERM") and out["fifo"] == "OK", out
        assert out["exists"] == (out["r"] == 0), out
        tun = (major, minor) == (10, 200)  # gVisor's own TUN (test_device_nodes_absent)
        if out["r"] == 0:
            assert out["open"] in (("OK",) if tun else ("ENXIO", "ENODEV", "EPERM", "EACCES")), out
        sectest.host_view_kept(host, sec.host_view(sid))
    else:
        assert out == {"r": "EPERM", "exists": False, "open": "ENOENT", "fifo": "OK"}


def test_masked_kernel_files(sec):
    """Kernel memory and information files: /proc/kcore (kernel memory), /proc/kmsg
    and syslog(2) (the kernel log), /proc/keys, /proc/timer_list, /proc/sched_debug
    (masked), /sys/firmware (masked): unreadable or empty."""
    out, _ = sec.py(sec.sandbox(), f"""
def rd(p):
    try:
        with open(p, 'rb') as f: return len(f.read(4096))
    except OSError as e: return errno.errorcode[e.errno]
for p in ('/proc/kcore', '/proc/kmsg', '/proc/keys', '/proc/timer_list', '/proc/sched_debug',
          '/proc/latency_stats', '/proc/acpi', '/proc/scsi'):
    out[p] = rd(p)
out['/sys/firmware'] = os.listdir('/sys/firmware')
buf = ctypes.create_string_buffer(4096)
out['syslog'] = sc({NR['syslog']}, 3, buf, 4096)
out['syslog_clear'] = sc({NR['syslog']}, 5, None, 0)
""")
    assert out.pop("/sys/firmware") == []
    if sec.gvisor:  # gVisor's own made-up boot log, not the host's kernel log
        assert isinstance(out.pop("syslog"), int), out
        assert out.pop("syslog_clear") in ("EPERM", "ENOSYS", 0), out
    else:
        assert out.pop("syslog") == "EPERM" and out.pop("syslog_clear") == "EPERM"
    for p, v in out.items():
        assert v in (0, "ENOENT", "EACCES", "EPERM", "EISDIR"), (p, v)
    assert out["/proc/kmsg"] in ("EACCES", "EPERM", "ENOENT")


@pytest.mark.parametrize("cwd", ["/proc/self/fd/1", "/proc/self/fd/3", "/proc/self/fd/4",
                                 "/proc/1/fd/1", "/proc/1/fd/3", "/proc/1/cwd", "/proc/1/root/.."])
def test_leaked_descriptors_as_cwd(sec, cwd):
    """The "leaky vessels" family (runc CVE-2024-21626): a command started with its
    working directory at a descriptor inherited from the host.  The agent's host-side
    descriptors are its log file and sockets, never a directory: such a cwd is a 400,
    or (/proc/1/cwd, /proc/1/root/..) the sandbox's own /.  No process in the sandbox
    holds a directory descriptor outside it."""
    sid = sec.sandbox()
    r = sec.api.request("POST", f"/v1/sandboxes/{sid}/exec",
                        {"argv": ["python3", "-c", "import os; print(os.getcwd(), "
                                  "sorted(os.listdir('.'))[:3])"], "cwd": cwd})
    if r.status == 200:
        assert r.json()["stdout"].startswith("/ ['.brig', 'bin', 'boot']"), r.body
    else:
        # 400: not a directory; 403: the agent's /proc entries do not open at all.
        assert (r.status == 400 and b"Not a directory" in r.body) or (
            r.status == 403 and b"Permission denied" in r.body), r.body
    out, _ = sec.py(sid, """
bad = []
for p in [p for p in os.listdir('/proc') if p.isdigit()]:
    for fd in os.listdir(f'/proc/{p}/fd'):
        try:
            t = os.readlink(f'/proc/{p}/fd/{fd}')
        except OSError:
            continue
        if t.startswith('/') and os.path.isdir(f'/proc/{p}/fd/{fd}') and not os.path.isdir(t):
            bad.append((p, fd, t))
out['bad'] = bad
""")
    assert out["bad"] == []


def test_template_poisoning(sec, daemon):
    """Overwriting and chmod-ing the template's files in one sandbox (/bin/busybox,
    which every command of the minimal template runs, and /etc/passwd): the change
    is that sandbox's own copy-up; the template in the host's cache and a new
    sandbox of the same template see the originals."""
    key = next(t["key"] for t in sec.api.ok("GET", "/v1/templates").json()["templates"]
               if t["name"] == "minimal")
    rootfs = os.path.join(brigtest.TEMPLATE_CACHE, "minimal", key, "rootfs")

    def digest(rel):
        st = os.stat(os.path.join(rootfs, rel))
        with open(os.path.join(rootfs, rel), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest(), st.st_mode, st.st_uid
    before = {p: digest(p) for p in ("bin/busybox", "etc/passwd")}
    a = sec.sandbox("minimal")
    assert sec.sh(a, "mkdir /tmp/copy && cp /bin/busybox /tmp/copy/busybox")["exit_code"] == 0
    # Run from the copy, so that no process executes /bin/busybox while it is rewritten.
    r = sec.api.exec(a, argv=["/tmp/copy/busybox", "sh", "-c",
                              "echo 'root::0:0::/root:/bin/sh' > /etc/passwd && chmod 777 "
                              "/etc/passwd && echo pwned > /bin/busybox && /tmp/copy/busybox cat "
                              "/etc/passwd /bin/busybox"])
    assert r["stdout"] == "root::0:0::/root:/bin/sh\npwned\n", r
    assert {p: digest(p) for p in ("bin/busybox", "etc/passwd")} == before
    b = sec.sandbox("minimal")
    r = sec.sh(b, "head -1 /etc/passwd; busybox true && echo busybox-ok")
    assert r["stdout"].startswith("root:x:0:0") and "busybox-ok" in r["stdout"], r


def test_agent_binary_poisoning(sec, daemon):
    """Replacing /.brig/brig-agent (the agent layer every sandbox shares; its owner,
    the host's root, is not mapped into the sandbox): writing, removing, renaming
    over, chmod-ing it and adding files next to it are refused (EACCES/EPERM); the
    host's agent layer is unchanged and a new sandbox starts and runs commands.
    Under gVisor the sandbox's root owns what it sees: the writes land in gVisor's
    overlay, the sandbox's own copy (its own agent may die of it: the exec answers
    502), and the host's layer and a new sandbox are as before."""
    agent_dir = os.path.join(daemon.state_dir, "agent")
    layer = [os.path.join(agent_dir, d) for d in os.listdir(agent_dir) if not d.startswith(".")]
    before = {p: sectest.tree_snapshot(p) for p in layer}
    a = sec.sandbox()
    if sec.gvisor:
        r = sec.api.request("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["python3", "-c", (
            "A = '/.brig/brig-agent'\nopen(A, 'r+b').write(b'#!/bin/sh')\n"
            "open('/tmp/fake', 'w').write('#!/bin/sh\\necho pwned\\n')\n"
            "import os; os.rename('/tmp/fake', A); os.chmod(A, 0o4777)")]})
        assert r.status in (200, 502), r.body
        assert {p: sectest.tree_snapshot(p) for p in layer} == before
        b = sec.sandbox("minimal")
        assert sec.sh(b, "echo alive; head -c 4 /.brig/brig-agent")["stdout"] == "alive\n\x7fELF"
        return
    out, _ = sec.py(a, """
A = '/.brig/brig-agent'
out['write'] = err(lambda: open(A, 'r+b').write(b'#!/bin/sh'))
out['truncate'] = err(os.truncate, A, 0)
out['unlink'] = err(os.unlink, A)
open('/tmp/fake', 'w').write('#!/bin/sh\\necho pwned\\n')
out['rename_over'] = err(os.rename, '/tmp/fake', A)
out['chmod'] = err(os.chmod, A, 0o4777)
out['create_next'] = err(lambda: open('/.brig/evil', 'w'))
out['xattr'] = err(os.setxattr, A, 'security.capability', b'\\1\\0\\0\\2' + b'\\xff' * 16)
out['head'] = open(A, 'rb').read(4).hex()
""")
    assert out.pop("head") == "7f454c46"  # still the ELF binary
    assert set(out.values()) <= {"EACCES", "EPERM"}, out
    assert {p: sectest.tree_snapshot(p) for p in layer} == before
    b = sec.sandbox("minimal")
    assert sec.sh(b, "echo alive")["stdout"] == "alive\n"
