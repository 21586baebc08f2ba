"""Pause and resume (issue 16, docs/snapshots.md): a paused sandbox's processes are
stopped where they are (the cgroup freezer; runsc pause under gVisor), requests that need
its agent answer 409 "paused", its idle timeout stands still while its lifetime runs on,
it costs the paused price instead of its tariff's, and it survives brigd's restart and
crash paused.  After the resume a background process goes on: its output from before the
pause is still there (same pid, same offsets) and it keeps streaming."""

import http.client
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from brigtest import (BUILD, Brigd, Sandbox, leftovers, needs_gvisor, runsc_processes,
                      wait_for)
from test_network import inet, napi, netd  # noqa: F401 - fixtures of the network test


def stream(api, path):
    conn = http.client.HTTPConnection(api.host, api.port, timeout=60)
    conn.request("GET", path, headers={"Authorization": f"Bearer {api.key}",
                                       "Accept": "application/x-ndjson"})
    return conn, conn.getresponse()


def output(api, sid, pid, follow=False):
    """The process's output events (a snapshot, or a live generator when follow)."""
    conn, resp = stream(api, f"/v1/sandboxes/{sid}/processes/{pid}/output?follow="
                        f"{1 if follow else 0}")
    assert resp.status == 200, resp.read()

    def gen():
        for line in resp:
            yield json.loads(line)
    if follow:
        return conn, gen()
    evs = list(gen())
    conn.close()
    return evs


def ticks(evs):
    """The numbers a counting process printed, in order."""
    text = "".join(e["data"] for e in evs if e.get("type") == "stdout")
    return [int(x) for x in text.split()]


COUNTER = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.02; done"


def start_counter(api, sid, cmd=COUNTER):
    r = api.ok("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": cmd, "background": True},
               expect=(202,))
    return r.json()["pid"]


def pause(api, sid, expect=(200,), body=None):
    return api.ok("POST", f"/v1/sandboxes/{sid}/pause", body, expect=expect).json()


def resume(api, sid, expect=(200,)):
    return api.ok("POST", f"/v1/sandboxes/{sid}/resume", expect=expect).json()


def freezer_state(sid):
    path = f"/sys/fs/cgroup/freezer/brig/{sid}/freezer.state"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    path = f"/sys/fs/cgroup/brig/{sid}/cgroup.freeze"  # v2
    with open(path) as f:
        return "FROZEN" if f.read().strip() == "1" else "THAWED"


def cpu_ns(sid):
    path = f"/sys/fs/cgroup/cpuacct/brig/{sid}/cpuacct.usage"
    if os.path.exists(path):
        with open(path) as f:
            return int(f.read())
    with open(f"/sys/fs/cgroup/brig/{sid}/cpu.stat") as f:
        return int(f.readline().split()[1]) * 1000


def refused_paused(api, method, path, body=None):
    r = api.request(method, path, body)
    assert r.status == 409, (method, path, r.status, r.body)
    assert "paused" in r.json()["error"]["message"], r.body


def timeline_kinds(api, sid):
    return [e["kind"] for e in
            api.ok("GET", f"/v1/sandboxes/{sid}/timeline?limit=1000").json()["events"]]


# ---- container mode ---------------------------------------------------------------

def test_pause_freezes_and_resume_goes_on(api):
    with Sandbox(api) as sb:
        pid = start_counter(api, sb.id)
        wait_for(lambda: len(ticks(output(api, sb.id, pid))) >= 5, what="the counter counting")
        p = pause(api, sb.id)
        assert p["state"] == "paused" and p["memory"] == "resident"
        assert p["paused_at"].endswith("Z") and p["idle_expires_at"] is None
        assert freezer_state(sb.id) == "FROZEN"
        # No process runs: the cgroup's CPU time stands still.
        before = cpu_ns(sb.id)
        time.sleep(0.3)
        assert cpu_ns(sb.id) == before
        # Listed and shown paused; pausing again changes nothing.
        assert api.ok("GET", f"/v1/sandboxes/{sb.id}").json()["state"] == "paused"
        listed = {s["id"]: s["state"] for s in api.ok("GET", "/v1/sandboxes").json()["sandboxes"]}
        assert listed[sb.id] == "paused"
        assert pause(api, sb.id)["state"] == "paused"
        # Everything that needs its agent: 409 naming "paused".
        base = f"/v1/sandboxes/{sb.id}"
        refused_paused(api, "POST", f"{base}/exec", {"cmd": "true"})
        refused_paused(api, "POST", f"{base}/exec", {"cmd": "sh", "pty": {"cols": 80, "rows": 24},
                                                      "background": True})
        refused_paused(api, "GET", f"{base}/files?path=/etc/hostname")
        refused_paused(api, "PUT", f"{base}/files?path=/tmp/x", b"x")
        refused_paused(api, "GET", f"{base}/processes")
        refused_paused(api, "GET", f"{base}/processes/{pid}/output?follow=0")
        # Resume: the counter goes on from where it stopped, with the same pid, and the
        # output from before the pause is still there from offset 0.
        r = resume(api, sb.id)
        assert r["state"] == "running" and "paused_at" not in r
        assert freezer_state(sb.id) == "THAWED"
        assert resume(api, sb.id)["state"] == "running"  # idempotent
        seen = ticks(output(api, sb.id, pid))
        assert seen[:5] == [1, 2, 3, 4, 5]
        conn, live = output(api, sb.id, pid, follow=True)
        try:
            assert next(live)["type"] == "output"
            got = []
            for ev in live:  # from the start again, then live past what was there
                if ev.get("type") == "stdout":
                    got += [int(x) for x in ev["data"].split()]
                if len(got) > len(seen) + 5:
                    break
        finally:
            conn.close()
        assert got == list(range(1, len(got) + 1)), got  # never restarted, nothing lost
        assert api.exec(sb.id, "echo awake")["stdout"] == "awake\n"
        kinds = timeline_kinds(api, sb.id)
        assert "sandbox.paused" in kinds and "sandbox.resumed" in kinds


def test_pause_answers_for_wrong_states_and_input(api):
    r = api.request("POST", "/v1/sandboxes/sbx_nonexistentnonexistent00/pause")
    assert r.status == 404 and "error" in r.json()
    with Sandbox(api) as sb:
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/pause", {"bogus": 1})
        assert r.status == 400 and "bogus" in r.json()["error"]["message"]
        assert api.request("POST", f"/v1/sandboxes/{sb.id}/resume", {"x": 1}).status == 400
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/pause", {"memory": "swap"})
        assert r.status == 400 and "memory" in r.json()["error"]["message"]
        # A container cannot checkpoint its memory: it says so, and nothing changed.
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/pause", {"memory": "checkpoint"})
        assert r.status == 400 and "cannot checkpoint" in r.json()["error"]["message"], r.body
        assert api.ok("GET", f"/v1/sandboxes/{sb.id}").json()["state"] == "running"
        assert pause(api, sb.id, body={"memory": "resident"})["memory"] == "resident"
        assert resume(api, sb.id)["state"] == "running"  # a running one: nothing to do
    # Ended: not found, like any sandbox that is not live.
    assert api.request("POST", f"/v1/sandboxes/{sb.id}/pause").status == 404
    assert api.request("POST", f"/v1/sandboxes/{sb.id}/resume").status == 404


def test_delete_of_a_paused_sandbox_leaves_nothing(api):
    """The api fixture's leak check proves nothing stays: processes, cgroups, mounts."""
    sid = api.create("minimal")["id"]
    start_counter(api, sid)
    pause(api, sid)
    t = time.monotonic()
    api.delete(sid)
    assert time.monotonic() - t < 2.5  # killed at once, not after the 2 s wait
    gone = api.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert gone["state"] == "deleted" and gone["reason"] == "deleted_by_api"
    assert "sandbox.paused" in timeline_kinds(api, sid)


def cli(api, *args):
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)
    return subprocess.run([os.path.join(BUILD, "brig"), *args], env=env, capture_output=True,
                          timeout=60)


def test_cli_pause_and_resume(api):
    with Sandbox(api) as sb:
        r = cli(api, "pause", sb.id)
        assert r.returncode == 0 and r.stdout.decode() == f"{sb.id} paused\n", r
        r = cli(api, "exec", sb.id, "--", "true")
        assert r.returncode != 0 and b"paused" in r.stderr, r
        r = cli(api, "resume", "--json", sb.id)
        assert r.returncode == 0 and json.loads(r.stdout)["state"] == "running", r
        r = cli(api, "pause", "sbx_nosuchsandbox")
        assert r.returncode == 1 and b"(HTTP 404 not_found)" in r.stderr, r
        # a container's memory cannot be checkpointed: said, and it is not paused
        r = cli(api, "pause", "--checkpoint", sb.id)
        assert r.returncode == 1 and b"checkpoint" in r.stderr and b"HTTP 400" in r.stderr, r
        assert api.ok("GET", f"/v1/sandboxes/{sb.id}").json()["state"] == "running"


# ---- with a daemon of its own -------------------------------------------------------

CONF = """[brigd]
billing_interval = 1
pause_price_micro_usd_per_gib_s = 7
[tariff.gig]
vcpus = 1
memory_mib = 256
disk_mib = 1024
price_micro_usd_per_second = 1000
"""


def own_brigd(tmp_path, conf):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text(conf)
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)])
    yield d
    if d.proc is not None:
        a = d.api()
        for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
            a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
        d.stop()
    if d.live_sandboxes():
        d.destroy_all()
    left = leftovers(d.state_dir)
    assert not left, f"test leaked: {left}"


@pytest.fixture
def pd(tmp_path):
    yield from own_brigd(tmp_path, CONF)


@pytest.fixture
def pd_idle(tmp_path):
    """Paused sandboxes live 4 s at most."""
    yield from own_brigd(tmp_path, CONF.replace("[brigd]\n", "[brigd]\npaused_max_age = 4\n"))


def ledger(d, sid):
    con = sqlite3.connect(f"file:{d.state_dir}/brig.db?mode=ro", uri=True)
    try:
        return con.execute("SELECT amount_micro_usd, seconds, at FROM ledger WHERE kind = 'charge'"
                           " AND sandbox_id = ? ORDER BY seq", (sid,)).fetchall()
    finally:
        con.close()


def row_state(d, sid):
    con = sqlite3.connect(f"file:{d.state_dir}/brig.db?mode=ro", uri=True)
    try:
        return con.execute("SELECT state FROM sandboxes WHERE id = ?", (sid,)).fetchone()[0]
    finally:
        con.close()


def test_paused_time_costs_the_paused_price(pd):
    d = pd.start()
    a = d.api()
    sid = a.create("minimal", tariff="gig")["id"]
    wait_for(lambda: ledger(d, sid), timeout=10, what="a first charge")
    pause(a, sid)
    n = len(ledger(d, sid))
    wait_for(lambda: len(ledger(d, sid)) >= n + 2, timeout=15, what="charges while paused")
    paused_rows = ledger(d, sid)[n:]
    # 1 GiB of disk at 7 micro-dollars per GiB-second; never the tariff's 1000.
    assert all(amount == 7 * secs for amount, secs, _ in paused_rows), paused_rows
    resume(a, sid)
    m = len(ledger(d, sid))
    wait_for(lambda: len(ledger(d, sid)) > m, timeout=15, what="a charge after the resume")
    amount, secs, _ = ledger(d, sid)[-1]
    assert amount == 1000 * secs
    a.delete(sid)


def test_paused_sandbox_survives_crash_and_restart(pd):
    """kill -9 of brigd, then a clean stop: each start finds it paused (its processes
    still frozen), and the resume lets the same process go on."""
    d = pd.start()
    a = d.api()
    sid = a.create("minimal", idle_timeout=1)["id"]
    pid = start_counter(a, sid)
    wait_for(lambda: len(ticks(output(a, sid, pid))) >= 3, what="the counter counting")
    pause(a, sid)
    assert row_state(d, sid) == "paused"
    d.stop(signal.SIGKILL)
    assert freezer_state(sid) == "FROZEN"
    d.start()
    a = d.api()
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "paused"
    refused_paused(a, "POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
    d.stop()  # SIGTERM: left as it is
    d.start()
    a = d.api()
    # Its idle timeout (1 s) stood still all along: the janitor did not end it.
    time.sleep(1.5)
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "paused"
    resume(a, sid)
    seen = ticks(output(a, sid, pid))
    wait_for(lambda: len(ticks(output(a, sid, pid))) > len(seen), what="the counter going on")
    got = ticks(output(a, sid, pid))
    assert got == list(range(1, len(got) + 1))
    a.delete(sid)


def test_lifetime_runs_on_while_paused(pd):
    d = pd.start()
    a = d.api()
    sid = a.create("minimal", max_lifetime=2)["id"]
    pause(a, sid)
    wait_for(lambda: a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "deleted",
             timeout=15, what="the paused sandbox to reach its lifetime")
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["reason"] == "max_lifetime"


def test_on_idle_pause_then_paused_max_age(pd_idle):
    """on_idle "pause" (the project's default, or the create's): the idle timeout pauses
    the sandbox instead of deleting it; it is kept across a restart; a sandbox paused for
    paused_max_age is deleted (paused_too_long)."""
    d = pd_idle.start()
    a = d.api()
    prj = a.ok("GET", "/v1/projects").json()["projects"][0]
    assert prj["on_idle"] == "delete"
    for bad in ({"on_idle": "sleep"}, {"on_idle": 1}, {"on_idle": None}):
        r = a.request("PATCH", f"/v1/projects/{prj['id']}", bad)
        assert r.status == 400 and "on_idle" in r.json()["error"]["message"], r.body
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal", **bad})
        assert r.status == 400 and "on_idle" in r.json()["error"]["message"], r.body
    assert a.ok("PATCH", f"/v1/projects/{prj['id']}", {"on_idle": "pause"}).json()[
        "on_idle"] == "pause"
    paused = a.create("minimal", idle_timeout=1)  # the project's default
    deleted = a.create("minimal", idle_timeout=1, on_idle="delete")  # its own wins
    assert paused["on_idle"] == "pause" and deleted["on_idle"] == "delete"
    sid = paused["id"]

    def state(s):
        return a.ok("GET", f"/v1/sandboxes/{s}").json()

    wait_for(lambda: state(sid)["state"] == "paused", timeout=15, what="the idle pause")
    # listed paused first, then frozen, then its timeline says so
    wait_for(lambda: freezer_state(sid) == "FROZEN", what="the freezer")
    wait_for(lambda: "sandbox.paused" in timeline_kinds(a, sid), what="the timeline")
    ev = [e for e in a.ok("GET", f"/v1/sandboxes/{sid}/timeline").json()["events"]
          if e["kind"] == "sandbox.paused"]
    assert ev and ev[-1]["data"]["by"] == "idle_timeout", ev
    wait_for(lambda: state(deleted["id"])["state"] == "deleted", timeout=15, what="the idle end")
    assert state(deleted["id"])["reason"] == "idle_timeout"
    # Resumed, it works; its on_idle is kept across a restart of brigd.
    resume(a, sid)
    assert a.exec(sid, "echo back")["stdout"] == "back\n"
    d.stop()
    d.start()
    a = d.api()
    assert state(sid)["on_idle"] == "pause"
    # Idle again: paused again, then deleted once paused for paused_max_age (4 s).
    wait_for(lambda: state(sid)["state"] == "paused", timeout=15, what="the idle pause")
    t = time.monotonic()
    wait_for(lambda: state(sid)["state"] == "deleted", timeout=15, what="the paused age")
    assert time.monotonic() - t > 2  # not before its age
    end = state(sid)
    assert end["reason"] == "paused_too_long" and end["end_reason"] == "idle", end


# ---- gVisor -------------------------------------------------------------------------

PY_COUNTER = ("python3 -u -c 'import time\n"
              "n = 0\n"
              "while True:\n"
              "    n += 1\n"
              "    print(n)\n"
              "    time.sleep(0.02)\n'")


@pytest.mark.base
def test_gvisor_pause_keeps_a_python_counter(api):
    """gVisor, frozen: runsc pause (memory resident; the checkpoint is below).  A Python process counting in memory goes on counting after the
    resume, from the number it had reached."""
    needs_gvisor(api)
    with Sandbox(api, "base", isolation="gvisor") as sb:
        pid = start_counter(api, sb.id, PY_COUNTER)
        wait_for(lambda: len(ticks(output(api, sb.id, pid))) >= 5, timeout=20,
                 what="the python counter counting")
        p = pause(api, sb.id)
        assert p["state"] == "paused" and p["memory"] == "resident"
        refused_paused(api, "POST", f"/v1/sandboxes/{sb.id}/exec", {"cmd": "true"})
        resume(api, sb.id)
        seen = ticks(output(api, sb.id, pid))
        wait_for(lambda: len(ticks(output(api, sb.id, pid))) > len(seen) + 5,
                 what="the counter going on")
        got = ticks(output(api, sb.id, pid))
        assert got == list(range(1, len(got) + 1))
        kinds = timeline_kinds(api, sb.id)
        assert "sandbox.paused" in kinds and "sandbox.resumed" in kinds


# ---- its network while paused ---------------------------------------------------------

@pytest.mark.base
def test_a_policy_change_while_paused_holds_after_resume(request):
    """The project's egress policy changes while a sandbox is paused: the host's firewall
    takes it for the paused sandbox too, so the resumed one cannot reach what is now
    closed (with the network harness of test_network.py)."""
    import test_network as tn
    napi = request.getfixturevalue("napi")
    p = napi.ok("POST", "/v1/projects", {"name": "net-pause"}).json()
    sb = napi.create(template="base", project=p["id"])["id"]
    tn.gateway(napi, sb)
    assert tn.fetch(napi, sb, "http://allowed.test/")[0] == 0
    napi.ok("POST", f"/v1/sandboxes/{sb}/pause")
    napi.ok("PATCH", f"/v1/projects/{p['id']}", {"egress": {"mode": "none"}})
    napi.ok("POST", f"/v1/sandboxes/{sb}/resume")
    assert tn.fetch(napi, sb, "http://allowed.test/")[0] != 0
    napi.delete(sb)


def test_gvisor_paused_survives_a_crash_and_its_delete_leaves_nothing(pd):
    d = pd.start()
    a = d.api()
    needs_gvisor(a)
    sid = a.create("minimal", isolation="gvisor")["id"]
    pid = start_counter(a, sid)
    wait_for(lambda: len(ticks(output(a, sid, pid))) >= 3, timeout=20, what="counting")
    pause(a, sid)
    d.stop(signal.SIGKILL)
    d.start()
    a = d.api()
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "paused"
    resume(a, sid)
    seen = ticks(output(a, sid, pid))
    wait_for(lambda: len(ticks(output(a, sid, pid))) > len(seen), what="the counter going on")
    got = ticks(output(a, sid, pid))
    assert got == list(range(1, len(got) + 1))
    pause(a, sid)
    a.delete(sid)  # paused: the pd fixture's leak check covers runsc's processes and state
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "deleted"


@pytest.mark.base
def test_gvisor_checkpoint_frees_memory_and_the_counter_goes_on(pd):
    """{"memory": "checkpoint"}: runsc checkpoint writes the sandbox's memory to disk and its
    processes end (none of them is left on the host; an output stream open across it ends,
    its agent closed every connection first); it stays so across a brigd restart,
    and the resume restores it: a Python process that held its counter in memory goes on
    counting from where it was (its output before the pause kept, nothing printed twice).
    Checkpointed again, brigd killed -9, deleted: the pd fixture's leak check proves that
    nothing stays (its image, the kept network namespace, runsc's state)."""
    d = pd.start()
    a = d.api()
    needs_gvisor(a)
    sid = a.create("base", isolation="gvisor")["id"]
    pid = start_counter(a, sid, PY_COUNTER)
    wait_for(lambda: len(ticks(output(a, sid, pid))) >= 5, timeout=20, what="counting")
    assert runsc_processes(d.state_dir)
    conn, follow = output(a, sid, pid, follow=True)
    next(follow)
    p = pause(a, sid, body={"memory": "checkpoint"})
    assert p["state"] == "paused" and p["memory"] == "checkpoint", p
    list(follow)  # a stream open across the checkpoint ends (its agent closed it)
    conn.close()
    assert runsc_processes(d.state_dir) == []  # its memory is freed: no process of it
    sdir = os.path.join(d.state_dir, "sandboxes", sid)
    assert os.listdir(os.path.join(sdir, "checkpoint"))
    refused_paused(a, "POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
    assert pause(a, sid)["memory"] == "checkpoint"  # paused already: as it is
    d.stop()
    d.start()
    a = d.api()
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "paused"
    assert runsc_processes(d.state_dir) == []
    assert resume(a, sid)["state"] == "running"
    assert runsc_processes(d.state_dir)
    assert not os.path.exists(os.path.join(sdir, "checkpoint"))
    seen = ticks(output(a, sid, pid))
    assert len(seen) >= 5
    wait_for(lambda: len(ticks(output(a, sid, pid))) > len(seen) + 5, timeout=20,
             what="the counter going on")
    got = ticks(output(a, sid, pid))
    assert got == list(range(1, len(got) + 1))  # from where it was: no restart, no gap
    assert a.exec(sid, "echo hi")["stdout"] == "hi\n"  # its agent listens again
    r = cli(a, "pause", "--checkpoint", sid)  # the CLI's way this time
    assert r.returncode == 0 and r.stdout.decode() == \
        f"{sid} paused (memory checkpointed to disk)\n", r
    d.stop(signal.SIGKILL)
    d.start()
    a = d.api()
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "paused"
    a.delete(sid)
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "deleted"
    assert leftovers(d.state_dir) == []
