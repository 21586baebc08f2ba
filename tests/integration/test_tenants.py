"""Projects, key scopes, accounts and secrets (issue: secrets and the network, the
non-network half): who may see and change what, and that a secret value never
shows up anywhere but in the sandbox's environment."""

import base64
import glob
import json
import os
import subprocess

import pytest

from brigtest import Api, Sandbox, wait_for

SECRET = "tok_9f8e7d6c5b4a3f2e1d0c"


def project_api(api, project_id, scope):
    k = api.ok("POST", f"/v1/projects/{project_id}/keys", {"scope": scope}).json()
    assert k["key"].startswith("brig_") and k["scope"] == scope
    return Api(api.base_url, k["key"]), k["id"]


def test_projects_and_scopes(api):
    projects = api.ok("GET", "/v1/projects").json()["projects"]
    assert len(projects) >= 1 and projects[0]["egress"] == {"mode": "open"}
    p = api.ok("POST", "/v1/projects", {"name": "agents"}).json()
    assert p["id"].startswith("prj_") and p["name"] == "agents"
    agent, key_id = project_api(api, p["id"], "sandbox")
    # A sandbox key: its own project only, and no admin calls.
    assert [x["id"] for x in agent.ok("GET", "/v1/projects").json()["projects"]] == [p["id"]]
    for method, path, body in [
        ("PATCH", f"/v1/projects/{p['id']}", {"egress": {"mode": "none"}}),
        ("POST", "/v1/projects", {"name": "mine"}),
        ("POST", f"/v1/projects/{p['id']}/keys", {"scope": "admin"}),
        ("PUT", f"/v1/projects/{p['id']}/secrets/TOKEN", {"value": SECRET}),
        ("GET", f"/v1/projects/{p['id']}/secrets", None),
        ("PATCH", "/v1/account", {"daily_limit_micro_usd": 0}),
        ("POST", "/v1/accounts", {"name": "x"}),
    ]:
        r = agent.request(method, path, body)
        assert r.status == 403, (method, path, r.body)
    # Sandboxes: the agent sees its project's, not the admin's default project's.
    with Sandbox(api) as admin_sb:
        with Sandbox(agent) as sb:
            mine = [x["id"] for x in agent.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
            assert mine == [sb.id]
            assert agent.request("GET", f"/v1/sandboxes/{admin_sb.id}").status == 404
            assert agent.request("POST", f"/v1/sandboxes/{admin_sb.id}/exec",
                                 {"cmd": "true"}).status == 404
            assert agent.request("DELETE", f"/v1/sandboxes/{admin_sb.id}").status == 404
            info = api.ok("GET", f"/v1/sandboxes/{sb.id}").json()  # the admin sees all
            assert info["project_id"] == p["id"]
            r = agent.request("POST", "/v1/sandboxes", {"template": "minimal",
                                                         "project": projects[0]["id"]})
            assert r.status == 403
    # A deleted key is dead at once.
    api.ok("DELETE", f"/v1/projects/{p['id']}/keys/{key_id}", expect=(204,))
    assert agent.request("GET", "/v1/sandboxes").status == 401
    assert api.request("DELETE", f"/v1/projects/{p['id']}/keys/{key_id}").status == 404


def test_keys_are_listed_without_their_secrets(api, daemon):
    """GET /v1/projects/{id}/keys: an admin sees each key's id, scope and times (a revoked
    one with its revocation), never a key or its hash; a sandbox key and another account
    cannot list them."""
    p = api.ok("POST", "/v1/projects", {"name": "listed"}).json()["id"]
    sbk, sbk_id = project_api(api, p, "sandbox")
    adm = api.ok("POST", f"/v1/projects/{p}/keys", {"scope": "admin"}).json()
    api.ok("DELETE", f"/v1/projects/{p}/keys/{adm['id']}", expect=(204,))
    r = api.ok("GET", f"/v1/projects/{p}/keys")
    keys = r.json()["keys"]
    assert [(k["id"], k["scope"]) for k in keys] == [(sbk_id, "sandbox"), (adm["id"], "admin")]
    assert keys[0]["revoked_at"] is None and keys[1]["revoked_at"] >= keys[1]["created_at"]
    assert all(set(k) == {"id", "scope", "created_at", "revoked_at"} for k in keys), keys
    assert sbk.key.encode() not in r.body and adm["key"].encode() not in r.body
    assert sbk.request("GET", f"/v1/projects/{p}/keys").status == 403
    other = daemon.operator().ok("POST", "/v1/accounts", {"name": "key-peeker"}).json()
    assert Api(api.base_url, other["api_key"]).request("GET", f"/v1/projects/{p}/keys").status == 404


def test_accounts_are_walled_off(api, daemon):
    op = daemon.operator()
    b = op.ok("POST", "/v1/accounts", {"name": "tenant-b"}).json()
    assert b["id"].startswith("acc_") and b["api_key"].startswith("brig_")
    assert b["balance_micro_usd"] == 1_000_000 and b["balance"] == "$1.000000"
    bapi = Api(api.base_url, b["api_key"])
    assert bapi.ok("GET", "/v1/account").json()["id"] == b["id"]
    # The key is shown once: nothing returns it again.
    assert "api_key" not in bapi.ok("GET", "/v1/account").json()
    with Sandbox(api) as a_sb, Sandbox(bapi) as b_sb:
        for who, other in [(api, b_sb.id), (bapi, a_sb.id)]:
            assert who.request("GET", f"/v1/sandboxes/{other}").status == 404
            assert who.request("POST", f"/v1/sandboxes/{other}/exec",
                               {"cmd": "true"}).status == 404
            q = f"/v1/sandboxes/{other}/files?path=/etc/hostname"
            assert who.request("GET", q).status == 404
            assert other not in json.dumps(who.ok("GET", "/v1/sandboxes").json())
        a_prj = api.ok("GET", "/v1/projects").json()["projects"][0]["id"]
        assert bapi.request("GET", f"/v1/projects/{a_prj}").status == 404
        assert bapi.request("PATCH", f"/v1/projects/{a_prj}", {"name": "x"}).status == 404
    # The operator manages accounts and nothing inside them.
    assert op.request("GET", "/v1/sandboxes").status == 403
    assert op.request("POST", "/v1/sandboxes", {"template": "minimal"}).status == 403
    assert api.request("POST", "/v1/accounts", {"name": "c"}).status == 403
    assert api.request("POST", f"/v1/accounts/{b['id']}/credits",
                       {"amount_micro_usd": 5}).status == 403


def test_egress_policy_is_validated_and_stored(api):
    p = api.ok("POST", "/v1/projects", {"name": "pol"}).json()
    ok = api.ok("PATCH", f"/v1/projects/{p['id']}", {"egress": {
        "mode": "allowlist", "domains": ["API.example.com", "*.example.org"],
        "cidrs": ["203.0.113.0/24"], "ports": [443]}}).json()
    assert ok["egress"] == {"mode": "allowlist", "domains": ["api.example.com", "*.example.org"],
                            "cidrs": ["203.0.113.0/24"], "ports": [443]}
    for bad in [{"mode": "wide-open"}, {"mode": "none", "domains": ["a.b"]},
                {"mode": "allowlist", "domains": ["bad domain"]},
                {"mode": "allowlist", "cidrs": ["10.0.0.0/33"]},
                {"mode": "allowlist", "ports": [0]}, {"mode": "open", "extra": 1}]:
        r = api.request("PATCH", f"/v1/projects/{p['id']}", {"egress": bad})
        assert r.status == 400, (bad, r.body)
    assert api.ok("GET", f"/v1/projects/{p['id']}").json()["egress"]["mode"] == "allowlist"


# ---- secrets ---------------------------------------------------------------------------

def test_secret_is_in_env_and_redacted_everywhere(api, daemon, tmp_path):
    r = api.ok("POST", "/v1/sandboxes", {"template": "base", "env": {"PLAIN": "visible"},
                                         "secrets": {"TOKEN": SECRET}})
    sb = r.json()
    assert SECRET not in r.body.decode()
    assert sb["secrets"] == ["TOKEN"] and sb["env"] == ["PLAIN"]
    sid = sb["id"]
    try:
        # The command sees the value...
        r = api.exec(sid, "test \"$TOKEN\" = " + SECRET + " && echo same")
        assert r["stdout"] == "same\n"
        # ...and every way of printing it comes back redacted.
        for cmd in ["echo $TOKEN", "echo $TOKEN >&2", "printenv", "printenv | base64",
                    "printf 'x%s' \"$TOKEN\" | base64 -w0",
                    "python3 -c \"import os,urllib.parse;print(urllib.parse.quote(os.environ['TOKEN']))\""]:
            out = api.exec(sid, cmd)
            both = out["stdout"] + out["stderr"]
            assert SECRET not in both, cmd
            assert "[REDACTED:TOKEN]" in both, (cmd, both)
            for enc in (base64.b64encode(SECRET.encode()).decode()[:16],):
                assert enc not in both, (cmd, both)
        # One byte at a time, flushed: each byte is its own output chunk.
        slow = ("import os,sys,time\n"
                "for c in os.environ['TOKEN']:\n"
                "    sys.stdout.write(c); sys.stdout.flush(); time.sleep(0.01)\n")
        api.put_file(sid, "/root/slow.py", slow.encode())
        from test_exec import stream, events
        conn, resp = stream(api, f"/v1/sandboxes/{sid}/exec", {"cmd": "python3 /root/slow.py"})
        text = "".join(e.get("data", "") for e in events(resp) if e["type"] == "stdout")
        conn.close()
        assert text == "[REDACTED:TOKEN]", text
        # Background output too.
        p = api.ok("POST", f"/v1/sandboxes/{sid}/exec",
                   {"cmd": "echo bg $TOKEN", "background": True}, expect=(202,)).json()
        api.ok("POST", f"/v1/sandboxes/{sid}/processes/{p['pid']}/wait", {"timeout": 10})
        conn, resp = stream(api, f"/v1/sandboxes/{sid}/processes/{p['pid']}/output",
                            method="GET")
        text = "".join(e.get("data", "") for e in events(resp) if e["type"] == "stdout")
        conn.close()
        assert text == "bg [REDACTED:TOKEN]\n"
        # Nothing at rest or in logs: the API, the CLI, the SQLite files, brigd's log.
        assert SECRET not in json.dumps(api.ok("GET", f"/v1/sandboxes/{sid}").json())
        assert SECRET not in json.dumps(api.ok("GET", "/v1/sandboxes").json())
        from brigtest import BUILD
        env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)
        for args in (["ls", "--json"], ["inspect", sid], ["exec", sid, "--", "printenv"]):
            out = subprocess.run([os.path.join(BUILD, "brig"), *args], env=env,
                                 capture_output=True)
            assert SECRET.encode() not in out.stdout + out.stderr, args
        for f in glob.glob(os.path.join(daemon.state_dir, "brig.db*")):
            with open(f, "rb") as fh:
                assert SECRET.encode() not in fh.read(), f
        assert SECRET not in daemon.log()
        # The value is only in the process environment, not on the sandbox's disk.
        r = api.exec(sid, "grep -rl " + SECRET + " /root /tmp /etc /home /var /run "
                          "2>/dev/null | head -3")
        assert r["stdout"] == ""
    finally:
        api.delete(sid)


def test_secret_rules(api):
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "secrets": {"A": "abc"}})
    assert r.status == 400 and "at least 4 bytes" in r.json()["error"]["message"]
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal",
                                              "secrets": {"BAD-NAME": "abcdef"}})
    assert r.status == 400
    r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "secrets": {"A": 5}})
    assert r.status == 400


def test_project_secrets_by_reference(api):
    p = api.ok("POST", "/v1/projects", {"name": "with-secrets"}).json()
    api.ok("PUT", f"/v1/projects/{p['id']}/secrets/DB_PASSWORD", {"value": "pg-pass-123456"},
           expect=(204,))
    assert api.ok("GET", f"/v1/projects/{p['id']}/secrets").json() == {"names": ["DB_PASSWORD"]}
    agent, _ = project_api(api, p["id"], "sandbox")
    sb = agent.ok("POST", "/v1/sandboxes", {"template": "minimal",
                                             "secret_refs": ["DB_PASSWORD"]}).json()
    try:
        assert sb["secrets"] == ["DB_PASSWORD"]
        r = agent.exec(sb["id"], "echo ${#DB_PASSWORD}; echo $DB_PASSWORD")
        assert r["stdout"] == "14\n[REDACTED:DB_PASSWORD]\n"
    finally:
        agent.delete(sb["id"])
    r = agent.request("POST", "/v1/sandboxes", {"template": "minimal",
                                                 "secret_refs": ["NOPE"]})
    assert r.status == 400 and "NOPE" in r.json()["error"]["message"]
    api.ok("DELETE", f"/v1/projects/{p['id']}/secrets/DB_PASSWORD", expect=(204,))
    assert api.ok("GET", f"/v1/projects/{p['id']}/secrets").json() == {"names": []}
