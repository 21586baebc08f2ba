"""brig-agent's protocol (docs/protocol.md), end to end against the real static binary.

The agent runs on the host, not as PID 1, with `--listen <tmp>/a.sock`; a small client
below speaks the framing.  Every command started by these tests carries BRIG_TEST_TAG in
its environment, and the fixture checks after each test that the agent exits 0 on SIGTERM
and leaves no process behind (tagged or descended from it).

No sleeps are used as synchronisation: waits poll for a condition against a deadline.
"""

import json
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest

BUILD = os.environ.get("BRIG_BUILD", "/work/main/build")
AGENT = os.path.join(BUILD, "brig-agent")

HELLO, CONTROL, DATA = 1, 2, 3
CHUNK = 64 * 1024


def wait_for(cond, timeout=10.0, what="condition"):
    """Polls cond() until it returns a true value; fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def alive(pid):
    """True while /proc/<pid> exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def proc_table():
    """{pid: (ppid, starttime)} for every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(d)] = (int(fields[1]), fields[19])
    return out


def descendants(pid):
    """{pid: starttime} of every descendant of pid."""
    table = proc_table()
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, (ppid, start) in table.items():
            if ppid == p and child not in found:
                found[child] = start
                todo.append(child)
    return found


def tagged(tag):
    """Pids of live processes whose environment holds BRIG_TEST_TAG=tag."""
    needle = f"BRIG_TEST_TAG={tag}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    out.append(int(d))
        except OSError:
            pass
    return out


def frame(ftype, payload=b"", chan=0, flags=0, length=None):
    n = len(payload) if length is None else length
    return struct.pack(">IBBH", n, ftype, flags, chan) + payload


class Conn:
    """One connection to the agent: framing, handshake, small helpers."""

    def __init__(self, path, hello=True, timeout=30.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.hello = self.handshake() if hello else None

    def close(self):
        self.s.close()

    def send(self, ftype, payload=b"", chan=0):
        self.s.sendall(frame(ftype, payload, chan))

    def send_json(self, obj, ftype=CONTROL):
        self.send(ftype, json.dumps(obj).encode())

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            b = self.s.recv(n - len(buf))
            if not b:
                if not buf:
                    return None
                raise AssertionError("connection closed inside a frame")
            buf += b
        return bytes(buf)

    def recv(self):
        """(type, chan, payload), or None at a clean EOF."""
        hdr = self._recv_exact(8)
        if hdr is None:
            return None
        n, ftype, flags, chan = struct.unpack(">IBBH", hdr)
        assert flags == 0 and ftype in (HELLO, CONTROL, DATA), hdr
        assert n <= (1 << 20)
        if ftype == DATA:
            assert n <= CHUNK, f"DATA frame of {n} bytes"
        else:
            assert chan == 0
        return ftype, chan, self._recv_exact(n) if n else b""

    def recv_json(self):
        f = self.recv()
        assert f is not None, "connection closed, expected a message"
        assert f[0] in (HELLO, CONTROL), f
        return json.loads(f[2])

    def handshake(self, version=1, min_version=1):
        self.send_json(
            {"proto": "brig-agent", "version": version, "min_version": min_version}, HELLO
        )
        f = self.recv()
        assert f is not None and f[0] == HELLO, f
        return json.loads(f[2])

    def closes(self, timeout=10.0):
        """True when the agent ends the connection (EOF or reset) within timeout; what it
        sends before that is returned in self.tail."""
        self.s.settimeout(timeout)
        self.tail = b""
        try:
            while True:
                b = self.s.recv(65536)
                if not b:
                    return True
                self.tail += b
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def expect_eof(self):
        assert self.closes(), "agent did not close the connection"
        assert self.tail == b"", f"unexpected trailing bytes {self.tail[:64]!r}"


class Agent:
    """A running agent.  `wrap` prefixes the command line (e.g. unshare, to make it PID 1
    of a pid namespace); `listen_fd` hands it an already listening socket instead of a
    path, as runc --preserve-fds does."""

    def __init__(self, tmp_path, wrap=(), listen_fd=False):
        self.dir = tmp_path
        self.sock = str(tmp_path / "a.sock")
        self.tag = uuid.uuid4().hex
        self.log = open(tmp_path / "agent.log", "wb")
        self.lsock = None
        if listen_fd:
            self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.lsock.bind(self.sock)
            self.lsock.listen(16)
            args, fds = ["--listen-fd", str(self.lsock.fileno())], (self.lsock.fileno(),)
        else:
            args, fds = ["--listen", self.sock], ()
        self.proc = subprocess.Popen(
            [*wrap, AGENT, *args],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
            pass_fds=fds,
        )
        if self.lsock is not None:
            self.lsock.close()  # the agent has its own copy now
        wait_for(self._ready, 10, "the agent to listen")
        # The process that is the agent (under a wrapper: the wrapper's child).
        self.pid = self.proc.pid
        if wrap:
            self.pid = wait_for(self._wrapped_pid, 10, "the wrapped agent")

    def _wrapped_pid(self):
        for p, (ppid, _) in proc_table().items():
            if ppid == self.proc.pid:
                return p
        return None

    def _ready(self):
        """A completed handshake is how brigd learns that an agent is ready."""
        assert self.proc.poll() is None, "agent exited: " + self.logtext()
        try:
            c = Conn(self.sock, hello=False, timeout=5)
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        try:
            c.handshake()
            return True
        finally:
            c.close()

    def logtext(self):
        return (self.dir / "agent.log").read_text(errors="replace")

    def connect(self, **kw):
        return Conn(self.sock, **kw)

    def ping(self):
        c = self.connect()
        c.send_json({"op": "ping"})
        assert c.recv_json() == {"type": "pong"}
        c.expect_eof()
        c.close()

    def env(self, extra=None):
        e = {"BRIG_TEST_TAG": self.tag}
        e.update(extra or {})
        return e

    def start_exec(self, **req):
        """Sends an exec request; returns (conn, first message)."""
        req["env"] = self.env(req.get("env"))
        c = self.connect()
        c.send_json({"op": "exec", **req})
        return c, c.recv_json()

    def collect(self, c, started):
        """Reads an exec's output and result after `started`."""
        assert started["type"] == "started", started
        assert isinstance(started["pid"], int) and started["pid"] > 0
        out = {1: bytearray(), 2: bytearray()}
        ended = set()
        while True:
            f = c.recv()
            assert f is not None, "connection closed before the exit message"
            ftype, chan, payload = f
            if ftype == DATA:
                assert chan in (1, 2) and chan not in ended, (chan, ended)
                if payload:
                    out[chan] += payload
                else:
                    ended.add(chan)
                continue
            msg = json.loads(payload)
            assert msg["type"] == "exit", msg
            assert ended == {1, 2}, "exit before both channels ended"
            c.expect_eof()
            c.close()
            msg["stdout"], msg["stderr"] = bytes(out[1]), bytes(out[2])
            msg["pid"] = started["pid"]
            return msg

    def exec(self, **req):
        """Runs a command to completion; returns the exit message plus stdout, stderr,
        pid and the wall time it took (or the error message)."""
        t0 = time.monotonic()
        c, first = self.start_exec(**req)
        if first["type"] == "error":
            c.expect_eof()
            c.close()
            return first
        res = self.collect(c, first)
        res["elapsed"] = time.monotonic() - t0
        return res

    def write_file(self, path, data, mode=None, chunk=CHUNK):
        c = self.connect()
        req = {"op": "write_file", "path": path}
        if mode is not None:
            req["mode"] = mode
        c.send_json(req)
        for i in range(0, len(data), chunk):
            c.send(DATA, data[i : i + chunk])
        c.send(DATA, b"")
        ans = c.recv_json()
        c.expect_eof()
        c.close()
        return ans

    def read_file(self, path):
        c = self.connect()
        c.send_json({"op": "read_file", "path": path})
        head = c.recv_json()
        if head["type"] != "file":
            c.expect_eof()
            c.close()
            return head, None
        data = bytearray()
        while True:
            ftype, chan, payload = c.recv()
            assert ftype == DATA and chan == 0
            if not payload:
                break
            data += payload
        c.expect_eof()
        c.close()
        return head, bytes(data)

    def stop(self):
        """SIGTERM, wait for the exit, and check that nothing was left behind."""
        before = descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.terminate()
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("agent did not exit on SIGTERM")
        self.log.close()
        assert rc == 0, f"agent exited {rc}: {self.logtext()}"
        table = proc_table()
        left = [p for p, start in before.items() if p in table and table[p][1] == start and alive(p)]
        assert left == [], f"processes left behind: {left}"
        assert tagged(self.tag) == [], "tagged processes left behind"
        if self.lsock is None:
            assert not os.path.exists(self.sock), "socket not removed"

    def terminate(self):
        os.kill(self.pid, signal.SIGTERM)


@pytest.fixture
def agent(tmp_path):
    assert os.access(AGENT, os.X_OK), f"{AGENT} not built (set BRIG_BUILD)"
    a = Agent(tmp_path)
    yield a
    a.stop()


# ---- handshake ----


def test_handshake_and_ping(agent):
    c = agent.connect()
    assert c.hello["proto"] == "brig-agent"
    assert c.hello["version"] == 1
    assert isinstance(c.hello["agent"], str) and c.hello["agent"]
    assert c.hello["pid"] == agent.pid
    c.send_json({"op": "ping"})
    assert c.recv_json() == {"type": "pong"}
    c.expect_eof()


def test_version_refused(agent):
    c = agent.connect(hello=False)
    c.send_json({"proto": "brig-agent", "version": 99, "min_version": 99}, HELLO)
    ftype, _, payload = c.recv()
    assert ftype == CONTROL
    msg = json.loads(payload)
    assert msg["type"] == "error" and msg["code"] == "version", msg
    c.expect_eof()
    agent.ping()


def test_newer_client_negotiates_down(agent):
    c = agent.connect(hello=False)
    c.send_json({"proto": "brig-agent", "version": 5, "min_version": 1}, HELLO)
    ftype, _, payload = c.recv()
    assert ftype == HELLO and json.loads(payload)["version"] == 1
    c.send_json({"op": "ping"})
    assert c.recv_json() == {"type": "pong"}


def test_probe_connection_is_fine(agent):
    # Connect and close without a word (a readiness probe), then after the handshake.
    agent.connect(hello=False).close()
    agent.connect().close()
    agent.ping()


# ---- exec ----


def test_exec_argv_separates_stdout_and_stderr(agent):
    r = agent.exec(argv=["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert r["stdout"] == b"out\n"
    assert r["stderr"] == b"err\n"
    assert r["exit_code"] == 3 and r["signal"] is None and r["timed_out"] is False
    assert isinstance(r["duration_ms"], int) and r["duration_ms"] >= 0


def test_exec_cmd_runs_in_a_shell(agent):
    r = agent.exec(cmd="echo $((6*7)) | tr 4 x; printf 'e' >&2")
    assert r["stdout"] == b"x2\n" and r["stderr"] == b"e" and r["exit_code"] == 0


@pytest.mark.parametrize("code", [0, 1, 42, 255])
def test_exit_codes(agent, code):
    assert agent.exec(cmd=f"exit {code}")["exit_code"] == code


def test_exit_by_signal(agent):
    r = agent.exec(cmd="kill -9 $$")
    assert r["exit_code"] == 137 and r["signal"] == 9 and r["timed_out"] is False


def test_exec_output_is_binary_safe_and_chunked(agent):
    r = agent.exec(argv=["sh", "-c", "head -c 3000000 /dev/zero; printf '\\000\\377' >&2"])
    assert r["stdout"] == b"\0" * 3000000
    assert r["stderr"] == b"\x00\xff"


def test_timeout_kills_the_group_and_escaped_grandchildren(agent, tmp_path):
    pidfile = tmp_path / "grandchild"
    # The grandchild leaves the command's session and group (setsid) before the timeout;
    # the command waits until it has written its pid, so the file exists when time runs out.
    cmd = (
        f"setsid sh -c 'echo $$ $(cut -d\" \" -f6 /proc/$$/stat) > {pidfile}.tmp; "
        f"mv {pidfile}.tmp {pidfile}; exec sleep 600' & "
        f"while [ ! -s {pidfile} ]; do :; done; sleep 600"
    )
    r = agent.exec(cmd=cmd, timeout_ms=1000)
    assert r["timed_out"] is True
    assert r["exit_code"] == 137 and r["signal"] == 9
    assert r["elapsed"] < 5, r["elapsed"]
    assert r["duration_ms"] >= 1000
    pid, sid = map(int, pidfile.read_text().split())
    assert sid == pid, "the grandchild did not get its own session"
    assert not os.path.exists(f"/proc/{pid}"), "setsid'd grandchild survived the timeout"
    assert not os.path.exists(f"/proc/{r['pid']}")


def test_timeout_kills_many_escaped_descendants(agent):
    # setsid'd children and double-forked daemons (reparented at once): all must be dead
    # and reaped before the exit message is sent.
    cmd = (
        "for i in $(seq 100); do setsid sleep 600 & (sleep 600 &); done; "
        "echo ready; exec sleep 600"
    )
    r = agent.exec(cmd=cmd, timeout_ms=1500)
    assert r["stdout"] == b"ready\n"
    assert r["timed_out"] is True and r["exit_code"] == 137
    assert tagged(agent.tag) == []


def test_background_job_does_not_hold_the_result(agent, tmp_path):
    pidfile = tmp_path / "bg"
    r = agent.exec(cmd=f"sleep 100 & echo $! > {pidfile}; echo done")
    assert r["stdout"] == b"done\n" and r["exit_code"] == 0
    assert r["elapsed"] < 3, r["elapsed"]
    # The job outlives the exec; the agent's shutdown (fixture) must still end it.
    assert alive(int(pidfile.read_text()))


def test_output_streams_before_exit_and_client_drop_kills(agent, tmp_path):
    pidfile = tmp_path / "pid"
    c, started = agent.start_exec(cmd=f"echo $$ > {pidfile}; echo ready; exec sleep 600")
    assert started["type"] == "started"
    f = c.recv()
    assert f[0] == DATA and f[1] == 1 and f[2] == b"ready\n"
    pid = int(pidfile.read_text())
    assert alive(pid)
    c.close()  # nobody is listening any more: the agent kills the command
    wait_for(lambda: not alive(pid), 5, "the command to be killed after the client left")
    agent.ping()


def test_env_and_cwd(agent, tmp_path):
    r = agent.exec(
        argv=["sh", "-c", 'echo "$FOO"; echo "$HOME"; pwd; echo "$LANG"; echo "$PATH"'],
        env={"FOO": "bar baz", "HOME": "/nowhere"},
        cwd=str(tmp_path),
    )
    lines = r["stdout"].decode().splitlines()
    assert lines[0] == "bar baz"
    assert lines[1] == "/nowhere"
    assert lines[2] == str(tmp_path)
    assert lines[3] == "C.UTF-8"
    assert "/usr/bin" in lines[4].split(":")


def test_default_cwd(agent):
    r = agent.exec(argv=["pwd"])
    assert r["stdout"] == (b"/root\n" if os.path.isdir("/root") else b"/\n")


def test_missing_cwd(agent, tmp_path):
    r = agent.exec(argv=["true"], cwd=str(tmp_path / "nope"))
    assert r["type"] == "error" and r["code"] == "not_found", r
    (tmp_path / "file").write_text("x")
    r = agent.exec(argv=["true"], cwd=str(tmp_path / "file"))
    assert r["type"] == "error" and r["code"] == "not_directory", r


def test_missing_program_is_127(agent):
    r = agent.exec(argv=["brig-no-such-program"])
    assert r["exit_code"] == 127 and r["signal"] is None
    assert b"brig-no-such-program" in r["stderr"]


def test_not_executable_is_126(agent, tmp_path):
    p = tmp_path / "script"
    p.write_text("#!/bin/sh\necho hi\n")
    p.chmod(0o644)
    r = agent.exec(argv=[str(p)])
    assert r["exit_code"] == 126
    assert b"ermission" in r["stderr"]


def test_stdin_relay(agent):
    c, started = agent.start_exec(argv=["sh", "-c", "tr a-z A-Z; echo end"], stdin=True)
    c.send(DATA, b"hello ")
    c.send(DATA, b"world\n")
    c.send(DATA, b"")
    r = agent.collect(c, started)
    assert r["stdout"] == b"HELLO WORLD\nend\n" and r["exit_code"] == 0


def test_stdin_large_binary_roundtrip(agent):
    data = random.randbytes(3 * 1024 * 1024 + 17)
    c, started = agent.start_exec(argv=["cat"], stdin=True)

    def feed():
        for i in range(0, len(data), CHUNK):
            c.send(DATA, data[i : i + CHUNK])
        c.send(DATA, b"")

    t = threading.Thread(target=feed)
    t.start()
    r = agent.collect(c, started)
    t.join()
    assert r["stdout"] == data and r["exit_code"] == 0


def test_stdin_not_read_by_the_command_does_not_deadlock(agent):
    c, started = agent.start_exec(cmd="exit 7", stdin=True)

    def feed():
        try:
            for _ in range(64):  # 4 MiB the command never reads
                c.send(DATA, b"x" * CHUNK)
            c.send(DATA, b"")
        except OSError:
            pass  # the agent is done and closed: fine

    t = threading.Thread(target=feed)
    t.start()
    r = agent.collect(c, started)
    t.join()
    assert r["exit_code"] == 7


def test_stdin_false_is_dev_null(agent):
    r = agent.exec(argv=["cat"])
    assert r["stdout"] == b"" and r["exit_code"] == 0


@pytest.mark.parametrize(
    "req",
    [
        {},
        {"argv": [], "cmd": None},
        {"argv": ["true"], "cmd": "true"},
        {"argv": "true"},
        {"argv": [1]},
        {"cmd": 5},
        {"cmd": "true", "cwd": "relative"},
        {"cmd": "true", "timeout_ms": "soon"},
        {"cmd": "true", "timeout_ms": -1},
        {"cmd": "true", "env": {"A=B": "x"}},
        {"cmd": "true", "env": {"": "x"}},
        {"cmd": "true", "env": {"A": 1}},
        {"cmd": "true", "env": []},
        {"cmd": "true", "stdin": "yes"},
    ],
)
def test_exec_bad_requests(agent, req):
    c = agent.connect()
    c.send_json({"op": "exec", **req})
    msg = c.recv_json()
    assert msg["type"] == "error" and msg["code"] == "bad_request", msg
    c.expect_eof()


# ---- files ----


def test_write_read_roundtrip(agent, tmp_path):
    data = random.randbytes(1024 * 1024)
    path = tmp_path / "a" / "b" / "c" / "file.bin"
    ans = agent.write_file(str(path), data, mode=0o600)
    assert ans == {"type": "ok", "size": len(data)}
    assert path.read_bytes() == data
    assert os.stat(path).st_mode & 0o7777 == 0o600
    assert os.stat(tmp_path / "a" / "b").st_mode & 0o777 == 0o755
    assert os.listdir(path.parent) == ["file.bin"], "temporary file left behind"
    head, got = agent.read_file(str(path))
    assert head == {"type": "file", "size": len(data), "mode": 0o600}
    assert got == data


def test_write_replaces_and_defaults_mode(agent, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"old content that is longer")
    assert agent.write_file(str(path), b"new")["size"] == 3
    assert path.read_bytes() == b"new"
    assert os.stat(path).st_mode & 0o7777 == 0o644
    assert agent.write_file(str(path), b"")["size"] == 0
    assert path.read_bytes() == b""


def test_write_refuses_relative_and_bad_paths(agent):
    for p in ["relative/x", "", 7, None]:
        ans = agent.write_file(p, b"data")
        assert ans["type"] == "error" and ans["code"] == "bad_request", (p, ans)
    agent.ping()


def test_write_to_directory(agent, tmp_path):
    ans = agent.write_file(str(tmp_path), b"data" * 100000)
    assert ans["code"] == "is_directory", ans
    ans = agent.write_file(str(tmp_path) + "/", b"data")
    assert ans["code"] == "is_directory", ans


def test_write_under_a_file(agent, tmp_path):
    (tmp_path / "plain").write_text("x")
    ans = agent.write_file(str(tmp_path / "plain" / "sub" / "f"), b"data")
    assert ans["code"] == "not_directory", ans


def test_write_no_space(agent, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        ans = agent.write_file(str(mnt / "big"), random.randbytes(1024 * 1024))
        assert ans["code"] == "no_space", ans
        assert os.listdir(mnt) == [], "temporary file left behind"
        agent.ping()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_write_client_disconnect_removes_temp(agent, tmp_path):
    d = tmp_path / "up"
    c = agent.connect()
    c.send_json({"op": "write_file", "path": str(d / "f")})
    c.send(DATA, b"partial")
    temps = lambda: d.is_dir() and [n for n in os.listdir(d) if ".brig-tmp-" in n]
    wait_for(temps, 5, "the temporary file")
    c.close()
    wait_for(lambda: os.listdir(d) == [], 5, "the temporary file to be removed")


def test_read_errors(agent, tmp_path):
    head, _ = agent.read_file(str(tmp_path / "missing"))
    assert head["type"] == "error" and head["code"] == "not_found", head
    head, _ = agent.read_file(str(tmp_path))
    assert head["code"] == "is_directory", head
    head, _ = agent.read_file("relative")
    assert head["code"] == "bad_request", head


def test_read_empty_file(agent, tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    head, data = agent.read_file(str(tmp_path / "empty"))
    assert head["size"] == 0 and data == b""


# ---- malformed input ----

MALFORMED = {
    "garbage_header": b"\x00\x00\x00\x04\x77\x13\x37\x00abcd",
    "unknown_frame_type": frame(9, b"{}"),
    "nonzero_flags": frame(CONTROL, b'{"op":"ping"}', flags=1),
    "control_on_channel": frame(CONTROL, b'{"op":"ping"}', chan=3),
    "oversized_length": frame(CONTROL, b"", length=0xFFFFFFFF),
    "empty_control": frame(CONTROL, b""),
    "invalid_json": frame(CONTROL, b"{not json"),
    "non_object_json": frame(CONTROL, b"[1,2,3]"),
    "trailing_json": frame(CONTROL, b'{"op":"ping"} {}'),
    "duplicate_keys": frame(CONTROL, b'{"op":"ping","op":"ping"}'),
    "nul_in_string": frame(CONTROL, b'{"op":"ping\\u0000"}'),
    "bad_utf8": frame(CONTROL, b'{"op":"\xff\xfe"}'),
    "data_instead_of_request": frame(DATA, b"xyz", chan=0),
    "unknown_op": frame(CONTROL, b'{"op":"frobnicate"}'),
    "op_not_a_string": frame(CONTROL, b'{"op":1}'),
    "truncated_frame": frame(CONTROL, b'{"op":"ping"}')[:-3],
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_request_closes_connection(agent, name):
    c = agent.connect()
    c.s.sendall(MALFORMED[name])
    if name == "truncated_frame":
        c.s.shutdown(socket.SHUT_WR)
    assert c.closes(), "connection not closed"
    if name in ("unknown_op", "op_not_a_string"):
        msg = json.loads(c.tail[8:])
        assert msg["type"] == "error" and msg["code"] == "bad_request", msg
    c.close()
    agent.ping()


@pytest.mark.parametrize(
    "data",
    [
        frame(CONTROL, b'{"op":"ping"}'),  # a request before the handshake
        frame(HELLO, b'{"proto":"other","version":1}'),
        frame(HELLO, b'{"proto":"brig-agent","version":"1"}'),
        frame(HELLO, b"not json"),
        frame(HELLO, b"", length=0x7FFFFFFF),
    ],
)
def test_malformed_handshake_closes_connection(agent, data):
    c = agent.connect(hello=False)
    c.s.sendall(data)
    assert c.closes()
    c.close()
    agent.ping()


def test_unexpected_frame_during_exec_kills_command(agent, tmp_path):
    pidfile = tmp_path / "pid"
    c, started = agent.start_exec(cmd=f"echo $$ > {pidfile}; echo ready; exec sleep 600")
    assert c.recv()[2] == b"ready\n"
    pid = int(pidfile.read_text())
    c.send(DATA, b"stdin was not requested")
    assert c.closes()
    wait_for(lambda: not alive(pid), 5, "the command to be killed")
    agent.ping()


# ---- PID 1 duties ----


def test_sigterm_stops_everything(agent, tmp_path):
    bg = tmp_path / "bg"
    r = agent.exec(cmd=f"sleep 300 & echo $! > {bg}")
    assert r["exit_code"] == 0
    bgpid = int(bg.read_text())
    pidfile = tmp_path / "fg"
    c, started = agent.start_exec(cmd=f"echo $$ > {pidfile}; echo go; exec sleep 600")
    assert c.recv()[2] == b"go\n"
    fgpid = int(pidfile.read_text())
    assert alive(bgpid) and alive(fgpid)
    t0 = time.monotonic()
    agent.terminate()
    # The running command is asked to stop, and its client still gets the result.
    res = agent.collect(c, started)
    assert res["signal"] == signal.SIGTERM and res["exit_code"] == 128 + signal.SIGTERM
    assert agent.proc.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 4, "orderly processes should not need the SIGKILL grace"
    assert not alive(bgpid) and not alive(fgpid)


def test_sigterm_kills_stubborn_processes_after_grace(agent, tmp_path):
    pidfile = tmp_path / "pid"
    r = agent.exec(cmd=f"(trap '' TERM; exec sleep 600) & echo $! > {pidfile}")
    assert r["exit_code"] == 0
    pid = int(pidfile.read_text())
    wait_for(lambda: alive(pid), 5)
    t0 = time.monotonic()
    agent.terminate()
    assert agent.proc.wait(timeout=15) == 0
    took = time.monotonic() - t0
    assert 4 < took < 10, took
    assert not alive(pid)


def test_many_concurrent_connections(agent):
    results = []

    def one(i):
        results.append(agent.exec(argv=["sh", "-c", f"echo {i}"]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(r["stdout"]) for r in results) == list(range(20))


# ---- how the runtime starts it ----


def test_listen_fd(tmp_path):
    a = Agent(tmp_path, listen_fd=True)
    try:
        a.ping()
        assert a.exec(cmd="echo hi")["stdout"] == b"hi\n"
        # The inherited listening socket must not leak into commands.
        r = a.exec(cmd="ls -l /proc/self/fd | grep -c socket || true")
        assert r["stdout"] == b"0\n", r
    finally:
        a.stop()


@pytest.mark.parametrize("arg", ["0", "9999", "x", "-1"])
def test_listen_fd_refuses_non_sockets(arg):
    r = subprocess.run([AGENT, "--listen-fd", arg], capture_output=True, timeout=10)
    assert r.returncode != 0


def test_version_flag():
    r = subprocess.run([AGENT, "--version"], capture_output=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith(b"brig-agent ")


@pytest.fixture
def pid1_agent(tmp_path):
    """The agent as PID 1 of its own pid namespace, as inside a sandbox."""
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a pid namespace here")
    a = Agent(tmp_path, wrap=("unshare", "--pid", "--fork", "--mount-proc"))
    yield a
    a.stop()


def test_as_pid1_reaps_orphans_and_stops_everything(pid1_agent, tmp_path):
    a = pid1_agent
    c = a.connect()
    assert c.hello["pid"] == 1
    c.close()
    # Orphans that outlive their handler end up with PID 1, which must reap them.
    r = a.exec(cmd="for i in 1 2 3 4 5; do (sleep 0.2 &) ; done; sleep 300 & echo ok")
    assert r["stdout"] == b"ok\n"

    def zombies():
        table = proc_table()
        return [p for p in descendants(a.pid) if p in table and not alive(p)]

    wait_for(lambda: zombies() == [] and len(descendants(a.pid)) == 1, 10, "orphans to be reaped")
    # A command that ignores SIGTERM needs the SIGKILL after the grace period.
    r = a.exec(cmd="(trap '' TERM; exec sleep 600) & echo ok")
    assert r["stdout"] == b"ok\n"
    r = a.exec(cmd="kill -0 1 && echo pid1-visible")
    assert r["stdout"] == b"pid1-visible\n"
    t0 = time.monotonic()
    a.terminate()
    assert a.proc.wait(timeout=15) == 0
    assert time.monotonic() - t0 < 10
    assert tagged(a.tag) == []
