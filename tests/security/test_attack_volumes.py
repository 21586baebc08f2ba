"""Issue 15: attacks on persistent volumes (docs/volumes.md, docs/security.md "Volumes").

A volume is a file system that outlives its sandbox and is mounted into the next one, so it
is a way for a tenant's bytes to travel: these tests try to use it to reach what is not
the sandbox's own.  Every test runs in both isolation modes (the `sec` fixture), attacks
from sandboxes of the `base` template and ends with the fixture's checks (the bystander of
another account, the host's marker files and processes, nothing left behind):

- another project's or another account's volume, by the API and from inside;
- out of the volume's directory: symlinks (followed inside, by the agent's files API and
  by tar), `..`, its file system's root and lost+found, hard links and renames across
  mounts;
- mount tricks: remounting a read-only volume, binding it, unmounting it, from a user
  namespace of the sandbox's own; open_by_handle_at;
- what one sandbox leaves for the next: setuid files, device nodes;
- paths at create that would shadow the agent, /proc or a file of the template;
- the bytes on the host: unreadable by any other sandbox's host uid.
"""

import os
import secrets
import urllib.parse

import pytest

import brigtest
import sectest

MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096


@pytest.fixture
def vol(sec):
    """Volumes of the test's own (made with the admin key unless another api is given),
    deleted after the test's sandboxes."""
    made = []

    def make(a=None, name=None, size_mib=32, project=None):
        a = a or sec.api
        body = {"name": name or f"v-{secrets.token_hex(4)}", "size_mib": size_mib}
        if project:
            body["project"] = project
        v = a.ok("POST", "/v1/volumes", body).json()
        made.append((a, v))
        return v

    yield make
    sec.delete_all()
    for a, v in made:
        r = a.request("DELETE", f"/v1/volumes/{v['id']}?project={v['project_id']}")
        assert r.status in (204, 404), r.body


def mounted(sec, vols, template="base", a=None):
    """A sandbox (of the test's isolation mode) that mounts vols."""
    body = {"template": template, "volumes": vols}
    sid = (a or sec.api).ok("POST", "/v1/sandboxes", body).json()["id"]
    sec.created.append(sid)
    return sid


def volume_paths(daemon, v):
    """The host's paths of a volume: its image, its host mount's data."""
    base = os.path.join(daemon.state_dir, "volumes", v["id"])
    return base + ".img", base + ".mnt/data"


def q(**kw):
    return urllib.parse.urlencode(kw)


def test_other_projects_and_accounts_volumes(sec, vol, daemon):
    """Another project's volume (same account) and another account's: not mountable by
    name or id, not visible to a sandbox key, and nothing of them inside the attacker."""
    marker = f"volume-marker {secrets.token_hex(16)}"
    p2 = sec.api.ok("POST", "/v1/projects", {"name": f"p2-{secrets.token_hex(3)}"}).json()["id"]
    theirs = vol(name="secret", project=p2)
    victims = vol(a=sec.victim.api, name="secret")
    mine = vol(name="mine")
    # A sandbox of p2 writes the marker into p2's volume.
    sb2 = sec.api.ok("POST", "/v1/sandboxes", {"template": "minimal", "project": p2,
                                               "volumes": [{"name": "secret",
                                                            "path": "/secret"}]})
    sid2 = sb2.json()["id"]
    sec.created.append(sid2)
    assert sec.sh(sid2, f"echo '{marker}' > /secret/marker")["exit_code"] == 0

    for ref in ("secret", theirs["id"], victims["id"]):
        r = sec.api.request("POST", "/v1/sandboxes", {"template": "base", "volumes": [
            {"name": ref, "path": "/x"}]})
        assert r.status == 400, r.body
    k = sec.api.ok("POST", f"/v1/projects/{mine['project_id']}/keys", {"scope": "sandbox"}).json()
    sbk = brigtest.Api(sec.api.base_url, k["key"])
    try:
        assert [x["id"] for x in sbk.ok("GET", "/v1/volumes").json()["volumes"]] == [mine["id"]]
        for path in (f"/v1/volumes/{theirs['id']}", f"/v1/volumes/secret?{q(project=p2)}",
                     f"/v1/volumes/{victims['id']}", f"/v1/volumes?{q(project=p2)}"):
            assert sbk.request("GET", path).status == 404, path
        assert sbk.request("DELETE", f"/v1/volumes/{theirs['id']}").status == 403
    finally:
        sec.api.ok("DELETE", f"/v1/projects/{mine['project_id']}/keys/{k['id']}", expect=(204,))

    sid = mounted(sec, [{"name": "mine", "path": "/data"}])
    img, data = volume_paths(daemon, theirs)
    clone = os.path.join(daemon.state_dir, "sandboxes", sid2, "vol", "0", "marker")
    out, _ = sec.py(sid, f"""
for name, p in (("image", {img!r}), ("host mount", {data + "/marker"!r}),
                ("clone", {clone!r}), ("state dir", {daemon.state_dir!r})):
    out[name] = err(open, p, "rb")
# Every file system mounted here but /proc, /sys, /dev: the marker is in none.
found = []
for line in open("/proc/self/mountinfo"):
    mp = line.split()[4]
    if mp == "/" or mp.split("/")[1] in ("proc", "sys", "dev"):
        continue
    for d, dirs, files in os.walk(mp):
        for f in files:
            try:
                if {marker!r}.encode() in open(os.path.join(d, f), "rb").read(1 << 20):
                    found.append(os.path.join(d, f))
            except OSError:
                pass
out["found"] = found
out["volumes"] = sorted(l.split()[4] for l in open("/proc/self/mountinfo")
                        if l.split()[4] in ("/data", "/secret", "/x"))
""")
    assert out["found"] == [] and out["volumes"] == ["/data"], out
    for name in ("image", "host mount", "clone", "state dir"):
        assert out[name] in ("ENOENT", "EACCES"), out


def test_symlinks_out_of_the_volume(sec, vol, daemon):
    """Symlinks planted in a volume point into the sandbox that follows them, never the
    host: inside, through the files API and tar, and in the next sandbox that mounts it."""
    v = vol()
    img, data = volume_paths(daemon, v)
    host = sec.host.dir
    links = {"host": host, "root": "/", "up": "../../../../../..", "proc": "/proc/1/root",
             "img": img, "mnt": data, "hostfile": os.path.join(host, "public.txt")}
    a = mounted(sec, [{"name": v["name"], "path": "/data"}])
    out, _ = sec.py(a, f"""
links = {links!r}
for name, target in links.items():
    os.symlink(target, "/data/" + name)
out["public"] = err(open, "/data/host/public.txt")
out["hostfile"] = err(open, "/data/hostfile")
out["img"] = err(open, "/data/img", "rb")
out["mnt"] = err(os.listdir, "/data/mnt")
out["up"] = os.path.realpath("/data/up")
out["dotdot"] = os.stat("/data/..").st_ino == os.stat("/").st_ino
out["listing"] = sorted(os.listdir("/data"))
out["root_of_fs"] = err(os.stat, "/data/lost+found")
""")
    assert out["public"] == out["hostfile"] == out["img"] == "ENOENT", out
    assert out["mnt"] == "ENOENT" and out["up"] == "/" and out["dotdot"], out
    assert out["listing"] == sorted(links) and out["root_of_fs"] == "ENOENT", out

    # The files API resolves paths inside the sandbox too.
    for path in ("/data/host/public.txt", "/data/hostfile", "/data/img", "/data/mnt/x"):
        r = sec.api.request("GET", f"/v1/sandboxes/{a}/files?" + q(path=path))
        assert r.status in (400, 404) and sec.host.secret.encode() not in r.body, (path, r.body)
    r = sec.api.request("PUT", f"/v1/sandboxes/{a}/files?" + q(path="/data/host/new.txt"),
                        b"through a symlink")
    assert r.status in (204, 403, 404), r.body
    if r.status == 204:  # it landed in the sandbox, at the host's path
        assert sec.sh(a, f"cat {host}/new.txt")["stdout"] == "through a symlink"
    tar = sec.api.ok("GET", f"/v1/sandboxes/{a}/files/tar?" + q(path="/data")).body
    assert sec.host.secret.encode() not in tar
    sec.host.check()
    sec.api.delete(a)

    # The next sandbox, read-only: the links are still only links.
    b = mounted(sec, [{"name": v["name"], "path": "/data", "read_only": True}])
    out, _ = sec.py(b, """
out["public"] = err(open, "/data/host/public.txt")
out["links"] = sorted(n for n in os.listdir("/data") if os.path.islink("/data/" + n))
""")
    assert out["public"] == "ENOENT" and out["links"] == sorted(links), out
    for path in ("/data/hostfile", "/data/host"):
        r = sec.api.request("GET", f"/v1/sandboxes/{b}/files?" + q(path=path))
        assert sec.host.secret.encode() not in r.body, (path, r.body)


def test_hard_links_and_renames_across_the_volume(sec, vol):
    """A volume is a mount of its own: nothing links or moves across it."""
    v = vol()
    a = mounted(sec, [{"name": v["name"], "path": "/data"}])
    out, _ = sec.py(a, """
open("/data/mine", "w").write("mine")
open("/root/own", "w").write("own")
out["in_passwd"] = err(os.link, "/etc/passwd", "/data/passwd")
out["in_agent"] = err(os.link, "/.brig/brig-agent", "/data/agent")
out["in_own"] = err(os.link, "/root/own", "/data/own")
out["out"] = err(os.link, "/data/mine", "/root/mine")
out["mv_in"] = err(os.rename, "/root/own", "/data/own")
out["mv_out"] = err(os.rename, "/data/mine", "/root/mine")
fd = os.open("/etc/passwd", os.O_PATH)
out["proc_fd"] = err(os.link, f"/proc/self/fd/{fd}", "/data/viafd", follow_symlinks=True)
AT_EMPTY_PATH, AT_FDCWD = 0x1000, -100
out["empty_path"] = sc(265, fd, b"", AT_FDCWD, b"/data/empty", AT_EMPTY_PATH)
out["left"] = sorted(os.listdir("/data"))
""")
    for k in ("in_passwd", "in_agent", "in_own", "out", "mv_in", "mv_out", "proc_fd"):
        assert out[k] in ("EXDEV", "EPERM", "EACCES"), out
    assert out["in_passwd"] == "EXDEV" and out["out"] == "EXDEV" and out["mv_in"] == "EXDEV", out
    assert out["empty_path"] in ("ENOENT", "EPERM", "EXDEV", "EACCES"), out
    assert out["left"] == ["mine"], out


def test_mount_tricks_on_a_read_only_volume(sec, vol, daemon):
    """A read-only volume stays read-only: no remount, bind, unmount, nor a user namespace
    of the sandbox's own that tries them; its bytes on the host are unchanged."""
    v = vol()
    w = mounted(sec, [{"name": v["name"], "path": "/data"}])
    assert sec.sh(w, "echo original > /data/f")["exit_code"] == 0
    sec.api.delete(w)
    r = mounted(sec, [{"name": v["name"], "path": "/ro", "read_only": True}])
    _, data = volume_paths(daemon, v)
    before = sectest.tree_snapshot(data)
    out, _ = sec.py(r, f"""
NR_mount, NR_umount2, NR_unshare, NR_obh = 165, 166, 272, 304
out["write"] = err(lambda: open("/ro/f", "w").write("changed"))
out["chmod"] = err(os.chmod, "/ro/f", 0o777)
out["create"] = err(os.mkdir, "/ro/new")
out["mknod"] = err(os.mknod, "/ro/null", 0o600 | 0o020000, os.makedev(1, 3))
out["remount"] = sc(NR_mount, None, b"/ro", None, {MS_REMOUNT | MS_BIND}, None)
out["bind"] = sc(NR_mount, b"/ro", b"/mnt", None, {MS_BIND}, None)
out["umount"] = sc(NR_umount2, b"/ro", 0)
out["handle"] = sc(NR_obh, -100, None, 0)
# A user namespace (and mount namespace) of its own, root there: the same attempts.
rd, wr = os.pipe()
pid = os.fork()
if pid == 0:
    res = {{}}
    res["unshare"] = sc(NR_unshare, {sectest.CLONE_NEWUSER | sectest.CLONE_NEWNS})
    if res["unshare"] == 0:
        try:
            open("/proc/self/setgroups", "w").write("deny")
            open("/proc/self/uid_map", "w").write("0 0 1")
            open("/proc/self/gid_map", "w").write("0 0 1")
        except OSError as e:
            res["map"] = errno.errorcode.get(e.errno)
        res["remount"] = sc(NR_mount, None, b"/ro", None, {MS_REMOUNT | MS_BIND}, None)
        res["umount"] = sc(NR_umount2, b"/ro", 2)
        res["write"] = err(lambda: open("/ro/f", "w").write("changed"))
        res["chmod"] = err(os.chmod, "/ro/f", 0o777)
    os.write(wr, json.dumps(res).encode())
    os._exit(0)
os.close(wr)
os.waitpid(pid, 0)
out["userns"] = json.loads(os.read(rd, 65536))
out["f"] = open("/ro/f").read()
out["mode"] = oct(os.stat("/ro/f").st_mode)
""")
    for k in ("write", "chmod", "create"):
        assert out[k] == "EROFS", out
    assert out["mknod"] in ("EPERM", "EROFS"), out
    assert out["remount"] == "EPERM" and out["bind"] == "EPERM" and out["umount"] == "EPERM", out
    # No CAP_DAC_READ_SEARCH (container); gVisor has no open_by_handle_at.
    assert out["handle"] in sec.mode(("EPERM",), ("ENOTSUP", "EOPNOTSUPP")), out
    u = out["userns"]
    if sec.gvisor:
        # gVisor makes the user namespace in its own kernel, lets its root remount the volume
        # read-write there and says a chmod is done: nothing changes, inside or on the host
        # (the host's mount under gVisor's gofer is brigd's read-only clone).
        assert u["unshare"] == 0 and u["write"] == "EROFS", out
    else:
        assert u == {"unshare": "EPERM"}, out  # seccomp: no new user namespace
    assert out["f"] == "original\n" and out["mode"] == "0o100644", out
    assert sectest.tree_snapshot(data) == before


def test_setuid_and_devices_left_in_a_volume(sec, vol):
    """What one sandbox leaves in a volume gains the next nothing: its setuid-root file runs
    as the caller (the mount is nosuid, and noNewPrivileges), no device node can be made."""
    v = vol()
    a = mounted(sec, [{"name": v["name"], "path": "/data"}])
    r = sec.sh(a, "cp /usr/bin/id /data/id && chmod 4755 /data/id && ls -ln /data/id && "
                  "mknod /data/mem c 1 1; echo mknod=$?")
    assert "-rwsr-xr-x" in r["stdout"] and "mknod=1" in r["stdout"], r
    assert sec.sh(a, "/data/id -u", user="user")["stdout"] == "1000\n"
    sec.api.delete(a)
    b = mounted(sec, [{"name": v["name"], "path": "/data"}])
    assert sec.sh(b, "/data/id -u", user="user")["stdout"] == "1000\n"
    assert sec.sh(b, "/data/id -u")["stdout"] == "0\n"
    assert sec.sh(b, "test -e /data/mem")["exit_code"] == 1


@pytest.mark.parametrize("path", [
    "/.brig", "/.brig/run", "/proc", "/proc/1", "/sys", "/dev", "/dev/pts", "/",
    "/data/../proc", "/../../etc", "/./.brig", "relative/path", "/etc/passwd",
    "/.brig/brig-agent",
])
def test_paths_that_would_shadow(sec, vol, path):
    """Refused at create, before anything runs: no sandbox is made."""
    v = vol(size_mib=16)
    r = sec.api.request("POST", "/v1/sandboxes", {"template": "base", "volumes": [
        {"name": v["name"], "path": path}]})
    assert r.status == 400, (path, r.status, r.body)
    assert sec.api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []


def test_a_template_symlink_in_the_path_stays_inside(sec, vol, daemon):
    """/lib is a symlink in the base template (to usr/lib): the volume lands at
    /usr/lib/brigvol inside the sandbox, nothing appears on the host."""
    v = vol(size_mib=16)
    sid = mounted(sec, [{"name": v["name"], "path": "/lib/brigvol"}])
    r = sec.sh(sid, "echo inside > /lib/brigvol/f && cat /usr/lib/brigvol/f && "
                    "stat -c %d /usr/lib/brigvol /usr/lib | uniq | wc -l")
    assert r["stdout"] == "inside\n2\n", r
    assert not os.path.lexists("/lib/brigvol") and not os.path.lexists("/usr/lib/brigvol")


def test_volume_bytes_unreachable_from_other_sandboxes(sec, vol, daemon):
    """On the host, a volume's image, its host mount and a sandbox's clone of it are out of
    reach of every other sandbox's host uid (each sandbox runs as its own range)."""
    v = vol()
    a = mounted(sec, [{"name": v["name"], "path": "/data"}])
    assert sec.sh(a, "umask 077; echo private > /data/p")["exit_code"] == 0
    b = sec.sandbox("minimal")
    img, data = volume_paths(daemon, v)
    clone = os.path.join(daemon.state_dir, "sandboxes", a, "vol", "0", "p")
    ua = sectest.host_uid(sec.init_pid(a))
    assert os.stat(clone).st_uid == ua  # mapped into A's range on the host
    assert os.stat(os.path.join(data, "p")).st_uid == 0  # stored as A's root: id 0
    assert os.stat(img).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(img)).st_mode & 0o777 == 0o700
    ub = sectest.host_uid(sec.init_pid(b))
    got = sectest.as_uid(ub, [img, os.path.join(data, "p"), clone])
    assert all(v == ("EACCES", "EACCES") for v in got.values()), got
