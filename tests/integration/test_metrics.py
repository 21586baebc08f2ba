"""Metrics (docs/metrics.md): the host's Prometheus exposition at /metrics, parsed with a
real parser (Debian's python3-prometheus-client), whose values move as they should; its
scopes and the unauthenticated metrics_listen; and each sandbox's usage samples at
/v1/sandboxes/{id}/metrics, kept as a black box once it ended."""

import json
import os
import signal
import socket
import sqlite3
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from brigtest import Api, Brigd, leftovers, wait_for

MiB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def md(tmp_path_factory):
    """A brigd sampling every second, with a warm minimal/small, a tariff of 128 MiB and
    the unauthenticated listener."""
    tmp = tmp_path_factory.mktemp("metrics")
    port = free_port()
    cfg = tmp / "brigd.conf"
    cfg.write_text("[brigd]\nmetrics_interval = 1\nwarm_pool = minimal:small:1\n"
                   f"metrics_listen = 127.0.0.1:{port}\n"
                   "[tariff.tiny]\nvcpus = 1\nmemory_mib = 128\ndisk_mib = 256\n"
                   "price_micro_usd_per_second = 1\n")
    d = Brigd(str(tmp / "state"), ["--config", str(cfg)]).start()
    d.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield d
    a = d.api()
    for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
        a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    d.stop()
    assert leftovers(d.state_dir) == []


def scrape(api):
    r = api.ok("GET", "/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(r.body.decode())


def parse(text):
    """{(sample name, frozenset of labels): value}, every family parsed strictly."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(m, name, **labels):
    return m.get((name, frozenset(labels.items())), 0.0)


def total(m, name):
    return sum(v for (n, _), v in m.items() if n == name)


def test_exposition_moves_with_creates_execs_and_errors(md):
    a = md.api()
    wait_for(lambda: value(scrape(a), "brig_warm_pool_ready", template="minimal", tariff="small",
                           isolation="container") == 1, timeout=60, what="the pool to fill")
    before = scrape(a)
    sb = a.create("minimal")  # claims the warm one
    a.exec(sb["id"], "true")
    during = scrape(a)
    assert value(during, "brig_sandboxes_running") == 1  # the warm one is nobody's: not listed
    assert value(during, "brig_sandboxes_live") == 1
    a.request("GET", "/v1/sandboxes/sbx-nosuchsandbox")
    a.request("GET", "/v1/no/such/route")
    a.delete(sb["id"])
    after = scrape(a)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("brig_sandboxes_created_total", isolation="container", pool="hit") == 1
    assert moved("brig_sandbox_create_seconds_count", pool="hit") == 1
    assert moved("brig_warm_pool_hits_total", template="minimal", tariff="small",
                 isolation="container") == 1
    assert moved("brig_exec_seconds_count") == 1
    assert moved("brig_sandboxes_ended_total", reason="deleted") == 1  # typed
    assert moved("brig_http_requests_total", method="GET", route="/v1/sandboxes/{id}",
                 status="404") == 1
    assert moved("brig_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert moved("brig_http_requests_total", method="POST", route="/v1/sandboxes/{id}/exec",
                 status="200") == 1
    # No raw path ever becomes a label.
    assert not [k for k in after if any("sbx" in v for _, v in k[1])]
    assert value(after, "brig_capacity_slots") == 500
    assert value(after, "brig_admission_queue_length") == 0
    assert value(after, "brig_billing_charged_micro_usd_total") > 0
    # A cold create of a tariff the pool does not keep.
    cold = a.create("minimal", tariff="tiny")
    a.delete(cold["id"])
    m = scrape(a)
    assert value(m, "brig_sandbox_create_seconds_count", pool="cold") == \
        value(after, "brig_sandbox_create_seconds_count", pool="cold") + 1
    assert value(m, "brig_sandbox_create_seconds_bucket", pool="cold", le="+Inf") >= 1


# Every metric of issue 13's list, by family as the parser names it (counters without
# their _total) and type.
FAMILIES = {
    "brig_sandboxes_live": "gauge", "brig_sandboxes_running": "gauge",
    "brig_sandboxes_created": "counter", "brig_sandboxes_ended": "counter",
    "brig_sandbox_creates_failed": "counter", "brig_sandbox_create_seconds": "histogram",
    "brig_exec_seconds": "histogram", "brig_warm_pool_ready": "gauge",
    "brig_warm_pool_target": "gauge", "brig_warm_pool_hits": "counter",
    "brig_warm_pool_misses": "counter", "brig_admission_queue_length": "gauge",
    "brig_admission_refused": "counter", "brig_capacity_slots_used": "gauge",
    "brig_capacity_slots": "gauge", "brig_capacity_memory_mib_used": "gauge",
    "brig_capacity_memory_mib": "gauge", "brig_capacity_disk_mib_used": "gauge",
    "brig_capacity_disk_mib": "gauge", "brig_http_requests": "counter",
    "brig_http_request_seconds": "histogram", "brig_agent_errors": "counter",
    "brig_billing_charged_micro_usd": "counter",
}


def test_every_family_and_refusals_and_agent_errors_move(md):
    a = md.api()
    text = a.ok("GET", "/metrics").body.decode()
    got = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert {k: got.get(k) for k in FAMILIES} == FAMILIES
    before = parse(text)
    # A create refused by the account's spend limit.
    acc = md.operator().ok("POST", "/v1/accounts", {"name": "refused"}).json()
    other = Api(a.base_url, acc["api_key"])
    other.ok("PATCH", "/v1/account", {"daily_limit_micro_usd": 0})
    assert other.request("POST", "/v1/sandboxes", {"template": "minimal"}).status == 429
    # A command whose agent dies under it: its connection fails (io).
    sid = a.create("minimal", tariff="tiny")["id"]
    cg = f"/sys/fs/cgroup/pids/brig/{sid}/cgroup.procs"
    box = {}
    t = threading.Thread(target=lambda: box.setdefault(
        "r", a.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "sleep 60"})))
    t.start()
    wait_for(lambda: "sleep" in comms(cg), timeout=20, what="the command to run")
    with open(os.path.join(md.state_dir, "sandboxes", sid, "init.pid")) as f:
        os.kill(int(f.read()), signal.SIGKILL)
    t.join(60)
    assert box["r"].status in (409, 502), box["r"].body
    wait_for(lambda: samples(a, sid)["state"] == "ended", timeout=20, what="its end")
    after = scrape(a)
    assert value(after, "brig_admission_refused_total", reason="limit_exceeded") == \
        value(before, "brig_admission_refused_total", reason="limit_exceeded") + 1
    assert value(after, "brig_agent_errors_total", kind="io") > \
        value(before, "brig_agent_errors_total", kind="io")
    assert value(after, "brig_sandboxes_ended_total", reason="agent_lost") == \
        value(before, "brig_sandboxes_ended_total", reason="agent_lost") + 1


def comms(cgroup_procs):
    out = []
    try:
        with open(cgroup_procs) as f:
            pids = f.read().split()
    except FileNotFoundError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                out.append(f.read().strip())
        except FileNotFoundError:
            pass
    return out


def test_scopes_and_the_unauthenticated_listener(md):
    a = md.api()
    assert "brig_sandboxes_live" in {n for n, _ in scrape(md.operator())}
    p = a.ok("POST", "/v1/projects", {"name": "metrics-scoped"}).json()
    k = a.ok("POST", f"/v1/projects/{p['id']}/keys", {"scope": "sandbox"}).json()
    r = Api(a.base_url, k["key"]).request("GET", "/metrics")
    assert r.status == 403 and r.json()["error"]["code"] == "forbidden"
    assert a.request("GET", "/metrics", key=None).status == 401
    with urllib.request.urlopen(md.metrics_url, timeout=10) as r:
        m = parse(r.read().decode())
    assert ("brig_capacity_slots", frozenset()) in m
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(md.metrics_url.replace("/metrics", "/v1/sandboxes"), timeout=10)
    assert e.value.code == 404


def samples(api, sid):
    return api.ok("GET", f"/v1/sandboxes/{sid}/metrics").json()


def latest(api, sid, field):
    s = samples(api, sid)["latest"]
    return s[field] if s else None


def test_disk_network_and_execs_of_a_sandbox(md):
    a = md.api()
    sb = a.create("minimal", tariff="tiny")
    sid = sb["id"]
    wait_for(lambda: latest(a, sid, "disk_bytes") is not None, timeout=10, what="a sample")
    m = samples(a, sid)
    assert m["state"] == "running" and m["interval"] == 1 and m["ended_at"] is None
    s = m["latest"]
    assert s["pids"] >= 1 and s["memory_bytes"] > 0 and s["cpu_seconds"] >= 0
    disk0, inodes0 = s["disk_bytes"], s["disk_inodes"]
    a.exec(sid, "dd if=/dev/urandom of=/big bs=1M count=8 && sync")
    wait_for(lambda: latest(a, sid, "disk_bytes") >= disk0 + 7 * MiB, timeout=10,
             what="disk use to grow")
    assert latest(a, sid, "disk_inodes") >= inodes0 + 1
    # From the second sample on, CPU use since the one before.
    wait_for(lambda: latest(a, sid, "cpu_percent") is not None, timeout=10, what="CPU use")
    out0 = latest(a, sid, "net_bytes_out")
    # One brigd per network namespace has networking (the session's, when it runs):
    # without it a sandbox has no link and no counters.  test_network's
    # test_e2e_metrics_count_a_sandboxs_traffic checks them with networking for sure.
    if a.request("GET", "/healthz", key=None).json()["network"]:
        assert out0 is not None
        a.exec(sid, "nslookup example.com; true", timeout=20)
        wait_for(lambda: latest(a, sid, "net_bytes_out") > out0 and
                 latest(a, sid, "net_packets_out") > 0 and latest(a, sid, "net_bytes_in") > 0
                 and latest(a, sid, "net_packets_in") > 0, timeout=10, what="traffic to count")
    else:
        assert out0 is None
        a.exec(sid, "true")
    wait_for(lambda: latest(a, sid, "execs") == 2, timeout=10, what="the execs counted")
    assert samples(a, sid)["execs"] == 2
    # Another project's key sees no such sandbox; a missing one is a 404 too.
    p = a.ok("POST", "/v1/projects", {"name": "metrics-other"}).json()
    k = a.ok("POST", f"/v1/projects/{p['id']}/keys", {"scope": "sandbox"}).json()
    assert Api(a.base_url, k["key"]).request("GET", f"/v1/sandboxes/{sid}/metrics").status == 404
    assert a.request("GET", "/v1/sandboxes/sbx-nosuchsandbox/metrics").status == 404
    a.delete(sid)
    ended = samples(a, sid)
    assert ended["state"] == "ended" and ended["reason"] == "deleted_by_api"
    assert ended["ended_at"] and ended["samples"]
    # The CLI prints the same samples, also of the ended sandbox.
    from test_api import cli
    table = cli(a, "metrics", sid).stdout.decode().splitlines()
    assert table[0].split()[:2] == ["TIME", "CPU%"] and len(table) == len(ended["samples"]) + 2
    assert table[-1] == "2 exec(s); ended: deleted_by_api", table
    assert json.loads(cli(a, "metrics", "--json", sid).stdout)["reason"] == "deleted_by_api"
    assert cli(a, "metrics", "sbx_nosuchsandbox", check=False).returncode != 0
    assert Api(a.base_url, k["key"]).request("GET", f"/v1/sandboxes/{sid}/metrics").status == 404


def check_climb(box):
    """The climb to a 128 MiB limit: several samples on the way up, and the peak at it."""
    assert box["state"] == "ended"
    mem = [s["memory_bytes"] for s in box["samples"] if s["memory_bytes"] is not None]
    rising = [m for m in mem if 16 * MiB < m < 120 * MiB]
    assert len(rising) >= 2, mem
    assert box["samples"][-1]["memory_peak_bytes"] >= 120 * MiB, box["samples"][-1]


def oom_climb(a, sid):
    """8 MiB every 0.25 s, touched, until the OOM killer takes the command."""
    wait_for(lambda: latest(a, sid, "memory_bytes") is not None, timeout=10, what="a sample")
    hog = ("import time\nb = []\nwhile True:\n    b.append(b'x' * (8 << 20))\n"
           "    time.sleep(0.25)\n")
    a.put_file(sid, "/hog.py", hog.encode())
    r = a.exec(sid, argv=["python3", "/hog.py"], timeout=60)
    assert r["signal"] == 9 or r["exit_code"] == 137, r
    assert r["reason"] == "oom_killed", r


@pytest.mark.base
def test_black_box_shows_the_memory_climb_before_an_oom(md):
    a = md.api()
    sid = a.create("base", tariff="tiny")["id"]
    oom_climb(a, sid)
    a.delete(sid)
    box = samples(a, sid)
    check_climb(box)
    assert (box["reason"], box["end_reason"]) == ("deleted_by_api", "deleted")


def blackbox_rows(d):
    con = sqlite3.connect(f"file:{os.path.join(d.state_dir, 'brig.db')}?mode=ro", uri=True)
    n = con.execute("SELECT count(*) FROM blackboxes").fetchone()[0]
    con.close()
    return n


@pytest.mark.base
def test_black_box_outlives_a_restart_until_its_retention(tmp_path):
    """The black box is kept in the store with its sandbox: a restart of brigd keeps it,
    whole, for the retention period; then the janitor prunes it."""
    conf = ("[brigd]\nmetrics_interval = 1\n{}[tariff.tiny]\nvcpus = 1\nmemory_mib = 128\n"
            "disk_mib = 256\nprice_micro_usd_per_second = 1\n")
    cfg = tmp_path / "brigd.conf"
    cfg.write_text(conf.format(""))
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        sid = a.create("base", tariff="tiny")["id"]
        short = a.create("minimal")["id"]  # ended before any tick sampled it
        oom_climb(a, sid)
        a.delete(sid)
        a.delete(short)
        box = samples(a, sid)
        check_climb(box)
        assert len(samples(a, short)["samples"]) >= 1  # its last sample, at its end
        p = a.ok("POST", "/v1/projects", {"name": "other"}).json()
        k = a.ok("POST", f"/v1/projects/{p['id']}/keys", {"scope": "sandbox"}).json()
        d.stop()
        d.start()
        a = d.api()
        assert samples(a, sid) == box
        assert Api(d.url, k["key"]).request("GET", f"/v1/sandboxes/{sid}/metrics").status == 404
        d.stop()
        cfg.write_text(conf.format("retention = 1\n"))
        d.start()
        a = d.api()
        wait_for(lambda: a.request("GET", f"/v1/sandboxes/{sid}/metrics").status == 404,
                 timeout=10, what="the black box past its retention")
        wait_for(lambda: blackbox_rows(d) == 0, timeout=90, what="the janitor to prune it")
    finally:
        if d.proc is not None:
            d.stop()
    assert leftovers(d.state_dir) == []
