"""Issue 15: persistent volumes per project (docs/volumes.md).

A volume is a project's named file system of a bounded size: made through the API,
mounted into sandboxes at create (one that writes, or many that read), outliving them and
brigd's restarts, deleted only while no sandbox mounts it, billed by size per second.
Every test here runs real sandboxes (runc, and runsc where the test is about what a
sandbox sees) against real ext4 images on loop devices; the `api` fixture's leak check
also finds a volume left mounted on the host or a loop device left on an image.
"""

import json
import os
import secrets
import subprocess
import threading
import time
import urllib.parse

import pytest

import brigtest
from brigtest import Api, Brigd, Sandbox, wait_for

MODES = ("container", "gvisor")


@pytest.fixture(params=MODES)
def mode(request, api):
    """The isolation of the sandboxes of a test about what a sandbox sees of its volume."""
    if request.param == "gvisor":
        brigtest.needs_gvisor(api)
    return request.param


@pytest.fixture
def volume(api, daemon):
    """Makes volumes of the test's own; deletes them afterwards and checks their bytes
    went with them."""
    made = []

    def make(name=None, size_mib=64, a=api, **kw):
        name = name or f"v-{secrets.token_hex(4)}"
        v = a.ok("POST", "/v1/volumes", {"name": name, "size_mib": size_mib, **kw}).json()
        made.append((a, v["id"], v["project_id"]))
        return v

    yield make
    for a, vid, prj in made:
        r = a.request("DELETE", f"/v1/volumes/{vid}?" + q(project=prj))
        assert r.status in (204, 404), r.body
        assert not os.path.exists(image(daemon, vid))


def image(daemon, vid):
    return os.path.join(daemon.state_dir, "volumes", f"{vid}.img")


def held_on_host(daemon, vid):
    """What holds a volume on the host: its mount, a loop device on its image."""
    mnt = os.path.realpath(os.path.join(daemon.state_dir, "volumes", f"{vid}.mnt"))
    held = [m for m in brigtest.mounts_under(os.path.join(daemon.state_dir, "volumes"))
            if m == mnt]
    held += [dev for dev, f in brigtest.loop_devices_under(daemon.state_dir)
             if f == os.path.realpath(image(daemon, vid))]
    return held


def sh(api, sid, cmd, user="root", timeout=60):
    return api.exec(sid, argv=["sh", "-c", cmd], user=user, timeout=timeout)


def create(api, vols, mode="container", template="minimal", **kw):
    return api.request("POST", "/v1/sandboxes", {"template": template, "isolation": mode,
                                                 "volumes": vols, **kw})


def q(**kw):
    return urllib.parse.urlencode(kw)


def error(r):
    return json.loads(r.body)["error"]


# ---- the resource -------------------------------------------------------------------------


def test_create_get_list_delete(api, daemon, volume):
    v = volume(size_mib=32)
    assert v["id"].startswith("vol_") and v["size_mib"] == 32 and v["mounted_by"] == []
    assert v["project_id"] == api.ok("GET", "/v1/account").json()["default_project_id"]
    assert v["cost_micro_usd"] == 0 and v["price_micro_usd_per_gib_hour"] == 0
    assert api.ok("GET", f"/v1/volumes/{v['name']}").json() == v
    assert api.ok("GET", f"/v1/volumes/{v['id']}").json() == v
    assert v in api.ok("GET", "/v1/volumes").json()["volumes"]
    # The bytes: an image of the size asked for, sparse (what is written takes room).
    st = os.stat(image(daemon, v["id"]))
    assert st.st_size == 32 << 20 and st.st_blocks * 512 < 16 << 20
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0
    assert held_on_host(daemon, v["id"]) == []  # mounted only while a sandbox uses it

    r = api.request("POST", "/v1/volumes", {"name": v["name"], "size_mib": 16})
    assert r.status == 409 and "already" in error(r)["message"], r.body
    api.ok("DELETE", f"/v1/volumes/{v['name']}", expect=(204,))
    assert api.request("GET", f"/v1/volumes/{v['name']}").status == 404
    assert api.request("DELETE", f"/v1/volumes/{v['name']}").status == 404
    assert not os.path.exists(image(daemon, v["id"]))
    # The name is free again: a new volume, new bytes.
    w = volume(name=v["name"], size_mib=16)
    assert w["id"] != v["id"] and w["size_mib"] == 16


@pytest.mark.parametrize("body,words", [
    ({"name": "", "size_mib": 16}, "'name' must be"),
    ({"name": "Data", "size_mib": 16}, "'name' must be"),
    ({"name": "-x", "size_mib": 16}, "'name' must be"),
    ({"name": "a" * 33, "size_mib": 16}, "'name' must be"),
    ({"name": "../etc", "size_mib": 16}, "'name' must be"),
    ({"name": "a/b", "size_mib": 16}, "'name' must be"),
    ({"name": "vol_abc", "size_mib": 16}, "'name' must be"),
    ({"name": "ok", "size_mib": 15}, "volume_max_mib"),
    ({"name": "ok", "size_mib": 10241}, "volume_max_mib"),
    ({"name": "ok", "size_mib": "16"}, "'size_mib'"),
    ({"name": "ok"}, "'size_mib'"),
    ({"size_mib": 16}, "'name'"),
    ({"name": "ok", "size_mib": 16, "sise": 1}, "unknown field 'sise'"),
    ({"name": "ok", "size_mib": 16, "project": "prj_" + "a" * 26}, "no project"),
])
def test_create_refusals(api, body, words):
    r = api.request("POST", "/v1/volumes", body)
    assert r.status in (400, 404) and words in error(r)["message"], (r.status, r.body)
    assert api.request("GET", "/v1/volumes/ok").status == 404


def test_scopes_and_tenants(api, daemon, volume):
    """A sandbox key sees its project's volumes, but makes, mounts and deletes none; another
    project of the account names its own; another account sees nothing of them."""
    v = volume()
    prj = v["project_id"]
    k = api.ok("POST", f"/v1/projects/{prj}/keys", {"scope": "sandbox"}).json()
    sbk = Api(daemon.url, k["key"])
    try:
        assert [x["id"] for x in sbk.ok("GET", "/v1/volumes").json()["volumes"]] == [v["id"]]
        assert sbk.ok("GET", f"/v1/volumes/{v['name']}").json()["id"] == v["id"]
        r = sbk.request("POST", "/v1/volumes", {"name": "mine", "size_mib": 16})
        assert r.status == 403, r.body
        r = sbk.request("DELETE", f"/v1/volumes/{v['name']}")
        assert r.status == 403, r.body
        r = create(sbk, [{"name": v["name"], "path": "/data"}])
        assert r.status == 403 and "cannot mount volumes" in error(r)["message"], r.body
        assert sbk.request("GET", "/v1/volumes?" + q(project="prj_" + "b" * 26)).status == 404
    finally:
        api.ok("DELETE", f"/v1/projects/{prj}/keys/{k['id']}", expect=(204,))

    # Another project of the account: names are per project.
    p2 = api.ok("POST", "/v1/projects", {"name": f"p-{secrets.token_hex(3)}"}).json()["id"]
    assert api.request("GET", f"/v1/volumes/{v['name']}?" + q(project=p2)).status == 404
    w = volume(name=v["name"], project=p2)
    assert w["project_id"] == p2 and w["id"] != v["id"]
    ids = {x["id"] for x in api.ok("GET", "/v1/volumes").json()["volumes"]}
    assert {v["id"], w["id"]} <= ids
    only = api.ok("GET", "/v1/volumes?" + q(project=p2)).json()["volumes"]
    assert [x["id"] for x in only] == [w["id"]]
    # A sandbox of the default project cannot mount p2's volume by its id or name.
    r = create(api, [{"name": w["id"], "path": "/data"}])
    assert r.status == 400, r.body

    # Another account: nothing, by name or id, and no mount.
    other = daemon.operator().ok("POST", "/v1/accounts", {"name": "vol-other"}).json()
    o = Api(daemon.url, other["api_key"])
    assert o.ok("GET", "/v1/volumes").json()["volumes"] == []
    for ref in (v["name"], v["id"]):
        assert o.request("GET", f"/v1/volumes/{ref}").status == 404
        assert o.request("DELETE", f"/v1/volumes/{ref}").status == 404
    assert o.request("GET", f"/v1/volumes/{v['id']}?" + q(project=prj)).status == 404
    r = create(o, [{"name": v["name"], "path": "/data"}])
    assert r.status == 400 and "no volume named" in error(r)["message"], r.body


@pytest.mark.parametrize("vols,words", [
    ([{"name": "NAME", "path": "data"}], "absolute path"),
    ([{"name": "NAME", "path": "/"}], "absolute path"),
    ([{"name": "NAME", "path": "/data/"}], "not normal"),
    ([{"name": "NAME", "path": "//data"}], "not normal"),
    ([{"name": "NAME", "path": "/a/../etc"}], "not normal"),
    ([{"name": "NAME", "path": "/a/./b"}], "not normal"),
    ([{"name": "NAME", "path": "/.."}], "not normal"),
    ([{"name": "NAME", "path": "/proc"}], "under /proc"),
    ([{"name": "NAME", "path": "/proc/self/root"}], "under /proc"),
    ([{"name": "NAME", "path": "/.brig"}], "under /.brig"),
    ([{"name": "NAME", "path": "/.brig/run"}], "under /.brig"),
    ([{"name": "NAME", "path": "/sys/fs"}], "under /sys"),
    ([{"name": "NAME", "path": "/dev/shm"}], "under /dev"),
    ([{"name": "NAME", "path": "/da\nta"}], "control characters"),
    ([{"name": "NAME", "path": "/a" * 200}], "absolute path"),
    ([{"name": "NAME", "path": "/data", "read_only": "yes"}], "'read_only'"),
    ([{"name": "NAME", "path": "/data", "mode": "rw"}], "unknown field 'mode'"),
    ([{"path": "/data"}], "'name'"),
    ([{"name": "NAME"}], "absolute path"),
    ([{"name": "NAME", "path": "/a"}, {"name": "NAME", "path": "/b"}], "named twice"),
    ([{"name": "NAME", "path": "/a"}, {"name": "x", "path": "/a/b"}], "overlap"),
    ([{"name": "x", "path": "/a/b"}, {"name": "NAME", "path": "/a"}], "overlap"),
    ([{"name": f"n{i}", "path": f"/d{i}"} for i in range(9)], "at most 8"),
    ({"name": "NAME", "path": "/data"}, "a list"),
    ([{"name": "no-such-volume", "path": "/data"}], "no volume named"),
])
def test_mount_refusals(api, volume, vols, words):
    """Checked before anything is made: no sandbox, nothing mounted."""
    v = volume(size_mib=16)
    body = json.loads(json.dumps(vols).replace('"NAME"', json.dumps(v["name"])))
    r = create(api, body)
    assert r.status == 400 and words in error(r)["message"], (r.status, r.body)
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []


# ---- what a sandbox sees ------------------------------------------------------------------


def test_data_outlives_the_sandbox(api, daemon, volume, mode):
    """Written by one sandbox (as root and as `user`, by exec and through the files API),
    read by the next, with the same owners inside; the files API works on volume paths."""
    v = volume()
    vols = [{"name": v["name"], "path": "/data"}]
    with Sandbox(api, "minimal", isolation=mode, volumes=vols) as a:
        assert api.ok("GET", f"/v1/sandboxes/{a.id}").json()["volumes"] == [
            {"name": v["name"], "id": v["id"], "path": "/data", "read_only": False}]
        got = api.ok("GET", f"/v1/volumes/{v['id']}").json()["mounted_by"]
        assert got == [{"sandbox_id": a.id, "path": "/data", "read_only": False}]
        r = sh(api, a.id, "stat -c '%u:%g %a' /data && ls -A /data | wc -l && "
                          "echo from-root > /data/root.txt && mkdir /data/u && "
                          "chown user:user /data/u")
        assert r["exit_code"] == 0 and r["stdout"] == "0:0 755\n0\n", r
        r = sh(api, a.id, "echo from-user > /data/u/user.txt && id -u", user="user")
        assert r["exit_code"] == 0 and r["stdout"] == "1000\n", r
        api.put_file(a.id, "/data/api/put.bin", b"\x00\x01via the API", mode="0640")
        api.ok("POST", f"/v1/sandboxes/{a.id}/files/mkdir", {"path": "/data/dir"}, expect=(201,))
        api.ok("POST", f"/v1/sandboxes/{a.id}/files/move",
               {"from": "/data/api/put.bin", "to": "/data/dir/moved.bin"}, expect=(204,))
        tar = api.ok("GET", f"/v1/sandboxes/{a.id}/files/tar?" + q(path="/data/u")).body
        api.ok("PUT", f"/v1/sandboxes/{a.id}/files/tar?" + q(path="/data/copy"), tar,
               expect=(204,))
    # The host keeps nothing mounted between sandboxes.
    wait_for(lambda: held_on_host(daemon, v["id"]) == [], what="the volume let go of")

    with Sandbox(api, "minimal", isolation=mode, volumes=vols) as b:
        r = sh(api, b.id, "cat /data/root.txt /data/u/user.txt /data/copy/user.txt && "
                          "stat -c '%n %u:%g' /data/u /data/u/user.txt /data/dir/moved.bin")
        assert r["exit_code"] == 0, r
        assert r["stdout"] == ("from-root\nfrom-user\nfrom-user\n/data/u 1000:1000\n"
                               "/data/u/user.txt 1000:1000\n/data/dir/moved.bin 0:0\n"), r
        assert api.get_file(b.id, "/data/dir/moved.bin") == b"\x00\x01via the API"
        st = api.ok("GET", f"/v1/sandboxes/{b.id}/files?" +
                    q(path="/data/dir/moved.bin", stat=1)).json()
        assert st["mode"] == "0640" and st["size"] == 13
        names = [e["name"] for e in api.ok("GET", f"/v1/sandboxes/{b.id}/files?" +
                                           q(path="/data", list=1)).json()["entries"]]
        assert names == ["api", "copy", "dir", "root.txt", "u"], names
        # Its own writable layer is its own: the volume is only at /data.
        assert sh(api, b.id, "test -e /root/root.txt")["exit_code"] == 1
        # `user` owns its directory in this sandbox too (another host uid range).
        r = sh(api, b.id, "echo again >> /data/u/user.txt && cat /data/u/user.txt", user="user")
        assert r["exit_code"] == 0 and r["stdout"] == "from-user\nagain\n", r


def test_full_volume(api, volume, mode):
    """The volume's size is the kernel's bound: ENOSPC inside, 507 through the API; the
    sandbox's own disk is not touched, and space freed is usable again."""
    v = volume(size_mib=32)
    with Sandbox(api, "minimal", isolation=mode,
                 volumes=[{"name": v["name"], "path": "/data"}]) as s:
        r = sh(api, s.id, "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; echo rc=$?; "
                          "du -sm /data/big | cut -f1")
        assert "rc=1" in r["stdout"] and "No space left on device" in r["stdout"], r
        assert int(r["stdout"].split()[-1]) <= 32, r
        r = api.request("PUT", f"/v1/sandboxes/{s.id}/files?" + q(path="/data/upload"),
                        b"x" * (8 << 20))
        assert r.status == 507 and error(r)["code"] == "no_space", (r.status, r.body)
        assert sh(api, s.id, "test -e /data/upload")["exit_code"] == 1  # the partial file went
        r = sh(api, s.id, "dd if=/dev/zero of=/root/own bs=1M count=40 2>/dev/null && echo ok")
        assert r["stdout"] == "ok\n", r
        assert sh(api, s.id, "rm /data/big")["exit_code"] == 0
        api.put_file(s.id, "/data/upload", b"y" * (8 << 20))
        assert sh(api, s.id, "wc -c < /data/upload")["stdout"].strip() == str(8 << 20)


def test_one_writer_or_many_readers(api, volume):
    v = volume(size_mib=16)
    rw = [{"name": v["name"], "path": "/data"}]
    ro = [{"name": v["name"], "path": "/data", "read_only": True}]
    with Sandbox(api, "minimal", volumes=rw) as w:
        sh(api, w.id, "echo v1 > /data/f")
        for vols in (rw, ro):
            r = create(api, vols)
            assert r.status == 409, r.body
            assert f"mounted read-write by sandbox {w.id}" in error(r)["message"]
        r = api.request("DELETE", f"/v1/volumes/{v['name']}")
        assert r.status == 409 and w.id in error(r)["message"], r.body
    # The writer is deleted: readers mount at once (its teardown is waited for).
    with Sandbox(api, "minimal", volumes=ro) as r1, Sandbox(api, "minimal", volumes=ro) as r2:
        for s in (r1, r2):
            r = sh(api, s.id, "cat /data/f; echo x > /data/g; echo rc=$?")
            assert r["stdout"] == "v1\nrc=1\n" and "Read-only file system" in r["stderr"], r
        users = api.ok("GET", f"/v1/volumes/{v['name']}").json()["mounted_by"]
        assert sorted(u["sandbox_id"] for u in users) == sorted([r1.id, r2.id])
        assert all(u["read_only"] for u in users)
        r = create(api, rw)
        assert r.status == 409 and "mounted read-only by sandbox" in error(r)["message"], r.body
        r = api.request("PUT", f"/v1/sandboxes/{r1.id}/files?" + q(path="/data/g"), b"no")
        assert r.status == 403, (r.status, r.body)
    # Two writers at once: exactly one gets it.
    answers = []

    def one():
        answers.append(create(api, rw))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [json.loads(r.body)["id"] for r in answers if r.status == 201]
    try:
        assert sorted(r.status for r in answers) == [201, 409], [r.body for r in answers]
    finally:
        for sid in ok:
            api.delete(sid)
    api.ok("DELETE", f"/v1/volumes/{v['name']}", expect=(204,))


def test_restart_keeps_volumes_and_mounts(fresh_daemon):
    d = fresh_daemon.start()
    a = d.api()
    v = a.ok("POST", "/v1/volumes", {"name": "keep", "size_mib": 32}).json()
    sid = a.create("minimal", volumes=[{"name": "keep", "path": "/srv/keep"}])["id"]
    assert sh(a, sid, "echo before > /srv/keep/f")["exit_code"] == 0
    d.stop()
    d.start()
    a = d.api()
    assert a.ok("GET", "/v1/volumes/keep").json()["id"] == v["id"]
    got = a.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert got["state"] == "running" and got["volumes"] == [
        {"name": "keep", "id": v["id"], "path": "/srv/keep", "read_only": False}]
    r = sh(a, sid, "cat /srv/keep/f && echo after >> /srv/keep/f")
    assert r["stdout"] == "before\n", r
    # Still its writer after the restart: the volume stays out of others' and the delete's reach.
    assert create(a, [{"name": "keep", "path": "/k", "read_only": True}]).status == 409
    assert a.request("DELETE", "/v1/volumes/keep").status == 409
    a.delete(sid)
    with Sandbox(a, "minimal", volumes=[{"name": "keep", "path": "/k", "read_only": True}]) as s:
        assert sh(a, s.id, "cat /k/f")["stdout"] == "before\nafter\n"
    wait_for(lambda: held_on_host(d, v["id"]) == [], what="the volume let go of")
    # A restart with no sandbox: the volume and its data stay, nothing is mounted.
    d.stop()
    d.start()
    a = d.api()
    assert held_on_host(d, v["id"]) == []
    with Sandbox(a, "minimal", volumes=[{"name": "keep", "path": "/k"}]) as s:
        assert sh(a, s.id, "cat /k/f")["stdout"] == "before\nafter\n"
    a.ok("DELETE", "/v1/volumes/keep", expect=(204,))
    assert not os.path.exists(image(d, v["id"]))


def test_a_crash_leaves_nothing(fresh_daemon):
    """brigd killed while a sandbox mounts a volume: the next start re-attaches it; killed
    again with the sandbox gone meanwhile (`--destroy-all`), the volume is let go of; bytes
    with no volume row (a create cut short) are removed."""
    d = fresh_daemon.start()
    a = d.api()
    v = a.ok("POST", "/v1/volumes", {"name": "crash", "size_mib": 16}).json()
    a.create("minimal", volumes=[{"name": "crash", "path": "/data"}])
    d.stop(sig=9)
    assert held_on_host(d, v["id"]) != []  # the sandbox still runs and mounts it
    r = d.destroy_all()
    assert r.returncode == 0, r.stderr
    assert held_on_host(d, v["id"]) == []
    orphan = os.path.join(d.state_dir, "volumes", "vol_" + "a" * 26 + ".img")
    with open(orphan, "wb") as f:
        f.truncate(16 << 20)
    d.start()
    a = d.api()
    assert not os.path.exists(orphan)
    assert a.ok("GET", "/v1/volumes/crash").json()["mounted_by"] == []
    a.ok("DELETE", "/v1/volumes/crash", expect=(204,))


def test_billed_by_size_per_second(tmp_path):
    cfg = tmp_path / "brigd.ini"
    # 3.6 $/GiB-hour: a 1 GiB volume costs 1000 micro-dollars a second.
    cfg.write_text("[brigd]\nbilling_interval = 1\nvolume_price_micro_usd_per_gib_hour = 3600000\n"
                   "network = off\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        before = a.ok("GET", "/v1/account").json()["balance_micro_usd"]
        t0 = time.monotonic()
        v = a.ok("POST", "/v1/volumes", {"name": "paid", "size_mib": 1024}).json()
        assert v["price_micro_usd_per_gib_hour"] == 3600000

        def charges():
            entries = a.ok("GET", "/v1/account/ledger").json()["entries"]
            return [e for e in entries if e["volume_id"] == v["id"]]

        wait_for(lambda: len(charges()) >= 2, timeout=20, what="two charges of the volume")
        c = charges()
        assert all(e["kind"] == "charge" and e["sandbox_id"] is None and e["seconds"] >= 1 and
                   e["amount_micro_usd"] == 1000 * e["seconds"] for e in c), c
        a.ok("DELETE", "/v1/volumes/paid", expect=(204,))
        lived = time.monotonic() - t0
        total = sum(e["amount_micro_usd"] for e in charges())
        # Every second of its life at 1000 (the last one rounded up), never a second twice.
        assert 1000 * int(lived - 2) <= total <= 1000 * (int(lived) + 2), (lived, total)
        after = a.ok("GET", "/v1/account").json()["balance_micro_usd"]
        assert before - after == total
    finally:
        d.stop()
    assert not brigtest.leftovers(d.state_dir)


def test_disk_budget_and_account_total(tmp_path):
    """Volumes take their size from the host's disk budget (507 beyond) and an account's
    volumes add up to at most volume_mib_per_account (429)."""
    state = tmp_path / "state"
    state.mkdir()
    st = os.statvfs(state)
    free_mib = st.f_bavail * st.f_frsize >> 20
    ratio = max(0.001, 300 / max(free_mib - 1024, 1))  # a budget of about 300 MiB
    cfg = tmp_path / "brigd.ini"
    cfg.write_text(f"[brigd]\ndisk_overcommit = {ratio:.6f}\nvolume_mib_per_account = 200\n"
                   "network = off\n")
    d = Brigd(str(state), ["--config", str(cfg)]).start()
    try:
        a = d.api()
        cap = a.ok("GET", "/healthz", key=None).json()["disk_mib_capacity"]
        assert cap >= 250, cap
        a.ok("POST", "/v1/volumes", {"name": "one", "size_mib": 150})
        r = a.request("POST", "/v1/volumes", {"name": "two", "size_mib": 60})
        assert r.status == 429 and "volume_mib_per_account" in error(r)["message"], r.body
        assert a.ok("GET", "/healthz", key=None).json()["disk_mib_used"] == 150
        other = Api(d.url, d.operator().ok("POST", "/v1/accounts", {"name": "b"}).json()["api_key"])
        r = other.request("POST", "/v1/volumes", {"name": "big", "size_mib": cap - 150 + 1})
        assert r.status == 507 and error(r)["code"] == "no_space", r.body
        other.ok("POST", "/v1/volumes", {"name": "fits", "size_mib": cap - 150})
        a.ok("DELETE", "/v1/volumes/one", expect=(204,))
        other.ok("DELETE", "/v1/volumes/fits", expect=(204,))
        assert a.ok("GET", "/healthz", key=None).json()["disk_mib_used"] == 0
        assert os.listdir(state / "volumes") == []
    finally:
        d.stop()


def test_cli(api, daemon):
    """`brig volume create|ls|inspect|rm`, `brig create --volume`, `brig run --volume`."""
    exe = os.path.join(brigtest.BUILD, "brig")
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)

    def brig(*args, check=True):
        r = subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=120)
        assert not check or r.returncode == 0, (args, r.returncode, r.stderr)
        return r

    name = f"cli-{secrets.token_hex(3)}"
    vid = brig("volume", "create", "--size", "32", name).stdout.strip()
    assert vid.startswith("vol_")
    r = brig("volume", "create", name, check=False)
    assert r.returncode == 2 and "--size" in r.stderr
    r = brig("volume", "create", "--size", "32", name, check=False)
    assert r.returncode == 1 and "already" in r.stderr
    sid = brig("create", "--template", "minimal", "--volume", f"{name}:/data").stdout.strip()
    try:
        assert sh(api, sid, "echo cli > /data/f")["exit_code"] == 0
        ls = brig("volume", "ls").stdout
        assert name in ls and f"{sid}(rw)" in ls, ls
        assert json.loads(brig("volume", "inspect", name).stdout)["mounted_by"][0]["sandbox_id"] == sid
        r = brig("volume", "rm", name, check=False)
        assert r.returncode == 1 and "mounted" in r.stderr
    finally:
        brig("rm", sid)
    r = brig("run", "--template", "minimal", "--volume", f"{name}:/v:ro", "--", "cat", "/v/f")
    assert r.stdout == "cli\n"
    r = brig("create", "--volume", "no-colon", check=False)
    assert r.returncode == 2 and "NAME:/PATH" in r.stderr
    assert [v["id"] for v in json.loads(brig("volume", "ls", "--json").stdout)["volumes"]
            if v["name"] == name] == [vid]
    brig("volume", "rm", vid)
    assert name not in brig("volume", "ls").stdout
