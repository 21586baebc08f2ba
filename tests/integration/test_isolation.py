"""Isolation as a property of a sandbox (issue 12): the mode a create asks for, the
operator's default, a project's allowed modes and default (set by an admin key; a
sandbox key cannot go below them), the mode kept in the store (restart, the ended
view), and warm pools per template, tariff and isolation.

Tests of what a gvisor sandbox does call needs_gvisor() (or take `gvisor_api`): they
skip only where brigd refuses gvisor on this host, and run everywhere else."""

import json
import os
import signal
import sqlite3
import subprocess

import pytest

from brigtest import BUILD, Api, Brigd, gvisor_refusal, leftovers, needs_gvisor, wait_for

ALL = ["container", "gvisor", "microvm"]


def project_with_key(api, name, scope="sandbox"):
    p = api.ok("POST", "/v1/projects", {"name": name}).json()
    k = api.ok("POST", f"/v1/projects/{p['id']}/keys", {"scope": scope}).json()
    return p, Api(api.base_url, k["key"])


def set_policy(api, project_id, policy):
    return api.ok("PATCH", f"/v1/projects/{project_id}", {"isolation": policy}).json()


def stored_isolation(state_dir, sid):
    db = os.path.join(state_dir, "brig.db")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT isolation FROM sandboxes WHERE id = ?", (sid,)).fetchone()[0]
    finally:
        con.close()


def refused_for_gvisor(r):
    """A gvisor create on a host that cannot run it: a 400 naming gvisor, never a
    sandbox of another mode."""
    assert r.status == 400, (r.status, r.body)
    assert "gvisor" in r.json()["error"]["message"]


# ---- the mode of a create ---------------------------------------------------------------

def test_default_is_container_shown_live_and_ended(api, daemon):
    sb = api.create("minimal")
    assert sb["isolation"] == "container"
    assert api.ok("GET", f"/v1/sandboxes/{sb['id']}").json()["isolation"] == "container"
    listed = api.ok("GET", "/v1/sandboxes").json()["sandboxes"]
    assert [s["isolation"] for s in listed if s["id"] == sb["id"]] == ["container"]
    assert stored_isolation(daemon.state_dir, sb["id"]) == "container"
    api.delete(sb["id"])
    ended = api.ok("GET", f"/v1/sandboxes/{sb['id']}").json()
    assert ended["state"] == "deleted" and ended["isolation"] == "container"


def test_explicit_container(api):
    sb = api.create("minimal", isolation="container")
    assert sb["isolation"] == "container"
    assert api.exec(sb["id"], "echo ok")["stdout"] == "ok\n"
    api.delete(sb["id"])


@pytest.mark.parametrize("value, needle", [
    ("kvm", "'isolation' must be \"container\" or \"gvisor\""),
    ("", "'isolation' must be"),
    ("GVISOR", "'isolation' must be"),
    (5, "'isolation' must be"),
    (["gvisor"], "'isolation' must be"),
])
def test_invalid_mode_is_400(api, value, needle):
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "isolation": value})
    assert r.status == 400, r.body
    assert needle in r.json()["error"]["message"]
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []


def test_gvisor_is_run_or_refused_never_downgraded(api, daemon):
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "gvisor"})
    if gvisor_refusal(api) is not None:
        refused_for_gvisor(r)
        assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
        return
    assert r.status == 201, r.body
    sb = r.json()
    assert sb["isolation"] == "gvisor"
    assert stored_isolation(daemon.state_dir, sb["id"]) == "gvisor"
    api.delete(sb["id"])


def test_gvisor_sandbox_runs_and_says_so(gvisor_api, daemon):
    api = gvisor_api
    sb = api.create("minimal", isolation="gvisor")
    assert sb["isolation"] == "gvisor"
    assert api.exec(sb["id"], "echo hi")["stdout"] == "hi\n"
    # Its kernel is gVisor's, not the host's: the host's kernel release is not what
    # the sandbox sees (gVisor reports its own).
    inside = api.exec(sb["id"], "cat /proc/version")["stdout"]
    assert inside != open("/proc/version").read()
    api.delete(sb["id"])
    ended = api.ok("GET", f"/v1/sandboxes/{sb['id']}").json()
    assert ended["isolation"] == "gvisor"


# ---- a project's policy -----------------------------------------------------------------

def test_project_policy_default_shape(api):
    p = api.ok("POST", "/v1/projects", {"name": "iso-shape"}).json()
    assert p["isolation"] == {"allowed": ALL, "default": None}
    listed = api.ok("GET", "/v1/projects").json()["projects"]
    assert all(x["isolation"]["allowed"] for x in listed)
    got = api.ok("GET", f"/v1/projects/{p['id']}").json()
    assert got["isolation"] == {"allowed": ALL, "default": None}
    assert got["egress"] == {"mode": "open"}  # the rest as it was


def test_admin_requires_gvisor_sandbox_key_cannot_lower_it(api):
    p, agent = project_with_key(api, "iso-gvisor-only")
    out = set_policy(api, p["id"], {"allowed": ["gvisor"]})
    assert out["isolation"] == {"allowed": ["gvisor"], "default": None}
    assert api.ok("GET", f"/v1/projects/{p['id']}").json()["isolation"]["allowed"] == ["gvisor"]
    # A sandbox key asks for less: refused, naming what the project allows.
    r = agent.request("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "container"})
    assert r.status == 403, r.body
    msg = r.json()["error"]["message"]
    assert "isolation 'container' is not allowed" in msg and "allowed modes are gvisor" in msg
    # Nor may it change the policy.
    r = agent.request("PATCH", f"/v1/projects/{p['id']}", {"isolation": None})
    assert r.status == 403, r.body
    assert api.ok("GET", f"/v1/projects/{p['id']}").json()["isolation"]["allowed"] == ["gvisor"]
    # The admin key is held to the project's policy too (it changes the policy instead).
    r = api.request("POST", "/v1/sandboxes",
                    {"template": "minimal", "isolation": "container", "project": p["id"]})
    assert r.status == 403, r.body
    # Asking for nothing gets the project's mode: gvisor, run or refused, never a container.
    r = agent.request("POST", "/v1/sandboxes", {"template": "minimal"})
    if gvisor_refusal(api) is not None:
        refused_for_gvisor(r)
    else:
        assert r.status == 201 and r.json()["isolation"] == "gvisor", r.body
        agent.delete(r.json()["id"])
    assert agent.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []


def test_project_default_applies(api):
    p, agent = project_with_key(api, "iso-default")
    out = set_policy(api, p["id"], {"allowed": ALL, "default": "container"})
    assert out["isolation"] == {"allowed": ALL, "default": "container"}
    sb = agent.create("minimal")
    assert sb["isolation"] == "container" and sb["project_id"] == p["id"]
    agent.delete(sb["id"])
    # An explicit mode the project allows wins over its default.
    r = agent.request("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "gvisor"})
    if gvisor_refusal(api) is not None:
        refused_for_gvisor(r)
    else:
        assert r.status == 201 and r.json()["isolation"] == "gvisor", r.body
        agent.delete(r.json()["id"])
    # null: no policy of its own again.
    out = set_policy(api, p["id"], None)
    assert out["isolation"] == {"allowed": ALL, "default": None}


@pytest.mark.parametrize("policy, needle", [
    ({"allowed": ["kvm"]}, "no isolation mode 'kvm'"),
    ({"allowed": ["gvisor", 3]}, "no isolation mode"),
    ({"allowed": []}, "non-empty list"),
    ({"allowed": "gvisor"}, "non-empty list"),
    ({"default": "kvm"}, "'isolation.default' must be"),
    ({"allowed": ["container"], "default": "gvisor"}, "must be one of the allowed modes"),
    ({"allow": ["gvisor"]}, "takes \"allowed\" and \"default\", not 'allow'"),
    ("gvisor", "'isolation' must be null or"),
    (["gvisor"], "'isolation' must be null or"),
])
def test_bad_project_policy_is_400(api, policy, needle):
    p = api.ok("POST", "/v1/projects", {"name": "iso-bad"}).json()
    set_policy(api, p["id"], {"allowed": ["gvisor"], "default": "gvisor"})
    r = api.request("PATCH", f"/v1/projects/{p['id']}", {"isolation": policy, "name": "renamed"})
    assert r.status == 400, r.body
    assert needle in r.json()["error"]["message"]
    got = api.ok("GET", f"/v1/projects/{p['id']}").json()  # nothing of the PATCH applied
    assert got["isolation"] == {"allowed": ["gvisor"], "default": "gvisor"}
    assert got["name"] == "iso-bad"


def test_policy_duplicates_and_order_are_canonical(api):
    p = api.ok("POST", "/v1/projects", {"name": "iso-canon"}).json()
    out = set_policy(api, p["id"], {"allowed": ["microvm", "gvisor", "container", "gvisor"]})
    assert out["isolation"] == {"allowed": ALL, "default": None}
    out = api.ok("PATCH", f"/v1/projects/{p['id']}", {"name": "iso-canon2"}).json()
    assert out["isolation"] == {"allowed": ALL, "default": None}  # untouched by a rename


# ---- the operator's default -------------------------------------------------------------

def test_operator_default(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nisolation_default = gvisor\nnetwork = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        # A create without a mode gets the operator's: gvisor, run or refused.
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal"})
        if gvisor_refusal(a) is not None:
            refused_for_gvisor(r)  # saying why a mode nobody asked for
            assert "the default here is gvisor" in r.json()["error"]["message"]
        else:
            assert r.status == 201 and r.json()["isolation"] == "gvisor", r.body
            a.delete(r.json()["id"])
        # A project's default wins over the operator's.
        p = a.ok("POST", "/v1/projects", {"name": "c"}).json()
        set_policy(a, p["id"], {"default": "container"})
        sb = a.create("minimal", project=p["id"])
        assert sb["isolation"] == "container"
        a.delete(sb["id"])
        # A project that does not allow the operator's default: its first allowed mode.
        q = a.ok("POST", "/v1/projects", {"name": "c-only"}).json()
        set_policy(a, q["id"], {"allowed": ["container"]})
        sb = a.create("minimal", project=q["id"])
        assert sb["isolation"] == "container"
        a.delete(sb["id"])
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_bad_operator_default_is_refused(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nisolation_default = kvm\n")
    status, said = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).refused()
    assert status == 2 and "isolation_default" in said


# ---- kept in the store ------------------------------------------------------------------

def test_mode_survives_a_restart(fresh_daemon):
    d = fresh_daemon.start()
    a = d.api()
    sid = a.create("minimal")["id"]
    d.stop(signal.SIGKILL)
    d.start()
    a = d.api()
    got = a.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert got["state"] == "running" and got["isolation"] == "container"
    a.delete(sid)
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["isolation"] == "container"


def test_gvisor_mode_survives_a_restart(fresh_daemon):
    d = fresh_daemon.start()
    a = d.api()
    needs_gvisor(a)
    sid = a.create("minimal", isolation="gvisor")["id"]
    a.put_file(sid, "/root/state", b"kept")
    d.stop(signal.SIGKILL)
    d.start()
    a = d.api()
    got = a.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert got["state"] == "running" and got["isolation"] == "gvisor"
    assert a.get_file(sid, "/root/state") == b"kept"
    a.delete(sid)
    assert a.ok("GET", f"/v1/sandboxes/{sid}").json()["isolation"] == "gvisor"
    assert leftovers(d.state_dir) == []


# ---- warm pools per isolation -----------------------------------------------------------

def pools(api):
    return api.request("GET", "/healthz", key=None).json()["warm_pool"]


def counts(pool):
    """A pool's ready, target, hits and misses."""
    return (pool["ready"], pool["target"], pool["hits"], pool["misses"])


def test_pools_are_per_isolation(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nwarm_pool = minimal:small:1,minimal:small:1:gvisor\nnetwork = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        wait_for(lambda: pools(a)["minimal/small"]["ready"] == 1, timeout=30,
                 what="the container pool to fill")
        assert pools(a)["minimal/small/gvisor"]["target"] == 1
        gvisor = gvisor_refusal(a) is None
        if gvisor:
            wait_for(lambda: pools(a)["minimal/small/gvisor"]["ready"] == 1, timeout=30,
                     what="the gvisor pool to fill")
        # A container create is served by the container pool only.
        sb = a.create("minimal")
        assert sb["isolation"] == "container"
        p = pools(a)
        assert (p["minimal/small"]["hits"], p["minimal/small"]["misses"]) == (1, 0)
        assert (p["minimal/small/gvisor"]["hits"], p["minimal/small/gvisor"]["misses"]) == (0, 0)
        a.delete(sb["id"])
        # A gvisor create by the gvisor pool only (or refused, leaving the pools alone).
        r = a.request("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "gvisor"})
        p = pools(a)
        if gvisor:
            assert r.status == 201 and r.json()["isolation"] == "gvisor", r.body
            assert p["minimal/small/gvisor"]["hits"] == 1
            assert a.exec(r.json()["id"], "echo warm")["stdout"] == "warm\n"
            a.delete(r.json()["id"])
        else:
            refused_for_gvisor(r)
            assert counts(p["minimal/small/gvisor"]) == (0, 1, 0, 0)
        assert (p["minimal/small"]["hits"], p["minimal/small"]["misses"]) == (1, 0)
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_a_container_pool_does_not_serve_gvisor(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nwarm_pool = minimal:small:1\nnetwork = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        needs_gvisor(a)
        wait_for(lambda: pools(a)["minimal/small"]["ready"] == 1, timeout=30,
                 what="the pool to fill")
        sb = a.create("minimal", isolation="gvisor")
        assert sb["isolation"] == "gvisor"
        assert counts(pools(a)["minimal/small"]) == (1, 1, 0, 0)
        a.delete(sb["id"])
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


@pytest.mark.parametrize("value, needle", [
    ("minimal:small:1:kvm", "the isolation must be container, gvisor or microvm"),
    ("minimal:small:1:", "is not TEMPLATE:TARIFF:COUNT[:ISOLATION]"),
    ("minimal:small:1:gvisor:x", "is not TEMPLATE:TARIFF:COUNT[:ISOLATION]"),
])
def test_bad_pool_isolation_is_refused(tmp_path, value, needle):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text(f"[brigd]\nwarm_pool = {value}\n")
    status, said = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).refused()
    assert status == 2 and needle in said


# ---- the CLI ----------------------------------------------------------------------------

def brig_cli(api, *args):
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)
    return subprocess.run([os.path.join(BUILD, "brig"), *args], env=env, capture_output=True,
                          timeout=120)


def test_cli_isolation(api):
    r = brig_cli(api, "create", "--template", "minimal", "--isolation", "container", "--json")
    assert r.returncode == 0, r.stderr
    sb = json.loads(r.stdout)
    assert sb["isolation"] == "container"
    api.delete(sb["id"])
    r = brig_cli(api, "create", "--template", "minimal", "--isolation", "kvm")
    assert r.returncode == 1 and b"'isolation' must be" in r.stderr, r.stderr
    r = brig_cli(api, "run", "--template", "minimal", "--isolation", "container", "--",
                 "echo", "ran")
    assert r.returncode == 0 and r.stdout == b"ran\n", r.stderr
    r = brig_cli(api, "run", "--template", "minimal", "--isolation", "gvisor", "--", "echo", "ran")
    if gvisor_refusal(api) is not None:
        assert r.returncode == 1 and b"gvisor" in r.stderr, r.stderr
    else:
        assert r.returncode == 0 and r.stdout == b"ran\n", r.stderr
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
