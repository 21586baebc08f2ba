"""A hostile tenant against brigd's shared front: its HTTP connections (and the
thread each one costs), the memory that buffered exec results hold, and its logs.

What must hold: half-sent requests cannot hold brigd's connection slots (from one
address, or many) — every connection that has not authenticated yet has a deadline
for its request's head, at most `max_waiting_per_address` of them come from one
address and at most `max_waiting_connections` from all, the oldest making room for
a new one, so the rest of `max_connections` stays for authenticated calls; an
authenticated request has a deadline for its JSON body, and one account has at most
`max_requests_per_account` requests in flight; buffered exec output is bounded by a
memory budget per account, and brigd's memory returns afterwards; text from a sandbox
reaches brigd's and the agent's logs escaped (one record, one line) and at most at a
rate per sandbox.  Throughout, a second tenant (the bystander account, from its own
address) keeps getting answers with a latency close to its idle baseline.

The bounds below are brigd's defaults (docs/operations.md)."""

import http.client
import io
import json
import os
import resource
import re
import socket
import statistics
import tarfile
import threading
import time
import urllib.parse

import pytest

import brigtest
import sectest

# brigd's HTTP front and its buffered output are shared by every mode and see the same
# bytes from a sandbox's agent: those tests run in one mode, each saying so.  The log
# attacks run in both: the sandbox's text reaches host files (brigd's log, and the
# agent's own log, which a gVisor sandbox's agent stops writing once it is ready).
BRIGD_ONLY = pytest.mark.isolation("container")


MIB = 1 << 20
WAITING_PER_ADDRESS = 64  # max_waiting_per_address
WAITING_MAX = 256  # max_waiting_connections
HEADER_TIMEOUT = 10  # header_timeout, seconds
BODY_TIMEOUT = 20  # body_timeout, seconds
REQUESTS_PER_ACCOUNT = 256  # max_requests_per_account
ACCOUNT_OUTPUT_BUDGET = 256 * MIB  # exec_output_budget_per_account
LOG_RATE, LOG_BURST = 5, 20  # records per second and burst per sandbox (src/common/log.h)
LOG_LINE_MAX = 2048  # bytes per record (src/common/log.h)


class SourceApi(brigtest.Api):
    """brigtest.Api whose connections come from a given loopback address: brigd
    tells clients apart by address, so the bystander must not share the attacker's."""

    def __init__(self, base_url, key, source):
        super().__init__(base_url, key)
        self.source = source

    def request(self, method, path, body=None, key=..., headers=None, timeout=120):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout,
                                          source_address=(self.source, 0))
        h = dict(headers or {})
        k = self.key if key is ... else key
        if k is not None:
            h["Authorization"] = f"Bearer {k}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return brigtest.Response(r.status, {k.lower(): v for k, v in r.getheaders()},
                                     r.read())
        finally:
            conn.close()


def bystander(sec, source="127.0.0.2"):
    return SourceApi(sec.victim.api.base_url, sec.victim.api.key, source)


def exec_latency(api, sid, argv=("true",), timeout=30):
    """Seconds one buffered exec takes; raises on any error (a refused connection too)."""
    t0 = time.monotonic()
    r = api.ok("POST", f"/v1/sandboxes/{sid}/exec", {"argv": list(argv)}, timeout=timeout).json()
    assert r["exit_code"] == 0, r
    return time.monotonic() - t0


def baseline(api, sid, n=7):
    return statistics.median(exec_latency(api, sid) for _ in range(n))


class Prober:
    """The bystander's `exec true`, over and over from its own address while an attack
    runs: every latency, and every error (a connection reset is one)."""

    def __init__(self, api, sid):
        self.api, self.sid = api, sid
        self.latencies, self.errors = [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            try:
                self.latencies.append(exec_latency(self.api, self.sid))
            except Exception as e:  # noqa: BLE001 - the assertion reports it
                self.errors.append(repr(e))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=60)

    def check(self, base, what):
        assert not self.errors, f"the bystander failed during {what}: {self.errors[:3]}"
        assert len(self.latencies) >= 3, f"the bystander got {len(self.latencies)} answers"
        # Relative to its own idle baseline; generous for a 2-core host under load.
        worst = max(self.latencies)
        assert statistics.median(self.latencies) < base * 5 + 1.0, (what, base, self.latencies)
        assert worst < base * 10 + 5.0, (what, base, self.latencies)


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def half_request(source, port, head=b"POST /v1/sandboxes/x/exec HTTP/1.1\r\nHost: x\r\n"):
    """A connection from `source` that sent the start of a request head and no more;
    None when the connection itself was refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(head)
    except OSError:
        s.close()
        return None
    s.settimeout(None)  # blocking: a MSG_DONTWAIT peek must not wait for the timeout
    return s


def still_held(s):
    """True while brigd keeps the connection open without having answered it."""
    try:
        s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True  # open, nothing to read
    except OSError:
        return False  # reset
    return False  # closed (EOF) or answered


def close_all(socks):
    for s in socks:
        if s is not None:
            s.close()


@BRIGD_ONLY  # connections that never reach a sandbox
def test_slowloris_from_one_address(sec):
    """4200 half-sent requests from 127.0.0.1 (more than brigd's 4096 connections):
    brigd keeps at most max_waiting_per_address of them and refuses the rest at once,
    and the bystander tenant (from 127.0.0.2) keeps running commands without an error
    and with a latency near its baseline while they are held."""
    raise_nofile(8192)
    bys = bystander(sec)
    base = baseline(bys, sec.victim.id)
    port = urllib.parse.urlsplit(sec.daemon.url).port
    socks = []
    try:
        for _ in range(4200):
            socks.append(half_request("127.0.0.1", port))
        with Prober(bys, sec.victim.id) as p:
            brigtest.wait_for(lambda: len(p.latencies) + len(p.errors) >= 8, timeout=120,
                              interval=0.1, what="eight bystander calls")
        p.check(base, "a slowloris from one address")
        # The attack holds what it was allowed to hold, and no more.
        held = sum(1 for s in socks if s is not None and still_held(s))
        assert 0 < held <= WAITING_PER_ADDRESS, held
    finally:
        close_all(socks)


@BRIGD_ONLY  # half-sent heads that never reach a sandbox
def test_slowloris_from_many_addresses_with_dripping_heads(sec):
    """16 addresses x 40 connections (640, more than max_waiting_connections), each
    sending one more byte of its request head every second: well before their
    deadline brigd holds at most max_waiting_connections of them (newer ones pushed
    the oldest out), it closes every one within header_timeout (plus slack) although
    none is ever idle, and the bystander keeps getting answers meanwhile."""
    raise_nofile(8192)
    bys = bystander(sec)
    base = baseline(bys, sec.victim.id)
    port = urllib.parse.urlsplit(sec.daemon.url).port
    sources = [f"127.0.0.{i}" for i in range(3, 19)]
    t0 = time.monotonic()
    socks = [half_request(src, port) for src in sources for _ in range(40)]
    stop = threading.Event()

    def drip():
        while not stop.is_set():
            for s in socks:
                if s is not None:
                    try:
                        s.send(b"X")  # one more byte of a header name: never idle
                    except OSError:
                        pass
            stop.wait(1.0)

    def held():
        return sum(1 for s in socks if s is not None and still_held(s))
    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        with Prober(bys, sec.victim.id) as p:
            # Long before their deadline, brigd holds no more than its bound of them
            # (the others were pushed out as newer ones came).
            brigtest.wait_for(lambda: held() <= WAITING_MAX, timeout=HEADER_TIMEOUT / 2,
                              interval=0.1, what="at most max_waiting_connections held")
            assert time.monotonic() - t0 < HEADER_TIMEOUT, "too late to tell the bound"
            brigtest.wait_for(lambda: held() == 0, timeout=HEADER_TIMEOUT + 20, interval=0.25,
                              what="brigd to close every dripping connection")
            took = time.monotonic() - t0
        p.check(base, "a dripping slowloris from 16 addresses")
        assert took < HEADER_TIMEOUT + 15, took
    finally:
        stop.set()
        dripper.join(timeout=10)
        close_all(socks)


@BRIGD_ONLY  # bodies brigd never forwards
def test_slow_bodies_of_authenticated_requests(sec):
    """The attacker's own valid key, 300 requests whose JSON body never finishes (a
    byte a second): at most max_requests_per_account are taken in (the rest get 429
    at once, before their body), every one of those is cut within body_timeout
    (plus slack) although it is never idle, and the bystander keeps getting answers."""
    raise_nofile(8192)
    sid = sec.sandbox("minimal")
    bys = bystander(sec)
    base = baseline(bys, sec.victim.id)
    port = urllib.parse.urlsplit(sec.daemon.url).port
    head = (f"POST /v1/sandboxes/{sid}/exec HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {sec.api.key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: 4096\r\nExpect: 100-continue\r\n\r\n").encode()
    taken, refused, socks = 0, 0, []
    stop = threading.Event()
    try:
        for _ in range(300):
            s = half_request("127.0.0.1", port, head)
            assert s is not None
            socks.append(s)
            s.settimeout(30)
            status = s.recv(64)
            s.settimeout(None)  # "100 Continue" once brigd took the head in, or an error
            if status.startswith(b"HTTP/1.1 100"):
                taken += 1
            else:
                assert status.startswith(b"HTTP/1.1 429"), status
                refused += 1
        t0 = time.monotonic()

        def drip():
            while not stop.is_set():
                for s in socks:
                    try:
                        s.send(b" ")
                    except OSError:
                        pass
                stop.wait(1.0)
        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        with Prober(bys, sec.victim.id) as p:
            brigtest.wait_for(lambda: not any(still_held(s) for s in socks),
                              timeout=BODY_TIMEOUT + 25, interval=0.25,
                              what="brigd to cut every slow body")
            took = time.monotonic() - t0
        p.check(base, "slow bodies of an authenticated tenant")
        assert taken <= REQUESTS_PER_ACCOUNT and refused >= 300 - REQUESTS_PER_ACCOUNT, (
            taken, refused)
        assert took < BODY_TIMEOUT + 15, took
    finally:
        stop.set()
        close_all(socks)
    # The account's slots are free again: its next request is served.
    assert sec.sh(sid, "echo ok")["stdout"] == "ok\n"


def rss_kib(pid, field="VmRSS"):
    return int(sectest.proc_status(pid, field)[0])


@BRIGD_ONLY  # brigd's memory: any mode's bytes
def test_concurrent_buffered_exec_output(sec, daemon):
    """16 buffered execs at once, each writing 10 MiB to stdout and 10 MiB to stderr
    (320 MiB in all): brigd's peak memory grows by the account's output budget plus
    slack, not by the 16 results and their JSON; what did not fit is truncated with
    "output_budget_exceeded" (or the exec is refused 429 before it runs); the
    bystander's exec of 1 MiB meanwhile gets its whole output and answers near its
    baseline; afterwards brigd's resident memory returns near where it was."""
    sids = [sec.sandbox("minimal") for _ in range(2)]
    bys = bystander(sec)
    base = baseline(bys, sec.victim.id)
    pid = daemon.proc.pid
    rss0 = rss_kib(pid)
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # reset brigd's peak RSS (VmHWM)
    hwm0 = rss_kib(pid, "VmHWM")
    cmd = ("head -c 10485760 /dev/zero | tr '\\0' A; "
           "head -c 10485760 /dev/zero | tr '\\0' B >&2")
    results, errors = [], []

    def flood(i):
        try:
            r = sec.api.request("POST", f"/v1/sandboxes/{sids[i % 2]}/exec",
                                {"cmd": cmd, "timeout": 120}, timeout=300)
            body = r.json()
            if r.status == 200:
                results.append({k: v for k, v in body.items()
                                if k not in ("stdout", "stderr")} |
                               {"out": len(body["stdout"]), "err": len(body["stderr"])})
            else:
                results.append({"status": r.status, "error": body["error"]})
        except Exception as e:  # noqa: BLE001 - the assertion reports it
            errors.append(repr(e))
    threads = [threading.Thread(target=flood, args=(i,)) for i in range(16)]
    with Prober(bys, sec.victim.id) as p:
        for t in threads:
            t.start()
        # The bystander's own output is whole, not cut by the attacker's use of memory.
        r = bys.ok("POST", f"/v1/sandboxes/{sec.victim.id}/exec",
                   {"cmd": "head -c 1048576 /dev/zero | tr '\\0' v"}, timeout=120).json()
        assert r["exit_code"] == 0 and len(r["stdout"]) == MIB and "stdout_truncated" not in r
        for t in threads:
            t.join(timeout=600)
    assert not errors, errors
    growth = rss_kib(pid, "VmHWM") - hwm0
    print(f"brigd peak RSS growth {growth} KiB; bystander {base:.3f}s idle, "
          f"{statistics.median(p.latencies):.3f}s median under attack; results {results}")
    # KiB: the account's budget, plus the sanitizer's shadow and quarantine and the
    # encoder's buffers; not 16 x (20 MiB kept + its JSON copies).
    assert growth < (ACCOUNT_OUTPUT_BUDGET + 192 * MIB) // 1024, growth
    p.check(base, "16 concurrent buffered execs of 20 MiB")
    ok = [r for r in results if "status" not in r]
    limited = [r for r in results if r.get("output_budget_exceeded") or r.get("status") == 429]
    assert ok and limited, results
    for r in results:
        if "status" in r:
            assert r["status"] == 429 and r["error"]["code"] == "limit_exceeded", r
        else:
            assert r["exit_code"] == 0 and r["out"] <= 10 * MIB and r["err"] <= 10 * MIB, r
            if r["out"] + r["err"] < 20 * MIB:
                assert r.get("output_budget_exceeded") is True, r
    # The memory is brigd's to give back once the results are sent.
    brigtest.wait_for(lambda: rss_kib(pid) - rss0 < 96 * 1024, timeout=30, interval=0.5,
                      what=f"brigd's RSS back near {rss0} KiB (now {rss_kib(pid)} KiB)")


FORGED = "2031-01-01T00:00:00.000Z brigd info: sandbox sbx_forged: deleted (1 ms)"
# tar's last 2 KiB of stderr become the agent's error message; "tar: …" with status
# 127 is "this sandbox has no usable tar (…)", a 500 that brigd logs.
FAKE_TAR = (
    "#!/bin/sh\n"
    f"printf 'tar: not today\\n{FORGED}\\n\\033[2J\\r{FORGED}\\n' >&2\n"
    "i=0; while [ $i -lt 20 ]; do echo " + "f" * 70 + " $i >&2; i=$((i+1)); done\n"
    "exit 127\n")


def tar_bytes():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("hello.txt")
        info.size = 5
        t.addfile(info, io.BytesIO(b"hello"))
    return buf.getvalue()


def forged_lines(path):
    with open(path, "rb") as f:
        return [line for line in f.read().split(b"\n") if line.startswith(FORGED[:24].encode())]


def size(path):
    return os.path.getsize(path)


def fake_tar_sandbox(sec):
    """A sandbox whose `tar` prints forged log lines and fails; (its id, its agent log,
    the upload that makes brigd and the agent log tar's words)."""
    sid = sec.sandbox("minimal")
    assert sec.sh(sid, "mkdir -p /usr/local/bin")["exit_code"] == 0
    sec.api.put_file(sid, "/usr/local/bin/tar", FAKE_TAR.encode(), mode="0755")
    agent_log = os.path.join(sec.daemon.state_dir, "sandboxes", sid, "agent.log")
    data = tar_bytes()
    url = f"/v1/sandboxes/{sid}/files/tar?path=/root"
    return sid, agent_log, lambda: sec.api.request("PUT", url, data)


def test_sandbox_text_cannot_forge_log_lines(sec, daemon):
    """tar's stderr (2 KiB with newlines, a carriage return and a terminal escape) in
    the error of a failed upload: it reaches brigd's log and the agent's, but neither
    has a line that starts like the forged one, nor a raw escape or carriage return:
    each record stays one line, the sandbox's text escaped inside it."""
    sid, agent_log, upload = fake_tar_sandbox(sec)
    r = upload()
    assert r.status == 500 and b"no usable tar" in r.body, r.body
    with open(daemon.log_path, "rb") as f:
        assert b"no usable tar (tar: not today\\n2031-01-01" in f.read()
    assert forged_lines(daemon.log_path) == [] and forged_lines(agent_log) == []
    for path in (daemon.log_path, agent_log):
        with open(path, "rb") as f:
            for line in f.read().split(b"\n"):
                assert b"\x1b" not in line and b"\r" not in line, line[:200]
                assert len(line) < LOG_LINE_MAX, line[:200]


def test_sandbox_log_flood_is_rate_limited(sec, daemon):
    """160 failing tar uploads in a burst, each logging tar's 2 KiB in brigd's log and
    the agent's: both grow at most at the per-sandbox rate (burst + rate x duration
    records of at most 2 KiB, and the notices of what was suppressed), the suppression
    is said, and a bystander's own log line (its new sandbox) still appears."""
    sid, agent_log, upload = fake_tar_sandbox(sec)
    bys = bystander(sec)
    base = baseline(bys, sec.victim.id)
    brigd0, agent0 = size(daemon.log_path), size(agent_log)
    statuses = []

    def flood(n):
        for _ in range(n):
            statuses.append(upload().status)
    t0 = time.monotonic()
    threads = [threading.Thread(target=flood, args=(40,)) for _ in range(4)]
    with Prober(bys, sec.victim.id) as p:
        for t in threads:
            t.start()
        with brigtest.Sandbox(bys, "minimal") as other:
            for t in threads:
                t.join(timeout=300)
            took = time.monotonic() - t0
    p.check(base, "a log flood")
    assert statuses == [500] * 160, statuses
    # Each of the two logs: the records the limit lets through, at most LOG_LINE_MAX
    # bytes each, plus a few short ones (notices, the bystander's).
    bound = (LOG_BURST + LOG_RATE * took + 8) * LOG_LINE_MAX
    grew = size(daemon.log_path) - brigd0, size(agent_log) - agent0
    print(f"logs grew {grew} bytes in {took:.1f}s (bound {bound:.0f}); bystander {base:.3f}s "
          f"idle, {statistics.median(p.latencies):.3f}s median under attack")
    assert grew[0] < bound and grew[1] < bound, (grew, bound, took)
    with open(daemon.log_path, "rb") as f:
        log = f.read()[brigd0:]
    assert re.search(rb"log: \d+ records of sandbox " + sid.encode() + rb" suppressed", log), \
        log[-2000:]
    assert f"sandbox {other.id}: running".encode() in log, "the bystander's line is missing"
