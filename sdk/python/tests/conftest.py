"""Fixtures for the SDK's tests.

Integration tests run against a real brigd, one per session, started like
tests/integration does (binaries from $BRIG_BUILD, default <repo>/build: build
them with ``make build``; templates from $BRIG_TEMPLATE_CACHE).  BRIG_URL and
BRIG_API_KEY are set in os.environ during each test that uses it, so
``Sandbox.create()`` works without arguments, exactly as a user's program would.

After every test that used the daemon, ``Sandbox.list()`` must be empty: a
test that leaves a sandbox behind fails (and its sandboxes are deleted so the
next test starts clean).  Tests that only use the fake server in fakeserver.py
need no brigd.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(SDK))

# Test the source tree (not whatever brig is installed), unless told otherwise.
if not os.environ.get("BRIG_SDK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(SDK, "src"))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, HERE)

import brig  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "base: needs the base template (python3 inside)")


@pytest.fixture(scope="session")
def daemon():
    """One real brigd for the session (see _brig_env for BRIG_URL/BRIG_API_KEY)."""
    import brigtest

    tmp = tempfile.mkdtemp(prefix="brig-sdk-")
    d = brigtest.Brigd(os.path.join(tmp, "state")).start()
    try:
        # One sandbox first, alone: a fresh brigd makes its writable-layer golden
        # image on the first create, and concurrent first creates race on it
        # (reported); the SDK tests are about the SDK.
        brig.Sandbox.create("minimal", url=d.url, api_key=d.key).delete()
        yield d
    finally:
        d.stop()
        left = brigtest.leftovers(d.state_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        assert not left, f"left behind at the end of the session: {left}"


@pytest.fixture(autouse=True)
def _brig_env(request):
    """For a test that uses the daemon: BRIG_URL/BRIG_API_KEY point at it
    (set per test and restored after, so that other test directories run in
    the same pytest session see the environment they had), and the test must
    leave no sandbox behind."""
    if "daemon" not in request.fixturenames:
        yield
        return
    d = request.getfixturevalue("daemon")
    saved = {k: os.environ.get(k) for k in ("BRIG_URL", "BRIG_API_KEY")}
    os.environ["BRIG_URL"] = d.url
    os.environ["BRIG_API_KEY"] = d.key
    try:
        yield
        live = brig.Sandbox.list()
        for sb in live:  # clean up first, so one failing test does not cascade
            sb.delete(missing_ok=True)
        assert not live, f"test left sandboxes behind: {[sb.id for sb in live]}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def client(daemon):
    """A sync client on the session's brigd."""
    with brig.Client() as c:
        yield c


@pytest.fixture
def sb(daemon):
    """A minimal (busybox) sandbox, deleted after the test."""
    with brig.Sandbox.create("minimal") as s:
        yield s


@pytest.fixture
def base_sb(daemon):
    """A base sandbox (python3, node), deleted after the test."""
    with brig.Sandbox.create("base") as s:
        yield s
