"""Snapshots (issue 16, docs/snapshots.md): a sandbox's file system taken while its
processes stand still (crash-consistent: what was written and never synced is in it), the
source going on afterwards; new sandboxes start from it like from a template, with their
files' owners moved into their own id range; a damaged snapshot is refused, never handed
out partial; listing, getting and deleting them, and nothing left on the host."""

import hashlib
import os

import pytest

from brigtest import Sandbox, needs_gvisor


def snapshot(api, sid, expect=(201,), **body):
    return api.ok("POST", f"/v1/sandboxes/{sid}/snapshot", body or None, expect=expect).json()


def snap_dir(daemon, snap_id):
    return os.path.join(daemon.state_dir, "snapshots", snap_id)


WRITE = ("mkdir -p /root/work && head -c 5000000 /dev/urandom > /root/work/blob && "
         "echo kept > /root/work/a.txt && touch /root/work/u && chown 1000:1000 /root/work/u && "
         "rm /etc/hostname && sha256sum /root/work/blob | cut -d' ' -f1")


def test_snapshot_then_create_from_it(api, daemon):
    with Sandbox(api) as src:
        blob_sum = src.exec(WRITE)["stdout"].strip()  # written, never synced
        snap = snapshot(api, src.id, name="before-fix")
        assert snap["id"].startswith("snp_") and snap["name"] == "before-fix"
        assert snap["source_id"] == src.id and snap["template"] == "minimal"
        assert snap["bytes"] >= 5_000_000 and len(snap["digest"]) == 64
        # The source goes on, and diverges.
        assert api.ok("GET", f"/v1/sandboxes/{src.id}").json()["state"] == "running"
        src.exec("rm /root/work/a.txt && echo later > /root/work/b.txt")
        kinds = [e["kind"] for e in api.ok("GET", f"/v1/sandboxes/{src.id}/timeline").json()
                 ["events"]]
        assert "sandbox.snapshot" in kinds
        listed = api.ok("GET", "/v1/snapshots").json()["snapshots"]
        assert snap["id"] in [s["id"] for s in listed]
        assert api.ok("GET", f"/v1/snapshots/{snap['id']}").json() == snap
        child = api.ok("POST", "/v1/sandboxes", {"snapshot": snap["id"]}).json()["id"]
        try:
            info = api.ok("GET", f"/v1/sandboxes/{child}").json()
            assert info["template"] == "minimal"
            r = api.exec(child, "cat /root/work/a.txt; ls /root/work; sha256sum /root/work/blob | "
                           "cut -d' ' -f1; stat -c %u:%g /root/work/u /root/work/a.txt; "
                           "test -e /etc/hostname || echo no-hostname")
            assert r["exit_code"] == 0, r
            lines = r["stdout"].split()
            assert lines[0] == "kept" and "b.txt" not in lines
            assert blob_sum in lines and "1000:1000" in lines and "0:0" in lines
            assert "no-hostname" in lines  # a deletion (an overlay whiteout) is kept too
            # The child is its own: writes go nowhere else.
            api.exec(child, "echo child > /root/work/c.txt")
            assert src.exec("test -e /root/work/c.txt")["exit_code"] == 1
        finally:
            api.delete(child)
        api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))
    assert not os.path.exists(snap_dir(daemon, snap["id"]))
    assert api.request("GET", f"/v1/snapshots/{snap['id']}").status == 404
    r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"]})
    assert r.status == 400 and "no snapshot" in r.json()["error"]["message"]


def test_snapshot_of_a_paused_sandbox_leaves_it_paused(api, daemon):
    with Sandbox(api) as src:
        src.exec("echo x > /root/x")
        api.ok("POST", f"/v1/sandboxes/{src.id}/pause")
        snap = snapshot(api, src.id)
        assert snap["name"] is None
        assert api.ok("GET", f"/v1/sandboxes/{src.id}").json()["state"] == "paused"
        api.ok("POST", f"/v1/sandboxes/{src.id}/resume")
        api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def damage(img):
    with open(img, "r+b") as f:  # flip a byte in its data
        off = os.lseek(f.fileno(), 1 << 20, os.SEEK_DATA)
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))


def test_a_damaged_snapshot_is_refused(api, daemon):
    with Sandbox(api) as src:
        src.exec("head -c 2000000 /dev/urandom > /root/data")
        snap = snapshot(api, src.id)
    damage(os.path.join(snap_dir(daemon, snap["id"]), "disk.img"))
    r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"]})
    assert r.status == 409, r.body
    msg = r.json()["error"]["message"]
    assert "damaged" in msg and snap["id"] in msg, msg
    # Nothing of the refused create stays (the api fixture's leak check), and its
    # snapshot can still be deleted.
    api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def allocated(path):
    return os.stat(path).st_blocks * 512


def test_layers_are_shared_and_outlive_their_snapshot(api, daemon):
    """A sandbox made from a snapshot shares its layer (a hard link, mounted read-only as a
    lower layer): nothing is copied.  A snapshot of such a sandbox keeps the chain; deleting
    the first snapshot takes nothing from its children or from the later snapshot; a layer
    changed after it was checked is checked (and refused) again."""
    with Sandbox(api) as src:
        src.exec("mkdir -p /root/w && head -c 8000000 /dev/urandom > /root/w/a && "
                 "chown 1000:1000 /root/w/a")
        a_sum = src.exec("sha256sum /root/w/a")["stdout"].split()[0]
        s1 = snapshot(api, src.id)
    b = api.ok("POST", "/v1/sandboxes", {"snapshot": s1["id"]}).json()["id"]
    c = None
    try:
        bdir = os.path.join(daemon.state_dir, "sandboxes", b)
        # Shared, not copied: its own disk holds about the golden image's metadata only.
        assert os.stat(os.path.join(bdir, "layers", "0.img")).st_ino == os.stat(
            os.path.join(snap_dir(daemon, s1["id"]), "disk.img")).st_ino
        assert allocated(os.path.join(bdir, "disk.img")) < 4_000_000
        api.exec(b, "echo b > /root/w/b && rm /etc/hostname")
        s2 = snapshot(api, b)
        api.ok("DELETE", f"/v1/snapshots/{s1['id']}", expect=(204,))
        assert not os.path.exists(snap_dir(daemon, s1["id"]))
        # b still reads its lower layer (the file lives on through b's link) ...
        assert api.exec(b, "sha256sum /root/w/a")["stdout"].split()[0] == a_sum
        # ... and s2 has both layers.
        c = api.ok("POST", "/v1/sandboxes", {"snapshot": s2["id"]}).json()["id"]
        r = api.exec(c, "sha256sum /root/w/a | cut -d' ' -f1; cat /root/w/b; "
                        "stat -c %u:%g /root/w/a; test -e /etc/hostname || echo gone")
        assert r["stdout"].split() == [a_sum, "b", "1000:1000", "gone"], r
        api.exec(c, "echo c > /root/w/a")  # its own upper: b and s2 see nothing of it
        assert api.exec(b, "sha256sum /root/w/a")["stdout"].split()[0] == a_sum
        # Checked once (a record beside the layer); a change since is checked again.
        lower = os.path.join(snap_dir(daemon, s2["id"]), "lower-0.img")
        assert os.path.exists(lower + ".verified")
        damage(lower)
        r = api.request("POST", "/v1/sandboxes", {"snapshot": s2["id"]})
        assert r.status == 409 and "damaged" in r.json()["error"]["message"], r.body
        api.ok("DELETE", f"/v1/snapshots/{s2['id']}", expect=(204,))
    finally:
        api.delete(b)
        if c:
            api.delete(c)


def test_snapshot_answers_for_bad_input(api, daemon):
    r = api.request("POST", "/v1/sandboxes/sbx_nonexistentnonexistent00/snapshot")
    assert r.status == 404
    with Sandbox(api) as src:
        for bad in ({"name": 7}, {"name": ""}, {"name": "x" * 64}, {"bogus": 1}):
            assert api.request("POST", f"/v1/sandboxes/{src.id}/snapshot", bad).status == 400
        snap = snapshot(api, src.id)
        try:
            r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"], "template": "base"})
            assert r.status == 400 and "template" in r.json()["error"]["message"]
            r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"], "tariff": "medium"})
            assert r.status == 400 and "disk" in r.json()["error"]["message"]
            assert api.request("POST", "/v1/sandboxes", {"snapshot": 5}).status == 400
        finally:
            api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))
    assert api.request("DELETE", f"/v1/snapshots/{snap['id']}").status == 404


@pytest.mark.base
def test_gvisor_snapshot_is_refused_clearly(api):
    needs_gvisor(api)
    with Sandbox(api, isolation="gvisor") as sb:
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/snapshot")
        assert r.status == 400 and "container" in r.json()["error"]["message"]
        assert api.ok("GET", f"/v1/sandboxes/{sb.id}").json()["state"] == "running"
        assert sb.exec("echo ok")["stdout"] == "ok\n"


def test_a_gvisor_sandbox_starts_from_a_container_snapshot(api):
    """The snapshot's layer is a lower layer of the root gVisor's gofer serves."""
    needs_gvisor(api)
    with Sandbox(api) as src:
        src.exec("echo hello > /root/h && chown 1000:1000 /root/h && rm /etc/hostname")
        snap = snapshot(api, src.id)
    try:
        with Sandbox(api, snapshot=snap["id"], isolation="gvisor") as k:
            r = k.exec("cat /root/h; stat -c %u /root/h; test -e /etc/hostname || echo gone; "
                       "echo w > /root/new && cat /root/new")
            assert r["stdout"].split() == ["hello", "1000", "gone", "w"], r
    finally:
        api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def test_digest_is_of_the_data(api, daemon):
    """The manifest's digest is what a reader of the image computes: sha256 over each
    non-zero 64 KiB block, after its offset (docs/snapshots.md)."""
    with Sandbox(api) as src:
        src.exec("echo hello > /root/h")
        snap = snapshot(api, src.id)
    try:
        img = os.path.join(snap_dir(daemon, snap["id"]), "disk.img")
        h = hashlib.sha256()
        with open(img, "rb") as f:
            off = 0
            while True:
                block = f.read(65536)
                if not block:
                    break
                if block.count(0) != len(block):
                    h.update(off.to_bytes(8, "little"))
                    h.update(block)
                off += len(block)
        assert h.hexdigest() == snap["digest"]
    finally:
        api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


# ---- fork -------------------------------------------------------------------------

def test_fork_children_start_from_now_and_diverge(api, daemon):
    with Sandbox(api) as src:
        src.exec("echo base > /root/f; head -c 1000000 /dev/urandom > /root/blob")
        api.ok("POST", f"/v1/sandboxes/{src.id}/pause")  # a paused source forks too
        r = api.ok("POST", f"/v1/sandboxes/{src.id}/fork", {"count": 3}, expect=(201,)).json()
        assert r["source_id"] == src.id and r["refused"] == 0 and r["error"] is None
        kids = [k["id"] for k in r["sandboxes"]]
        assert len(set(kids)) == 3 and all(k["state"] == "running" for k in r["sandboxes"])
        try:
            assert api.ok("GET", f"/v1/sandboxes/{src.id}").json()["state"] == "paused"
            api.ok("POST", f"/v1/sandboxes/{src.id}/resume")
            want = src.exec("sha256sum /root/blob")["stdout"]
            for i, k in enumerate(kids):
                assert api.exec(k, "cat /root/f")["stdout"] == "base\n"
                assert api.exec(k, "sha256sum /root/blob")["stdout"] == want
                api.exec(k, f"echo {i} > /root/f")
            for i, k in enumerate(kids):  # each its own
                assert api.exec(k, "cat /root/f")["stdout"] == f"{i}\n"
            assert src.exec("cat /root/f")["stdout"] == "base\n"
            # The fork's snapshot is gone; the children do not need it.
            assert "fork" not in [s["name"] for s in
                                  api.ok("GET", "/v1/snapshots").json()["snapshots"]]
        finally:
            for k in kids:
                api.delete(k)


def test_fork_answers_for_bad_input(api):
    assert api.request("POST", "/v1/sandboxes/sbx_nonexistentnonexistent00/fork",
                       {"count": 1}).status == 404
    with Sandbox(api) as src:
        for bad in ({"count": 0}, {"count": 17}, {"count": "2"}, {"bogus": 1}):
            r = api.request("POST", f"/v1/sandboxes/{src.id}/fork", bad)
            assert r.status == 400, (bad, r.body)


def test_fork_past_the_accounts_limit_is_partial_and_says_why(tmp_path):
    from brigtest import Brigd, leftovers
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nmax_live_per_account = 3\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        src = a.create("minimal")["id"]
        r = a.ok("POST", f"/v1/sandboxes/{src}/fork", {"count": 4}, expect=(201,)).json()
        assert len(r["sandboxes"]) == 2 and r["refused"] == 2
        assert r["error"]["code"] == "rate_limited" or "concurrency" in r["error"]["message"]
        # None more can be made: the whole fork is refused with the limit's answer.
        r2 = a.request("POST", f"/v1/sandboxes/{src}/fork", {"count": 1})
        assert r2.status == 429 and "concurrency" in r2.json()["error"]["message"], r2.body
        assert a.ok("GET", "/v1/snapshots").json()["snapshots"] == []
        for k in [x["id"] for x in r["sandboxes"]] + [src]:
            a.delete(k)
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []
    assert os.listdir(os.path.join(d.state_dir, "snapshots")) == []


def snapshot_rows(d):
    import sqlite3
    con = sqlite3.connect(f"file:{d.state_dir}/brig.db?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT id FROM snapshots WHERE deleted_at IS NULL")}
    finally:
        con.close()


def test_a_crash_during_or_after_a_snapshot_leaks_nothing(tmp_path):
    """kill -9 of brigd while a snapshot is being taken (its directory there, its row maybe
    not), and a row deleted while its layer was left: the next start removes every layer
    no row names, thaws the sandbox's file system and keeps it."""
    import signal
    import threading
    from brigtest import Brigd, leftovers, wait_for
    d = Brigd(str(tmp_path / "state"), []).start()
    sdir = os.path.join(d.state_dir, "snapshots")
    try:
        a = d.api()
        sid = a.create("minimal")["id"]
        a.exec(sid, "head -c 150000000 /dev/urandom > /root/big", timeout=300)
        kept = snapshot(a, sid)["id"]  # a snapshot with a row: it stays
        def take():
            try:
                a.request("POST", f"/v1/sandboxes/{sid}/snapshot", timeout=60)
            except OSError:  # brigd killed under it
                pass
        t = threading.Thread(target=take, daemon=True)
        t.start()
        wait_for(lambda: len(os.listdir(sdir)) > 1, timeout=30, interval=0.005,
                 what="the second snapshot's directory")
        d.stop(signal.SIGKILL)
        t.join(60)
        taken = set(os.listdir(sdir)) - {kept}
        assert len(taken) == 1  # cut short (or just done: then its row names it)
        d.start()
        a = d.api()
        assert set(os.listdir(sdir)) == snapshot_rows(d) and kept in snapshot_rows(d)
        # The sandbox goes on, its file system writable (thawed).
        info = a.ok("GET", f"/v1/sandboxes/{sid}").json()
        if info["state"] == "paused":  # frozen for the copy when brigd died
            a.ok("POST", f"/v1/sandboxes/{sid}/resume")
        assert a.exec(sid, "echo ok > /root/after && cat /root/after",
                      timeout=20)["stdout"] == "ok\n"
        # A row deleted whose layer stayed (brigd died between the two).
        d.stop(signal.SIGKILL)
        import sqlite3
        con = sqlite3.connect(f"{d.state_dir}/brig.db")
        con.execute("UPDATE snapshots SET deleted_at = 1 WHERE id = ?", (kept,))
        con.commit()
        con.close()
        d.start()
        a = d.api()
        assert os.listdir(sdir) == [] and snapshot_rows(d) == set()
        assert f"removing the layer of snapshot {kept}" in d.log()
        a.delete(sid)
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_snapshots_are_billed_by_their_data(tmp_path):
    """snapshot_price_micro_usd_per_gib_s: 1024 micro-dollars per GiB-second is one a
    second per MiB of the snapshot's data (bytes, MiB rounded up), charged every
    billing_interval and at its delete, in the ledger with its snapshot_id."""
    import time
    from brigtest import Brigd, leftovers, wait_for
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nbilling_interval = 1\nsnapshot_price_micro_usd_per_gib_s = 1024\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        with Sandbox(a) as src:
            src.exec("head -c 3000000 /dev/urandom > /root/x")
            t0 = time.monotonic()
            snap = snapshot(a, src.id)
        mib = (snap["bytes"] + 1048575) // 1048576

        def charges():
            return [e for e in a.ok("GET", "/v1/account/ledger").json()["entries"]
                    if e.get("snapshot_id") == snap["id"]]

        wait_for(lambda: len(charges()) >= 2, timeout=20, what="two charges of the snapshot")
        a.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))
        lived = time.monotonic() - t0
        c = charges()
        assert all(e["kind"] == "charge" and e["sandbox_id"] is None and e["volume_id"] is None
                   and e["note"] == "snapshot" and e["amount_micro_usd"] == mib * e["seconds"]
                   for e in c), c
        total = sum(e["amount_micro_usd"] for e in c)
        assert mib * int(lived - 2) <= total <= mib * (int(lived) + 2), (lived, total, mib)
    finally:
        d.stop()
    assert leftovers(d.state_dir) == []


def test_cli_snapshot_fork_and_rm(api):
    import subprocess
    from brigtest import BUILD
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)

    def cli(*args):
        return subprocess.run([os.path.join(BUILD, "brig"), *args], env=env,
                              capture_output=True, timeout=120)

    with Sandbox(api) as src:
        src.exec("echo from-the-source > /root/mark")
        r = cli("snapshot", src.id, "cli-snap")
        assert r.returncode == 0, r
        snap_id, size, unit = r.stdout.decode().split()
        assert unit == "bytes"
        assert snap_id.startswith("snp_") and int(size) > 0
        # create --snapshot: a sandbox of its file system
        r = cli("create", "--snapshot", snap_id)
        assert r.returncode == 0, r
        made = r.stdout.decode().strip()
        try:
            assert api.exec(made, "cat /root/mark")["stdout"] == "from-the-source\n"
            assert api.ok("GET", f"/v1/sandboxes/{made}").json()["template"] == "minimal"
        finally:
            api.delete(made)
        r = cli("create", "--snapshot", "snp_nosuchsnapshot")
        assert r.returncode == 1 and b"(HTTP 400 invalid_request)" in r.stderr, r
        r = cli("snapshots")
        assert r.returncode == 0 and f"{snap_id} cli-snap {src.id} minimal" in r.stdout.decode()
        r = cli("fork", src.id, "2")
        assert r.returncode == 0, r
        kids = r.stdout.decode().split()
        assert len(kids) == 2 and all(k.startswith("sbx_") for k in kids)
        for k in kids:
            api.delete(k)
        assert cli("fork", src.id, "17").returncode == 2
        assert cli("snapshot-rm", snap_id).returncode == 0
        r = cli("snapshot-rm", snap_id)
        assert r.returncode == 1 and b"(HTTP 404 not_found)" in r.stderr, r
