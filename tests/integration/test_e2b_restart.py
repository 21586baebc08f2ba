"""E2B compatibility across a brigd restart (docs/e2b.md): a sandbox made through E2B's
control plane keeps its envd access token (derived from brigd's master key, stored nowhere),
so an SDK that holds the sandbox goes on using it after brigd restarts, and a wrong token is
still refused; its metadata and the key envd acts as are in the store, so getInfo and list's
metadata filters see them after the restart too."""

import json
import os
import signal
import sqlite3
import urllib.parse

import pytest

from brigtest import Api


def raw(api, method, path, body=None, headers=None):
    return api.request(method, path, body, key=None, headers=headers)


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_envd_token_survives_a_restart(fresh_daemon, how):
    d = fresh_daemon.start()
    a = d.api()
    meta = {"job": "42", "note": "a b&c=d"}
    r = raw(a, "POST", "/sandboxes", {"templateID": "minimal", "timeout": 300, "metadata": meta},
            headers={"X-API-KEY": a.key})
    assert r.status == 201, r.body
    sb = r.json()
    sid, token = sb["sandboxID"], sb["envdAccessToken"]
    a.put_file(sid, "/root/kept.txt", b"kept across restarts\n")
    env = {"E2b-Sandbox-Id": sid, "X-Access-Token": token}
    path = "/files?path=/root/kept.txt&username=root"
    got = raw(a, "GET", path, headers=env)
    assert got.status == 200 and got.body == b"kept across restarts\n", got.body
    d.stop(signal.SIGKILL if how == "kill -9" else signal.SIGTERM)
    d.start()
    a = Api(d.url, a.key)
    got = raw(a, "GET", path, headers=env)
    assert got.status == 200 and got.body == b"kept across restarts\n", got.body
    # The same token from a connect after the restart; a wrong one is refused.
    r = raw(a, "POST", f"/sandboxes/{sid}/connect", {"timeout": 300},
            headers={"X-API-KEY": a.key})
    assert r.status in (200, 201) and r.json()["envdAccessToken"] == token, r.body
    bad = dict(env, **{"X-Access-Token": "0" * 64})
    assert raw(a, "GET", path, headers=bad).status == 401
    info = json.loads(raw(a, "GET", f"/sandboxes/{sid}", headers={"X-API-KEY": a.key}).body)
    assert info["sandboxID"] == sid and info["metadata"] == meta, info
    # A sandbox of brig's own API, listed beside it, has no metadata.
    own = a.create(template="minimal")
    assert list_ids(a, {"note": "a b&c=d"}) == [sid]
    assert list_ids(a, {"job": "42", "note": "other"}) == []
    assert sorted(list_ids(a, None)) == sorted([sid, own["id"]])
    a.delete(own["id"])
    a.delete(sid)


def list_ids(api, metadata):
    """GET /v2/sandboxes filtered by metadata as the SDK sends it (each key and value
    percent-encoded, then the whole query once more)."""
    q = ""
    if metadata:
        inner = "&".join(f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}"
                         for k, v in metadata.items())
        q = "?metadata=" + urllib.parse.quote(inner, safe="")
    r = raw(api, "GET", "/v2/sandboxes" + q, headers={"X-API-KEY": api.key})
    assert r.status == 200, r.body
    return [s["sandboxID"] for s in r.json()]


def e2b_records(d):
    """Sandbox ids with an E2B record in the store (read directly)."""
    con = sqlite3.connect(f"file:{os.path.join(d.state_dir, 'brig.db')}?mode=ro", uri=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT sandbox_id FROM e2b_sandboxes"))
    finally:
        con.close()


def test_records_of_ended_sandboxes_are_dropped(fresh_daemon):
    """A kill drops the sandbox's record from the store; those of sandboxes that ended while
    brigd was down go at the next start's first list."""
    d = fresh_daemon.start()
    a = d.api()
    ids = []
    for _ in range(2):
        r = raw(a, "POST", "/v2/sandboxes", {"templateID": "minimal", "metadata": {"k": "v"}},
                headers={"X-API-KEY": a.key})
        assert r.status == 201, r.body
        ids.append(r.json()["sandboxID"])
    assert e2b_records(d) == sorted(ids)
    assert raw(a, "DELETE", f"/sandboxes/{ids[0]}", headers={"X-API-KEY": a.key}).status == 204
    assert e2b_records(d) == [ids[1]]
    d.stop()
    d.destroy_all()  # ends it while brigd is down
    assert e2b_records(d) == [ids[1]]
    d.start()
    a = Api(d.url, a.key)
    assert list_ids(a, {"k": "v"}) == []
    assert e2b_records(d) == []
