"""Against a real brigd: background processes."""

from __future__ import annotations

import time

import pytest

import brig


def test_background_wait(sb):
    p = sb.exec("sleep 0.3; echo done; exit 3", background=True)
    assert isinstance(p, brig.Process) and p.pid > 0
    assert p.last_info is not None and p.last_info.background
    info = p.wait(timeout=10)
    assert not info.running and info.exit_code == 3 and info.ended_at is not None
    assert p.info().exit_code == 3


def test_wait_timeout_raises(sb):
    p = sb.exec("sleep 30", background=True)
    t0 = time.monotonic()
    with pytest.raises(brig.Timeout):
        p.wait(timeout=0.5)
    assert 0.4 < time.monotonic() - t0 < 5
    assert p.info().running
    p.kill()
    info = p.wait(timeout=10)
    assert info.exit_code == 137 and info.signal == 9


def test_kill_with_other_signals(sb):
    p = sb.exec("sleep 30", background=True)
    p.kill("TERM")
    assert p.wait(timeout=10).signal == 15
    p = sb.exec("sleep 30", background=True)
    import signal

    p.kill(signal.SIGINT)
    assert p.wait(timeout=10).signal == 2
    p = sb.exec("sleep 30", background=True)
    p.terminate()
    assert p.wait(timeout=10).exit_code == 143
    with pytest.raises(brig.InvalidRequest):
        p.kill("NOT_A_SIGNAL")


def test_stdin(sb):
    p = sb.exec("cat; echo EOF-seen", background=True)
    assert p.send_stdin("line one\n") == 9
    assert p.send_stdin(b"\x00\xffbin\n") == 6
    p.close_stdin()
    info = p.wait(timeout=10)
    assert info.exit_code == 0
    r = p.collect()
    assert r.stdout_bytes == b"line one\n\x00\xffbin\nEOF-seen\n" and r.exit_code == 0


def test_output_follow_and_snapshot(sb):
    p = sb.exec("echo one; sleep 0.5; echo two >&2; sleep 0.5; echo three", background=True)
    t0 = time.monotonic()
    events = []
    with p.output() as out:
        for ev in out:
            events.append((time.monotonic() - t0, ev))
    types = [e.type for _, e in events]
    assert types[0] == "output" and types[-1] == "exit"
    data = [(e.type, e.data) for _, e in events if e.type in ("stdout", "stderr")]
    assert data == [("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n")]
    first_out = next(t for t, e in events if e.type == "stdout")
    assert first_out < 0.8 and events[-1][0] >= 0.9
    assert events[-1][1].exit_code == 0

    snap = list(p.output(follow=False))
    assert snap[0].type == "output" and snap[-1].type == "end"
    assert snap[-1].raw["running"] is False
    assert "".join(e.data for e in snap if e.type == "stdout") == "one\nthree\n"


def test_reconnect_by_pid_and_list(sb):
    p = sb.exec(["sh", "-c", "sleep 30"], background=True)
    handle = brig.Sandbox.connect(sb.id)
    again = handle.process(p.pid)
    assert again.info().running and again.info().argv == ["sh", "-c", "sleep 30"]
    assert p.pid in [x.pid for x in sb.processes()]
    again.kill()
    handle.close()  # drops its connections; the sandbox stays
    assert p.wait(timeout=10).running is False


def test_output_of_unknown_process(sb):
    with pytest.raises(brig.NotFound):
        list(sb.process(424242).output())
