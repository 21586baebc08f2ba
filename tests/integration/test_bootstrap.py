"""First start and template rebuilds (issue 2), against a real brigd and the real CLI.

- On first start brigd creates the first account's admin API key, saves it to
  <state-dir>/admin.key (0600) and prints it once on stdout with a one-line quick
  start (README.md, docs/operations.md); later starts print no key and leave the
  file alone.
- `brig template build NAME` rebuilds a template (docs/templates.md, docs/cli.md):
  the builder runs with --force, so the cache key (spec + builder) stays the same
  while the rootfs behind it is a new one; the previous rootfs is moved aside to
  .old-KEY-PID/ and kept for the sandboxes that still run on it.
- A build runs in the background (docs/api.md): POST /v1/templates/NAME/build
  answers 202 with the build's record at once, GET .../builds/ID shows it (and with
  ?follow=1 streams its output until it ends), one build of a template runs at a
  time, and brigd answers other requests meanwhile.  Those tests use a template of
  their own whose spec waits for the test's go on a FIFO, so a build provably runs
  while the test looks.

The rebuild tests never touch the shared template cache (other tests use it at the
same time): each runs a brigd of its own on a private copy of the template's cache
entry in tmp_path.  To tell the builds apart, the test drops a marker file into the
copied rootfs before brigd starts: a sandbox on the previous build sees it, one on
the rebuilt rootfs does not; on the host, a sandbox's lower/ mount (its id-mapped
template) has the inode of the rootfs directory it was made from.
"""

import glob
import http.client
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from brigtest import (BUILD, REPO, TEMPLATE_CACHE, Api, Brigd, leftovers, mounts_under,
                      searchable, wait_for)

BRIG = os.path.join(BUILD, "brig")
BUILDER = os.path.join(REPO, "templates", "build")
MARKER = "/etc/brig-test-previous-build"


class OwnBrigd(Brigd):
    """A Brigd with its own template cache, and with stdout kept apart from the log
    (stderr): each start writes <base>.N.stdout and <base>.N.log outside the state
    dir, so a start's output can be told from the previous one's."""

    def __init__(self, state_dir, extra_args=(), cache=TEMPLATE_CACHE):
        super().__init__(state_dir, extra_args)
        self.cache = cache
        self.base = os.path.join(os.path.dirname(state_dir), "brigd")
        self.starts = 0
        self.stdout_path = None

    def start(self, timeout=60):
        self.starts += 1
        self.stdout_path = f"{self.base}.{self.starts}.stdout"
        self.log_path = f"{self.base}.{self.starts}.log"
        return super().start(timeout)

    def argv(self):
        argv = super().argv()
        argv[argv.index("--template-cache") + 1] = self.cache
        if self.stdout_path is None:
            return argv
        # sh execs brigd (same pid) with stdout sent to this start's own file.
        return ["/bin/sh", "-c", 'exec "$@" >>"$0"', self.stdout_path, *argv]

    def stdout(self):
        with open(self.stdout_path) as f:
            return f.read()


def read(path):
    with open(path) as f:
        return f.read()


def count_rows(state_dir, table):
    con = sqlite3.connect(f"file:{os.path.join(state_dir, 'brig.db')}?mode=ro", uri=True)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def shutdown(d):
    """Deletes what a test left, stops brigd and checks that nothing leaked."""
    if d.proc is not None:
        a = d.api()
        for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
            a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
        d.stop()
    if d.live_sandboxes():
        d.destroy_all()
    left = leftovers(d.state_dir)
    assert not left, f"leaked: {left}"


# ---- first start: the admin key ----------------------------------------------------


def first_start(tmp_path):
    state = tmp_path / "state"
    assert not state.exists()
    d = OwnBrigd(str(state)).start()
    return d, os.path.join(d.state_dir, "admin.key")


QUICK_START = re.compile(r"quick start: export BRIG_URL=(\S+) BRIG_API_KEY=\$\(cat (\S+)\); "
                         r"build/brig run -- python3 -c 'print\(\"hello from a sandbox\"\)'")


def test_first_start_prints_the_admin_key_once_and_saves_it(tmp_path):
    d, path = first_start(tmp_path)
    try:
        content = read(path)
        key = content.strip()
        assert content == key + "\n"
        assert re.fullmatch(r"brig_[A-Za-z0-9_-]{43}", key), key
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0, oct(st.st_mode)
        assert not os.path.exists(path + ".tmp")

        out, log = d.stdout(), d.log()
        lines = out.splitlines()
        # Printed once, on stdout: a heading, the key alone on its line, the quick start.
        assert out.count(key) == 1, out
        assert len(lines) == 3, out
        assert lines[0] == (f"brigd: created the admin API key (saved to {path}, mode 0600; "
                            "shown only now):"), out
        assert lines[1].strip() == key
        m = QUICK_START.fullmatch(lines[2])
        assert m, f"no quick start line of the documented shape: {lines[2]!r}"
        assert m.group(1) == d.url  # the address brigd really listens on
        assert m.group(2) == path
        # Never in the log, and the operator key is never printed at all.
        assert key not in log
        operator = d.operator_key
        assert operator not in out and operator not in log

        # The printed key is the first account's admin key.
        a = Api(d.url, key)
        assert a.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
        r = a.request("GET", "/v1/sandboxes", key="brig_" + "A" * 43)
        assert r.status == 401
        d.stop()

        before = os.stat(path)
        keys_before = count_rows(d.state_dir, "api_keys")
        assert count_rows(d.state_dir, "accounts") == 1

        # Second start, same state dir: no key printed anywhere, admin.key untouched.
        d.start()
        out2, log2 = d.stdout(), d.log()
        assert key not in out2 and key not in log2, out2 + log2
        assert "admin API key" not in out2 and "quick start" not in out2, out2
        assert not QUICK_START.search(out2)
        assert read(path) == content
        after = os.stat(path)
        assert (after.st_ino, after.st_mtime_ns, after.st_mode, after.st_uid) == \
            (before.st_ino, before.st_mtime_ns, before.st_mode, before.st_uid)
        assert count_rows(d.state_dir, "accounts") == 1
        assert count_rows(d.state_dir, "api_keys") == keys_before
        assert Api(d.url, key).ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
    finally:
        shutdown(d)


@pytest.mark.base
def test_the_printed_quick_start_runs(tmp_path):
    """The quick start line, run as printed (build/brig being the build under test):
    brig run on the default template (base, from the shared cache) says hello."""
    d, path = first_start(tmp_path)
    try:
        line = d.stdout().splitlines()[-1]
        assert QUICK_START.fullmatch(line), line
        cmd = line[len("quick start: "):].replace("build/brig", BRIG)
        env = {k: v for k, v in os.environ.items()
               if k not in ("BRIG_URL", "BRIG_API_KEY", "BRIG_STATE_DIR")}
        r = subprocess.run(["bash", "-c", cmd], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "hello from a sandbox\n"
        # brig run deleted its sandbox
        assert d.api().ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
    finally:
        shutdown(d)


# ---- brig template build -------------------------------------------------------------


def template_key(name):
    r = subprocess.run([BUILDER, "--print-key", name], capture_output=True, text=True,
                       check=True)
    return r.stdout.strip()


def private_cache(tmp_path, name):
    """A template cache of the test's own holding `name` built: a copy of the shared
    cache's entry (and its download cache, so a rebuild of base needs no registry),
    or a fresh build there when the shared cache has none."""
    cache = tmp_path / "cache"
    (cache / name).mkdir(parents=True)
    key = template_key(name)
    src = os.path.join(TEMPLATE_CACHE, name, key)
    if os.path.exists(os.path.join(src, "ok")):
        subprocess.run(["cp", "-a", "--reflink=auto", src, str(cache / name / key)], check=True)
    downloads = os.path.join(TEMPLATE_CACHE, ".downloads")
    if name == "base" and os.path.isdir(downloads):
        subprocess.run(["cp", "-a", "--reflink=auto", downloads, str(cache / ".downloads")],
                       check=True)
    # Cached: prints the path at once; otherwise builds it.
    r = subprocess.run([BUILDER, "--cache", str(cache), name], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    rootfs = cache / name / key / "rootfs"
    assert r.stdout.splitlines()[-1] == str(rootfs)
    searchable(str(rootfs))
    return cache, key, rootfs


def templates_of(api):
    return {t["name"]: t for t in api.ok("GET", "/v1/templates").json()["templates"]}


def cli(d, *args, env_extra=None, timeout=600):
    """The CLI as the operator on the brigd host: no BRIG_API_KEY, so the key comes
    from $BRIG_STATE_DIR/operator.key (docs/cli.md)."""
    env = {k: v for k, v in os.environ.items() if k not in ("BRIG_API_KEY",)}
    env.update(BRIG_URL=d.url, BRIG_STATE_DIR=d.state_dir, **(env_extra or {}))
    return subprocess.run([BRIG, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def lower_ino(d, sid):
    """The inode of the template rootfs the sandbox's lower/ layer was mounted from."""
    return os.stat(os.path.join(d.state_dir, "sandboxes", sid, "lower")).st_ino


def sees_marker(api, sid):
    r = api.exec(sid, f"cat {MARKER}")
    if r["exit_code"] == 0:
        assert r["stdout"] == "previous build\n", r
        return True
    assert "No such file" in r["stderr"], r
    return False


def cleanup_cache(cache):
    if not mounts_under(str(cache)):  # a base copy and its old rootfs: ~800 MiB
        shutil.rmtree(cache, ignore_errors=True)


REBUILD_CHECK = {
    "minimal": ("id user; echo ok > /tmp/f; cat /tmp/f",
                "uid=1000(user) gid=1000(user) groups=1000(user)\nok\n"),
    "base": ("python3 -c 'print(6*7)'; node -e 'console.log(\"node\")'", "42\nnode\n"),
}


@pytest.mark.parametrize("name", ["minimal", pytest.param("base", marks=pytest.mark.base)])
def test_template_build_rebuilds_it(tmp_path, name):
    """`brig template build NAME` rebuilds the template: same key, a new rootfs; a
    sandbox made before keeps running on the previous rootfs, one made after runs on
    the new one.  base too: a rebuild of base takes about 75 s on the 2-core machine
    (mmdebstrap from the host's Debian mirror), so it is tested like minimal."""
    cache, key, rootfs = private_cache(tmp_path, name)
    with open(str(rootfs) + MARKER, "w") as f:
        f.write("previous build\n")
    old_ino = os.stat(rootfs).st_ino
    d = OwnBrigd(str(tmp_path / "state"), cache=str(cache)).start()
    try:
        a = d.api()
        assert templates_of(a)[name] == {"name": name, "key": key, "built": True}
        old = a.create(name)["id"]
        assert sees_marker(a, old)
        assert lower_ino(d, old) == old_ino

        r = cli(d, "template", "build", name)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"built {name} (key {key})\n"
        # the builder's output, followed as it came
        assert f"templates/build: built '{name}' in " in r.stderr, r.stderr
        assert "brig:" not in r.stderr, r.stderr

        # The key names the spec and the builder, so it stays; the rootfs is new and
        # the previous one is kept aside for the sandboxes that use it.
        assert templates_of(a)[name] == {"name": name, "key": key, "built": True}
        assert (cache / name / key / "ok").is_file()
        assert os.stat(rootfs).st_ino != old_ino
        assert not os.path.exists(str(rootfs) + MARKER)
        aside = glob.glob(str(cache / name / f".old-{key}-*"))
        assert len(aside) == 1, os.listdir(cache / name)
        assert os.stat(os.path.join(aside[0], "rootfs")).st_ino == old_ino
        assert not glob.glob(str(cache / name / ".tmp-*"))
        assert not mounts_under(str(cache / name / key))  # the build's mounts are gone

        cmd, want = REBUILD_CHECK[name]
        # The sandbox made before keeps working, on the previous build.
        res = a.exec(old, cmd)
        assert (res["exit_code"], res["stdout"]) == (0, want), res
        assert sees_marker(a, old)
        assert lower_ino(d, old) == old_ino

        # One made afterwards runs on the rebuilt rootfs.
        new = a.create(name)["id"]
        res = a.exec(new, cmd)
        assert (res["exit_code"], res["stdout"]) == (0, want), res
        assert not sees_marker(a, new)
        assert lower_ino(d, new) == os.stat(rootfs).st_ino

        a.delete(old)
        a.delete(new)
        assert leftovers(d.state_dir) == []
        assert not mounts_under(str(cache))
    finally:
        shutdown(d)
        cleanup_cache(cache)


def test_template_build_is_for_the_operator_only(tmp_path):
    """An admin key is refused (403) and an unknown template is not found (404): the
    CLI exits 1 with brigd's message, and nothing is rebuilt."""
    cache, key, rootfs = private_cache(tmp_path, "minimal")
    ino = os.stat(rootfs).st_ino
    d = OwnBrigd(str(tmp_path / "state"), cache=str(cache)).start()
    try:
        r = cli(d, "template", "build", "minimal", env_extra={"BRIG_API_KEY": d.key})
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr == ("brig: build minimal: this operation needs the operator key"
                            " (HTTP 403 forbidden)\n")
        r = cli(d, "template", "build", "nosuch")
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr == "brig: build nosuch: no template named 'nosuch' (HTTP 404 not_found)\n"
        # A build's record is the operator's too (an account's key finds only its
        # account's builds); an unknown one is not found.
        url = "/v1/templates/minimal/builds/bld_" + "a" * 26
        assert d.api().request("GET", url).status == 404
        r = d.operator().request("GET", url)
        assert r.status == 404 and r.json()["error"]["code"] == "not_found", r.body
        assert os.stat(rootfs).st_ino == ino
        assert not glob.glob(str(cache / "minimal" / ".old-*"))
        assert not glob.glob(str(cache / "minimal" / ".tmp-*"))
    finally:
        shutdown(d)
        cleanup_cache(cache)


def test_template_build_retires_pooled_sandboxes(tmp_path):
    """docs/operations.md: "A template rebuild makes older pooled sandboxes of that
    template go at the next claim."  After `brig template build minimal`, a create
    must not be handed a warm sandbox started on the previous rootfs."""
    cache, key, rootfs = private_cache(tmp_path, "minimal")
    with open(str(rootfs) + MARKER, "w") as f:
        f.write("previous build\n")
    old_ino = os.stat(rootfs).st_ino
    conf = tmp_path / "brigd.conf"
    conf.write_text("[brigd]\nwarm_pool = minimal:small:1\nnetwork = off\n")
    d = OwnBrigd(str(tmp_path / "state"), ["--config", str(conf)], cache=str(cache)).start()
    try:
        a = d.api()

        def pool():
            return a.request("GET", "/healthz", key=None).json()["warm_pool"]["minimal/small"]

        wait_for(lambda: pool()["ready"] == 1, timeout=60, what="the pool to fill")
        (pooled,) = os.listdir(os.path.join(d.state_dir, "sandboxes"))
        assert lower_ino(d, pooled) == old_ino

        r = cli(d, "template", "build", "minimal")
        assert r.returncode == 0, r.stderr
        assert os.stat(rootfs).st_ino != old_ino

        sb = a.create("minimal")["id"]
        assert not sees_marker(a, sb), (
            f"the create after the rebuild got {sb} on the previous rootfs "
            f"(pool: {pool()}, pooled before the rebuild: {pooled})")
        assert lower_ino(d, sb) == os.stat(rootfs).st_ino
        a.delete(sb)
    finally:
        shutdown(d)
        cleanup_cache(cache)


# ---- builds in the background ----------------------------------------------------------

GATE_LINE = "waiting for the test's go"
BUILD_FIELDS = {"build_id", "template", "key", "state", "error", "started_at", "ended_at",
                "log_bytes", "log_tail"}
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def own_templates(tmp_path, name, spec):
    """A templates dir of the test's own: the real builder (brigd runs TEMPLATES_DIR/build)
    and template `name` with this spec.  Returns (dir, spec path, key)."""
    tdir = tmp_path / "templates"
    (tdir / name).mkdir(parents=True)
    shutil.copy2(BUILDER, tdir / "build")
    (tdir / name / "spec").write_text(spec)
    r = subprocess.run([str(tdir / "build"), "--print-key", name], capture_output=True,
                       text=True, check=True)
    return str(tdir), tdir / name / "spec", r.stdout.strip()


def gated_template(tmp_path, name="gated"):
    """A busybox template whose spec, when the builder sources it, counts itself in
    sourced.log, says GATE_LINE and waits until the test writes to the FIFO `gate`."""
    gate, count = tmp_path / "gate", tmp_path / "sourced.log"
    os.mkfifo(gate)
    minimal = read(os.path.join(REPO, "templates", "minimal", "spec"))
    spec = (f"{minimal}\necho sourced >>{count}\necho \"{GATE_LINE}\" >&2\n"
            f"read -r _ <{gate}\n")
    tdir, spec_path, key = own_templates(tmp_path, name, spec)
    return tdir, spec_path, key, gate, count


def open_gate(gate):
    with open(gate, "w") as f:  # the builder waits in open(gate) for reading
        f.write("go\n")


def build_record(api, location):
    r = api.ok("GET", location)
    rec = r.json()
    assert set(rec) == BUILD_FIELDS, rec
    return rec


def at_gate(api, location):
    rec = build_record(api, location)
    return rec if GATE_LINE in rec["log_tail"] else None


class Follower(threading.Thread):
    """GET location?follow=1 on a thread of its own: the NDJSON events as they come, until
    the end; `streaming` is set once the first one came."""

    def __init__(self, api, location):
        super().__init__(daemon=True)
        self.api, self.location = api, location
        self.events, self.failure = [], None
        self.streaming = threading.Event()
        self.start()

    def run(self):
        conn = http.client.HTTPConnection(self.api.host, self.api.port, timeout=300)
        try:
            conn.request("GET", self.location + "?follow=1",
                         headers={"Authorization": f"Bearer {self.api.key}"})
            r = conn.getresponse()
            if r.status != 200 or r.getheader("content-type") != "application/x-ndjson":
                self.failure = f"{r.status} {r.getheader('content-type')}: {r.read()[:300]}"
                return
            for line in r:
                self.events.append(json.loads(line))
                self.streaming.set()
        except Exception as e:  # noqa: BLE001 - reported by result()
            self.failure = repr(e)
        finally:
            conn.close()
            self.streaming.set()

    def result(self):
        self.join(timeout=300)
        assert not self.is_alive(), "the follow stream did not end"
        assert self.failure is None, self.failure
        assert self.events, "the follower got no events"
        *logs, end = self.events
        assert all(e["type"] == "log" and set(e) == {"type", "data"} for e in logs), logs
        assert end["type"] == "end" and set(end) == BUILD_FIELDS - {"log_tail"} | {"type"}, end
        return "".join(e["data"] for e in logs), end


def own_brigd(tmp_path, tdir):
    cache = tmp_path / "cache"
    cache.mkdir()
    argv = ["--templates-dir", tdir]
    return OwnBrigd(str(tmp_path / "state"), argv, cache=str(cache)).start(), cache


def test_template_key_follows_its_spec_while_brigd_runs(tmp_path):
    """brigd hashes a template's spec and builder once and reuses the key while both files
    stay the same: an edit (one of the same length too) or a replaced builder gives the
    key the builder prints, and going back gives the first key again."""
    minimal = read(os.path.join(REPO, "templates", "minimal", "spec"))
    tdir, spec_path, key = own_templates(tmp_path, "keyed", minimal + "\n# one\n")
    d, _ = own_brigd(tmp_path, tdir)

    def printed():
        return subprocess.run([os.path.join(tdir, "build"), "--print-key", "keyed"],
                              capture_output=True, text=True, check=True).stdout.strip()

    try:
        api = d.api()
        assert templates_of(api)["keyed"]["key"] == key
        assert templates_of(api)["keyed"]["key"] == key  # the second from what it kept
        spec_path.write_text(minimal + "\n# two\n")  # same size
        two = printed()
        assert two != key and templates_of(api)["keyed"]["key"] == two
        builder = os.path.join(tdir, "build")
        with open(builder, "a") as f:
            f.write("\n# a builder of another version\n")
        three = printed()
        assert three not in (key, two) and templates_of(api)["keyed"]["key"] == three
        shutil.copy2(BUILDER, builder)
        spec_path.write_text(minimal + "\n# one\n")
        assert templates_of(api)["keyed"]["key"] == key
    finally:
        d.stop()


def test_template_build_runs_in_the_background(tmp_path):
    """POST .../build answers 202 at once with the build's record and Location; two
    requests at once, a later one and the CLI all get the one build that runs; the API
    answers meanwhile; its output can be followed until it ends."""
    tdir, spec, key, gate, count = gated_template(tmp_path)
    d, cache = own_brigd(tmp_path, tdir)
    try:
        op = d.operator()
        with ThreadPoolExecutor(2) as ex:
            answers = list(ex.map(lambda _: op.request("POST", "/v1/templates/gated/build"),
                                  range(2)))
        assert [r.status for r in answers] == [202, 202], [r.body for r in answers]
        first, second = (r.json() for r in answers)
        bid = first["build_id"]
        assert second["build_id"] == bid, "two requests at once ran two builds"
        assert re.fullmatch(r"bld_[a-z2-7]{26}", bid), bid
        assert set(first) == BUILD_FIELDS, first
        assert (first["template"], first["key"], first["state"], first["error"],
                first["ended_at"]) == ("gated", key, "running", None, None)
        assert TIME.fullmatch(first["started_at"]), first
        loc = f"/v1/templates/gated/builds/{bid}"
        assert [r.headers["location"] for r in answers] == [loc, loc]

        rec = wait_for(lambda: at_gate(op, loc), timeout=60, what="the builder at the gate")
        assert rec["state"] == "running" and rec["log_bytes"] >= len(rec["log_tail"]) > 0

        # The build holds no HTTP thread: other requests answer at once meanwhile.
        t0 = time.monotonic()
        assert d.api().request("GET", "/healthz", key=None).status == 200
        assert templates_of(d.api()) == {"gated": {"name": "gated", "key": key, "built": False}}
        assert time.monotonic() - t0 < 10
        assert build_record(op, loc)["state"] == "running"

        # A later request gets the running build, not a second one ...
        r = op.request("POST", "/v1/templates/gated/build")
        assert r.status == 202 and r.json()["build_id"] == bid, r.body
        # ... unless the template changed since it started: that build would not do.
        original = spec.read_text()
        spec.write_text(original + "# changed\n")
        r = op.request("POST", "/v1/templates/gated/build")
        assert r.status == 409, r.body
        assert r.json()["error"] == {
            "code": "conflict",
            "message": f"template 'gated' changed since its build {bid} started; "
                       "build it again once that one ended"}
        spec.write_text(original)

        # The CLI follows the running build: it shows its output so far, then the rest.
        env = {k: v for k, v in os.environ.items() if k != "BRIG_API_KEY"}
        env.update(BRIG_URL=d.url, BRIG_STATE_DIR=d.state_dir)
        proc = subprocess.Popen([BRIG, "template", "build", "gated"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = ""
        while GATE_LINE not in seen:
            line = proc.stderr.readline()
            assert line, f"brig ended before the gate: {seen}"
            seen += line
        follower = Follower(op, loc)

        open_gate(gate)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, seen + err
        assert out == f"built gated (key {key})\n"
        assert "templates/build: built 'gated' in " in seen + err
        log, end = follower.result()
        assert log.startswith("templates/build: building 'gated'"), log
        assert GATE_LINE + "\n" in log and "templates/build: built 'gated' in " in log, log
        assert (end["build_id"], end["state"], end["error"]) == (bid, "succeeded", None), end
        assert end["log_bytes"] == len(log.encode()), end
        assert TIME.fullmatch(end["ended_at"]) and end["ended_at"] >= end["started_at"]

        assert count.read_text() == "sourced\n", "more than one builder ran"
        rec = build_record(op, loc)
        assert {k: rec[k] for k in end if k != "type"} == {k: end[k] for k in end if k != "type"}
        assert rec["log_tail"] == log  # all of it: shorter than the tail
        assert templates_of(d.api()) == {"gated": {"name": "gated", "key": key, "built": True}}
        assert (cache / "gated" / key / "ok").is_file()
        # finished: the next request starts a new build
        (tmp_path / "gate").unlink()
        os.mkfifo(gate)
        r = op.request("POST", "/v1/templates/gated/build")
        assert r.status == 202 and r.json()["build_id"] != bid, r.body
        wait_for(lambda: at_gate(op, r.headers["location"]), timeout=60, what="the second build")
        open_gate(gate)
        _, end2 = Follower(op, r.headers["location"]).result()
        assert end2["state"] == "succeeded", end2
        assert build_record(op, loc)["state"] == "succeeded"  # the first is still on record
    finally:
        shutdown(d)
        cleanup_cache(cache)


def test_a_failed_build_says_why(tmp_path):
    """The builder's failure ends the build as failed, with the reason (its last line)
    in the record and the CLI's message; brig exits 1 after showing the output."""
    tdir, spec, key = own_templates(tmp_path, "broken", "KIND=bogus\n")
    d, cache = own_brigd(tmp_path, tdir)
    try:
        r = cli(d, "template", "build", "broken")
        why = (f"building template broken failed (exited with status 1): "
               f"templates/build: error: {spec}: unknown KIND 'bogus' (debootstrap or busybox)")
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr.endswith(f"\nbrig: build broken: {why}\n"), r.stderr
        assert "templates/build: building 'broken'" in r.stderr
        op = d.operator()
        bid = op.ok("POST", "/v1/templates/broken/build", expect=(202,)).json()["build_id"]
        _, end = Follower(op, f"/v1/templates/broken/builds/{bid}").result()
        assert (end["state"], end["error"]) == ("failed", why), end
        assert not (cache / "broken" / key).exists()
        assert not glob.glob(str(cache / "broken" / ".tmp-*"))
    finally:
        shutdown(d)
        cleanup_cache(cache)


def test_brigd_stops_a_running_build_and_forgets_it(tmp_path):
    """brigd stopping stops its builds (their followers see the end) and the builder
    cleans up; after a restart the build's record is gone (docs/api.md)."""
    tdir, spec, key, gate, count = gated_template(tmp_path)
    d, cache = own_brigd(tmp_path, tdir)
    try:
        op = d.operator()
        r = op.ok("POST", "/v1/templates/gated/build", expect=(202,))
        loc = r.headers["location"]
        wait_for(lambda: at_gate(op, loc), timeout=60, what="the builder at the gate")
        follower = Follower(op, loc)
        assert follower.streaming.wait(timeout=60) and follower.failure is None, follower.failure
        d.stop()
        log, end = follower.result()
        assert GATE_LINE in log
        assert end["state"] == "failed", end
        assert end["error"].startswith("brigd stopped during the build (the builder "), end
        assert not glob.glob(str(cache / "gated" / ".tmp-*")), "the builder left its build"
        assert not (cache / "gated" / key).exists()

        d.start()
        r = d.operator().request("GET", loc)
        assert r.status == 404 and r.json()["error"]["code"] == "not_found", r.body
        assert count.read_text() == "sourced\n"
    finally:
        shutdown(d)
        cleanup_cache(cache)


def test_a_build_keeps_the_newest_output(tmp_path):
    """brigd keeps the last 1 MiB of a build's output at most: a follower that starts at
    the beginning is told how much was dropped (again if it falls that far behind), then
    gets the rest line by line; the
    record's log_tail is the last 16 KiB at most, from a line's start."""
    minimal = read(os.path.join(REPO, "templates", "minimal", "spec"))
    # (the spec is sourced under pipefail: yes ends by SIGPIPE, which is no failure here)
    chatty = minimal + "\n{ yes 'line of output' || true; } | head -n 200000 >&2\n"  # 3.8 MB
    tdir, spec, key = own_templates(tmp_path, "chatty", chatty)
    d, cache = own_brigd(tmp_path, tdir)
    try:
        op = d.operator()
        r = op.ok("POST", "/v1/templates/chatty/build", expect=(202,))
        loc = r.headers["location"]
        f = Follower(op, loc)
        f.join(timeout=300)
        dropped = [e for e in f.events if e["type"] == "dropped"]
        f.events = [e for e in f.events if e["type"] != "dropped"]
        log, end = f.result()
        assert end["state"] == "succeeded", end
        # once at the start; again whenever this follower fell 1 MiB behind (a loaded host)
        assert len(dropped) >= 1 and f.events is not None, dropped
        lost = sum(e["bytes"] for e in dropped)
        assert lost + len(log.encode()) == end["log_bytes"] > 3_000_000
        assert len(log.encode()) <= 1 << 20
        assert log.endswith(f"{cache}/chatty/{key}/rootfs\n"), log[-300:]
        rec = build_record(op, loc)
        tail = rec["log_tail"]
        assert 0 < len(tail.encode()) <= 16 << 10 and log.endswith(tail)
        assert tail.startswith("line of output\n") or tail.startswith("templates/build: ")
    finally:
        shutdown(d)
        cleanup_cache(cache)
