"""The warm pool: sandboxes started ahead of demand are claimed by creates, the
pool refills, claimed sandboxes are ordinary ones of the caller, and nothing of
the pool outlives brigd."""

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
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)])
    try:
        d.start(timeout=20)
    except RuntimeError as e:
        assert "warm_pool: no tariff 'nosuchtariff'" in str(e)
        assert d.proc.wait(timeout=20) == 2  # a usage error, before doing anything
        d.proc = None
    else:
        d.stop()
        raise AssertionError("brigd started with a bad warm_pool")


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
