"""Against a real brigd: commands, buffered and streamed."""

from __future__ import annotations

import threading
import time

import pytest

import brig


def test_nonzero_exit_is_a_result(sb):
    r = sb.exec("echo out; echo err >&2; exit 7")
    assert isinstance(r, brig.ExecResult)
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out, r.signal) == (7, "out\n", "err\n",
                                                                        False, None)
    assert not r.ok and r.duration_ms >= 0 and r.reason == "exited"
    assert sb.exec("no-such-program").exit_code == 127
    assert sb.exec("true").ok


def test_argv_cwd_env_stdin(sb):
    assert sb.exec(["echo", "a b", "$HOME"]).stdout == "a b $HOME\n"
    assert sb.exec("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sb.exec("echo $FOO", env={"FOO": "bar"}).stdout == "bar\n"
    assert sb.exec("cat", stdin="from stdin").stdout == "from stdin"
    assert sb.exec("od -An -tx1", stdin=b"\xff\x00").stdout.split() == ["ff", "00"]
    assert sb.exec("id -u", user="user", cwd="/tmp").stdout == "1000\n"


def test_timeout_is_a_result(sb):
    t0 = time.monotonic()
    r = sb.exec("sleep 30", timeout=0.5)
    assert time.monotonic() - t0 < 10
    assert r.timed_out and r.exit_code == 137 and r.reason == "timeout"


def test_signal_is_a_result(sb):
    r = sb.exec("kill -TERM $$")
    assert r.exit_code == 143 and r.signal == 15 and r.reason == "signal"


def test_binary_output(sb):
    r = sb.exec("printf 'ok\\377\\376'")
    assert r.stdout_bytes == b"ok\xff\xfe"
    assert r.stdout.startswith("ok") and "\ufffd" in r.stdout


def test_streaming_callbacks_see_output_before_the_end(sb):
    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    r = sb.exec("echo first; sleep 2; echo second >&2; echo third",
                on_stdout=lambda c: seen.append((time.monotonic() - t0, "out", c)),
                on_stderr=lambda c: seen.append((time.monotonic() - t0, "err", c)))
    end = time.monotonic() - t0
    assert r.exit_code == 0 and r.stdout == "first\nthird\n" and r.stderr == "second\n"
    assert r.pid is not None
    assert seen[0][1:] == ("out", "first\n")
    assert seen[0][0] < 1.5 and end >= 2.0, (seen, end)
    # two pipes: their relative order is not kept
    assert sorted(s[1:] for s in seen[1:]) == [("err", "second\n"), ("out", "third\n")]


def test_streaming_binary_chunk_is_bytes(sb):
    chunks = []
    r = sb.exec("printf 'text\\n'; sleep 0.2; printf '\\377\\376'", on_stdout=chunks.append)
    assert chunks[0] == "text\n"
    assert b"".join(c for c in chunks[1:] if isinstance(c, bytes)) == b"\xff\xfe"
    assert r.stdout_bytes == b"text\n\xff\xfe"


def test_streaming_timeout_and_exit_code(sb):
    r = sb.exec("echo x; sleep 30", timeout=0.5, on_stdout=lambda c: None)
    assert r.timed_out and r.exit_code == 137 and r.stdout == "x\n" and r.reason == "timeout"
    r = sb.exec("exit 5", on_stderr=lambda c: None)
    assert r.exit_code == 5 and r.reason == "exited"


def test_callback_exception_stops_and_kills_the_command(sb):
    class Stop(Exception):
        pass

    def cb(chunk):
        raise Stop(chunk)

    with pytest.raises(Stop):
        sb.exec("echo go; sleep 1.5; touch /root/marker", on_stdout=cb)
    time.sleep(2.5)  # the command would have touched the marker by now
    assert not sb.exists("/root/marker")


def test_exec_stream_iterator(sb):
    with sb.exec_stream("echo a; echo b >&2; exit 4") as stream:
        types = [ev.type for ev in stream]
    assert types[0] == "start" and types[-1] == "exit"
    assert {"stdout", "stderr"} <= set(types)
    assert stream.result.exit_code == 4 and stream.result.stdout == "a\n"


def test_pty(sb):
    r = sb.exec("test -t 1 && echo tty; echo err >&2", pty=True)
    assert "tty" in r.stdout and "err" in r.stdout and r.stderr == ""


def test_threads_share_one_sandbox(sb):
    results = {}

    def run(i):
        results[i] = sb.exec(f"sleep 0.5; echo {i}").stdout

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"{i}\n" for i in range(8)}
    assert time.monotonic() - t0 < 3.5


@pytest.mark.base
def test_python_in_base(base_sb):
    base_sb.upload("/root/task.py", "import sys; print(sum(range(10))); sys.exit(1)")
    r = base_sb.exec("python3 /root/task.py", timeout=55)
    assert (r.exit_code, r.stdout) == (1, "45\n")
