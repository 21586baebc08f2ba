"""Host capacity by memory: the tariffs' memory limits of live sandboxes add up to
at most memory_overcommit x the host's RAM; beyond, creates queue and then get 503."""

import os
import threading

from brigtest import Brigd, leftovers, wait_for


def ram_mib():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGESIZE") // (1024 * 1024)


def start(tmp_path, queue_timeout, extra=""):
    budget = int(ram_mib() * 0.1)
    half = budget // 2 + 16  # two do not fit, one does
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nmemory_overcommit = 0.1\nnetwork = off\n"
                   f"create_queue_timeout = {queue_timeout}\n{extra}"
                   f"[tariff.half]\nmemory_mib = {half}\n"
                   f"[tariff.whole]\nmemory_mib = {budget + 64}\n")
    return Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start(), budget, half


def health(a):
    return a.request("GET", "/healthz", key=None).json()


def test_memory_budget_queues_then_refuses(tmp_path):
    d, budget, half = start(tmp_path, queue_timeout=1)
    try:
        a = d.api()
        h = health(a)
        assert abs(h["memory_mib_capacity"] - budget) <= 1, h
        first = a.create("minimal", tariff="half")
        assert health(a)["memory_mib_used"] == half
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "tariff": "half"})
        assert r.status == 503, r.body
        msg = r.json()["error"]["message"]
        assert "at capacity" in msg and f"{half} of {h['memory_mib_capacity']} MiB" in msg, msg
        # A tariff above the whole budget could never fit: refused at once.
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "tariff": "whole"})
        assert r.status == 503 and "can never fit" in r.json()["error"]["message"], r.body
        # Small sandboxes still fit next to the first one.
        small = a.create("minimal")
        assert health(a)["memory_mib_used"] == half + 512
        a.delete(small["id"])
        a.delete(first["id"])
        wait_for(lambda: health(a)["memory_mib_used"] == 0, what="the memory to be returned")
        second = a.create("minimal", tariff="half")  # now it fits
        a.delete(second["id"])
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_a_queued_create_gets_the_freed_memory(tmp_path):
    d, budget, half = start(tmp_path, queue_timeout=60)
    try:
        a = d.api()
        first = a.create("minimal", tariff="half")
        got = []
        t = threading.Thread(target=lambda: got.append(
            a.request("POST", "/v1/sandboxes", {"template": "minimal", "tariff": "half"})))
        t.start()
        wait_for(lambda: health(a)["queued"] == 1, what="the second create to queue")
        a.delete(first["id"])
        t.join(timeout=60)
        assert got and got[0].status == 201, got and got[0].body
        assert health(a)["memory_mib_used"] == half
        a.delete(got[0].json()["id"])
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_bad_overcommit_is_refused(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nmemory_overcommit = lots\n")
    status, said = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).refused()
    assert "memory_overcommit: 'lots' is not 0 (no bound) or a ratio" in said
    assert status == 2
