"""Fixtures for brig's integration tests (pytest, real brigd, real runc)."""

import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import brigtest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "base: needs the base template")


@pytest.fixture(scope="session")
def daemon():
    """One brigd for the session (most tests); stopped cleanly at the end."""
    tmp = tempfile.mkdtemp(prefix="brig-it-")
    d = brigtest.Brigd(os.path.join(tmp, "state")).start()
    yield d
    d.stop()
    left = brigtest.leftovers(d.state_dir)
    shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"left behind at the end of the session: {left}"


@pytest.fixture
def api(daemon):
    """The session daemon's API, with a leak check after the test: every sandbox
    the test created must be gone, with nothing of it left on the host."""
    a = daemon.api()
    yield a
    live = a.ok("GET", "/v1/sandboxes").json()["sandboxes"]
    for sb in live:  # clean up first so one failing test does not cascade
        a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    left = brigtest.leftovers(daemon.state_dir)
    assert not live, f"test left sandboxes running: {[s['id'] for s in live]}"
    assert not left, f"test leaked: {left}"


@pytest.fixture
def gvisor_api(api):
    """The session daemon's API for a test of gvisor sandboxes: skipped (only) when brigd
    refuses gvisor on this host (brigtest.needs_gvisor; call that for another daemon)."""
    brigtest.needs_gvisor(api)
    return api


@pytest.fixture
def fresh_daemon(tmp_path):
    """A brigd of the test's own (restart tests); the test may stop/restart it."""
    d = brigtest.Brigd(str(tmp_path / "state"))
    yield d
    if d.proc is not None:
        a = d.api()
        for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
            a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
        d.stop()
    if d.live_sandboxes():  # a failed test's, left in a stopped brigd's dir
        d.destroy_all()
    left = brigtest.leftovers(d.state_dir)
    assert not left, f"test leaked: {left}"


@pytest.hookimpl(trylast=True)  # after session fixtures' own teardown
def pytest_sessionfinish(session, exitstatus):
    """A failed test may leave its own brigd running, or sandboxes live in a
    stopped one's state dir: stop those daemons and destroy what they left,
    so nothing (processes, mounts, loop devices, links) outlives the session."""
    for d in brigtest.Brigd.started:
        if d.proc is not None:
            d.proc.terminate()
            d.proc.wait(timeout=60)
            d.proc = None
        if d.live_sandboxes():
            r = d.destroy_all()
            print(f"\nreaped sandboxes left in {d.state_dir}: rc {r.returncode}")
