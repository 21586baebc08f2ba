"""Fixtures for brig's attack suite (pytest, real brigd, real runc and runsc).

The suite runs in every isolation mode: a test that uses `sec` runs once per mode
(`test_x[container]`, `test_x[gvisor]`; session-scoped, so pytest runs all of one mode,
then all of the other), and every sandbox it creates — through `sec.sandbox()` or any
other create of the test's — asks for that mode.  A file or test whose attack only
reaches brigd (its API, accounts, money, limits it enforces itself) may run in one mode:
`pytestmark = pytest.mark.isolation("container")`, with a comment saying why.  gvisor
tests are skipped (loudly) only where brigd says it cannot run gvisor on this host.

Every attack test gets `sec`: it creates the sandboxes to attack from, and after
the test checks that
  (b) brigd is alive and answers, the bystander `victim` sandbox (one for the
      session) still runs commands, its marker file and its background process
      are intact, the host's marker files are untouched and a host sentinel
      process still runs;
  (c) every attacked sandbox is deleted cleanly (204 within the timeout, then 404)
      and leaves no runc state, mount, directory, process, cgroup or loop device.
"""

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sectest  # noqa: E402  (puts tests/integration on sys.path)
import brigtest  # noqa: E402

DELETE_TIMEOUT = 30
MODES = ("container", "gvisor")


def pytest_configure(config):
    config.addinivalue_line("markers", "isolation(*modes): run the test only in these "
                                       "isolation modes (default: every mode)")
    config.addinivalue_line("markers", "gvisor_finding(text): under gVisor the attack gets "
                                       "through: a strict xfail naming the finding")


def pytest_collection_modifyitems(items):
    """A finding of the gVisor mode (docs/security.md, "Findings under gVisor") is a
    strict xfail there: the test asserts the safe result, and fails once it is fixed
    until the marker goes."""
    for item in items:
        m = item.get_closest_marker("gvisor_finding")
        cs = getattr(item, "callspec", None)
        if m and cs and cs.params.get("isolation") == "gvisor":
            item.add_marker(pytest.mark.xfail(strict=True, reason=m.args[0]))


def pytest_generate_tests(metafunc):
    """The isolation parameter of every test that needs it (through `sec`)."""
    if "isolation" in metafunc.fixturenames:
        m = metafunc.definition.get_closest_marker("isolation")
        modes = m.args if m else MODES
        assert set(modes) <= set(MODES), modes
        metafunc.parametrize("isolation", modes, indirect=True, scope="session")


@pytest.fixture(scope="session")
def isolation(request, api):
    """The isolation mode of the sandboxes a test attacks from (and of its bystander)."""
    if request.param == "gvisor":
        brigtest.needs_gvisor(api)
    return request.param


@pytest.fixture(scope="session")
def tmp_root():
    tmp = tempfile.mkdtemp(prefix="brig-sec-")
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(tmp_root):
    """One brigd for the attack suite; stopped cleanly (no sanitizer report) at the end."""
    d = brigtest.Brigd(os.path.join(tmp_root, "state")).start()
    yield d
    a = d.api()
    for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
        a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    d.stop()
    left = brigtest.leftovers(d.state_dir)
    assert not left, f"left behind at the end of the attack suite: {left}"


@pytest.fixture(scope="session")
def api(daemon):
    return daemon.api()


class HostMarkers:
    """Files on the host that no sandbox may read, change or add to: a
    world-readable one (no permission bit protects it), a private one, a
    directory.  Their path is what attacks aim at."""

    def __init__(self, root):
        self.dir = os.path.join(root, "host-markers")
        os.makedirs(os.path.join(self.dir, "sub"))
        brigtest.searchable(self.dir)
        self.secret = secrets.token_hex(16)
        self.public = os.path.join(self.dir, "public.txt")
        self.private = os.path.join(self.dir, "private.txt")
        for path, mode in ((self.public, 0o644), (self.private, 0o600)):
            with open(path, "w") as f:
                f.write(f"host-marker {self.secret}\n")
            os.chmod(path, mode)
        os.chmod(self.dir, 0o777)  # even a world-writable host directory stays out of reach
        self.snapshot = sectest.tree_snapshot(self.dir)

    def check(self):
        now = sectest.tree_snapshot(self.dir)
        assert now == self.snapshot, (
            f"host marker directory changed: added {set(now) - set(self.snapshot)}, "
            f"changed {[k for k in now if k in self.snapshot and now[k] != self.snapshot[k]]}")


@pytest.fixture(scope="session")
def host_markers(tmp_root):
    return HostMarkers(tmp_root)


@pytest.fixture(scope="session")
def sentinel():
    """A host process that no sandbox may signal or trace."""
    p = subprocess.Popen(["sleep", "86400"])
    yield p
    p.kill()
    p.wait()


class Victim:
    """A bystander sandbox of the same brigd, in another account: every attack must
    leave it working, with its files and processes intact."""

    def __init__(self, api, daemon, isolation):
        self.api = api
        self.daemon = daemon
        self.isolation = isolation
        self.id = api.create("minimal", isolation=isolation)["id"]
        self.marker = f"victim-marker {secrets.token_hex(16)}\n"
        self.token = f"victimproc{secrets.token_hex(6)}"
        api.put_file(self.id, "/root/marker", self.marker.encode(), mode="0644")
        # A long-running process whose command line carries a token: attackers
        # scan for it; it must still run after every attack.
        r = api.exec(self.id, f"mkdir -p /opt/{self.token} && ln -s /bin/busybox "
                              f"/opt/{self.token}/sleep")
        assert r["exit_code"] == 0, r
        p = api.ok("POST", f"/v1/sandboxes/{self.id}/exec",
                   {"argv": [f"/opt/{self.token}/sleep", "86400"], "background": True},
                   expect=(202,)).json()
        self.pid = p["pid"]
        self.init_pid = sectest.init_pid(daemon.state_dir, self.id)
        self.host_uid = sectest.host_uid(self.init_pid)

    def check(self):
        r = self.api.exec(self.id, argv=["cat", "/root/marker"], timeout=10)
        assert r["exit_code"] == 0 and r["stdout"] == self.marker, f"victim's marker: {r}"
        r = self.api.exec(self.id, argv=["true"], timeout=10)
        assert r["exit_code"] == 0, f"victim cannot exec `true`: {r}"
        p = self.api.ok("GET", f"/v1/sandboxes/{self.id}/processes/{self.pid}").json()
        assert p["running"], f"victim's background process died: {p}"
        # Same init, same host uid: the victim was not restarted behind our back.
        assert sectest.init_pid(self.daemon.state_dir, self.id) == self.init_pid
        assert sectest.host_uid(self.init_pid) == self.host_uid


@pytest.fixture(scope="session")
def victim(daemon, isolation):
    """The bystander belongs to another account (tenant) than the attackers, and runs
    in the attackers' mode (one per mode: the other mode's is deleted when it ends)."""
    acct = daemon.operator().ok("POST", "/v1/accounts", {"name": f"bystander-{isolation}"}).json()
    v = Victim(brigtest.Api(daemon.url, acct["api_key"]), daemon, isolation)
    yield v
    v.api.delete(v.id)


class Sec:
    """What an attack test uses: sandboxes to attack from, the bystanders to aim at."""

    def __init__(self, api, daemon, victim, host_markers, sentinel, isolation):
        self.isolation = isolation
        self.gvisor = isolation == "gvisor"
        self.api = api
        self.daemon = daemon
        self.victim = victim
        self.host = host_markers
        self.sentinel = sentinel
        self.created = []

    def sandbox(self, template="base"):
        sid = self.api.create(template, isolation=self.isolation)["id"]
        self.created.append(sid)
        return sid

    def py(self, sid, body, **kw):
        return sectest.py(self.api, sid, body, **kw)

    def sh(self, sid, cmd, **kw):
        return sectest.sh(self.api, sid, cmd, **kw)

    def needs_network(self):
        """Fails (does not skip) when this suite's brigd runs without networking: one
        brigd per network namespace manages it, so another brigd alive in the same
        pytest session (or on the host) takes it first; run the suite on its own."""
        h = self.api.ok("GET", "/healthz", key=None).json()
        assert h["network"], ("brigd runs without sandbox networking (another brigd in this "
                              f"network namespace has it):\n{self.daemon.log()[-2000:]}")

    def init_pid(self, sid):
        return sectest.init_pid(self.daemon.state_dir, sid)

    def mode(self, container, gvisor):
        """What this mode expects: an attack that gVisor answers in its own kernel gets
        gVisor's answer (ENOSYS where it lacks the call, its own checks' errno)."""
        return gvisor if self.gvisor else container

    def host_view(self, sid):
        return sectest.host_view(self.daemon.state_dir, sid)

    def check_unharmed(self):
        """(b): brigd, the victim, the host's files and processes are unharmed."""
        assert self.daemon.proc.poll() is None, f"brigd died:\n{self.daemon.log()}"
        r = self.api.request("GET", "/healthz", key=None, timeout=10)
        assert r.status == 200, r.body
        self.victim.check()
        self.host.check()
        assert self.sentinel.poll() is None, "the host sentinel process was killed"

    def delete_all(self):
        """(c): every attacked sandbox deletes cleanly and leaves nothing behind."""
        for sid in self.created:
            t0 = time.monotonic()
            r = self.api.request("DELETE", f"/v1/sandboxes/{sid}", timeout=DELETE_TIMEOUT)
            assert r.status in (204, 404), f"DELETE {sid}: {r.status} {r.body}"
            assert time.monotonic() - t0 < DELETE_TIMEOUT
            r = self.api.request("GET", f"/v1/sandboxes/{sid}")
            assert r.status == 404 or (r.status == 200 and r.json()["state"] == "deleted"), r.body
        try:
            brigtest.wait_for(
                lambda: not sectest.sandbox_leaks(self.daemon.state_dir, self.created),
                timeout=10, what="no leftovers of the attacked sandboxes")
        except AssertionError:
            pass  # the caller's assertion names what leaked


_plain_request = brigtest.Api.request


def _creates_in(monkeypatch, mode):
    """Every create of the test (any account's) asks for `mode` unless it names one,
    and is checked to have got it."""
    def request(self, method, path, body=None, *a, **kw):
        create = method == "POST" and path == "/v1/sandboxes" and isinstance(body, dict)
        if create:
            body = {"isolation": mode, **body}
        r = _plain_request(self, method, path, body, *a, **kw)
        if create and r.status == 201:
            assert r.json()["isolation"] == body["isolation"], r.json()
        return r
    monkeypatch.setattr(brigtest.Api, "request", request)


@pytest.fixture
def sec(api, daemon, victim, host_markers, sentinel, isolation, monkeypatch):
    _creates_in(monkeypatch, isolation)
    s = Sec(api, daemon, victim, host_markers, sentinel, isolation)
    yield s
    try:
        s.check_unharmed()
    finally:
        s.delete_all()
    left = sectest.sandbox_leaks(daemon.state_dir, s.created)
    assert not left, f"attacked sandboxes leaked: {left}"
    live = [x["id"] for x in api.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
    assert live == [], f"sandboxes still running after the test: {live}"
