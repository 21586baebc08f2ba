"""The warm pool: sandboxes started ahead of demand are claimed by creates, the
pool refills, claimed sandboxes are ordinary ones of the caller, and nothing of
the pool outlives brigd."""

import threading
import time

from brigtest import Brigd, leftovers, wait_for


def pool_of(api, key="minimal/small"):
    return api.request("GET", "/healthz", key=None).json()["warm_pool"].get(key, {})


def test_claim_refill_and_shutdown(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nwarm_pool = minimal:small:2\nnetwork = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        wait_for(lambda: pool_of(a).get("ready") == 2, timeout=30, what="the pool to fill")
        assert pool_of(a)["target"] == 2
        t0 = time.monotonic()
        sb = a.create("minimal", env={"WHO": "claimed"})
        claim_s = time.monotonic() - t0
        assert sb["state"] == "running" and sb["tariff"] == "small"
        assert (pool_of(a)["hits"], pool_of(a)["misses"]) == (1, 0)
        assert a.exec(sb["id"], "echo $WHO; hostname")["stdout"] == "claimed\nsandbox\n"
        # It is the caller's like any other: listed, billed from the claim on.
        assert [s["id"] for s in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]] == [sb["id"]]
        wait_for(lambda: pool_of(a).get("ready") == 2, timeout=30, what="the pool to refill")
        # A tariff the pool does not keep is a cold create.
        cold = a.create("minimal", tariff="medium")
        assert pool_of(a)["ready"] == 2
        assert (pool_of(a)["hits"], pool_of(a)["misses"]) == (1, 0)  # not the pool's business
        for s in (sb, cold):
            a.delete(s["id"])
        assert a.ok("GET", f"/v1/sandboxes/{sb['id']}").json()["cost_micro_usd"] == 600
        assert claim_s < 5
    finally:
        d.stop()
    # Pooled sandboxes belong to nobody: brigd's shutdown destroyed them.
    assert leftovers(d.state_dir) == []


def test_bad_pool_setting_is_refused(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nwarm_pool = minimal:nosuchtariff:2\n")
    status, said = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).refused()
    assert "warm_pool: no tariff 'nosuchtariff'" in said
    assert status == 2  # a usage error, before doing anything


def test_a_miss_is_counted(tmp_path):
    """One user-id range: the pool holds it, the claim takes it, and no refill
    or cold create can get another, so the next create is a miss for certain."""
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nwarm_pool = minimal:small:1\nuid_ranges = 1\nnetwork = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        wait_for(lambda: pool_of(a).get("ready") == 1, timeout=30, what="the pool to fill")
        sb = a.create("minimal")
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal"})
        assert r.status == 503 and "user-id ranges are in use" in r.json()["error"]["message"]
        assert pool_of(a) == {"ready": 0, "target": 1, "hits": 1, "misses": 1}
        a.delete(sb["id"])
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_refill_is_not_starved_by_a_long_request(tmp_path):
    """A refill yields to sandbox requests, but only for a while: with an exec in
    flight the whole time, a claimed pool still refills."""
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nwarm_pool = minimal:small:1\nnetwork = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    busy = None
    try:
        a = d.api()
        wait_for(lambda: pool_of(a).get("ready") == 1, timeout=30, what="the pool to fill")
        busy = a.create("minimal")
        wait_for(lambda: pool_of(a).get("ready") == 1, timeout=30, what="the pool to refill")
        done = []
        t = threading.Thread(target=lambda: done.append(
            a.request("POST", f"/v1/sandboxes/{busy['id']}/exec",
                      {"cmd": "echo > /tmp/started; exec sleep 600"})))
        t.start()

        def started():
            r = a.request("GET", f"/v1/sandboxes/{busy['id']}/files?path=/tmp/started")
            return r.status == 200
        wait_for(started, timeout=30, what="the long exec to start")
        sb = a.create("minimal")
        assert pool_of(a)["ready"] == 0
        wait_for(lambda: pool_of(a).get("ready") == 1, timeout=30,
                 what="the pool to refill under a request in flight")
        assert t.is_alive() and not done  # the exec was in flight all along
        a.delete(sb["id"])
        busy_id = busy["id"]
        a.delete(busy_id)  # ends the exec
        busy = None
        t.join(timeout=30)
        assert done and done[0].status == 409, (done[0].status, done[0].body)
        assert done[0].json()["error"]["message"] == (
            f"sandbox {busy_id} ended while the request ran (deleted_by_api)")
    finally:
        if busy:
            a.delete(busy["id"])
        d.stop()
    assert leftovers(d.state_dir) == []
