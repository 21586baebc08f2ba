"""E2B compatibility across a brigd restart (docs/e2b.md): a sandbox made through E2B's
control plane keeps its envd access token (derived from brigd's master key, stored nowhere),
so an SDK that holds the sandbox goes on using it after brigd restarts, and a wrong token is
still refused."""

import json
import signal

import pytest

from brigtest import Api


def raw(api, method, path, body=None, headers=None):
    return api.request(method, path, body, key=None, headers=headers)


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_envd_token_survives_a_restart(fresh_daemon, how):
    d = fresh_daemon.start()
    a = d.api()
    r = raw(a, "POST", "/sandboxes", {"templateID": "minimal", "timeout": 300},
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
    assert json.loads(raw(a, "GET", f"/sandboxes/{sid}",
                          headers={"X-API-KEY": a.key}).body)["sandboxID"] == sid
    a.delete(sid)
