"""Helpers for brig's integration tests: start a real brigd, talk HTTP to it, and
check that nothing leaked.  Standard library only."""

import http.client
import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BRIG_BUILD", os.path.join(REPO, "build"))
TEMPLATE_CACHE = os.environ.get("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates")
SANITIZER_MARKS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:")


class ApiError(Exception):
    def __init__(self, status, body):
        self.status = status
        self.body = body
        try:
            err = json.loads(body)["error"]
            self.code, self.message = err["code"], err["message"]
        except Exception:  # noqa: BLE001 - keep the raw body for the assertion message
            self.code, self.message = None, body[:200]
        super().__init__(f"HTTP {status} {self.code}: {self.message}")


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)


class Api:
    """A minimal HTTP client for brigd's REST API."""

    def __init__(self, base_url, key):
        self.base_url = base_url
        self.key = key
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port = u.hostname, u.port

    def request(self, method, path, body=None, key=..., headers=None, timeout=120):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = dict(headers or {})
        k = self.key if key is ... else key
        if k is not None:
            h["Authorization"] = f"Bearer {k}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        resp = Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        conn.close()
        return resp

    def ok(self, method, path, body=None, expect=(200, 201, 204), **kw):
        r = self.request(method, path, body, **kw)
        if r.status not in expect:
            raise ApiError(r.status, r.body)
        return r

    # Conveniences for the common calls.
    def create(self, template="minimal", **extra):
        return self.ok("POST", "/v1/sandboxes", {"template": template, **extra}).json()

    def delete(self, sid):
        return self.ok("DELETE", f"/v1/sandboxes/{sid}", expect=(204,))

    def exec(self, sid, cmd=None, argv=None, **kw):
        body = dict(kw)
        if cmd is not None:
            body["cmd"] = cmd
        if argv is not None:
            body["argv"] = argv
        return self.ok("POST", f"/v1/sandboxes/{sid}/exec", body).json()

    def put_file(self, sid, path, data, mode=None):
        q = {"path": path}
        if mode is not None:
            q["mode"] = mode
        return self.ok("PUT", f"/v1/sandboxes/{sid}/files?{urllib.parse.urlencode(q)}", data,
                       expect=(204,))

    def get_file(self, sid, path):
        q = urllib.parse.urlencode({"path": path})
        return self.ok("GET", f"/v1/sandboxes/{sid}/files?{q}").body


class Sandbox:
    """Context manager: a sandbox that is deleted on exit, whatever happened."""

    def __init__(self, api, template="minimal", **create):
        self.api = api
        self.template = template
        self.create = create
        self.id = None

    def __enter__(self):
        self.id = self.api.create(self.template, **self.create)["id"]
        return self

    def __exit__(self, *exc):
        r = self.api.request("DELETE", f"/v1/sandboxes/{self.id}")
        assert r.status in (204, 404), r.body

    def exec(self, cmd=None, **kw):
        return self.api.exec(self.id, cmd, **kw)


def searchable(path):
    """Sandboxes run as unprivileged host uids that must reach their root file
    systems below the state dir: make every ancestor o+x (pytest and mkdtemp
    create 0700 directories)."""
    p = os.path.realpath(path)
    while p != "/":
        st = os.stat(p)
        if not st.st_mode & 0o001:
            os.chmod(p, st.st_mode | 0o111)
        p = os.path.dirname(p)


class Brigd:
    """A real brigd on a loopback port with its own state directory."""

    started = []  # every instance ever started: reaped at the end of the session

    def __init__(self, state_dir, extra_args=(), default_pool=False):
        self.state_dir = state_dir
        self.extra_args = list(extra_args)
        self.default_pool = default_pool  # keep brigd's own warm_pool default (see pool_off)
        self.proc = None
        self.log_path = os.path.join(state_dir, "brigd.log")
        self.url = None

    def start(self, timeout=60):
        os.makedirs(self.state_dir, exist_ok=True)
        searchable(self.state_dir)
        rfd, wfd = os.pipe()
        env = dict(os.environ)
        # A small quarantine: memory-growth tests measure brigd, not ASan's freed-chunk cache.
        env.setdefault("ASAN_OPTIONS",
                       "detect_leaks=1:abort_on_error=0:exitcode=23:quarantine_size_mb=16")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        env.setdefault("LSAN_OPTIONS", f"suppressions={REPO}/tests/lsan.supp")
        # Sandbox DNS goes nowhere real: a closed local port (the network tests
        # set their own "internet" upstream).
        env.setdefault("BRIG_DNS_UPSTREAM", "127.0.0.1:9")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv() + ["--listen", "127.0.0.1:0", "--ready-fd", str(wfd)],
                stdout=log, stderr=log, pass_fds=(wfd,), env=env)
        os.close(wfd)
        if self not in Brigd.started:
            Brigd.started.append(self)
        try:
            line = b""
            deadline = time.monotonic() + timeout
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([rfd], [], [], left)[0]:
                    raise RuntimeError(f"brigd not ready in {timeout}s:\n{self.log()}")
                chunk = os.read(rfd, 256)
                if not chunk:
                    raise RuntimeError(f"brigd exited during start-up:\n{self.log()}")
                line += chunk
        finally:
            os.close(rfd)
        self.url = line.decode().split()[1]
        return self

    def refused(self, timeout=20):
        """Starts brigd expecting it to refuse to (a bad setting): (its exit status,
        what it said).  Fails when it got ready instead."""
        try:
            self.start(timeout=timeout)
        except RuntimeError as e:
            status = self.proc.wait(timeout=timeout)
            self.proc = None
            return status, str(e)
        self.stop()
        raise AssertionError(f"brigd started with {self.extra_args}")

    def argv(self):
        return [os.path.join(BUILD, "brigd"),
                "--state-dir", self.state_dir, "--template-cache", TEMPLATE_CACHE,
                "--templates-dir", os.path.join(REPO, "templates"),
                "--agent", os.path.join(BUILD, "brig-agent"), *self.pool_off(self.extra_args)]

    def pool_off(self, args):
        """brigd's default adaptive warm pool keeps a base sandbox running, which tests of
        anything else must not see (leftover checks, process counts, CPU): a test brigd
        runs without it unless its config names warm_pool itself."""
        args = list(args)
        if self.default_pool:
            return args
        conf, text = None, ""
        if "--config" in args:
            conf = args[args.index("--config") + 1]
            with open(conf) as f:
                text = f.read()
        if re.search(r"^\s*warm_pool\s*=", text, re.M):
            return args
        if re.search(r"^\s*\[brigd\]", text, re.M):
            text = re.sub(r"^(\s*\[brigd\][^\n]*\n)", r"\1warm_pool = off\n", text, count=1,
                          flags=re.M)
        else:
            text = "[brigd]\nwarm_pool = off\n" + text
        os.makedirs(self.state_dir, exist_ok=True)
        path = self.state_dir.rstrip("/") + ".conf"
        with open(path, "w") as f:
            f.write(text)
        if conf is None:
            return args + ["--config", path]
        args[args.index("--config") + 1] = path
        return args

    def live_sandboxes(self):
        """Ids the store calls live (read directly: brigd need not be running)."""
        db = os.path.join(self.state_dir, "brig.db")
        if not os.path.exists(db):
            return []
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return [r[0] for r in con.execute(
                "SELECT id FROM sandboxes WHERE state NOT IN ('deleted','failed')")]
        finally:
            con.close()

    def destroy_all(self, timeout=120):
        """`brigd --destroy-all` on this state dir (brigd must be stopped)."""
        assert self.proc is None, "stop brigd first"
        r = subprocess.run(self.argv() + ["--destroy-all"], capture_output=True, text=True,
                           timeout=timeout)
        for mark in SANITIZER_MARKS:
            assert mark.decode() not in r.stderr, r.stderr
        return r

    @property
    def key(self):
        with open(os.path.join(self.state_dir, "admin.key")) as f:
            return f.read().strip()

    def api(self):
        return Api(self.url, self.key)

    @property
    def operator_key(self):
        with open(os.path.join(self.state_dir, "operator.key")) as f:
            return f.read().strip()

    def operator(self):
        return Api(self.url, self.operator_key)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-20000:]
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops brigd; a clean SIGTERM stop must exit 0 with no sanitizer report."""
        if self.proc is None:
            return None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self.proc = None
        log = self.log().encode()
        for mark in SANITIZER_MARKS:
            assert mark not in log, f"sanitizer report in brigd's log:\n{self.log()}"
        if sig == signal.SIGTERM:
            assert rc == 0, f"brigd exited with {rc}:\n{self.log()}"
        return rc


def runc_containers(state_dir):
    root = os.path.join(state_dir, "runc")
    if not os.path.isdir(root):
        return []
    out = subprocess.run(["runc", "--root", root, "list", "-q"], capture_output=True, text=True)
    return [l for l in out.stdout.split() if l]


RUNSC = "/usr/lib/brig/bin/runsc"  # where scripts/setup installs gVisor's runsc


def runsc_containers(state_dir):
    """Sandboxes runsc (isolation gvisor) still holds state for."""
    root = os.path.join(state_dir, "runsc")
    if not os.path.isdir(root) or not os.access(RUNSC, os.X_OK):
        return []
    out = subprocess.run([RUNSC, "--root", root, "list", "--quiet"], capture_output=True,
                         text=True, check=True)
    return [l for l in out.stdout.split() if l]


def runsc_processes(state_dir):
    """runsc's own processes (sandbox, gofer) of this brigd's sandboxes, found by the
    --root they run with, wherever they are (runsc state lost, cgroup gone)."""
    root = os.path.join(os.path.realpath(state_dir), "runsc")
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(a in (f"--root={root}".encode(), root.encode()) for a in argv) and not reaped_by_init(p):
            pids.append(int(p))
    return pids


def mounts_under(path):
    path = os.path.realpath(path)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            if mp == path or mp.startswith(path + "/"):
                found.append(mp)
    return found


def loop_devices_under(path):
    """(device, backing file) of each loop device whose file lies below path."""
    path = os.path.realpath(path)
    found = []
    for dev in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{dev}/loop/backing_file") as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing.startswith(path + "/"):
            found.append((dev, backing))
    return found


def known_sandbox_ids(state_dir):
    """Every sandbox id this brigd ever created (from its SQLite store)."""
    db = os.path.join(state_dir, "brig.db")
    if not os.path.exists(db):
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT id FROM sandboxes")}
    finally:
        con.close()


def reaped_by_init(pid):
    """A zombie whose parent is the host's init: a sandbox that outlived a brigd
    crash is reparented there, and only init can reap it.  Not a leak of ours."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] == "Z" and fields[1] == "1"


def sandbox_processes(ids):
    """Host pids of processes in the cgroup of one of these sandboxes."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cgroup") as f:
                cg = f.read()
        except OSError:
            continue
        if any(f"/brig/{i}" in cg for i in ids) and not reaped_by_init(p):
            pids.append(int(p))
    return pids


def qemu_processes(state_dir):
    """QEMU processes (microVMs) holding a file of this brigd's state dir (a VM's disk)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if b"qemu-system" not in open(f"/proc/{p}/cmdline", "rb").read():
                continue
            fds = os.listdir(f"/proc/{p}/fd")
            links = [os.readlink(f"/proc/{p}/fd/{fd}") for fd in fds]
        except OSError:
            continue
        if any(l.startswith(state_dir.rstrip("/") + "/") for l in links):
            found.append(int(p))
    return found


QEMU = "/usr/bin/qemu-system-x86_64"  # qemu-system-x86, scripts/setup (isolation microvm)
VM_KERNEL = "/usr/lib/brig/vm/vmlinuz"  # the guest kernel, scripts/setup-vm
MICROVM_ACCEL = os.environ.get("BRIG_MICROVM_ACCEL", "tcg")  # scripts/verify-kvm: kvm


def microvm_missing():
    """Why isolation microvm cannot be tested here (QEMU or the guest kernel missing), or
    None."""
    if not (os.access(QEMU, os.X_OK) and os.path.exists(VM_KERNEL)):
        return f"isolation microvm needs {QEMU} and {VM_KERNEL}: run scripts/setup"
    return None


def microvm_brigd(tmp, conf_extra=""):
    """A started brigd running microVMs (MICROVM_ACCEL: tcg on a host without KVM)."""
    conf = os.path.join(tmp, "brigd.conf")
    with open(conf, "w") as f:
        f.write(f"[brigd]\nmicrovm_accel = {MICROVM_ACCEL}\n{conf_extra}")
    return Brigd(os.path.join(tmp, "state"), ["--config", conf],
                 default_pool="warm_pool" in conf_extra).start()


def microvm_brigd_end(d):
    """Deletes what d still runs, stops it, ends what a pool kept, checks nothing is left."""
    if d.proc is not None:
        api = d.api()
        for sb in api.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
            api.request("DELETE", f"/v1/sandboxes/{sb['id']}")
        d.stop()
    d.destroy_all()
    left = leftovers(d.state_dir)
    assert not left, f"left behind: {left}"


def leftovers(state_dir, settle=15.0):
    """Everything a deleted sandbox of this brigd could leave behind.  brigd
    answers a DELETE once the sandbox's processes are killed and cleans up the
    host side right after: wait up to `settle` seconds for it to be done (a
    polled state, not a sleep) and return what is left then."""
    deadline = time.monotonic() + settle
    while True:
        left = leftovers_now(state_dir)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def host_link(sid):
    """The host-side link brigd names after a sandbox id: "brg" + 12 hex digits of
    the id's 64-bit FNV-1a hash (src/brigd/net/net.c, ifname_of)."""
    h = 0xcbf29ce484222325
    for b in sid.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"brg{h & 0xFFFFFFFFFFFF:012x}"


def net_links():
    """Link names of this network namespace (/sys/class/net shows the namespace sysfs was
    mounted in, the host's when a test runs in a namespace of its own)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if ":" in l}


def leftovers_now(state_dir):
    ids = known_sandbox_ids(state_dir)
    left = [f"runc container {c}" for c in runc_containers(state_dir)]
    left += [f"runsc sandbox {c}" for c in runsc_containers(state_dir)]
    left += [f"runsc process {p}" for p in runsc_processes(state_dir)]
    left += [f"mount {m}" for m in mounts_under(os.path.join(state_dir, "sandboxes"))]
    # A volume stays mounted on the host only while a sandbox mounts it.
    left += [f"volume mount {m}" for m in mounts_under(os.path.join(state_dir, "volumes"))]
    left += [f"loop device {dev} -> {f}" for dev, f in loop_devices_under(state_dir)]
    sdir = os.path.join(state_dir, "sandboxes")
    if os.path.isdir(sdir):
        left += [f"sandbox dir {d}" for d in os.listdir(sdir)]
    left += [f"process {p}" for p in sandbox_processes(ids)]
    mdir = os.path.join(state_dir, "utpl-builds")  # a user template build's sandbox, marked
    if os.path.isdir(mdir):
        left += [f"template build mark {m}" for m in os.listdir(mdir)]
    left += [f"qemu process {p}" for p in qemu_processes(state_dir)]
    vdir = os.path.join(state_dir, "microvm", "vms")
    if os.path.isdir(vdir):
        left += [f"microvm dir {d}" for d in os.listdir(vdir)]
    for ctrl in os.listdir("/sys/fs/cgroup"):
        for i in ids:
            if os.path.isdir(f"/sys/fs/cgroup/{ctrl}/brig/{i}"):
                left.append(f"cgroup {ctrl}/brig/{i}")
    # Its network namespace lives as long as a process or a mount holds it (both
    # checked above); its host-side link is the one piece outside it.
    links = net_links()
    left += [f"host link {host_link(i)} of {i}" for i in ids if host_link(i) in links]
    return left


def wait_for(cond, timeout=10.0, interval=0.02, what="condition"):
    """Polls cond() until true: waiting on an observable state, not a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def gvisor_refusal(api):
    """None when this brigd can run gvisor sandboxes, else brigd's own words why not.
    Asks without starting anything: a create of a template that does not exist is
    refused for its isolation (the runtime's available(), checked first) before the
    template is looked up."""
    r = api.request("POST", "/v1/sandboxes", {"template": "nosuchtemplate", "isolation": "gvisor"})
    msg = r.json()["error"]["message"] if r.status >= 400 else ""
    if r.status == 400 and msg.startswith("no template named"):
        return None
    assert r.status == 400 and "gvisor" in msg, (r.status, r.body)
    return msg


def needs_gvisor(api):
    """Skips the calling test when brigd refuses gvisor sandboxes on this host (and
    only then: any other answer is a failure).  For tests of what gvisor sandboxes do."""
    import pytest  # the helpers stay importable without pytest
    why = gvisor_refusal(api)
    if why is not None:
        pytest.skip(f"brigd cannot run gvisor here: {why}")
