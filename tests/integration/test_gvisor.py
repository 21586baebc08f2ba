"""Isolation "gvisor" end to end, with a real brigd and gVisor's runsc: the same tests
as container mode (imported below and run here with every create asking for gvisor),
and what only gVisor shows: its own kernel, its limits, runsc's leftovers, a restart.

Needs runsc where scripts/setup installs it; skipped (loudly) without it."""

import json
import os
import signal
import subprocess
import time

import pytest

import brigtest
from brigtest import Sandbox, leftovers, runsc_containers, runsc_processes, wait_for

pytestmark = pytest.mark.skipif(not os.access(brigtest.RUNSC, os.X_OK),
                                reason=f"runsc is not installed at {brigtest.RUNSC}: scripts/setup")

_plain_request = brigtest.Api.request


@pytest.fixture(autouse=True)
def gvisor_creates(monkeypatch):
    """Every create of this module's tests asks for isolation gvisor unless it names one."""
    def request(self, method, path, body=None, *a, **kw):
        create = method == "POST" and path == "/v1/sandboxes" and isinstance(body, dict)
        if create:
            body = {"isolation": "gvisor", **body}
        r = _plain_request(self, method, path, body, *a, **kw)
        if create and r.status == 201:  # proof that each imported test ran under gVisor
            assert r.json()["isolation"] == body["isolation"], r.json()
        return r
    monkeypatch.setattr(brigtest.Api, "request", request)


# ---- container mode's tests, under gVisor ----------------------------------------------
# (pytest resolves their fixtures here, so the autouse fixture above applies to them.)

from test_api import (  # noqa: E402,F401
    test_create_list_get_delete, test_exec_stdout_stderr_exit_code, test_exec_argv_is_not_a_shell,
    test_exec_cwd_and_env, test_exec_missing_program_is_127, test_exec_killed_by_signal,
    test_exec_timeout_kills_the_command, test_exec_binary_output_is_base64,
    test_exec_background_job_does_not_hold_the_result, test_file_round_trip_1mib_binary,
    test_file_overwrite_and_empty_file, test_python_traceback_is_a_result,
    test_restart_reattaches_live_sandbox, test_restart_after_clean_stop_reattaches,
    test_sandbox_env_applies_to_every_command, test_seed_loop_on_base)
from test_exec import (  # noqa: E402,F401
    test_stream_delivers_output_while_the_command_runs, test_stream_text_and_binary_chunks,
    test_a_command_cut_off_by_its_sandboxs_end_says_so,
    test_disconnecting_a_foreground_stream_kills_the_command, test_foreground_stdin_text_and_binary,
    test_stdin_not_read_does_not_hang, test_exec_as_unprivileged_user,
    test_exec_timeout_kills_grandchild_that_left_the_group, test_background_process_lifecycle,
    test_background_stdin_and_close, test_signals_and_wait_timeout, test_pty_session_with_python)
from test_files_ops import (  # noqa: E402,F401
    test_list_stat_mkdir_move_remove, test_recursive_remove_does_not_follow_symlinks,
    test_tar_round_trip, test_tar_cannot_escape_its_directory, test_full_disk_is_507_and_leaves_nothing)
from test_tenants import test_secret_is_in_env_and_redacted_everywhere  # noqa: E402,F401
from test_limits import test_exec_and_file_requests_keep_a_sandbox_from_going_idle  # noqa: E402,F401
from test_network import (  # noqa: E402,F401
    inet, netd, napi, test_e2e_policies_through_the_api, test_e2e_denied_destinations_and_inbound)


@pytest.mark.base
def test_e2e_warm_gvisor_pool_claim_gets_the_projects_policy(netd, inet):
    """A gVisor warm sandbox is connected before runsc starts it (its network stack sees
    only what is there then): a claim gives it its project's policy all the same."""
    from test_network import warm_pool_claim_gets_the_projects_policy
    warm_pool_claim_gets_the_projects_policy(netd, inet, "gvisor")


# ---- what only gVisor shows ----------------------------------------------------------------

def test_syscalls_reach_gvisors_kernel_not_the_hosts(api):
    host = os.uname().release
    with Sandbox(api) as sb:
        info = api.ok("GET", f"/v1/sandboxes/{sb.id}").json()
        assert info["isolation"] == "gvisor"
        r = sb.exec("uname -r; cat /proc/version; dmesg 2>&1 | head -3")
        assert r["exit_code"] == 0, r
        release = r["stdout"].split("\n")[0]
        assert release != host, (release, host)  # uname(2) answered by gVisor's kernel
        assert "gVisor" in r["stdout"] or release == "4.4.0", r["stdout"]
        # The host sees runsc's sandbox process, not the sandbox's own programs.
        sb.exec("sleep 1000 >/dev/null 2>&1 &")
        out = subprocess.run(["pgrep", "-x", "sleep"], capture_output=True, text=True).stdout
        for pid in out.split():
            with open(f"/proc/{pid}/cgroup") as f:
                assert f"/brig/{sb.id}" not in f.read()


def test_container_mode_stays_the_default_and_runs_alongside(api):
    gv = api.create("minimal")["id"]
    r = _plain_request(api, "POST", "/v1/sandboxes", {"template": "minimal"})  # no isolation
    assert r.status == 201, r.body
    ct = r.json()
    try:
        assert ct["isolation"] == "container"
        assert api.exec(ct["id"], "uname -r")["stdout"].strip() == os.uname().release
        assert api.exec(gv, "uname -r")["stdout"].strip() != os.uname().release
    finally:
        api.delete(ct["id"])
        api.delete(gv)


def ended_by_its_kernels_death(api, sid, r, reasons):
    """The exec's answer when runsc's sandbox process died under it (the request saw its
    agent connection close, or the sandbox end), then the sandbox ended for one of
    `reasons` (oom_killed when the host's OOM killer took runsc, else agent_lost)."""
    assert r.status in (409, 502), r.body
    msg = r.json()["error"]["message"]
    assert any(w in msg for w in ("connection closed",) + reasons), msg
    wait_for(lambda: api.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] != "running",
             timeout=15, what="the sandbox to end")
    sb = api.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert sb["reason"] in reasons and sb["end_reason"] == sb["reason"], sb


def host_memory_limit(sid):
    for path in (f"/sys/fs/cgroup/memory/brig/{sid}/memory.limit_in_bytes",  # v1
                 f"/sys/fs/cgroup/brig/{sid}/memory.max"):  # v2
        if os.path.exists(path):
            with open(path) as f:
                return int(f.read())
    raise AssertionError(f"no memory cgroup of {sid}")


@pytest.mark.base
def test_memory_limit(api, daemon):
    """The tariff's memory bounds the host cgroup of runsc's sandbox process (gVisor's
    kernel and every program's memory), and gVisor reports it as the machine's memory.
    A sandbox past it is ended by the host's OOM killer (where a container loses only
    the program): the host and the other sandboxes are untouched, nothing leaks."""
    tariffs = {t["name"]: t for t in api.ok("GET", "/v1/tariffs").json()["tariffs"]}
    sb = api.create("base")
    sid, mib = sb["id"], tariffs[sb["tariff"]]["memory_mib"]
    assert host_memory_limit(sid) == mib << 20
    total_kb = int(api.exec(sid, "grep MemTotal /proc/meminfo")["stdout"].split()[1])
    assert total_kb == mib << 10
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec", {
        "cmd": f"python3 -c 'b = bytearray({2 * mib} << 20)'; echo rc=$?", "timeout": 60})
    if r.status == 200:  # the program alone failed
        assert "rc=0" not in r.json()["stdout"], r.json()
        api.delete(sid)
    else:
        ended_by_its_kernels_death(api, sid, r, ("oom_killed",))
    assert leftovers(daemon.state_dir) == []


def test_pids_limit(api, daemon):
    """The host cgroup bounds runsc's processes (gVisor's kernel's threads and a stub per
    program thread): a fork bomb never takes more host tasks than pids.max; under gVisor
    a sandbox that reaches it is ended (its kernel cannot make a thread), where a
    container's fork fails.  Either way the host is untouched and nothing leaks."""
    sid = api.create("minimal")["id"]
    with open(f"/sys/fs/cgroup/pids/brig/{sid}/pids.max") as f:
        host_max = int(f.read())
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec", {
        "cmd": "i=0; while [ $i -lt 2000 ]; do sleep 100 & i=$((i+1)); done 2>/dev/null; "
               "echo started $(ls /proc | grep -c '^[0-9]')", "timeout": 300}, timeout=320)
    if r.status == 200:  # throttled: forks failed, the sandbox lives on
        out = r.json()
        assert not out["timed_out"] and out["stdout"].startswith("started"), out
        assert int(out["stdout"].split()[1]) < 2000, out
        api.delete(sid)
    else:
        # (a fork bomb's memory may trip the OOM killer before the pids limit)
        ended_by_its_kernels_death(api, sid, r, ("agent_lost", "oom_killed"))
    assert host_max > 0
    assert leftovers(daemon.state_dir) == []


def test_disk_limit(api):
    """Writes land in gVisor's overlay, whose file store lives on the sandbox's own disk
    image: filling it stops at the tariff's disk size, and space comes back on rm."""
    with Sandbox(api) as sb:
        r = sb.exec("dd if=/dev/zero of=/root/big bs=1M count=3000 2>&1; echo rc=$?", timeout=200)
        assert "rc=0" not in r["stdout"] and "space" in r["stdout"], r
        assert sb.exec("rm /root/big && dd if=/dev/zero of=/root/small bs=1M count=200 "
                       "2>/dev/null && echo ok", timeout=60)["stdout"] == "ok\n"


def test_tmp_is_on_the_disk_not_in_memory(api):
    """runsc would put a tmpfs on /tmp: a file there would live in the sandbox's memory,
    and one bigger than the tariff's 512 MiB would end the sandbox.  brigd mounts /tmp
    from the sandbox's disk, as in a container: 700 MiB fit, and the disk bounds it."""
    with Sandbox(api) as sb:
        assert "tmpfs" not in sb.exec("grep ' /tmp ' /proc/mounts")["stdout"]
        r = sb.exec("dd if=/dev/zero of=/tmp/big bs=1M count=700 2>/dev/null; echo rc=$?; "
                    "rm /tmp/big", timeout=120)
        assert r["stdout"] == "rc=0\n", r
        r = sb.exec("dd if=/dev/zero of=/tmp/big bs=1M count=3000 2>&1; echo rc=$?; "
                    "rm /tmp/big", timeout=200)
        assert "rc=0" not in r["stdout"] and "space" in r["stdout"], r
        assert sb.exec("echo alive")["stdout"] == "alive\n"


def test_idle_timeout_ends_it(api):
    sid = api.create("minimal", idle_timeout=1)["id"]
    # Until its end is complete (deleting is still a sandbox of the account's list).
    wait_for(lambda: api.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "deleted",
             timeout=30, what="idle timeout")
    assert api.ok("GET", f"/v1/sandboxes/{sid}").json()["reason"] == "idle_timeout"


def test_delete_leaves_no_runsc_state_or_process(api, daemon):
    sid = api.create("minimal")["id"]
    assert sid in runsc_containers(daemon.state_dir)
    assert runsc_processes(daemon.state_dir)
    api.delete(sid)
    assert leftovers(daemon.state_dir) == []  # runsc's state and processes included


def test_kill_9_brigd_reattaches_and_cleans(fresh_daemon):
    d = fresh_daemon.start()
    a = d.api()
    live = a.create("minimal")["id"]
    dead = a.create("minimal")["id"]
    a.put_file(live, "/root/kept", b"kept")
    with open(os.path.join(d.state_dir, "sandboxes", dead, "init.pid")) as f:
        dead_pid = int(f.read())
    d.stop(signal.SIGKILL)
    os.kill(dead_pid, signal.SIGKILL)  # its runsc sandbox dies while brigd is down
    d.start()
    a = d.api()
    assert a.ok("GET", f"/v1/sandboxes/{live}").json()["state"] == "running"
    assert a.get_file(live, "/root/kept") == b"kept"
    assert a.exec(live, "uname -r")["stdout"].strip() != os.uname().release
    # Its network taken back: the host link is there and brigd re-registered it (when this
    # brigd has networking: another brigd of the same namespace, the session's, may hold it).
    if "net: pool" in d.log():
        assert brigtest.host_link(live) in brigtest.net_links()
        assert "network after restart" not in d.log()
        assert "inet " in a.exec(live, "ip addr show eth0")["stdout"]
    gone = a.ok("GET", f"/v1/sandboxes/{dead}").json()
    assert gone["state"] == "deleted" and gone["reason"] == "lost_on_restart"
    assert dead not in runsc_containers(d.state_dir)
    a.delete(live)
    assert leftovers(d.state_dir) == []


def test_lost_runsc_state_still_leaves_nothing(fresh_daemon):
    """runsc's state of a sandbox is gone while brigd is down (a crash between runsc's run
    and its state's write, a state dir restored from a backup): runsc can no longer name
    its Sentry and gofer, and the restart ends the sandbox by its cgroup instead."""
    d = fresh_daemon.start()
    a = d.api()
    sid = a.create("minimal")["id"]
    assert sid in runsc_containers(d.state_dir)
    d.stop(signal.SIGKILL)
    root = os.path.join(d.state_dir, "runsc")
    for name in os.listdir(root):
        if sid in name:
            os.remove(os.path.join(root, name))
    assert runsc_processes(d.state_dir)  # its Sentry and gofer run on
    d.start()
    a = d.api()
    gone = a.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert gone["state"] == "deleted", gone
    assert leftovers(d.state_dir) == []


def test_without_runsc_gvisor_is_refused_naming_it(tmp_path):
    d = brigtest.Brigd(str(tmp_path / "state"), extra_args=["--runsc", "/nonexistent/runsc"]).start()
    try:
        a = d.api()
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal"})
        assert r.status == 400, r.body
        msg = r.json()["error"]["message"]
        assert "gvisor" in msg and "runsc" in msg and "/nonexistent/runsc" in msg, msg
        assert a.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
        sb = a.create("minimal", isolation="container")  # never silently downgraded, but
        a.delete(sb["id"])                                # containers still run
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_runsc_settings_reach_runsc(tmp_path):
    """runsc_platform, runsc_overlay and runsc_directfs (docs/operations.md) are what runsc
    runs with: its processes' command lines say so, and with no overlay of gVisor's a
    write to the sandbox's root lands as a file of the host's writable layer (owned by
    the sandbox's root id), where gVisor's own overlay keeps it in its file store."""
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nrunsc_platform = ptrace\nrunsc_overlay = none\n"
                   "runsc_directfs = off\n")
    d = brigtest.Brigd(str(tmp_path / "state"), extra_args=["--config", str(cfg)]).start()
    try:
        a = d.api()
        sid = a.create("minimal")["id"]
        argv = [open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
                for p in runsc_processes(d.state_dir)]
        assert argv and all(b"--platform=ptrace" in v and b"--overlay2=none" in v
                            and b"--directfs=false" in v for v in argv), argv
        assert a.exec(sid, "echo hi > /written; cat /written")["stdout"] == "hi\n"
        upper = os.path.join(d.state_dir, "sandboxes", sid, "disk", "upper")
        with open(os.path.join(upper, "written")) as f:
            assert f.read() == "hi\n"
        assert not [n for n in os.listdir(upper) if n.startswith(".gvisor.filestore")]
        assert os.stat(os.path.join(upper, "written")).st_uid >= 65536
        a.delete(sid)
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []
