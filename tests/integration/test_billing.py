"""Money and limits: per-second billing with a 60 s minimum from a prepaid
balance, spend and concurrency limits, idle and lifetime timeouts, the CPU-abuse
stop, fair scheduling under a full host, and a brigd crash in the middle of a
billed sandbox."""

import concurrent.futures
import os
import signal
import sqlite3
import threading
import time

import pytest

from brigtest import Api, Brigd, Sandbox, wait_for


def daemon_with(tmp_path, conf):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text(conf)
    return Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()


@pytest.fixture(autouse=True)
def no_live_sandboxes_left(tmp_path):
    """Tests with a daemon of their own must delete every sandbox they made."""
    yield
    db = tmp_path / "state" / "brig.db"
    if db.exists():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        live = con.execute("SELECT id FROM sandboxes WHERE state NOT IN ('deleted','failed')")
        rows = live.fetchall()
        con.close()
        assert rows == [], f"sandboxes left running: {rows}"


def ledger(d):
    con = sqlite3.connect(f"file:{d.state_dir}/brig.db?mode=ro", uri=True)
    try:
        return con.execute("SELECT kind, amount_micro_usd, sandbox_id, seconds FROM ledger"
                           " ORDER BY seq").fetchall()
    finally:
        con.close()


def state_of(api, sid):
    return api.ok("GET", f"/v1/sandboxes/{sid}").json()


def test_account_balance_and_charges(api):
    before = api.ok("GET", "/v1/account").json()
    for f in ("balance_micro_usd", "usage_today_micro_usd", "usage_month_micro_usd",
              "live_sandboxes", "max_live_sandboxes", "daily_limit_micro_usd"):
        assert f in before
    assert before["balance"].startswith("$")
    sb = api.create("minimal")
    assert api.ok("GET", "/v1/account").json()["live_sandboxes"] == before["live_sandboxes"] + 1
    api.delete(sb["id"])
    after = api.ok("GET", "/v1/account").json()
    # 60 s minimum at $0.00001/s.
    assert before["balance_micro_usd"] - after["balance_micro_usd"] == 600
    assert after["usage_today_micro_usd"] - before["usage_today_micro_usd"] == 600
    assert state_of(api, sb["id"])["cost_micro_usd"] == 600


def test_credits_and_payment_required(tmp_path):
    d = daemon_with(tmp_path, "[brigd]\ninitial_credit_micro_usd = 700\n")
    try:
        op = d.operator()
        acc = op.ok("POST", "/v1/accounts", {"name": "poor"}).json()
        assert acc["balance_micro_usd"] == 700
        a = Api(d.url, acc["api_key"])
        a.delete(a.create("minimal")["id"])          # -600 -> 100
        a.delete(a.create("minimal")["id"])          # still positive at admission -> -500
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal"})
        assert r.status == 402 and r.json()["error"]["code"] == "payment_required"
        assert "-$0.000500" in r.json()["error"]["message"]
        got = op.ok("POST", f"/v1/accounts/{acc['id']}/credits",
                    {"amount_micro_usd": 2000, "note": "top-up"}).json()
        assert got["balance_micro_usd"] == 1500
        a.delete(a.create("minimal")["id"])
        kinds = [row[0] for row in ledger(d)]
        assert kinds.count("credit") >= 3 and kinds.count("charge") == 3
        # The ledger is append-only, even for someone with the database file.
        con = sqlite3.connect(f"{d.state_dir}/brig.db")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute("UPDATE ledger SET amount_micro_usd = 0")
        con.close()
    finally:
        d.stop()


def test_daily_and_monthly_limits(api):
    acc = api.ok("GET", "/v1/account").json()
    try:
        r = api.ok("PATCH", "/v1/account", {"daily_limit_micro_usd": acc["usage_today_micro_usd"]})
        assert r.json()["daily_limit_micro_usd"] == acc["usage_today_micro_usd"]
        r = api.request("POST", "/v1/sandboxes", {"template": "minimal"})
        assert r.status == 429
        msg = r.json()["error"]["message"]
        assert "daily spend limit" in msg and "resets at" in msg
        api.ok("PATCH", "/v1/account", {"daily_limit_micro_usd": None,
                                        "monthly_limit_micro_usd": 0})
        r = api.request("POST", "/v1/sandboxes", {"template": "minimal"})
        assert r.status == 429 and "monthly spend limit" in r.json()["error"]["message"]
        r = api.request("PATCH", "/v1/account", {"daily_limit_micro_usd": -1})
        assert r.status == 400
    finally:
        api.ok("PATCH", "/v1/account", {"daily_limit_micro_usd": None,
                                        "monthly_limit_micro_usd": None})
    api.delete(api.create("minimal")["id"])  # allowed again


def test_concurrency_limit(tmp_path):
    d = daemon_with(tmp_path, "[brigd]\nmax_live_per_account = 2\n")
    try:
        a = d.api()
        ids = [a.create("minimal")["id"] for _ in range(2)]
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal"})
        assert r.status == 429 and "concurrency limit" in r.json()["error"]["message"]
        a.delete(ids.pop())
        ids.append(a.create("minimal")["id"])
        for i in ids:
            a.delete(i)
    finally:
        d.stop()


def test_idle_timeout_spares_busy_sandboxes(api):
    t0 = time.monotonic()  # before the idle one's last use (its create): the bound's start
    idle = api.create("minimal", idle_timeout=1)["id"]
    busy = api.create("minimal", idle_timeout=1)["id"]
    pid = api.ok("POST", f"/v1/sandboxes/{busy}/exec",
                 {"cmd": "sleep 600", "background": True}, expect=(202,)).json()["pid"]
    wait_for(lambda: state_of(api, idle)["state"] == "deleted", timeout=15,
             what="the idle sandbox to be deleted")
    assert state_of(api, idle)["reason"] == "idle_timeout"
    assert time.monotonic() - t0 >= 0.9
    # The one running a command is not idle, however long nobody calls it.
    wait_for(lambda: time.monotonic() - t0 > 3, timeout=10, interval=0.2, what="3 s to pass")
    assert state_of(api, busy)["state"] == "running"
    api.ok("POST", f"/v1/sandboxes/{busy}/processes/{pid}/signal", {"signal": "KILL"},
           expect=(204,))
    wait_for(lambda: state_of(api, busy)["state"] == "deleted", timeout=15,
             what="the sandbox to become idle once its command ended")
    assert state_of(api, busy)["reason"] == "idle_timeout"


def test_max_lifetime_and_extension(api):
    sid = api.create("minimal", max_lifetime=2)["id"]
    first = state_of(api, sid)["expires_at"]
    ext = api.ok("POST", f"/v1/sandboxes/{sid}/timeout", {"timeout": 4}).json()
    assert ext["expires_at"] > first
    wait_for(lambda: state_of(api, sid)["state"] == "deleted", timeout=20,
             what="the sandbox to reach its lifetime")
    assert state_of(api, sid)["reason"] == "max_lifetime"
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "max_lifetime": 10 ** 9})
    assert r.status == 400


def test_an_exec_cut_off_by_the_lifetime_says_why(api):
    """A command still running when its sandbox reaches its lifetime: the exec answers
    409 with the reason, not an agent error."""
    sid = api.create("minimal", max_lifetime=1)["id"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "exec sleep 50"})
    assert r.status == 409, r.body
    assert r.json()["error"]["message"] == (
        f"sandbox {sid} ended while the request ran (max_lifetime)")
    # Already while it is "deleting" (the cleanup may still run), the reason is there.
    assert state_of(api, sid)["reason"] == "max_lifetime"
    wait_for(lambda: state_of(api, sid)["state"] == "deleted", what="the sandbox deleted")
    assert state_of(api, sid)["reason"] == "max_lifetime"


def test_cpu_hog_is_stopped_and_flagged(tmp_path):
    # A quota of a tenth of a CPU: the hog uses all of it even when the host's cores are
    # busy with other work (a whole CPU's quota it would not get on a loaded 2-core host).
    d = daemon_with(tmp_path, "[brigd]\ncpu_abuse_window = 2\n"
                              "[tariff.tenth]\nvcpus = 0.1\nmemory_mib = 256\ndisk_mib = 256\n"
                              "price_micro_usd_per_second = 1\n")
    try:
        a = d.api()
        hog = a.create("minimal", tariff="tenth")["id"]
        calm = a.create("minimal")["id"]
        a.ok("POST", f"/v1/sandboxes/{hog}/exec",
             {"cmd": "while :; do :; done", "background": True}, expect=(202,))
        wait_for(lambda: state_of(a, hog)["state"] == "deleted", timeout=30,
                 what="the CPU hog to be stopped")
        assert state_of(a, hog)["reason"] == "cpu_abuse"
        assert a.ok("GET", "/v1/account").json()["cpu_abuse_stops"] == 1
        assert state_of(a, calm)["state"] == "running"  # an idle neighbour is not touched
        a.delete(calm)
    finally:
        d.stop()


def test_balance_exhausted_stops_running_sandbox(tmp_path):
    d = daemon_with(tmp_path, "[brigd]\nbilling_interval = 1\ninitial_credit_micro_usd = 50000\n"
                              "[tariff.pricey]\nprice_micro_usd_per_second = 20000\n")
    try:
        a = d.api()
        sid = a.create("minimal", tariff="pricey")["id"]
        wait_for(lambda: state_of(a, sid)["state"] == "deleted", timeout=20,
                 what="the sandbox to be stopped at zero balance")
        assert state_of(a, sid)["reason"] == "balance_exhausted"
        # Its whole life is charged, at least the 60 s minimum.
        assert state_of(a, sid)["cost_micro_usd"] >= 60 * 20000
        assert a.request("POST", "/v1/sandboxes", {"template": "minimal"}).status == 402
    finally:
        d.stop()


def test_restart_mid_billing_loses_no_row_and_charges_no_second_twice(tmp_path):
    d = daemon_with(tmp_path, "[brigd]\nbilling_interval = 1\n")
    try:
        a = d.api()
        sid = a.create("minimal")["id"]
        wait_for(lambda: len([r for r in ledger(d) if r[0] == "charge"]) >= 2, timeout=15,
                 what="two incremental charges")
        d.stop(signal.SIGKILL)
        d.start()
        a = d.api()
        n = len([r for r in ledger(d) if r[0] == "charge"])
        wait_for(lambda: len([r for r in ledger(d) if r[0] == "charge"]) > n, timeout=15,
                 what="charges to continue after the restart")
        a.delete(sid)
        info = state_of(a, sid)
        charges = [r for r in ledger(d) if r[0] == "charge" and r[2] == sid]
        seconds = sum(r[3] for r in charges)
        con = sqlite3.connect(f"file:{d.state_dir}/brig.db?mode=ro", uri=True)
        created, deleted = con.execute("SELECT created_at, deleted_at FROM sandboxes WHERE id = ?",
                                       (sid,)).fetchone()
        con.close()
        life_s = -(-(deleted - created) // 1000)  # ceil
        assert seconds == max(60, life_s), (seconds, life_s, charges)
        assert sum(r[1] for r in charges) == info["cost_micro_usd"] == seconds * 10
    finally:
        d.stop()


def test_fair_queue_serves_the_lone_tenant_before_the_burst(tmp_path):
    d = daemon_with(tmp_path, "[brigd]\nmax_sandboxes = 2\nmax_live_per_account = 50\n"
                              "create_queue_timeout = 60\n")
    try:
        a = d.api()
        b = Api(d.url, d.operator().ok("POST", "/v1/accounts", {"name": "lone"}).json()["api_key"])
        held = [a.create("minimal")["id"] for _ in range(2)]  # the host is full
        order, lock = [], threading.Lock()

        def create(who, api):
            sid = api.create("minimal")["id"]
            with lock:
                order.append((who, sid))
            return sid

        health = lambda: a.request("GET", "/healthz", key=None).json()
        deleted = set()

        def free(who, sid):
            if sid not in deleted:
                (a if who == "a" else b).delete(sid)
                deleted.add(sid)

        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            burst = [pool.submit(create, "a", a) for _ in range(6)]
            wait_for(lambda: health()["queued"] == 6, what="A's burst to queue")
            lone = pool.submit(create, "b", b)
            wait_for(lambda: health()["queued"] == 7, what="B's request to queue")
            a.delete(held.pop())  # one slot frees up
            first = wait_for(lambda: list(order), what="a slot to be granted")[0]
            assert first[0] == "b", order  # the lone tenant is served before the burst
            a.delete(held.pop())
            while len(deleted) < 7:  # let the burst drain, one freed slot at a time
                who, sid = wait_for(lambda: [o for o in order if o[1] not in deleted],
                                    what="the next grant")[0]
                free(who, sid)
            assert len(set(f.result() for f in burst)) == 6 and lone.result()
    finally:
        d.stop()


def test_ledger_usage_and_accounts(daemon, api):
    """The dashboard's money routes: the ledger page by page, spend per day, the operator's
    list of accounts."""
    sb = api.create("minimal")
    api.delete(sb["id"])
    first = api.ok("GET", "/v1/account/ledger?limit=1").json()
    assert len(first["entries"]) == 1 and first["next_before"] == first["entries"][0]["seq"]
    charge = first["entries"][0]
    assert charge["kind"] == "charge" and charge["sandbox_id"] == sb["id"]
    assert charge["amount_micro_usd"] == 600 and charge["amount"] == "$0.000600"
    rest = api.ok("GET", f"/v1/account/ledger?before={first['next_before']}").json()
    assert rest["next_before"] is None
    assert [e["kind"] for e in rest["entries"]][-1] == "credit"
    assert all(e["seq"] < charge["seq"] for e in rest["entries"])
    for bad in ("limit=0", "limit=1001", "before=-1", "limit=x"):
        assert api.request("GET", f"/v1/account/ledger?{bad}").status == 400, bad
    days = api.ok("GET", "/v1/account/usage?days=3").json()["days"]
    assert len(days) == 3 and days[-1]["date"] == time.strftime("%Y-%m-%d", time.gmtime())
    assert days[-1]["spent_micro_usd"] == api.ok("GET", "/v1/account").json()["usage_today_micro_usd"]
    assert api.request("GET", "/v1/account/usage?days=0").status == 400
    op = daemon.operator()
    acc = op.ok("POST", "/v1/accounts", {"name": "second"}).json()
    listed = op.ok("GET", "/v1/accounts").json()["accounts"]
    assert [a["id"] for a in listed][-1] == acc["id"] and listed[-1]["name"] == "second"
    assert api.request("GET", "/v1/accounts").status == 403
