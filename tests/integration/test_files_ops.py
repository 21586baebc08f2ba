"""Files, complete: listing, stat, remove, move, mkdir, tar in and out, size limits,
a full disk, and multi-gigabyte transfers that brigd streams without holding them."""

import hashlib
import http.client
import io
import os
import tarfile
import threading
import urllib.parse

import pytest

from brigtest import Brigd, Sandbox, sandbox_processes


def files(sb, **q):
    return f"/v1/sandboxes/{sb.id}/files?{urllib.parse.urlencode(q)}"


def test_list_stat_mkdir_move_remove(api):
    with Sandbox(api) as sb:
        api.put_file(sb.id, "/work/a.txt", b"hello", mode="0600")
        api.put_file(sb.id, "/work/sub/b.bin", b"\0" * 10)
        sb.exec("ln -s a.txt /work/link")
        entries = api.ok("GET", files(sb, path="/work", list=1)).json()["entries"]
        assert [e["name"] for e in entries] == ["a.txt", "link", "sub"]
        a, link, sub = entries
        assert (a["type"], a["size"], a["mode"]) == ("file", 5, "0600")
        assert a["mtime"].endswith("Z")
        assert link["type"] == "symlink" and link["target"] == "a.txt"
        assert sub["type"] == "dir"
        st = api.ok("GET", files(sb, path="/work/sub/b.bin", stat=1)).json()
        assert (st["name"], st["type"], st["size"]) == ("b.bin", "file", 10)

        r = api.request("POST", f"/v1/sandboxes/{sb.id}/files/mkdir",
                        {"path": "/work/new/deep", "mode": "0700", "parents": True})
        assert r.status == 201
        assert api.ok("GET", files(sb, path="/work/new/deep", stat=1)).json()["mode"] == "0700"
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/files/mkdir", {"path": "/work/a.txt"})
        assert r.status == 409
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/files/mkdir", {"path": "relative"})
        assert r.status == 400

        api.ok("POST", f"/v1/sandboxes/{sb.id}/files/move",
               {"from": "/work/a.txt", "to": "/work/new/a2.txt"}, expect=(204,))
        assert api.get_file(sb.id, "/work/new/a2.txt") == b"hello"
        assert api.request("GET", files(sb, path="/work/a.txt")).status == 404
        r = api.request("POST", f"/v1/sandboxes/{sb.id}/files/move",
                        {"from": "/work/missing", "to": "/work/x"})
        assert r.status == 404

        assert api.request("DELETE", files(sb, path="/work/sub")).status == 409
        assert api.request("DELETE", files(sb, path="/work/sub", recursive=1)).status == 204
        assert api.request("DELETE", files(sb, path="/work/link")).status == 204
        assert api.request("DELETE", files(sb, path="/work/nothing")).status == 404
        assert api.request("DELETE", files(sb, path="/", recursive=1)).status == 400
        # The link was removed, not its target.
        assert api.get_file(sb.id, "/work/new/a2.txt") == b"hello"
        assert api.request("GET", files(sb, path="/work/a.txt", list=1)).status == 404
        r = api.request("GET", files(sb, path="/work/new/a2.txt", list=1))
        assert r.status == 400


def test_recursive_remove_does_not_follow_symlinks(api):
    with Sandbox(api) as sb:
        sb.exec("mkdir -p /keep /gone && echo precious > /keep/f && ln -s /keep /gone/link")
        assert api.request("DELETE", files(sb, path="/gone", recursive=1)).status == 204
        assert sb.exec("cat /keep/f")["stdout"] == "precious\n"


def make_tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_tar_round_trip(api):
    with Sandbox(api) as sb:
        blob = os.urandom(100000)
        tar = make_tar([("src", "dir", None, 0o755), ("src/main.py", "file", b"print(1)\n", 0o755),
                        ("src/data.bin", "file", blob, 0o600),
                        ("src/link", "symlink", "main.py", 0o777)])
        api.ok("PUT", f"/v1/sandboxes/{sb.id}/files/tar?path=/repo", tar, expect=(204,))
        assert api.get_file(sb.id, "/repo/src/data.bin") == blob
        assert sb.exec("stat -c %a /repo/src/main.py; readlink /repo/src/link")["stdout"] == \
            "755\nmain.py\n"
        out = api.ok("GET", f"/v1/sandboxes/{sb.id}/files/tar?path=/repo").body
        with tarfile.open(fileobj=io.BytesIO(out)) as t:
            names = {m.name.lstrip("./"): m for m in t.getmembers()}
            assert names["src/data.bin"].mode & 0o777 == 0o600
            assert names["src/link"].issym() and names["src/link"].linkname == "main.py"
            assert t.extractfile(names["src/data.bin"]).read() == blob
        assert api.request("GET", f"/v1/sandboxes/{sb.id}/files/tar?path=/nope").status == 404


def test_tar_cannot_escape_its_directory(api):
    with Sandbox(api) as sb:
        tar = make_tar([("../escaped", "file", b"x", 0o644), ("/abs", "file", b"y", 0o644),
                        ("ok", "file", b"z", 0o644)])
        api.request("PUT", f"/v1/sandboxes/{sb.id}/files/tar?path=/dst/inner", tar)
        r = sb.exec("ls /dst; test -e /dst/escaped || test -e /escaped || test -e /abs")
        assert r["exit_code"] != 0, r


def test_upload_size_limit(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nmax_file_bytes = 100000\n")
    d = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        api = d.api()
        with Sandbox(api) as sb:
            api.put_file(sb.id, "/tmp/ok", b"x" * 100000)
            r = api.request("PUT", files(sb, path="/tmp/big"), b"x" * 100001)
            assert r.status == 413 and r.json()["error"]["code"] == "too_large"
            # Without Content-Length (chunked): refused when the limit is crossed.
            conn = http.client.HTTPConnection(api.host, api.port)
            conn.request("PUT", files(sb, path="/tmp/big2"),
                         body=iter([b"y" * 60000, b"y" * 60000]), encode_chunked=True,
                         headers={"Authorization": f"Bearer {api.key}"})
            r = conn.getresponse()
            assert r.status == 413
            conn.close()
            assert sb.exec("ls -A /tmp")["stdout"].split() == ["ok"]
    finally:
        d.stop()


def test_full_disk_is_507_and_leaves_nothing(api):
    with Sandbox(api) as sb:
        # /dev/shm is a 64 MiB tmpfs inside every sandbox.
        r = api.request("PUT", files(sb, path="/dev/shm/huge"), b"z" * (80 << 20))
        assert r.status == 507 and r.json()["error"]["code"] == "no_space"
        assert sb.exec("ls -A /dev/shm")["stdout"] == ""


def gen(total, chunk=1 << 20):
    block = bytes(range(256)) * (chunk // 256)
    sent = 0
    while sent < total:
        n = min(chunk, total - sent)
        yield block[:n]
        sent += n


def test_2gib_upload_and_download_stream(tmp_path):
    """2 GiB each way; brigd's peak resident size must not grow by more than 64 MiB,
    and no agent process (PID 1 and the handlers it forks) may peak above 32 MiB."""
    from test_exec import rss_kib
    size = 2 << 30
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[tariff.big]\ndisk_mib = 2600\n")  # room for 2 GiB plus ext4's own
    daemon = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).start()
    try:
        big_transfer(daemon, size)
    finally:
        daemon.stop()


def big_transfer(daemon, size):
    from test_exec import rss_kib
    api = daemon.api()
    with Sandbox(api, tariff="big") as sb:
        base = rss_kib(daemon.proc.pid, "VmHWM")
        agent_peak, stop = [0], threading.Event()

        def watch_agent():
            # A handler's peak goes with it: sample every agent process while it lives.
            while not stop.is_set():
                for pid in sandbox_processes([sb.id]):
                    try:
                        with open(f"/proc/{pid}/comm") as f:
                            if f.read().strip() != "brig-agent":
                                continue
                        agent_peak[0] = max(agent_peak[0], rss_kib(pid, "VmHWM"))
                    except (OSError, AssertionError):
                        pass  # it ended between the listing and the read
                stop.wait(0.05)
        watcher = threading.Thread(target=watch_agent)
        watcher.start()
        conn = http.client.HTTPConnection(api.host, api.port, timeout=600)
        conn.request("PUT", files(sb, path="/tmp/big"), body=gen(size),
                     headers={"Authorization": f"Bearer {api.key}",
                              "Content-Length": str(size)})
        r = conn.getresponse()
        assert r.status == 204, r.read()
        conn.close()
        expect = hashlib.sha256()
        for b in gen(size):
            expect.update(b)
        conn = http.client.HTTPConnection(api.host, api.port, timeout=600)
        conn.request("GET", files(sb, path="/tmp/big"),
                     headers={"Authorization": f"Bearer {api.key}"})
        r = conn.getresponse()
        assert r.status == 200 and int(r.getheader("Content-Length")) == size
        got = hashlib.sha256()
        n = 0
        while True:
            b = r.read(1 << 20)
            if not b:
                break
            got.update(b)
            n += len(b)
        conn.close()
        assert n == size and got.hexdigest() == expect.hexdigest()
        stop.set()
        watcher.join()
        peak = rss_kib(daemon.proc.pid, "VmHWM")
        print(f"2 GiB each way: brigd's peak RSS grew by {peak - base} KiB, "
              f"the agent's processes peaked at {agent_peak[0]} KiB")
        assert peak - base < 64 * 1024, f"brigd peak RSS grew by {(peak - base) // 1024} MiB"
        assert 0 < agent_peak[0] < 32 * 1024, f"an agent process peaked at {agent_peak[0]} KiB"
        sb.exec("rm /tmp/big")
