"""Account-level attacks on the host's shared capacity and on the money arithmetic:

- a burst of concurrent creates must not slip past the account's concurrency limit
  (the new sandbox is counted in the same critical section as the check);
- a tenant must not promise itself more disk than the host has: disk is admitted
  like memory (a budget from the free space of the state dir's file system, less a
  reserve for brigd's store and logs), a create that does not fit queues without
  holding up another account's create that does, and the host's free space is
  checked against the reserve at every create;
- an account restricted to some tariffs cannot pick another one;
- a credit (or a limit) cannot push money past integer micro-dollars.

Each attack runs while another account works next to it, and that account is
measured (its creates and commands) during the attack."""

import json
import os
import threading
import time

import pytest

import brigtest
import sectest

# These attacks are on brigd's accounts, money and capacity admission, the same whatever
# isolation a sandbox has: one mode, each test saying so.  The one whose tenant writes
# its disk until the host's reserve is reached runs in both.
BRIGD_ONLY = pytest.mark.isolation("container")


MIB = 1 << 20
CREDIT_MAX = 10**12  # micro-dollars: $1,000,000 per credit
MONEY_MAX = 10**15  # micro-dollars: the most any balance or limit may hold


def _operator_account(daemon, name):
    """A fresh account (the attacker or a bystander): its id and an API for its admin key."""
    acct = daemon.operator().ok("POST", "/v1/accounts", {"name": name}).json()
    return acct["id"], brigtest.Api(daemon.url, acct["api_key"])


def _exec_true_s(api, sid):
    t0 = time.monotonic()
    r = api.exec(sid, argv=["true"], timeout=10)
    assert r["exit_code"] == 0, r
    return time.monotonic() - t0


def _create_s(api, **body):
    """Seconds a create took, and the response."""
    t0 = time.monotonic()
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", **body}, timeout=120)
    return time.monotonic() - t0, r


def _error(r, status):
    assert r.status == status, f"{r.status} {r.body[:300]!r}"
    e = r.json()["error"]
    assert set(e) == {"code", "message"} and e["message"], e
    return e["message"]


def _delete_checked(daemon, api, ids):
    for sid in ids:
        r = api.request("DELETE", f"/v1/sandboxes/{sid}", timeout=30)
        assert r.status in (204, 404), r.body
    brigtest.wait_for(lambda: not sectest.sandbox_leaks(daemon.state_dir, ids), timeout=30,
                      what="no leftovers of the account's sandboxes")


# ---- finding 19: the concurrency limit under a burst of creates ---------------------------

def _burst(api, n):
    """n creates released at once from n threads: their responses."""
    barrier = threading.Barrier(n)
    out = [None] * n

    def one(i):
        barrier.wait()
        out[i] = api.request("POST", "/v1/sandboxes", {"template": "minimal"}, timeout=120)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert all(r is not None for r in out), "a create of the burst never answered"
    return out


def _check_burst(sec, limit, set_limit):
    """40 concurrent creates of one account against its limit leave exactly `limit`
    live and answer the rest 429; another account creates and runs commands
    during the burst, as fast as before it (relative bound)."""
    acc, attacker = _operator_account(sec.daemon, "burst")
    if set_limit:
        r = sec.daemon.operator().ok("PATCH", f"/v1/accounts/{acc}",
                                     {"max_live_sandboxes": limit}).json()
        assert r["max_live_sandboxes"] == limit, r
    assert attacker.ok("GET", "/v1/account").json()["max_live_sandboxes"] == limit
    victim = sec.victim
    base_exec = min(_exec_true_s(victim.api, victim.id) for _ in range(3))
    base_create, r = _create_s(victim.api)
    assert r.status == 201, r.body
    ids = [r.json()["id"]]
    got = []
    try:
        during = {}

        def bystander():
            brigtest.wait_for(lambda: attacker.ok("GET", "/v1/account").json()
                              ["live_sandboxes"] > 0, timeout=60, interval=0.01,
                              what="the burst to start")
            during["create"] = _create_s(victim.api)
            during["exec"] = _exec_true_s(victim.api, victim.id)

        t = threading.Thread(target=bystander)
        t.start()
        got = _burst(attacker, 40)
        t.join(timeout=120)
        created = [r.json()["id"] for r in got if r.status == 201]
        refused = [r for r in got if r.status != 201]
        statuses = sorted({r.status for r in got})
        live = attacker.ok("GET", "/v1/sandboxes").json()["sandboxes"]
        account = attacker.ok("GET", "/v1/account").json()
        assert len(created) == limit and len(live) == limit and \
            account["live_sandboxes"] == limit, (
                f"limit {limit}: {len(created)} creates succeeded, {len(live)} live, "
                f"statuses {statuses}")
        for r in refused:
            assert "concurrency limit reached" in _error(r, 429)
        # The bystander account was served during the burst.
        create_s, r = during["create"]
        assert r.status == 201, r.body
        ids.append(r.json()["id"])
        assert create_s < base_create * 10 + 20, (create_s, base_create)
        assert during["exec"] < base_exec * 20 + 5, (during["exec"], base_exec)
    finally:
        _delete_checked(sec.daemon, attacker, [r.json()["id"] for r in got if r.status == 201])
        _delete_checked(sec.daemon, victim.api, ids)
    # Deleting frees the account's slots: it may create again.
    sid = attacker.create("minimal")["id"]
    _delete_checked(sec.daemon, attacker, [sid])


@BRIGD_ONLY  # admission in brigd
def test_concurrent_creates_leave_exactly_the_default_limit_live(sec):
    _check_burst(sec, 20, set_limit=False)


@BRIGD_ONLY  # admission in brigd
def test_concurrent_creates_leave_exactly_an_operator_set_limit_live(sec):
    _check_burst(sec, 5, set_limit=True)


# ---- finding 16: money stays bounded integer micro-dollars ---------------------------------

def _balance(api):
    r = api.ok("GET", "/v1/account")
    raw = r.body.decode()
    acct = r.json()
    b = acct["balance_micro_usd"]
    assert type(b) is int, f"balance is not an integer in JSON: {raw}"
    # The raw text too: a number with a fraction or an exponent is a float.
    tail = raw.split('"balance_micro_usd":', 1)[1].lstrip()
    num = tail[:len(tail) - len(tail.lstrip("-0123456789.eE+"))]
    assert num.lstrip("-").isdigit(), f"balance_micro_usd written as {num!r}"
    return b


@BRIGD_ONLY  # brigd's money
def test_a_huge_credit_is_refused_and_the_balance_stays_an_integer(sec):
    acc, tenant = _operator_account(sec.daemon, "rich")
    op = sec.daemon.operator()
    before = _balance(tenant)
    for amount in (2**63 - 1, CREDIT_MAX + 1, 2**62):
        r = op.request("POST", f"/v1/accounts/{acc}/credits", {"amount_micro_usd": amount})
        msg = _error(r, 400)
        assert "[1, 1000000000000]" in msg, msg
        assert _balance(tenant) == before
    # Not a number JSON can carry exactly, not an integer: refused as well.
    for raw in (b'{"amount_micro_usd": 1e300}', b'{"amount_micro_usd": 9223372036854775808}'):
        r = op.request("POST", f"/v1/accounts/{acc}/credits", raw,
                       headers={"Content-Type": "application/json"})
        assert r.status == 400, r.body
        assert _balance(tenant) == before
    # The largest credit is taken exactly.
    r = op.ok("POST", f"/v1/accounts/{acc}/credits", {"amount_micro_usd": CREDIT_MAX}).json()
    assert r["balance_micro_usd"] == before + CREDIT_MAX
    assert _balance(tenant) == before + CREDIT_MAX
    # Limits are bounded the same way.
    r = tenant.request("PATCH", "/v1/account", {"daily_limit_micro_usd": 2**63 - 1})
    assert str(MONEY_MAX) in _error(r, 400)
    r = tenant.ok("PATCH", "/v1/account", {"daily_limit_micro_usd": MONEY_MAX}).json()
    assert r["daily_limit_micro_usd"] == MONEY_MAX
    # The account still works: a sandbox is created, runs and is charged in integers.
    sid = tenant.create("minimal")["id"]
    assert tenant.exec(sid, argv=["true"])["exit_code"] == 0
    _delete_checked(sec.daemon, tenant, [sid])
    after = _balance(tenant)
    assert before + CREDIT_MAX - 10_000 <= after < before + CREDIT_MAX
    sec.victim.check()


# ---- finding 8: per-account tariffs --------------------------------------------------------

@BRIGD_ONLY  # brigd's tariffs
def test_a_restricted_account_cannot_pick_a_tariff_not_allowed_to_it(sec):
    acc, tenant = _operator_account(sec.daemon, "restricted")
    op = sec.daemon.operator()
    assert tenant.ok("GET", "/v1/account").json()["tariffs"] is None  # all, by default
    r = op.ok("PATCH", f"/v1/accounts/{acc}", {"tariffs": ["small"]}).json()
    assert r["tariffs"] == ["small"], r
    assert tenant.ok("GET", "/v1/account").json()["tariffs"] == ["small"]
    for tariff in ("large", "medium"):
        r = tenant.request("POST", "/v1/sandboxes", {"template": "minimal", "tariff": tariff})
        msg = _error(r, 403)
        assert f"may not use tariff '{tariff}'" in msg and "small" in msg, msg
    # Only the operator sets them: not the account's admin key, by either route.
    r = tenant.request("PATCH", f"/v1/accounts/{acc}", {"tariffs": None})
    _error(r, 403)
    r = tenant.request("PATCH", "/v1/account", {"tariffs": None})
    assert "tariffs" in _error(r, 400)
    # Bad lists are refused with a clear error.
    for bad, says in (({"tariffs": ["nope"]}, "no tariff named 'nope'"),
                      ({"tariffs": "small"}, "a list of tariff names"),
                      ({"tariffs": []}, "at least one"),
                      ({"tariffs": [1]}, "a list of tariff names"),
                      ({"max_live_sandboxes": -1}, "max_live_sandboxes"),
                      ({"max_live_sandboxes": 2**40}, "max_live_sandboxes")):
        assert says in _error(op.request("PATCH", f"/v1/accounts/{acc}", bad), 400)
    _error(op.request("PATCH", "/v1/accounts/acc_nobody", {"tariffs": None}), 404)
    # The allowed tariff (the default) works.
    sid = tenant.create("minimal")["id"]
    assert tenant.exec(sid, argv=["true"])["exit_code"] == 0
    _delete_checked(sec.daemon, tenant, [sid])
    # null lifts the restriction.
    assert op.ok("PATCH", f"/v1/accounts/{acc}", {"tariffs": None}).json()["tariffs"] is None
    sid = tenant.create("minimal", tariff="medium")["id"]
    _delete_checked(sec.daemon, tenant, [sid])
    sec.victim.check()


# ---- finding 8: the disk budget and the reserve -------------------------------------------

def _free_mib(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // MIB


def _health(api):
    return api.request("GET", "/healthz", key=None).json()


def _own_brigd(tmp_path, conf):
    """A brigd of this test's own (networking off: the suite's brigd owns this
    network namespace's sandbox networking)."""
    state = tmp_path / "state"
    state.mkdir()
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nnetwork = off\n" + conf)
    return brigtest.Brigd(str(state), ["--config", str(cfg)])


@BRIGD_ONLY  # disk promised, not written
def test_the_disk_budget_queues_a_create_that_does_not_fit_and_serves_another_account(
        sec, tmp_path):
    """The state dir's free space, times disk_overcommit, less the reserve, is what
    live sandboxes' disks may add up to.  An attacker that holds most of it and asks
    for more queues (and a tariff above the whole budget is refused at once), while
    another account's small create goes through at once."""
    free = _free_mib(str(tmp_path))
    budget = 1000  # MiB, from a ratio fitted to the free space now
    ratio = budget / (free - 1024)
    big, tiny = 600, 100  # two bigs do not fit, a big and a few tiny ones do
    d = _own_brigd(tmp_path, f"disk_overcommit = {ratio:.8f}\ncreate_queue_timeout = 120\n"
                             f"[tariff.big]\nmemory_mib = 64\ndisk_mib = {big}\n"
                             f"[tariff.tiny]\nmemory_mib = 64\ndisk_mib = {tiny}\n"
                             f"[tariff.whole]\nmemory_mib = 64\ndisk_mib = {budget * 3 // 2}\n")
    d.start()
    a_ids, b_ids = [], []
    try:
        _, attacker = _operator_account(d, "attacker")
        _, bystander = _operator_account(d, "bystander")
        h = _health(bystander)
        assert abs(h["disk_mib_capacity"] - budget) < budget * 0.05, h
        assert h["disk_mib_used"] == 0, h
        a_ids.append(attacker.create("minimal", tariff="big")["id"])
        # The bystander's baseline, served last: the turn is then the attacker's.
        base_create, r = _create_s(bystander, tariff="tiny")
        assert r.status == 201, r.body
        b_ids.append(r.json()["id"])
        base_exec = min(_exec_true_s(bystander, b_ids[0]) for _ in range(3))
        assert _health(bystander)["disk_mib_used"] == big + tiny
        # A tariff above the whole budget can never fit: refused at once.
        t, r = _create_s(attacker, tariff="whole")
        msg = _error(r, 503)
        assert "can never fit" in msg and "disk" in msg, msg
        # The attacker's second big does not fit now: it waits...
        queued = {}
        th = threading.Thread(target=lambda: queued.update(r=_create_s(attacker, tariff="big")))
        th.start()
        brigtest.wait_for(lambda: _health(bystander)["queued"] == 1, timeout=30,
                          what="the attacker's second create to queue")
        # ...and holds up nobody else: the bystander's create is served at once
        # (not after the attacker's queue timeout, 120 s).
        during_create, r = _create_s(bystander, tariff="tiny")
        assert r.status == 201, r.body
        b_ids.append(r.json()["id"])
        assert during_create < base_create * 10 + 20, (during_create, base_create)
        assert _exec_true_s(bystander, b_ids[1]) < base_exec * 20 + 5
        h = _health(bystander)
        assert h["queued"] == 1 and h["disk_mib_used"] == big + 2 * tiny, h
        # The attacker's own freed disk is what serves its queued create.
        attacker.delete(a_ids.pop())
        th.join(timeout=90)
        _, r = queued["r"]
        assert r.status == 201, r.body
        a_ids.append(r.json()["id"])
        assert _health(bystander)["disk_mib_used"] == big + 2 * tiny
    finally:
        for api, ids in ((attacker, a_ids), (bystander, b_ids)):
            for sid in ids:
                api.request("DELETE", f"/v1/sandboxes/{sid}")
        d.stop()
    assert brigtest.leftovers(d.state_dir) == []


@BRIGD_ONLY  # disk promised, not written
def test_the_default_disk_budget_keeps_the_reserve_free(sec, tmp_path):
    """By default (disk_overcommit = 1) every sandbox may fill its whole disk and
    the state dir's file system still keeps the reserve: the budget is at most the
    free space less the reserve, so `large` sandboxes (32 GiB each) stop being
    admitted long before they could promise more than the host has."""
    before = _free_mib(str(tmp_path))
    d = _own_brigd(tmp_path, "create_queue_timeout = 1\n").start()
    try:
        _, attacker = _operator_account(d, "attacker")
        h = _health(attacker)
        free = max(before, _free_mib(str(tmp_path)))  # what brigd saw was between the two
        assert h["disk_mib_capacity"] <= free - 1024 + 64, (h, free)
        fit = h["disk_mib_capacity"] // 32768  # how many `large` disks the budget holds
        ids = []
        try:
            for _ in range(fit):
                ids.append(attacker.create("minimal", tariff="large")["id"])
            _, r = _create_s(attacker, tariff="large")
            msg = _error(r, 503)
            assert "disk" in msg, msg
            assert _health(attacker)["disk_mib_used"] == fit * 32768
        finally:
            for sid in ids:
                attacker.request("DELETE", f"/v1/sandboxes/{sid}")
    finally:
        d.stop()
    assert brigtest.leftovers(d.state_dir) == []


def test_creates_stop_when_the_host_disk_is_down_to_its_reserve(sec, tmp_path):
    """With disk overcommitted (sandboxes may write more than the host has), the
    reserve is checked against the state dir's real free space at every create:
    once a tenant's writes eat into it, every create is refused with a clear
    error (the store and the logs keep their room), and they come back when the
    space does.  Under gVisor the tenant writes /tmp, the disk that runsc's file
    access reaches on the host (its / is an overlay that gVisor fills in memory first);
    what counts is the host's free space after a host sync."""
    free = _free_mib(str(tmp_path))
    reserve = free - 768  # 768 MiB above the reserve now
    d = _own_brigd(tmp_path, f"disk_overcommit = 1000\ndisk_reserve_mib = {reserve}\n"
                             "[tariff.fill]\nmemory_mib = 128\ndisk_mib = 2048\n").start()
    ids = []
    try:
        _, attacker = _operator_account(d, "attacker")
        _, bystander = _operator_account(d, "bystander")
        sid = attacker.create("minimal", tariff="fill")["id"]
        ids.append(sid)
        fill = "/tmp/fill" if sec.gvisor else "/root/fill"
        r = attacker.exec(sid, f"dd if=/dev/zero of={fill} bs=1M count=1536 conv=fsync "
                               "2>&1; sync", timeout=300)
        os.sync()  # what the sandbox wrote, through its image's loop device to the host
        assert _free_mib(str(tmp_path)) < reserve, (r, _free_mib(str(tmp_path)), reserve)
        _, r = _create_s(bystander)
        msg = _error(r, 503)
        assert "reserve" in msg and "disk" in msg, msg
        assert json.loads(d.api().request("GET", "/healthz", key=None).body)["status"] == "ok"
        attacker.delete(ids.pop())
        brigtest.wait_for(lambda: _free_mib(str(tmp_path)) > reserve + 256, timeout=60,
                          what="the filler's disk to be given back")
        sid = bystander.create("minimal")["id"]
        bystander.delete(sid)
    finally:
        for sid in ids:
            attacker.request("DELETE", f"/v1/sandboxes/{sid}")
        d.stop()
    assert brigtest.leftovers(d.state_dir) == []
