"""Why it ended (issue 13, docs/api.md "Why it ended"): every command and every sandbox
ends with a typed reason, each provoked here for real: a memory bomb is `oom_killed` (the
cgroup's OOM count, not a guess from SIGKILL), a fork bomb `pids_limit`, a full disk
`disk_full`, and the sandbox ends (idle, lifetime, delete, balance, spend limit, CPU
abuse, agent lost or OOM-killed, brigd restart, host shutdown or reboot)."""

import http.client
import json
import os
import signal
import sqlite3
import threading
import time
import urllib.parse

import pytest

from brigtest import Api, Brigd, leftovers, needs_gvisor, wait_for

CONF = """[brigd]
pids_limit = 64
billing_interval = 1
cpu_abuse_window = 3
[tariff.small]
vcpus = 1
memory_mib = 512
disk_mib = 2048
price_micro_usd_per_second = 10
[tariff.tiny]
vcpus = 1
memory_mib = 64
disk_mib = 64
price_micro_usd_per_second = 10
[tariff.tenth]
vcpus = 0.1
memory_mib = 128
disk_mib = 128
price_micro_usd_per_second = 1
[tariff.wee]
vcpus = 1
memory_mib = 16
disk_mib = 64
price_micro_usd_per_second = 1
[tariff.pricey]
vcpus = 1
memory_mib = 128
disk_mib = 128
price_micro_usd_per_second = 500000
"""


@pytest.fixture(scope="module")
def rd(tmp_path_factory):
    """One brigd for the module, with small tariffs and limits to run into."""
    tmp = tmp_path_factory.mktemp("reasons")
    cfg = tmp / "brigd.conf"
    cfg.write_text(CONF)
    d = Brigd(str(tmp / "state"), ["--config", str(cfg)]).start()
    yield d
    d.stop()
    left = leftovers(d.state_dir)
    assert not left, f"left behind: {left}"


@pytest.fixture
def ra(rd):
    a = rd.api()
    yield a
    for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
        a.request("DELETE", f"/v1/sandboxes/{sb['id']}")


def state_of(api, sid):
    return api.ok("GET", f"/v1/sandboxes/{sid}").json()


def ended(api, sid, timeout=30, what="the sandbox to end"):
    wait_for(lambda: state_of(api, sid)["state"] == "deleted", timeout=timeout, what=what)
    return state_of(api, sid)


def events(api, sid, kind):
    tl = api.ok("GET", f"/v1/sandboxes/{sid}/timeline?limit=1000").json()["events"]
    return [e["data"] for e in tl if e["kind"] == kind]


def streamed_exit(api, sid, body):
    u = urllib.parse.urlparse(api.base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("POST", f"/v1/sandboxes/{sid}/exec", json.dumps(body),
                 {"Authorization": f"Bearer {api.key}", "Accept": "application/x-ndjson",
                  "Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    lines = [json.loads(x) for x in resp.read().decode().splitlines() if x]
    conn.close()
    return [x for x in lines if x["type"] == "exit"][0]


def new_account(d, name):
    acc = d.operator().ok("POST", "/v1/accounts", {"name": name}).json()
    return Api(d.url, acc["api_key"])


def init_pid(d, sid):
    with open(os.path.join(d.state_dir, "sandboxes", sid, "init.pid")) as f:
        return int(f.read())


# ---- commands ------------------------------------------------------------------------


def test_exited_signal_timeout(ra):
    sid = ra.create("minimal")["id"]
    r = ra.exec(sid, "exit 3")
    assert (r["exit_code"], r["reason"]) == (3, "exited")
    r = ra.exec(sid, "kill -9 $$")
    assert (r["signal"], r["reason"]) == (9, "signal")
    r = ra.exec(sid, "sleep 10", timeout=0.3)
    assert r["timed_out"] and r["reason"] == "timeout"
    # Streamed: the exit event says it too.
    assert streamed_exit(ra, sid, {"cmd": "exit 0"})["reason"] == "exited"
    assert streamed_exit(ra, sid, {"cmd": "kill -TERM $$"})["reason"] == "signal"
    assert streamed_exit(ra, sid, {"cmd": "sleep 10", "timeout": 0.3})["reason"] == "timeout"
    # The timeline's exec events carry the reason.
    got = [e["reason"] for e in events(ra, sid, "exec")]
    assert got == ["exited", "signal", "timeout", "exited", "signal", "timeout"]
    ra.delete(sid)


def test_memory_bomb_is_oom_killed_not_signal(ra):
    sid = ra.create("minimal", tariff="tiny")["id"]
    # sort keeps a line that never ends: 512 MiB against a 64 MiB limit.  The shell
    # reports its child's SIGKILL as 137.
    r = ra.exec(sid, "head -c 512m /dev/zero | sort >/dev/null", timeout=60)
    assert r["exit_code"] == 137 and r["reason"] == "oom_killed", r
    # The OOM killer, not SIGKILL as such: a plain kill -9 afterwards is a signal.
    r = ra.exec(sid, "kill -9 $$")
    assert r["signal"] == 9 and r["reason"] == "signal"
    bomb = "exec awk 'BEGIN { s = \"x\"; while (1) s = s s }'"
    exit_ev = streamed_exit(ra, sid, {"cmd": bomb, "timeout": 60})
    assert exit_ev["reason"] == "oom_killed" and exit_ev["signal"] == 9
    assert [e["reason"] for e in events(ra, sid, "exec")] == ["oom_killed", "signal",
                                                               "oom_killed"]
    assert state_of(ra, sid)["state"] == "running"  # only the command died
    ra.delete(sid)


def test_fork_bomb_is_pids_limit(ra):
    sid = ra.create("minimal")["id"]
    # 64 tasks at most (pids_limit): the 100 sleepers cannot all start, and the shell
    # gives up ("can't fork").
    r = ra.exec(sid, "i=0; while [ $i -lt 100 ]; do sleep 2 & i=$((i+1)); done", timeout=60)
    assert r["exit_code"] != 0 and r["reason"] == "pids_limit", r
    # Once the sleepers are gone, a failing command is just that: the count did not rise
    # during it.  (Gone, not merely fewer: brigd's spare agent connections are processes of
    # the sandbox too, so a command can start while a few sleepers still hold their pids.)
    wait_for(lambda: (lambda r: r.status == 200 and r.json()["exit_code"] == 0)(
        ra.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "! pidof sleep"})),
        timeout=20, what="the sleepers to end")
    r = ra.exec(sid, "exit 1")
    assert r["reason"] == "exited"
    ra.delete(sid)


def test_full_disk_is_disk_full(ra):
    sid = ra.create("minimal", tariff="tiny")["id"]
    r = ra.exec(sid, "dd if=/dev/zero of=/root/fill bs=1M", timeout=60)
    assert r["exit_code"] != 0 and "No space left" in r["stderr"], r
    assert r["reason"] == "disk_full"
    r = ra.exec(sid, "rm /root/fill; exit 1")
    assert r["reason"] == "exited"  # room again
    ra.delete(sid)


def test_background_end_is_recorded_once(ra):
    sid = ra.create("minimal")["id"]
    pid = ra.ok("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "exit 4", "background": True},
                expect=(202,)).json()["pid"]
    p = ra.ok("POST", f"/v1/sandboxes/{sid}/processes/{pid}/wait", {"timeout": 30}).json()
    assert (p["running"], p["exit_code"], p["reason"]) == (False, 4, "exited")
    assert ra.ok("GET", f"/v1/sandboxes/{sid}/processes/{pid}").json()["reason"] == "exited"
    listed = ra.ok("GET", f"/v1/sandboxes/{sid}/processes").json()["processes"]
    assert [x["reason"] for x in listed if x["pid"] == pid] == ["exited"]
    # One that still runs: no reason yet; it ends with its sandbox.
    pid2 = ra.ok("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "sleep 600", "background": True},
                 expect=(202,)).json()["pid"]
    assert ra.ok("GET", f"/v1/sandboxes/{sid}/processes/{pid2}").json()["reason"] is None
    ra.delete(sid)
    ends = events(ra, sid, "exec.ended")
    assert len(ends) == 2, ends
    assert ends[0]["pid"] == pid and ends[0]["exit_code"] == 4 and ends[0]["reason"] == "exited"
    assert ends[0]["command"] == "exit 4"
    assert ends[1]["pid"] == pid2 and ends[1]["reason"] == "deleted" and ends[1]["with_sandbox"]
    # Started events stay as they were: one "exec" per command.
    assert [e["background"] for e in events(ra, sid, "exec")] == [True, True]


# ---- sandboxes -----------------------------------------------------------------------


def check_end(api, sid, detail, code):
    got = state_of(api, sid)
    assert (got["reason"], got["end_reason"]) == (detail, code), got
    ev = events(api, sid, "sandbox.ended")
    assert len(ev) == 1 and ev[0]["end_reason"] == code and ev[0]["reason"] == detail, ev
    return ev[0]


def test_deleted_idle_lifetime(ra):
    sid = ra.create("minimal")["id"]
    ra.delete(sid)
    check_end(ra, sid, "deleted_by_api", "deleted")
    idle = ra.create("minimal", idle_timeout=1)["id"]
    short = ra.create("minimal", max_lifetime=1)["id"]
    ended(ra, idle)
    ended(ra, short)
    check_end(ra, idle, "idle_timeout", "idle")
    check_end(ra, short, "max_lifetime", "lifetime")


def test_balance_and_spend_limit(rd):
    poor = new_account(rd, "poor")
    sid = poor.create("minimal", tariff="pricey")["id"]  # $0.50 a second from $1
    ended(poor, sid, what="the balance to run out")
    check_end(poor, sid, "balance_exhausted", "balance")
    capped = new_account(rd, "capped")
    sid = capped.create("minimal")["id"]
    spent = capped.ok("GET", "/v1/account").json()["usage_today_micro_usd"]
    capped.ok("PATCH", "/v1/account", {"daily_limit_micro_usd": spent + 20})
    t0 = time.monotonic()
    ended(capped, sid, what="the daily spend limit to stop the sandbox")
    assert time.monotonic() - t0 >= 1  # 10 µ$ a second: two seconds' worth of charges
    check_end(capped, sid, "spend_limit", "spend_limit")
    assert capped.ok("GET", "/v1/account").json()["balance_micro_usd"] > 0


def test_cpu_abuse(ra):
    hog = ra.create("minimal", tariff="tenth")["id"]
    ra.ok("POST", f"/v1/sandboxes/{hog}/exec", {"cmd": "while :; do :; done",
                                               "background": True}, expect=(202,))
    ended(ra, hog, what="the CPU hog to be stopped")
    check_end(ra, hog, "cpu_abuse", "cpu_abuse")
    assert events(ra, hog, "exec.ended")[0]["reason"] == "cpu_abuse"


def test_agent_killed_from_the_host_is_agent_lost(rd, ra):
    sid = ra.create("minimal")["id"]
    os.kill(init_pid(rd, sid), signal.SIGKILL)
    ended(ra, sid, what="the sandbox to end with its agent")
    ev = check_end(ra, sid, "agent_lost", "agent_lost")
    assert "ready" in ev["last_words"], ev  # the last line its console got


# The sandbox's root may raise (never lower) PID 1's oom_score_adj: at 1000 the agent's
# score is 16000 + its few pages (for 64 MiB), and the OOM killer takes the process of the
# highest score.  The memory goes to /dev/shm (a 64 MiB tmpfs, charged to the sandbox,
# in no process's pages; a quick kernel copy, so the CPU-abuse check never sees a hog),
# then to a sort of one 40 MiB line (at most ~10240 pages: below the agent's score).
AGENT_OOM = ("echo 1000 > /proc/1/oom_score_adj; cat /dev/zero >/dev/shm/fill 2>/dev/null; "
             "(head -c 40m /dev/zero; sleep 30) | sort >/dev/null")


@pytest.mark.parametrize("isolation", ["container", "gvisor"])
def test_agent_killed_by_the_oom_killer_is_oom_killed(ra, isolation):
    """The agent itself (PID 1) taken by the OOM killer ends the sandbox as oom_killed,
    told from the cgroup's OOM count (a kill -9 from the host is agent_lost, above).
    Under gVisor the host's OOM killer sees gVisor's kernel, which holds the whole
    sandbox's memory: the same bomb takes it, and with it the agent; or gVisor's own
    kernel, near the limit it reads from the cgroup, kills the agent first (its raised
    oom_score_adj counts there too) and the host's count never moves: agent_lost."""
    if isolation == "gvisor":
        needs_gvisor(ra)
    sid = ra.create("minimal", tariff="tiny", isolation=isolation)["id"]
    r = ra.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": AGENT_OOM, "timeout": 60})
    assert r.status in (409, 502), r.body  # its agent's connection closed, or it ended
    ended(ra, sid, what="the sandbox to end with its agent")
    if isolation == "gvisor" and state_of(ra, sid)["end_reason"] == "agent_lost":
        check_end(ra, sid, "agent_lost", "agent_lost")
    else:
        check_end(ra, sid, "oom_killed", "oom_killed")


def test_create_failed(rd, ra):
    """A create that fails after its row was written: the host lost the image of a volume
    the sandbox mounts (here: the test overwrites it), so the runtime cannot mount it."""
    vol = ra.ok("POST", "/v1/volumes", {"name": "lost", "size_mib": 16}).json()
    with open(os.path.join(rd.state_dir, "volumes", f"{vol['id']}.img"), "r+b") as f:
        f.write(bytes(1 << 20))  # the superblock and group descriptors: no ext4 any more
    try:
        r = ra.request("POST", "/v1/sandboxes", {"template": "minimal",
                                                 "volumes": [{"name": "lost", "path": "/v"}]})
    finally:
        gone = ra.request("DELETE", f"/v1/volumes/{vol['id']}")
    assert r.status in (500, 503), r.body  # it did not start
    assert gone.status == 204, gone.body  # a failed create holds no volume
    msg = r.json()["error"]["message"]
    export = [json.loads(x) for x in ra.ok("GET", "/v1/audit").body.decode().splitlines()]
    failed = [e for e in export if e["kind"] == "sandbox.ended" and e["data"]["reason"] == msg]
    assert len(failed) == 1, failed
    sid = failed[0]["sandbox_id"]
    got = state_of(ra, sid)
    assert (got["state"], got["end_reason"], got["reason"]) == ("failed", "create_failed", msg)
    ev = events(ra, sid, "sandbox.ended")
    assert ev == [{"state": "failed", "reason": msg, "end_reason": "create_failed"}], ev


def row_of(d, sid):
    con = sqlite3.connect(f"file:{os.path.join(d.state_dir, 'brig.db')}?mode=ro", uri=True)
    row = con.execute("SELECT state, reason FROM sandboxes WHERE id = ?", (sid,)).fetchone()
    con.close()
    return row


def test_an_end_cut_short_by_a_crash_keeps_its_reason(fresh_daemon):
    """brigd dies while a sandbox is being ended: the next start finishes the end with the
    reason it was ending for (here a DELETE's), not as lost.  The window is held open by
    the cgroup v1 freezer: a frozen process dies of its SIGKILL only once thawed, and the
    DELETE waits up to 2 s for it."""
    d = fresh_daemon.start()
    a = d.api()
    sid = a.create("minimal")["id"]
    freezer = f"/sys/fs/cgroup/freezer/brig/{sid}/freezer.state"
    if not os.path.exists(freezer):
        pytest.skip("no cgroup v1 freezer (under v2 a SIGKILL ends frozen processes)")
    with open(freezer, "w") as f:
        f.write("FROZEN")
    wait_for(lambda: open(freezer).read().strip() == "FROZEN", what="the sandbox frozen")

    def delete():
        try:
            a.request("DELETE", f"/v1/sandboxes/{sid}", timeout=10)
        except OSError:
            pass  # brigd died under it: that is the point

    t = threading.Thread(target=delete, daemon=True)
    try:
        t.start()
        wait_for(lambda: row_of(d, sid)[0] == "deleting", what="the end under way")
        d.stop(signal.SIGKILL)
        assert row_of(d, sid) == ("deleting", "deleted_by_api")  # cut short there
    finally:
        with open(freezer, "w") as f:
            f.write("THAWED")
    t.join(30)
    d.start()
    a = d.api()
    check_end(a, sid, "deleted_by_api", "deleted")


def test_brigd_restart_and_host_shutdown(fresh_daemon):
    d = fresh_daemon.start()
    a = d.api()
    lost = a.create("minimal")["id"]
    kept = a.create("minimal")["id"]
    init = init_pid(d, lost)
    d.stop(signal.SIGKILL)
    os.kill(init, signal.SIGKILL)  # dies while brigd is down: cannot be re-attached
    d.start()
    a = d.api()
    check_end(a, lost, "lost_on_restart", "brigd_restart")
    assert state_of(a, kept)["state"] == "running"  # a clean one is re-attached
    assert 'brig_sandboxes_ended_total{reason="brigd_restart"} 1' in \
        d.operator().ok("GET", "/metrics").body.decode()
    # The host booted while brigd was down (its boot id is not the one brigd recorded): what
    # did not survive ended with the host.  The reboot is played by its two traces: the
    # agent's death and another boot id in the state dir.
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read()
    boot_file = os.path.join(d.state_dir, "boot_id")
    with open(boot_file) as f:
        assert f.read() == boot  # recorded at start
    rebooted = a.create("minimal")["id"]
    init = init_pid(d, rebooted)
    d.stop()
    os.kill(init, signal.SIGKILL)
    with open(boot_file, "w") as f:
        f.write("00000000-0000-4000-8000-000000000000\n")
    d.start()
    a = d.api()
    check_end(a, rebooted, "host_reboot", "host_shutdown")
    assert state_of(a, kept)["state"] == "running"
    with open(boot_file) as f:
        assert f.read() == boot
    d.stop()
    assert d.destroy_all().returncode == 0  # the operator takes the host's sandboxes down
    d.start()
    a = d.api()
    check_end(a, kept, "destroyed_by_operator", "host_shutdown")
