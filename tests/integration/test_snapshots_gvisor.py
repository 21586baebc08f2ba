"""Snapshots and forks of gVisor sandboxes (issue 16, docs/snapshots.md).  A gVisor
sandbox created with "snapshots": true runs with --overlay2=none: its root's writes go
through runsc's gofer into its writable layer on the host, which is then snapshotted
(runsc pause, FIFREEZE, the copy with its digest) and forked exactly as a container's is.
Without it, gVisor keeps the writes in its own overlay and a snapshot is refused, saying
how to get one.  Skipped (only) where brigd cannot run gvisor."""

import http.client
import json
import os
import subprocess

from brigtest import BUILD, Sandbox, needs_gvisor, runsc_processes, wait_for
from test_snapshots import damage, snapshot


WRITE = ("mkdir -p /root/work && head -c 5000000 /dev/urandom > /root/work/blob && "
         "echo kept > /root/work/a.txt && touch /root/work/u && chown 1000:1000 /root/work/u && "
         "rm /etc/hostname && echo t > /tmp/t && sha256sum /root/work/blob | cut -d' ' -f1")

CHECK = ("cat /root/work/a.txt /tmp/t; ls /root/work; sha256sum /root/work/blob | cut -d' ' -f1; "
         "stat -c %u:%g /root/work/u /root/work/a.txt; test -e /etc/hostname || echo no-hostname")


def test_snapshot_of_a_gvisor_sandbox_starts_gvisor_and_container_sandboxes(gvisor_api):
    """Written, never synced, in gVisor: in the snapshot; a gVisor child and a container
    child (the layer is the same kind: an overlay upper on ext4, owned by the source's
    range) see the same files, owners and deletions."""
    api = gvisor_api
    with Sandbox(api, isolation="gvisor", snapshots=True) as src:
        blob_sum = src.exec(WRITE)["stdout"].strip()
        snap = snapshot(api, src.id, name="g")
        assert snap["bytes"] >= 5_000_000 and len(snap["digest"]) == 64
        assert api.ok("GET", f"/v1/sandboxes/{src.id}").json()["state"] == "running"
        src.exec("rm /root/work/a.txt && echo later > /root/work/b.txt")  # it goes on
    try:
        for iso in ("gvisor", "container"):
            with Sandbox(api, snapshot=snap["id"], isolation=iso) as k:
                r = k.exec(CHECK)
                assert r["exit_code"] == 0, (iso, r)
                lines = r["stdout"].split()
                assert lines[:2] == ["kept", "t"] and "b.txt" not in lines, (iso, lines)
                assert blob_sum in lines and "1000:1000" in lines and "0:0" in lines, lines
                assert "no-hostname" in lines, (iso, lines)
                assert k.exec("echo w > /root/work/w && cat /root/work/w")["stdout"] == "w\n"
    finally:
        api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def test_without_snapshots_true_it_is_refused_naming_the_option(gvisor_api):
    api = gvisor_api
    with Sandbox(api, isolation="gvisor") as sb:
        for route, body in (("snapshot", None), ("fork", {"count": 2})):
            r = api.request("POST", f"/v1/sandboxes/{sb.id}/{route}", body)
            assert r.status == 400, r.body
            assert '"snapshots": true' in r.json()["error"]["message"], r.body
        assert sb.exec("echo ok")["stdout"] == "ok\n"
    assert api.ok("GET", "/v1/snapshots").json()["snapshots"] == []
    r = api.request("POST", "/v1/sandboxes", {"isolation": "gvisor", "snapshots": "yes"})
    assert r.status == 400 and "snapshots" in r.json()["error"]["message"], r.body


def test_fork_of_a_gvisor_sandbox_diverges_and_forks_again(gvisor_api):
    api = gvisor_api
    with Sandbox(api, isolation="gvisor", snapshots=True) as src:
        src.exec("mkdir -p /root/w && echo base > /root/w/f && rm /etc/hostname")
        r = api.ok("POST", f"/v1/sandboxes/{src.id}/fork", {"count": 3}, expect=(201,)).json()
        kids = [k["id"] for k in r["sandboxes"]]
        try:
            assert len(kids) == 3 and r["refused"] == 0 and r["error"] is None, r
            for k in kids:
                assert api.ok("GET", f"/v1/sandboxes/{k}").json()["isolation"] == "gvisor"
                api.exec(k, f"echo {k} > /root/w/mine && echo {k} >> /root/w/f")
            for k in kids:
                out = api.exec(k, "cat /root/w/mine; cat /root/w/f; "
                                  "test -e /etc/hostname || echo gone")["stdout"].split()
                assert out == [k, "base", k, "gone"], (k, out)
            assert src.exec("cat /root/w/f; test -e /root/w/mine || echo none")["stdout"] \
                .split() == ["base", "none"]
            # A child is made to be snapshotted too: it forks in turn (a chain of layers).
            g = api.ok("POST", f"/v1/sandboxes/{kids[0]}/fork", {"count": 1},
                       expect=(201,)).json()["sandboxes"][0]["id"]
            kids.append(g)
            assert api.exec(g, "cat /root/w/mine /root/w/f")["stdout"].split() == \
                [kids[0], "base", kids[0]]
            # The forks' snapshots are gone with their forks.
            assert api.ok("GET", "/v1/snapshots").json()["snapshots"] == []
        finally:
            for k in kids:
                api.delete(k)


def test_a_damaged_gvisor_snapshot_is_refused(gvisor_api, daemon):
    api = gvisor_api
    with Sandbox(api, isolation="gvisor", snapshots=True) as src:
        src.exec("head -c 2000000 /dev/urandom > /root/data")
        snap = snapshot(api, src.id)
    damage(os.path.join(daemon.state_dir, "snapshots", snap["id"], "disk.img"))
    for iso in ("gvisor", "container"):
        r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"], "isolation": iso})
        assert r.status == 409, r.body
        msg = r.json()["error"]["message"]
        assert "damaged" in msg and snap["id"] in msg, msg
    # Nothing of the refused creates stays (the api fixture's leak check).
    api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def output_text(api, sid, pid):
    """What the background process printed so far."""
    conn = http.client.HTTPConnection(api.host, api.port, timeout=60)
    conn.request("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output?follow=0",
                 headers={"Authorization": f"Bearer {api.key}", "Accept": "application/x-ndjson"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    evs = [json.loads(line) for line in resp]
    conn.close()
    return "".join(e["data"] for e in evs if e.get("type") == "stdout")


def ticks(api, sid, pid):
    """The numbers the counting process printed so far."""
    return [int(x) for x in output_text(api, sid, pid).split()]


COUNTER = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.02; done"


def test_a_checkpointed_gvisor_sandbox_is_snapshotted_and_restored(gvisor_api, daemon):
    """Its memory on disk (pause {"memory": "checkpoint"}) and no process of it running:
    its file system is snapshotted as it is, and the restore (with the same
    --overlay2=none) finds its files and its counting process again."""
    api = gvisor_api
    with Sandbox(api, isolation="gvisor", snapshots=True) as sb:
        sb.exec("echo before > /root/f")
        pid = api.ok("POST", f"/v1/sandboxes/{sb.id}/exec", {"cmd": COUNTER, "background": True},
                     expect=(202,)).json()["pid"]
        wait_for(lambda: len(ticks(api, sb.id, pid)) >= 5, timeout=20, what="counting")
        p = api.ok("POST", f"/v1/sandboxes/{sb.id}/pause", {"memory": "checkpoint"}).json()
        assert p["memory"] == "checkpoint", p
        assert runsc_processes(daemon.state_dir) == []
        snap = snapshot(api, sb.id)
        try:
            api.ok("POST", f"/v1/sandboxes/{sb.id}/resume")
            seen = len(ticks(api, sb.id, pid))
            wait_for(lambda: len(ticks(api, sb.id, pid)) > seen + 5, timeout=20,
                     what="the counter going on")
            got = ticks(api, sb.id, pid)
            assert got == list(range(1, len(got) + 1))  # no restart, no gap
            assert sb.exec("cat /root/f; echo after > /root/f; cat /root/f")["stdout"] == \
                "before\nafter\n"
            with Sandbox(api, snapshot=snap["id"], isolation="gvisor") as k:
                assert k.exec("cat /root/f")["stdout"] == "before\n"
        finally:
            api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def addresses(api, sid):
    """Its IPv4 addresses other than loopback, as its own kernel sees them."""
    r = api.exec(sid, "ip -4 -o addr show")
    assert r["exit_code"] == 0, r
    w = r["stdout"].split()
    return sorted(w[i + 1].split("/")[0] for i in range(len(w) - 1)
                  if w[i] == "inet" and not w[i + 1].startswith("127."))


def test_fork_with_memory_the_counter_goes_on_in_each_child(gvisor_api):
    """{"memory": true}: each child is restored from the source's memory image (runsc
    checkpoint --leave-running) on the snapshot's layer of the same instant: the source's
    counting process goes on in every child, from its number, with no restart; each child
    has its own network address (gVisor's restore keeps the stack of the child's own
    namespace) and its own files; the source goes on too.  The children hold the source's
    secrets (its processes do) and redact them."""
    api = gvisor_api
    with Sandbox(api, isolation="gvisor", snapshots=True,
                 secrets={"TOKEN": "s3cret-token-value"}) as src:
        src.exec("echo base > /root/f")
        said = api.ok("POST", f"/v1/sandboxes/{src.id}/exec",
                      {"cmd": "echo $TOKEN; sleep 600", "background": True},
                      expect=(202,)).json()["pid"]
        pid = api.ok("POST", f"/v1/sandboxes/{src.id}/exec", {"cmd": COUNTER, "background": True},
                     expect=(202,)).json()["pid"]
        wait_for(lambda: len(ticks(api, src.id, pid)) >= 5, timeout=20, what="counting")
        r = api.ok("POST", f"/v1/sandboxes/{src.id}/fork", {"count": 2, "memory": True},
                   expect=(201,)).json()
        kids = [k["id"] for k in r["sandboxes"]]
        try:
            assert len(kids) == 2 and r["refused"] == 0, r
            for k in kids:
                seen = ticks(api, k, pid)
                assert len(seen) >= 5 and seen == list(range(1, len(seen) + 1)), (k, seen)
                wait_for(lambda: len(ticks(api, k, pid)) > len(seen) + 5, timeout=20,
                         what=f"the counter going on in {k}")
                api.exec(k, f"echo {k} > /root/f")
                # Its processes hold the source's secrets: the child redacts them as well.
                out = output_text(api, k, said)
                assert "[REDACTED:TOKEN]" in out and "s3cret" not in out, out
            assert [api.exec(k, "cat /root/f")["stdout"] for k in kids] == [k + "\n" for k in kids]
            n = len(ticks(api, src.id, pid))
            wait_for(lambda: len(ticks(api, src.id, pid)) > n + 5, timeout=20,
                     what="the source counting on")
            assert src.exec("cat /root/f")["stdout"] == "base\n"
            ips = [addresses(api, s) for s in [src.id] + kids]
            assert all(ips) and len({tuple(a) for a in ips}) == 3, ips
        finally:
            for k in kids:
                api.delete(k)
        assert api.ok("GET", "/v1/snapshots").json()["snapshots"] == []


def test_fork_with_memory_is_refused_where_it_cannot_be(gvisor_api):
    api = gvisor_api
    with Sandbox(api) as c:
        r = api.request("POST", f"/v1/sandboxes/{c.id}/fork", {"memory": True})
        assert r.status == 400 and "gVisor" in r.json()["error"]["message"], r.body
        r = api.request("POST", f"/v1/sandboxes/{c.id}/fork", {"memory": 1})
        assert r.status == 400 and "memory" in r.json()["error"]["message"], r.body
    with Sandbox(api, isolation="gvisor", snapshots=True) as g:
        api.ok("POST", f"/v1/sandboxes/{g.id}/pause")
        r = api.request("POST", f"/v1/sandboxes/{g.id}/fork", {"memory": True})
        assert r.status == 409 and "running" in r.json()["error"]["message"], r.body
        api.ok("POST", f"/v1/sandboxes/{g.id}/resume")
        assert g.exec("echo ok")["stdout"] == "ok\n"
    assert api.ok("GET", "/v1/snapshots").json()["snapshots"] == []


def test_made_to_be_snapshotted_survives_a_restart(fresh_daemon):
    """The mark is in its directory: a restarted brigd still snapshots it (and a default
    gVisor sandbox is still refused)."""
    d = fresh_daemon.start()
    a = d.api()
    needs_gvisor(a)
    g = a.create("minimal", isolation="gvisor", snapshots=True)["id"]
    plain = a.create("minimal", isolation="gvisor")["id"]
    a.exec(g, "echo kept > /root/k")
    d.stop()
    d.start()
    a = d.api()
    snap = snapshot(a, g)
    assert a.request("POST", f"/v1/sandboxes/{plain}/snapshot").status == 400
    with Sandbox(a, snapshot=snap["id"], isolation="gvisor") as k:
        assert k.exec("cat /root/k")["stdout"] == "kept\n"
    a.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))
    a.delete(g)
    a.delete(plain)


def test_cli_create_snapshots_and_fork_memory(gvisor_api):
    api = gvisor_api
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)

    def brig(*args):
        return subprocess.run([os.path.join(BUILD, "brig"), *args], env=env,
                              capture_output=True, timeout=120)
    r = brig("create", "--isolation", "gvisor", "--snapshots")
    assert r.returncode == 0, r
    sid = r.stdout.decode().strip()
    try:
        r = brig("fork", "--memory", sid, "2")
        assert r.returncode == 0, r
        kids = r.stdout.decode().split()
        assert len(kids) == 2 and all(k.startswith("sbx_") for k in kids), r
        for k in kids:
            assert api.ok("GET", f"/v1/sandboxes/{k}").json()["isolation"] == "gvisor"
            api.delete(k)
    finally:
        api.delete(sid)
