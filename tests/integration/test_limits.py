"""Limits a client runs into: the host's capacity queue (max_sandboxes,
create_queue_timeout), the idle timeout and what resets it, and spend limits
(which refuse new sandboxes and leave running ones alone).  See docs/api.md
("Accounts, money and limits", "Reasons a sandbox ends") and docs/operations.md."""

import concurrent.futures
import datetime
import time

import pytest

import brigtest
from brigtest import Brigd, wait_for


@pytest.fixture
def brigd_with(tmp_path):
    """Starts brigds of the test's own with a config file; at the end every one is
    stopped cleanly and must have left nothing behind."""
    made = []

    def start(conf, name="state"):
        cfg = tmp_path / f"{name}.conf"
        cfg.write_text(conf)
        d = Brigd(str(tmp_path / name), ["--config", str(cfg)]).start()
        made.append(d)
        return d

    yield start
    live = []
    for d in made:
        if d.proc is not None:
            a = d.api()
            for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
                live.append(sb["id"])
                a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
            d.stop()
        if d.live_sandboxes():
            d.destroy_all()
        left = brigtest.leftovers(d.state_dir)
        assert not left, f"test leaked: {left}"
    assert not live, f"test left sandboxes running: {live}"


def health(a):
    return a.request("GET", "/healthz", key=None).json()


def state_of(a, sid):
    return a.ok("GET", f"/v1/sandboxes/{sid}").json()


def account(a):
    return a.ok("GET", "/v1/account").json()


def live_ids(a):
    return [s["id"] for s in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]]


def ms(iso):
    """brigd's timestamps ("2026-12-01T10:00:00.123Z") as Unix milliseconds."""
    t = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ")
    return round(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


# ---- host capacity: the create queue ---------------------------------------------------

def test_a_create_on_a_full_host_waits_then_gets_503(brigd_with):
    """max_sandboxes = 1: a second create queues (visible in /healthz), waits the whole
    create_queue_timeout for a slot and then answers 503 `unavailable` with a message
    that says why; it creates nothing and does not keep a slot."""
    d = brigd_with("[brigd]\nmax_sandboxes = 1\ncreate_queue_timeout = 3\n")
    a = d.api()
    held = a.create("minimal")["id"]
    h = health(a)
    assert (h["capacity"], h["slots_used"], h["queued"]) == (1, 1, 0), h
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        t0 = time.monotonic()
        fut = pool.submit(a.request, "POST", "/v1/sandboxes", {"template": "minimal"})
        wait_for(lambda: health(a)["queued"] == 1, what="the create to queue")
        assert not fut.done()
        r = fut.result(timeout=60)
        waited = time.monotonic() - t0
    assert r.status == 503, r.body
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["code"] == "unavailable", err
    msg = err["message"]
    for part in ("this host is at capacity", "within 3 s", "try again later"):
        assert part in msg, msg
    assert 3.0 <= waited < 15, waited  # it waited for the queue timeout, not less
    h = health(a)
    assert (h["slots_used"], h["queued"]) == (1, 0), h
    assert live_ids(a) == [held]
    # The timed-out request holds nothing: once the held sandbox is gone, a create
    # gets the slot at once.
    a.delete(held)
    wait_for(lambda: health(a)["slots_used"] == 0, what="the freed slot to be returned")
    t0 = time.monotonic()
    sid = a.create("minimal")["id"]
    assert time.monotonic() - t0 < 3
    a.delete(sid)


def test_a_queued_create_gets_the_slot_a_delete_frees(brigd_with):
    """A create waiting for capacity succeeds as soon as another sandbox is deleted,
    well before its queue timeout, and the sandbox it gets works."""
    d = brigd_with("[brigd]\nmax_sandboxes = 1\ncreate_queue_timeout = 30\n")
    a = d.api()
    held = a.create("minimal")["id"]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(a.request, "POST", "/v1/sandboxes", {"template": "minimal"})
        wait_for(lambda: health(a)["queued"] == 1, what="the create to queue")
        assert not fut.done()
        t0 = time.monotonic()
        a.delete(held)
        r = fut.result(timeout=60)
        granted_after = time.monotonic() - t0
    assert r.status == 201, r.body
    assert granted_after < 15, granted_after  # the freed slot, not the 30 s timeout
    sid = r.json()["id"]
    assert sid != held and state_of(a, sid)["state"] == "running"
    assert a.exec(sid, "echo granted")["stdout"] == "granted\n"
    h = health(a)
    assert (h["slots_used"], h["queued"]) == (1, 0), h
    assert live_ids(a) == [sid]
    a.delete(sid)


# ---- idle timeout -----------------------------------------------------------------------

def test_exec_and_file_requests_keep_a_sandbox_from_going_idle(api):
    """idle_timeout = 2 s; an exec, a file upload and a file download, in turn, each
    1.2 s after the previous one: for over twice the idle timeout the sandbox stays
    running and every request moves idle_expires_at forward.  Each kind of request
    must reset the clock: without one kind, 2.4 s would pass between two resets.
    Once the requests stop it is deleted with reason idle_timeout, not before its
    idle_expires_at."""
    idle, gap = 2, 1.2
    sid = api.create("minimal", idle_timeout=idle)["id"]
    try:
        info = state_of(api, sid)
        assert info["idle_timeout"] == idle
        expires = ms(info["idle_expires_at"])
        steps = [
            ("exec", lambda: api.exec(sid, "echo active")["stdout"] == "active\n"),
            ("upload", lambda: api.put_file(sid, "/root/activity.txt", b"still here\n") or True),
            ("download", lambda: api.get_file(sid, "/root/activity.txt") == b"still here\n"),
        ] * 2
        t_start = time.monotonic()
        next_at = t_start + gap
        for name, step in steps:
            # Pacing the client's requests (the point of the test), not waiting on brigd.
            wait_for(lambda: time.monotonic() >= next_at, timeout=gap + 1, interval=0.01,
                     what=f"the time for the {name}")
            assert step(), name
            info = state_of(api, sid)
            assert info["state"] == "running", (name, info)
            assert ms(info["idle_expires_at"]) > expires, (name, info)
            expires = ms(info["idle_expires_at"])
            next_at = time.monotonic() + gap
        assert time.monotonic() - t_start > 2 * idle
        # Now nobody calls it: it goes, and not before its idle_expires_at.
        wait_for(lambda: state_of(api, sid)["state"] == "deleted", timeout=15,
                 what="the idle sandbox to be deleted")
        ended = state_of(api, sid)
        assert ended["reason"] == "idle_timeout", ended
        assert ms(ended["deleted_at"]) >= expires, (ended, expires)
    finally:
        r = api.request("DELETE", f"/v1/sandboxes/{sid}")
        assert r.status in (204, 404), r.body


def test_idle_timeout_above_the_default_maximum_is_refused(api):
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "idle_timeout": 86401})
    assert r.status == 400, r.body
    assert r.json()["error"] == {"code": "invalid_request",
                                 "message": "'idle_timeout' must be seconds in (0, 86400]"}
    assert live_ids(api) == []


def test_idle_timeout_above_the_configured_maximum_is_refused(brigd_with):
    """idle_timeout_max bounds what a create may ask for: above it (or not a positive
    number) is a 400 that names the range, and creates nothing; the maximum itself is
    fine, and a create without one gets idle_timeout_default."""
    d = brigd_with("[brigd]\nidle_timeout_default = 2\nidle_timeout_max = 3\n")
    a = d.api()
    for bad in (4, 3.5, 86400, 0, -1, "2"):
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "idle_timeout": bad})
        assert r.status == 400, (bad, r.body)
        assert r.json()["error"] == {"code": "invalid_request",
                                     "message": "'idle_timeout' must be seconds in (0, 3]"}, bad
    assert live_ids(a) == [] and account(a)["live_sandboxes"] == 0
    at_max = a.create("minimal", idle_timeout=3)
    assert at_max["idle_timeout"] == 3
    default = a.create("minimal")
    assert default["idle_timeout"] == 2
    assert ms(default["idle_expires_at"]) - ms(default["created_at"]) >= 2000
    a.delete(at_max["id"])
    a.delete(default["id"])


# ---- spend limits ----------------------------------------------------------------------

PRICEY = ("[brigd]\nbilling_interval = 1\n"
          "[tariff.pricey]\nprice_micro_usd_per_second = 1000\n")


@pytest.mark.parametrize("period", ["daily", "monthly"])
def test_spend_limit_refuses_new_sandboxes_and_stops_running_ones(brigd_with, period):
    """docs/api.md: "Daily and monthly spend limits ... refuse new sandboxes; a spend
    limit reached also stops the account's running sandboxes at their next charge."
    A sandbox billed every second at $0.001/s runs the account to its limit: a new
    create gets 429 limit_exceeded saying which limit and when it resets, and the
    running sandbox ends with reason spend_limit."""
    d = brigd_with(PRICEY)
    a = d.api()
    usage = "usage_today_micro_usd" if period == "daily" else "usage_month_micro_usd"
    limit = 3000
    assert account(a)[usage] == 0
    got = a.ok("PATCH", "/v1/account", {f"{period}_limit_micro_usd": limit}).json()
    assert got[f"{period}_limit_micro_usd"] == limit
    sid = a.create("minimal", tariff="pricey")["id"]  # nothing spent yet: allowed
    wait_for(lambda: account(a)[usage] >= limit, timeout=30,
             what="the running sandbox's charges to reach the limit")
    r = a.request("POST", "/v1/sandboxes", {"template": "minimal"})
    assert r.status == 429, r.body
    err = r.json()["error"]
    assert err["code"] == "limit_exceeded", err
    assert f"{period} spend limit of $0.003000 reached" in err["message"], err
    assert "resets at" in err["message"], err
    # The running sandbox is stopped at its next charge, saying why.
    wait_for(lambda: state_of(a, sid)["state"] == "deleted", timeout=30,
             what="the running sandbox to be stopped at the limit")
    ended = state_of(a, sid)
    assert (ended["reason"], ended["end_reason"]) == ("spend_limit", "spend_limit"), ended
    assert live_ids(a) == []
    assert a.request("POST", "/v1/sandboxes", {"template": "minimal"}).status == 429
    # Lifting the limit lets creates in again.
    a.ok("PATCH", "/v1/account", {f"{period}_limit_micro_usd": None})
    a.delete(a.create("minimal")["id"])
