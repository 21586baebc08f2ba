"""Commands, complete: streaming, stdin, background processes, signals, PTY, users,
limits and timeouts — through the REST API of a real brigd."""

import base64
import concurrent.futures
import http.client
import json
import os
import time

import pytest

from brigtest import Brigd, Sandbox, sandbox_processes, wait_for


def stream(api, path, body=None, method="POST"):
    """Opens an NDJSON stream; returns (connection, response)."""
    conn = http.client.HTTPConnection(api.host, api.port, timeout=120)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={
        "Authorization": f"Bearer {api.key}", "Accept": "application/x-ndjson"})
    r = conn.getresponse()
    return conn, r


def events(resp):
    for line in resp:
        yield json.loads(line)


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


# ---- streaming ------------------------------------------------------------------

def test_stream_delivers_output_while_the_command_runs(api):
    with Sandbox(api) as sb:
        cmd = ("echo first; while [ ! -e /tmp/go ]; do sleep 0.01; done; "
               "echo second >&2; exit 5")
        conn, r = stream(api, f"/v1/sandboxes/{sb.id}/exec", {"cmd": cmd})
        assert r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson"
        ev = events(r)
        start = next(ev)
        assert start["type"] == "start" and start["pid"] > 1
        assert next(ev) == {"type": "stdout", "data": "first\n"}
        # The command is still waiting for us: the stream is live, not replayed.
        assert sb.exec("touch /tmp/go")["exit_code"] == 0
        assert next(ev) == {"type": "stderr", "data": "second\n"}
        end = next(ev)
        assert end["type"] == "exit" and end["exit_code"] == 5 and end["timed_out"] is False
        assert list(ev) == []
        conn.close()


def test_a_command_cut_off_by_its_sandboxs_end_says_so(api):
    """An exec in flight when its sandbox is deleted ends with a conflict that names
    the reason, not with an agent protocol error: plain and streamed."""
    sid = api.create("minimal")["id"]
    conn, r = stream(api, f"/v1/sandboxes/{sid}/exec", {"cmd": "echo up; exec sleep 600"})
    ev = events(r)
    assert next(ev)["type"] == "start"
    assert next(ev) == {"type": "stdout", "data": "up\n"}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        plain = pool.submit(api.request, "POST", f"/v1/sandboxes/{sid}/exec",
                            {"cmd": "echo > /tmp/plain; exec sleep 600"})
        wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sid}/files?path=/tmp/plain").status
                 == 200, what="the plain exec to start")
        api.delete(sid)
        got = plain.result(timeout=60)
    msg = f"sandbox {sid} ended while the request ran (deleted_by_api)"
    assert got.status == 409, got.body
    assert got.json()["error"] == {"code": "conflict", "message": msg}
    assert list(ev) == [{"type": "error", "code": "conflict", "message": msg}]
    conn.close()


def test_stream_text_and_binary_chunks(api):
    with Sandbox(api) as sb:
        # A two-byte character written in two halves, then bytes that are not text.
        cmd = "printf '\\303'; sleep 0.2; printf '\\251\\n'; printf '\\377\\000' >&2"
        conn, r = stream(api, f"/v1/sandboxes/{sb.id}/exec", {"cmd": cmd})
        out, err = b"", b""
        for e in events(r):
            if e["type"] in ("stdout", "stderr"):
                raw = (base64.b64decode(e["data"]) if e.get("encoding") == "base64"
                       else e["data"].encode())
                if e["type"] == "stdout":
                    assert "encoding" not in e  # é arrived whole, as text
                    out += raw
                else:
                    err += raw
        conn.close()
        assert out == "\u00e9\n".encode() and err == b"\xff\x00"


def test_stream_errors_before_start_are_http_errors(api):
    with Sandbox(api) as sb:
        conn, r = stream(api, f"/v1/sandboxes/{sb.id}/exec", {"cmd": "true", "cwd": "/nowhere"})
        assert r.status == 400 and "nowhere" in json.loads(r.read())["error"]["message"]
        conn.close()


def test_disconnecting_a_foreground_stream_kills_the_command(api):
    with Sandbox(api) as sb:
        conn, r = stream(api, f"/v1/sandboxes/{sb.id}/exec",
                         {"cmd": "sleep 600 & echo $!; wait", "timeout": 0})
        ev = events(r)
        assert next(ev)["type"] == "start"
        sleeper = int(next(ev)["data"])
        conn.close()
        wait_for(lambda: sb.exec(f"test -e /proc/{sleeper}")["exit_code"] != 0,
                 what="the sleep to be killed after the client left")


# ---- stdin, users, limits -------------------------------------------------------

def test_foreground_stdin_text_and_binary(api):
    with Sandbox(api) as sb:
        assert sb.exec("cat", stdin="line one\nline two\n")["stdout"] == "line one\nline two\n"
        data = os.urandom(200000)
        r = sb.exec("sha256sum", stdin=base64.b64encode(data).decode(), stdin_encoding="base64")
        import hashlib
        assert r["stdout"].split()[0] == hashlib.sha256(data).hexdigest()


def test_stdin_not_read_does_not_hang(api):
    with Sandbox(api) as sb:
        r = sb.exec("echo ignored", stdin="x" * 500000, timeout=20)
        assert r["stdout"] == "ignored\n" and r["exit_code"] == 0


def test_exec_as_unprivileged_user(api):
    with Sandbox(api, "base") as sb:
        r = sb.exec("id -un; id -u; echo $HOME; pwd; touch /etc/x", user="user")
        lines = r["stdout"].splitlines()
        assert lines[:4] == ["user", "1000", "/home/user", "/home/user"]
        assert r["exit_code"] != 0 and "Permission denied" in r["stderr"]
        assert sb.exec("id -un")["stdout"] == "root\n"
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/exec", {"cmd": "id", "user": "nosuch"})
        assert r.status == 400


def test_output_limit_truncates_without_blocking(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\noutput_limit_bytes = 4096\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        api = d.api()
        with Sandbox(api) as sb:
            r = sb.exec("head -c 1000000 /dev/zero | tr '\\0' a; echo done >&2")
            assert len(r["stdout"]) == 4096 and r["stdout_truncated"] is True
            assert r["stderr"] == "done\n" and "stderr_truncated" not in r
    finally:
        d.stop()


def test_heavy_output_does_not_grow_brigd(api, daemon):
    """`yes` for 10 s through a buffered exec: gigabytes pass through brigd, which
    keeps 10 MiB of them; its resident size must stay within 64 MiB of before."""
    with Sandbox(api) as sb:
        sb.exec("true")
        before = rss_kib(daemon.proc.pid)
        r = sb.exec("timeout 10 yes; yes | head -c 3G > /dev/null; echo ok >&2",
                    timeout=60)
        after = rss_kib(daemon.proc.pid)
        print(f"yes for 10 s + 3 GB piped: brigd's RSS grew by {after - before} KiB")
        assert r["stdout_truncated"] is True and r["stderr"].endswith("ok\n")
        assert len(r["stdout"]) == 10 << 20
        assert after - before < 64 * 1024, f"brigd grew by {(after - before) // 1024} MiB"


def test_exec_timeout_kills_grandchild_that_left_the_group(api):
    with Sandbox(api) as sb:
        r = sb.exec("setsid sh -c 'echo $$ > /tmp/gc; exec sleep 600' & sleep 600", timeout=1)
        assert r["timed_out"] is True
        gc = sb.exec("cat /tmp/gc")["stdout"].strip()
        assert gc.isdigit()
        assert sb.exec(f"test -e /proc/{gc}")["exit_code"] == 1


def test_64_concurrent_commands_keep_their_own_output(api):
    with Sandbox(api) as sb:
        def one(i):
            return sb.exec(f"sleep 1; echo {i}; echo err{i} >&2")
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            results = list(pool.map(one, range(64)))
        assert time.monotonic() - t0 < 30
        for i, r in enumerate(results):
            assert (r["stdout"], r["stderr"], r["exit_code"]) == (f"{i}\n", f"err{i}\n", 0)


# ---- background processes ---------------------------------------------------------

def proc_path(sb, pid, tail=""):
    return f"/v1/sandboxes/{sb.id}/processes/{pid}{tail}"


def test_background_process_lifecycle(api):
    with Sandbox(api) as sb:
        r = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec",
                   {"cmd": "echo hello; while [ ! -e /tmp/stop ]; do sleep 0.01; done; "
                           "echo bye >&2; exit 7", "background": True}, expect=(202,))
        p = r.json()
        pid = p["pid"]
        assert p["running"] is True and p["background"] is True
        assert p["started_at"].endswith("Z") and p["exit_code"] is None
        listed = api.ok("GET", f"/v1/sandboxes/{sb.id}/processes").json()["processes"]
        assert pid in [x["pid"] for x in listed]
        # A snapshot of the output so far, then disconnect.
        conn, resp = stream(api, proc_path(sb, pid, "/output?follow=0"), method="GET")
        evs = list(events(resp))
        conn.close()
        assert evs[0]["type"] == "output" and evs[-1] == {"type": "end", "running": True}
        assert {"type": "stdout", "data": "hello\n"} in evs
        # Reconnect and follow: the output again from the start, then live, then exit.
        conn, resp = stream(api, proc_path(sb, pid, "/output"), method="GET")
        ev = events(resp)
        assert next(ev)["type"] == "output"
        assert next(ev) == {"type": "stdout", "data": "hello\n"}
        sb.exec("touch /tmp/stop")
        assert next(ev) == {"type": "stderr", "data": "bye\n"}
        end = next(ev)
        assert end["type"] == "exit" and end["exit_code"] == 7
        conn.close()
        p = api.ok("POST", proc_path(sb, pid, "/wait"), {"timeout": 10}).json()
        assert p["running"] is False and p["exit_code"] == 7 and p["ended_at"].endswith("Z")
        assert api.ok("GET", proc_path(sb, pid)).json()["exit_code"] == 7


def test_background_stdin_and_close(api):
    with Sandbox(api) as sb:
        pid = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec",
                     {"argv": ["sh", "-c", "cat > /tmp/got; echo done"], "background": True},
                     expect=(202,)).json()["pid"]
        assert api.ok("POST", proc_path(sb, pid, "/stdin"), b"part one,").json() == {"bytes": 9}
        api.ok("POST", proc_path(sb, pid, "/stdin"), b" part two")
        api.ok("POST", proc_path(sb, pid, "/stdin/close"), expect=(204,))
        p = api.ok("POST", proc_path(sb, pid, "/wait"), {"timeout": 10}).json()
        assert p["exit_code"] == 0
        assert api.get_file(sb.id, "/tmp/got") == b"part one, part two"
        # Its stdin is gone now.
        assert api.request("POST", proc_path(sb, pid, "/stdin"), b"more").status == 400


def test_signals_and_wait_timeout(api):
    with Sandbox(api) as sb:
        pid = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec",
                     {"cmd": "trap 'echo got-term; exit 3' TERM; while :; do sleep 0.01; done",
                      "background": True}, expect=(202,)).json()["pid"]
        p = api.ok("POST", proc_path(sb, pid, "/wait"), {"timeout": 0.3}).json()
        assert p["running"] is True
        api.ok("POST", proc_path(sb, pid, "/signal"), {"signal": "SIGTERM"}, expect=(204,))
        p = api.ok("POST", proc_path(sb, pid, "/wait"), {"timeout": 10}).json()
        assert p["running"] is False and p["exit_code"] == 3
        pid = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec",
                     {"cmd": "sleep 600", "background": True}, expect=(202,)).json()["pid"]
        api.ok("POST", proc_path(sb, pid, "/signal"), {"signal": "KILL"}, expect=(204,))
        p = api.ok("POST", proc_path(sb, pid, "/wait"), {"timeout": 10}).json()
        assert p["signal"] == 9 and p["exit_code"] == 137
        r = api.request("POST", proc_path(sb, pid, "/signal"), {"signal": "SIGNOPE"})
        assert r.status == 400
        assert api.request("GET", proc_path(sb, 999999)).status == 404
        assert api.request("GET", proc_path(sb, "abc")).status == 404


def test_background_buffer_drops_oldest(api):
    with Sandbox(api) as sb:
        pid = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec",
                     {"cmd": "seq 1 200000; echo last", "background": True,
                      "buffer_bytes": 65536}, expect=(202,)).json()["pid"]
        api.ok("POST", proc_path(sb, pid, "/wait"), {"timeout": 30})
        conn, resp = stream(api, proc_path(sb, pid, "/output"), method="GET")
        evs = list(events(resp))
        conn.close()
        assert evs[0]["type"] == "output" and evs[0]["dropped_bytes"] > 1000000
        out = "".join(e["data"] for e in evs if e["type"] == "stdout")
        assert len(out) <= 65536 and out.endswith("199999\n200000\nlast\n")
        assert evs[-1]["type"] == "exit"


def test_pty_session_with_python(api):
    with Sandbox(api, "base") as sb:
        p = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec",
                   {"argv": ["python3", "-q"], "pty": {"cols": 80, "rows": 24},
                    "background": True}, expect=(202,)).json()
        assert p["pty"] is True
        pid = p["pid"]
        conn, resp = stream(api, proc_path(sb, pid, "/output"), method="GET")
        ev = events(resp)
        seen = ""

        def read_until(text):
            nonlocal seen
            while text not in seen:
                e = next(ev)
                assert e["type"] != "stderr"  # a terminal has one stream
                if e["type"] == "stdout":
                    seen += (base64.b64decode(e["data"]).decode(errors="replace")
                             if e.get("encoding") else e["data"])
        read_until(">>> ")
        api.ok("POST", proc_path(sb, pid, "/stdin"), b"print(6 * 7)\n")
        read_until("42")
        api.ok("POST", proc_path(sb, pid, "/resize"), {"cols": 100, "rows": 30}, expect=(204,))
        api.ok("POST", proc_path(sb, pid, "/stdin"),
               b"import os; print(os.get_terminal_size())\n")
        read_until("columns=100, lines=30")
        api.ok("POST", proc_path(sb, pid, "/stdin"), b"exit(4)\n")
        for e in ev:
            if e["type"] == "exit":
                assert e["exit_code"] == 4
                break
        conn.close()
        r = api.request("POST", proc_path(sb, pid, "/resize"), {"cols": 0, "rows": 5})
        assert r.status == 400


# ---- spare agent connections (sandbox/spares.c) ---------------------------------

def idle_handlers(sid):
    """Host pids of the agent's handlers in sandbox sid that wait for their request:
    brig-agent processes blocked in read(2) (syscall 0; PID 1 and supervisors poll)."""
    found = []
    for p in sandbox_processes([sid]):
        try:
            with open(f"/proc/{p}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{p}/syscall") as f:
                nr = f.read().split()[0]
        except OSError:
            continue
        if comm == "brig-agent" and nr == "0":
            found.append(p)
    return found


def test_an_exec_leaves_spare_connections_and_survives_their_death(api):
    """After a command brigd keeps agent connections ready (handlers waiting for a
    request); ones whose handler died are never handed out: the next command works."""
    with Sandbox(api) as sb:
        assert sb.exec(argv=["true"])["exit_code"] == 0
        spares = wait_for(lambda: len(idle_handlers(sb.id)) >= 2 and idle_handlers(sb.id),
                          what="two spare connections")
        for p in spares:
            os.kill(p, 9)
        wait_for(lambda: not set(spares) & set(idle_handlers(sb.id)),
                 what="the killed handlers to be gone")
        for _ in range(3):
            r = sb.exec(argv=["sh", "-c", "echo ok"])
            assert (r["exit_code"], r["stdout"]) == (0, "ok\n")
        wait_for(lambda: len(idle_handlers(sb.id)) >= 2, what="new spare connections")
