"""The walking skeleton end to end: real brigd, real runc, real namespaces.

Every test deletes what it creates; the `api` fixture asserts afterwards that no
container, mount, directory, cgroup or process of a sandbox is left."""

import base64
import concurrent.futures
import hashlib
import io
import os
import signal
import subprocess
import time
import urllib.parse
import zipfile

import pytest

from brigtest import ApiError, Api, Brigd, Sandbox, leftovers, sandbox_processes, wait_for


# ---- auth and errors -----------------------------------------------------------

def test_healthz_is_public(api):
    r = api.request("GET", "/healthz", key=None)
    assert r.status == 200
    assert r.json()["status"] == "ok"


@pytest.mark.parametrize("key, header", [
    (None, None),
    ("brig_not-a-real-key", None),
    (None, "Basic dXNlcjpwYXNz"),
    (None, "Bearer "),
])
def test_bad_keys_get_401(api, key, header):
    headers = {"Authorization": header} if header else {}
    r = api.request("GET", "/v1/sandboxes", key=key, headers=headers)
    assert r.status == 401
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers.get("www-authenticate") == "Bearer"


def test_unknown_sandbox_is_404(api):
    for method, path, body in [
        ("GET", "/v1/sandboxes/sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa", None),
        ("DELETE", "/v1/sandboxes/sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa", None),
        ("POST", "/v1/sandboxes/nonsense/exec", {"cmd": "true"}),
        ("GET", "/v1/sandboxes/../../etc/passwd", None),
        ("GET", "/v1/sandboxes/sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa/files?path=/etc/passwd", None),
    ]:
        r = api.request(method, path, body)
        assert r.status == 404, (method, path, r.body)
        assert r.json()["error"]["code"] == "not_found"


def test_unknown_route_and_method(api):
    r = api.request("GET", "/v1/nothing")
    assert r.status == 404 and r.json()["error"]["code"] == "not_found"
    r = api.request("PATCH", "/v1/sandboxes")
    assert r.status == 405 and r.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("body, needle", [
    (b"{not json", "not valid JSON"),
    (b"[1,2,3]", "JSON object"),
    (b'{"template": 5}', "'template' must be a string"),
    (b'{"template": "no-such-template"}', "no template named"),
    (b'{"templat": "minimal"}', "unknown field"),
])
def test_create_rejects_bad_bodies(api, body, needle):
    r = api.request("POST", "/v1/sandboxes", body)
    assert r.status == 400, r.body
    assert needle in r.json()["error"]["message"]


def test_oversized_body_is_413(api):
    r = api.request("POST", "/v1/sandboxes", b"{" + b" " * (2 << 20) + b"}")
    assert r.status == 413
    assert r.json()["error"]["code"] == "too_large"


def test_exec_and_file_input_errors(api):
    with Sandbox(api) as sb:
        for body, needle in [
            ({}, "exactly one of"),
            ({"cmd": "true", "timeout": -5}, "timeout"),
            ({"cmd": "true", "cwd": "relative"}, "absolute"),
            ({"argv": ["true"], "env": {"A=B": "x"}}, "env name"),
            ({"cmd": "true", "cwd": "/does/not/exist"}, "/does/not/exist"),
        ]:
            r = api.request("POST", f"/v1/sandboxes/{sb.id}/exec", body)
            assert r.status == 400, (body, r.body)
            assert needle in r.json()["error"]["message"], r.body
        base = f"/v1/sandboxes/{sb.id}/files"
        assert api.request("PUT", base, b"x").status == 400            # no path
        assert api.request("PUT", base + "?path=rel/x", b"x").status == 400
        assert api.request("PUT", base + "?path=%2Fa%00b", b"x").status == 400
        assert api.request("PUT", base + "?path=/tmp/x&mode=999", b"x").status == 400
        assert api.request("GET", base + "?path=/no/such/file").status == 404
        r = api.request("GET", base + "?path=/tmp")
        assert r.status == 400 and "directory" in r.json()["error"]["message"]
        r = api.request("PUT", base + "?path=/tmp", b"x")
        assert r.status == 400 and "directory" in r.json()["error"]["message"]


# ---- lifecycle ------------------------------------------------------------------

def test_create_list_get_delete(api):
    sb = api.create("minimal")
    try:
        assert sb["id"].startswith("sbx_") and len(sb["id"]) == 30
        assert sb["state"] == "running" and sb["template"] == "minimal"
        assert sb["created_at"].endswith("Z")
        ids = [s["id"] for s in api.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
        assert sb["id"] in ids
        assert api.ok("GET", f"/v1/sandboxes/{sb['id']}").json()["id"] == sb["id"]
    finally:
        assert api.request("DELETE", f"/v1/sandboxes/{sb['id']}").status == 204
    # An ended sandbox stays queryable (retention period): state, reason, cost.
    gone = api.ok("GET", f"/v1/sandboxes/{sb['id']}").json()
    assert gone["state"] == "deleted" and gone["reason"] == "deleted_by_api"
    assert gone["cost_micro_usd"] == 60 * 10 and gone["cost"] == "$0.000600"  # 60 s minimum
    assert gone["deleted_at"].endswith("Z")
    assert api.request("DELETE", f"/v1/sandboxes/{sb['id']}").status == 404
    assert api.request("POST", f"/v1/sandboxes/{sb['id']}/exec", {"cmd": "true"}).status == 404


def test_recently_ended_sandboxes_are_listed_by_the_server(api, tmp_path):
    """GET /v1/sandboxes?state=ended: the caller's ended sandboxes, the last ended first, page
    by page, from `since` and within the retention period; a sandbox key sees its project's
    only (the dashboard's "recently ended" comes from here, not from the browser)."""
    project = api.ok("POST", "/v1/projects", {"name": "ended-list"}).json()["id"]
    k = api.ok("POST", f"/v1/projects/{project}/keys", {"scope": "sandbox"}).json()
    sk = Api(api.base_url, k["key"])
    try:
        ids = [sk.create("minimal")["id"] for _ in range(3)]
        live = sk.create("minimal")["id"]
        for sid in ids:
            sk.delete(sid)
        first_end = sk.ok("GET", f"/v1/sandboxes/{ids[0]}").json()["deleted_at"]
        listed = sk.ok("GET", "/v1/sandboxes?state=ended").json()
        assert [s["id"] for s in listed["sandboxes"]] == ids[::-1] and listed["next_before"] is None
        one = listed["sandboxes"][0]
        assert one["state"] == "deleted" and one["end_reason"] == "deleted"
        assert one["reason"] == "deleted_by_api" and one["cost_micro_usd"] == 600
        assert set(one) >= {"project_id", "template", "tariff", "isolation", "created_at",
                            "deleted_at", "cost"}
        # the live list and the ended one do not overlap
        assert [s["id"] for s in sk.ok("GET", "/v1/sandboxes").json()["sandboxes"]] == [live]
        assert sk.ok("GET", "/v1/sandboxes?state=live").json()["sandboxes"][0]["id"] == live
        # page by page: next_before is the next page's `before`
        page = sk.ok("GET", "/v1/sandboxes?state=ended&limit=2").json()
        assert [s["id"] for s in page["sandboxes"]] == [ids[2], ids[1]]
        assert page["next_before"] == ids[1]
        page = sk.ok("GET", f"/v1/sandboxes?state=ended&limit=2&before={ids[1]}").json()
        assert [s["id"] for s in page["sandboxes"]] == [ids[0]] and page["next_before"] is None
        # since: ended at or after it
        later = sk.ok("GET", "/v1/sandboxes?" + urllib.parse.urlencode(
            {"state": "ended", "since": first_end})).json()["sandboxes"]
        assert ids[0] in [s["id"] for s in later]
        assert sk.ok("GET", "/v1/sandboxes?state=ended&since=2999-01-01T00:00:00Z"
                     ).json()["sandboxes"] == []
        # the admin key sees them too; a sandbox key of another project does not
        assert {s["id"] for s in api.ok("GET", "/v1/sandboxes?state=ended&limit=1000").json()
                ["sandboxes"]} >= set(ids)
        other = api.ok("GET", "/v1/account").json()["default_project_id"]
        ok = api.ok("POST", f"/v1/projects/{other}/keys", {"scope": "sandbox"}).json()
        assert not {s["id"] for s in Api(api.base_url, ok["key"]).ok(
            "GET", "/v1/sandboxes?state=ended&limit=1000").json()["sandboxes"]} & set(ids)
        r = Api(api.base_url, ok["key"]).request("GET", f"/v1/sandboxes?state=ended&before={ids[1]}")
        assert r.status == 400 and "before" in r.json()["error"]["message"]
        api.ok("DELETE", f"/v1/projects/{other}/keys/{ok['id']}", expect=(204,))
        for bad in ("state=gone", "state=ended&limit=0", "state=ended&limit=1001",
                    "state=ended&since=never", f"state=ended&before=sbx_{'a' * 26}",
                    f"state=ended&before={live}", "limit=5", "since=0"):
            r = sk.request("GET", f"/v1/sandboxes?{bad}")
            assert r.status == 400 and r.json()["error"]["code"] == "invalid_request", bad
        assert api.request("GET", "/v1/sandboxes?state=ended", key=None).status == 401
    finally:
        api.delete(live)
        api.ok("DELETE", f"/v1/projects/{project}/keys/{k['id']}", expect=(204,))
    # Past the retention period an ended sandbox is listed no more (nor found by its id).
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nretention = 0\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        sid = a.create("minimal")["id"]
        a.delete(sid)
        # (retention 0: gone from the next millisecond on)
        wait_for(lambda: a.ok("GET", "/v1/sandboxes?state=ended").json()["sandboxes"] == [],
                 what="the ended sandbox to leave the list")
        assert a.request("GET", f"/v1/sandboxes/{sid}").status == 404
    finally:
        d.stop()


def test_delete_answers_once_every_process_is_dead(api, daemon):
    """The host-side cleanup may follow the answer; the processes may not."""
    sid = api.create("minimal")["id"]
    api.exec(sid, "sleep 1000 >/dev/null 2>&1 & sleep 1001 >/dev/null 2>&1 &")
    pids = sandbox_processes([sid])
    assert len(pids) >= 3, pids  # the agent and the two sleeps
    api.delete(sid)
    alive = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state not in ("Z", "X"):  # a zombie is dead, waiting to be reaped
            alive.append((p, state))
    assert alive == [], alive
    assert leftovers(daemon.state_dir) == []  # and the cleanup follows


def test_sandboxes_run_in_parallel(api):
    def one(i):
        with Sandbox(api) as sb:
            r = sb.exec(f"echo {i}; hostname")
            return r["stdout"]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        outs = list(pool.map(one, range(12)))
    assert outs == [f"{i}\nsandbox\n" for i in range(12)]


# ---- exec -----------------------------------------------------------------------

def test_exec_stdout_stderr_exit_code(api):
    with Sandbox(api) as sb:
        r = sb.exec("echo out; echo err >&2; exit 3")
        assert (r["exit_code"], r["stdout"], r["stderr"]) == (3, "out\n", "err\n")
        assert r["timed_out"] is False and r["signal"] is None
        assert isinstance(r["duration_ms"], int)


def test_exec_argv_is_not_a_shell(api):
    with Sandbox(api) as sb:
        r = sb.exec(argv=["echo", "a b", "$HOME", "'q'", ";", "|"])
        assert r["stdout"] == "a b $HOME 'q' ; |\n"


def test_exec_cwd_and_env(api):
    with Sandbox(api) as sb:
        r = sb.exec("pwd; echo $GREETING", cwd="/tmp", env={"GREETING": "hello there"})
        assert r["stdout"] == "/tmp\nhello there\n"


def test_exec_missing_program_is_127(api):
    with Sandbox(api) as sb:
        r = sb.exec(argv=["/no/such/program"])
        assert r["exit_code"] == 127
        assert "/no/such/program" in r["stderr"]


def test_exec_killed_by_signal(api):
    with Sandbox(api) as sb:
        r = sb.exec("kill -9 $$")
        assert r["exit_code"] == 137 and r["signal"] == 9 and r["timed_out"] is False


def test_exec_timeout_kills_the_command(api):
    with Sandbox(api) as sb:
        t0 = time.monotonic()
        r = sb.exec("sleep 600", timeout=1)
        elapsed = time.monotonic() - t0
        assert r["timed_out"] is True and r["exit_code"] == 137
        assert 0.9 <= r["duration_ms"] / 1000 < 5 and elapsed < 10
        ps = sb.exec("ps -o pid,args")["stdout"]
        assert "sleep 600" not in ps


def test_exec_binary_output_is_base64(api):
    import base64
    with Sandbox(api) as sb:
        r = sb.exec("printf '\\377\\000\\001abc'")
        assert r["stdout_encoding"] == "base64"
        assert base64.b64decode(r["stdout"]) == b"\xff\x00\x01abc"
        r = sb.exec("printf 'h\\303\\251llo'")  # valid UTF-8 stays text
        assert r["stdout"] == "h\u00e9llo" and "stdout_encoding" not in r


def test_exec_background_job_does_not_hold_the_result(api):
    with Sandbox(api) as sb:
        t0 = time.monotonic()
        r = sb.exec("sleep 300 & echo started", timeout=30)
        assert r["stdout"] == "started\n" and r["exit_code"] == 0
        assert time.monotonic() - t0 < 10


def test_sandbox_isolation_basics(api):
    """Own hostname, pid namespace (the agent is PID 1) and network namespace: its
    loopback and, when brigd does networking, its own link to the host."""
    with Sandbox(api) as sb:
        r = sb.exec("hostname; cat /proc/1/cmdline | tr '\\0' ' '; echo; ls -1 /sys/class/net | "
                    "tr '\\n' ' '")
        host, init, nets = r["stdout"].split("\n")[:3]
        assert host == "sandbox"
        assert init.startswith("/.brig/brig-agent")
        networked = api.request("GET", "/healthz", key=None).json()["network"]
        assert sorted(nets.split()) == (["eth0", "lo"] if networked else ["lo"])
        # The host's files are not there.
        assert sb.exec("test -e /work || test -e /var/lib/brig/brig.db")["exit_code"] == 1


# ---- files ----------------------------------------------------------------------

def test_file_round_trip_1mib_binary(api):
    data = os.urandom(1 << 20)
    with Sandbox(api) as sb:
        api.put_file(sb.id, "/root/deep/er/blob.bin", data, mode="0640")
        assert api.get_file(sb.id, "/root/deep/er/blob.bin") == data
        r = sb.exec("stat -c '%a %s' /root/deep/er/blob.bin; sha256sum /root/deep/er/blob.bin")
        mode_size, digest = r["stdout"].splitlines()
        assert mode_size == f"640 {len(data)}"
        import hashlib
        assert digest.split()[0] == hashlib.sha256(data).hexdigest()


def test_file_overwrite_and_empty_file(api):
    with Sandbox(api) as sb:
        api.put_file(sb.id, "/tmp/f", b"first version, longer")
        api.put_file(sb.id, "/tmp/f", b"second")
        assert api.get_file(sb.id, "/tmp/f") == b"second"
        api.put_file(sb.id, "/tmp/empty", b"")
        assert api.get_file(sb.id, "/tmp/empty") == b""
        # No temporary files are left next to the target.
        assert sb.exec("ls -A /tmp")["stdout"].split() == ["empty", "f"]


# ---- the base template: the seed loop ------------------------------------------

SEED = b"""import sys, platform
total = sum(i * i for i in range(1000))
print("sum of squares:", total)
print("python", platform.python_version(), file=sys.stderr)
"""


def test_seed_loop_on_base(api):
    with Sandbox(api, "base") as sb:
        api.put_file(sb.id, "/root/task.py", SEED)
        r = sb.exec("python3 /root/task.py", timeout=55)
        assert r["exit_code"] == 0, r
        assert r["stdout"] == "sum of squares: 332833500\n"
        assert r["stderr"].startswith("python 3.13")


def probe_wheel():
    """A pure-Python wheel made here (no index is reachable): brig_probe 1.0, VALUE = 42."""
    files = {
        "brig_probe/__init__.py": b"VALUE = 42\n",
        "brig_probe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: brig-probe\nVersion: 1.0\n",
        "brig_probe-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: brig-test\n"
                                          b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    files["brig_probe-1.0.dist-info/RECORD"] = (record + "brig_probe-1.0.dist-info/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_pip_install_as_root_and_in_a_venv_on_base(api):
    # Debian's PEP 668 marker is gone from base: root's pip installs without
    # --break-system-packages; a venv works as well.
    whl = "/root/brig_probe-1.0-py3-none-any.whl"
    with Sandbox(api, "base") as sb:
        api.put_file(sb.id, whl, probe_wheel())
        r = sb.exec(f"python3 -m pip install --no-index {whl} && "
                    "cd / && python3 -c 'import brig_probe; print(brig_probe.VALUE)'", timeout=55)
        assert r["exit_code"] == 0, r
        assert r["stdout"].endswith("\n42\n"), r
        assert "externally-managed" not in r["stderr"], r
        r = sb.exec(f"python3 -m venv /tmp/v && /tmp/v/bin/pip install --no-index {whl} && "
                    "/tmp/v/bin/python -c 'import brig_probe, sys; print(brig_probe.VALUE, sys.prefix)'",
                    timeout=55)
        assert r["exit_code"] == 0, r
        assert r["stdout"].endswith("\n42 /tmp/v\n"), r


def test_base_has_node_22_npm_git_curl(api):
    with Sandbox(api, "base") as sb:
        r = sb.exec("node --version; npm --version; git --version; curl --version | head -1; "
                    "python3 -m pip --version; id user")
        assert r["exit_code"] == 0, r
        lines = r["stdout"].splitlines()
        assert lines[0].startswith("v22.")
        assert lines[1].startswith("10.")
        assert lines[2].startswith("git version")
        assert lines[3].startswith("curl ")
        assert lines[4].startswith("pip ")
        assert "uid=1000(user)" in lines[5]
        r = sb.exec(argv=["node", "-e", "console.log(JSON.stringify({ok: 1 + 1}))"])
        assert r["stdout"] == '{"ok":2}\n'


def test_python_traceback_is_a_result(api):
    with Sandbox(api, "base") as sb:
        api.put_file(sb.id, "/root/bad.py", b"raise ValueError('boom')\n")
        r = sb.exec("python3 /root/bad.py")
        assert r["exit_code"] == 1
        assert "ValueError: boom" in r["stderr"]


# ---- restarts --------------------------------------------------------------------

def test_restart_reattaches_live_sandbox(fresh_daemon):
    d = fresh_daemon.start()
    api = d.api()
    sid = api.create("minimal")["id"]
    api.put_file(sid, "/root/state", b"kept")
    d.stop(signal.SIGKILL)  # a crash: no chance to clean up
    d.start()
    api = d.api()
    assert api.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "running"
    assert api.get_file(sid, "/root/state") == b"kept"
    assert api.exec(sid, "echo alive")["stdout"] == "alive\n"
    api.delete(sid)
    assert leftovers(d.state_dir) == []


def test_restart_after_clean_stop_reattaches(fresh_daemon):
    d = fresh_daemon.start()
    sid = d.api().create("minimal")["id"]
    d.stop()  # SIGTERM: brigd exits 0 and leaves sandboxes running
    d.start()
    assert d.api().exec(sid, "echo still here")["stdout"] == "still here\n"
    d.api().delete(sid)


def test_restart_cleans_up_dead_sandbox(fresh_daemon):
    d = fresh_daemon.start()
    api = d.api()
    sid = api.create("minimal")["id"]
    with open(os.path.join(d.state_dir, "sandboxes", sid, "init.pid")) as f:
        init = int(f.read())
    d.stop(signal.SIGKILL)
    os.kill(init, signal.SIGKILL)  # the sandbox dies while brigd is down
    d.start()
    api = d.api()
    gone = api.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert gone["state"] == "deleted" and gone["reason"] == "lost_on_restart"
    assert api.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"}).status == 404
    assert leftovers(d.state_dir) == []


def test_restart_removes_unknown_leftovers(fresh_daemon):
    d = fresh_daemon.start()
    d.stop()
    junk = os.path.join(d.state_dir, "sandboxes", "sbx_leftoverleftoverleftover")
    os.makedirs(os.path.join(junk, "upper"))
    d.start()
    assert not os.path.exists(junk)


def test_one_brigd_per_state_dir(fresh_daemon):
    d = fresh_daemon.start()
    sid = d.api().create("minimal")["id"]
    second = subprocess.run(d.argv() + ["--listen", "127.0.0.1:0"], capture_output=True,
                            text=True, timeout=60)
    assert second.returncode != 0
    assert "another brigd is using state dir" in second.stderr, second.stderr
    # Not even --destroy-all touches the sandboxes of a running brigd.
    r = subprocess.run(d.argv() + ["--destroy-all"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "another brigd is using state dir" in r.stderr, r.stderr
    assert d.api().exec(sid, "echo still mine")["stdout"] == "still mine\n"
    d.api().delete(sid)


def test_destroy_all(fresh_daemon):
    d = fresh_daemon.start()
    api = d.api()
    sids = [api.create("minimal")["id"] for _ in range(2)]
    api.exec(sids[0], "sleep 1000 >/dev/null 2>&1 &")  # a process of its own, too
    d.stop()  # sandboxes outlive a clean stop
    assert sorted(d.live_sandboxes()) == sorted(sids)
    assert leftovers(d.state_dir, settle=0) != []
    r = d.destroy_all()
    assert r.returncode == 0, r.stderr
    assert "destroy-all: 2 live sandboxes stopped (0 refused), 0 cleanups unfinished" in r.stderr, r.stderr
    assert d.live_sandboxes() == []
    assert leftovers(d.state_dir) == []
    # Ended as a DELETE ends them: visible with their reason and final charge.
    d.start()
    for sid in sids:
        gone = d.api().ok("GET", f"/v1/sandboxes/{sid}").json()
        assert gone["state"] == "deleted" and gone["reason"] == "destroyed_by_operator", gone
        assert gone["cost_micro_usd"] > 0, gone
    # Nothing to do is not an error.
    d.stop()
    r = d.destroy_all()
    assert r.returncode == 0 and "destroy-all: 0 live sandboxes stopped (0 refused), 0 cleanups unfinished" in r.stderr, r.stderr
# ---- the CLI against the real daemon --------------------------------------------

def cli(api, *args, input=None, check=True):
    from brigtest import BUILD
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)
    r = subprocess.run([os.path.join(BUILD, "brig"), *args], input=input, env=env,
                       capture_output=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"brig {args}: {r.returncode}\n{r.stderr.decode()}")
    return r


def test_cli_lifecycle(api, tmp_path):
    sid = cli(api, "create", "--template", "minimal").stdout.decode().strip()
    try:
        assert sid.startswith("sbx_")
        assert sid in cli(api, "ls").stdout.decode()
        r = cli(api, "exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 5", check=False)
        assert (r.returncode, r.stdout, r.stderr) == (5, b"out\n", b"err\n")
        local = tmp_path / "in.bin"
        local.write_bytes(os.urandom(300000))
        cli(api, "upload", sid, str(local), "/root/in.bin")
        cli(api, "download", sid, "/root/in.bin", str(tmp_path / "out.bin"))
        assert (tmp_path / "out.bin").read_bytes() == local.read_bytes()
        r = cli(api, "download", sid, "/root/missing", str(tmp_path / "nope"), check=False)
        assert r.returncode == 1 and b"404" in r.stderr
        assert not (tmp_path / "nope").exists()
    finally:
        cli(api, "rm", sid)
    assert sid not in cli(api, "ls").stdout.decode()


def test_cli_run_returns_exit_code_and_cleans_up(api):
    r = cli(api, "run", "--template", "minimal", "--", "sh", "-c", "echo hi; exit 7", check=False)
    assert r.returncode == 7 and r.stdout == b"hi\n"
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []


def test_cli_reports_auth_errors(api):
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY="brig_wrong")
    from brigtest import BUILD
    r = subprocess.run([os.path.join(BUILD, "brig"), "ls"], env=env, capture_output=True)
    assert r.returncode == 1
    assert b"401" in r.stderr and b"invalid API key" in r.stderr


# ---- tariffs and the sandbox environment ---------------------------------------

def test_tariffs_are_listed_and_applied(api):
    t = api.ok("GET", "/v1/tariffs").json()
    names = {x["name"]: x for x in t["tariffs"]}
    assert {"small", "medium", "large"} <= set(names) and t["default"] == "small"
    small = names["small"]
    assert (small["vcpus"], small["memory_mib"], small["disk_mib"]) == (1, 512, 2048)
    assert small["price_micro_usd_per_second"] == 10
    with Sandbox(api, tariff="medium") as sb:
        info = api.ok("GET", f"/v1/sandboxes/{sb.id}").json()
        assert info["tariff"] == "medium"
        # The limits of the tariff are in force: memory (cgroup) and disk size.
        r = sb.exec("cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || "
                    "cat /sys/fs/cgroup/memory.max; df -k / | tail -1")
        mem, df = r["stdout"].splitlines()
        assert int(mem) == 2048 << 20
        assert 7_000_000 < int(df.split()[1]) <= 8 << 20
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "tariff": "huge"})
    assert r.status == 400 and "huge" in r.json()["error"]["message"]


def test_sandbox_env_applies_to_every_command(api):
    with Sandbox(api, env={"GREETING": "hi", "MODE": "sandbox"}) as sb:
        assert api.ok("GET", f"/v1/sandboxes/{sb.id}").json()["env"] == ["GREETING", "MODE"]
        assert sb.exec("echo $GREETING $MODE")["stdout"] == "hi sandbox\n"
        # A command's own env wins over the sandbox's.
        assert sb.exec("echo $MODE", env={"MODE": "cmd"})["stdout"] == "cmd\n"
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "env": {"A=B": "x"}})
    assert r.status == 400


def test_concurrent_first_creates_of_a_new_disk_size(tmp_path):
    """The first sandboxes of a disk size format its golden image once, safely,
    however many arrive together."""
    from brigtest import Brigd
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[tariff.odd]\ndisk_mib = 333\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            sbs = list(pool.map(lambda _: a.create("minimal", tariff="odd")["id"], range(4)))
        for sid in sbs:
            assert a.exec(sid, "df -m / | tail -1")["exit_code"] == 0
            a.delete(sid)
    finally:
        d.stop()
