"""Against a real brigd: files, file-system operations, directories as tar."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

import brig


def test_upload_download_kinds(sb, tmp_path):
    sb.upload("/root/s.txt", "text é\n")
    assert sb.download("/root/s.txt") == "text é\n".encode()
    assert sb.read_text("/root/s.txt") == "text é\n"
    sb.upload("/root/b.bin", b"\x00\xff" * 10)
    assert sb.download("/root/b.bin") == b"\x00\xff" * 10
    sb.upload("/root/f.bin", io.BytesIO(b"from a file object"))
    assert sb.download("/root/f.bin") == b"from a file object"
    sb.upload("/root/t.txt", io.StringIO("from a text file"))
    assert sb.download("/root/t.txt") == b"from a text file"
    sb.upload("/root/it.bin", (bytes([i]) * 1000 for i in range(10)))  # chunked, no length
    assert sb.download("/root/it.bin") == b"".join(bytes([i]) * 1000 for i in range(10))
    local = tmp_path / "local.txt"
    local.write_text("from a path")
    sb.upload("/root/p.txt", local)
    sb.upload_file("/root/p2.txt", str(local))
    assert sb.download("/root/p.txt") == sb.download("/root/p2.txt") == b"from a path"
    sb.upload("/root/empty", b"")
    assert sb.download("/root/empty") == b""
    sb.upload("/root/deep/er/x", "parents made")
    assert sb.stat("/root/deep/er").is_dir


def test_upload_mode(sb):
    sb.upload("/root/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
    assert sb.stat("/root/run.sh").mode == 0o755
    assert sb.exec("/root/run.sh").stdout == "ran\n"
    sb.upload("/root/ro", "x", mode="0600")
    assert sb.stat("/root/ro").mode == 0o600


def test_download_keeps_mode(sb, tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    sb.upload("/root/run.sh", "#!/bin/sh\n", mode=0o755)
    sb.download("/root/run.sh", tmp_path / "run.sh")
    assert (tmp_path / "run.sh").stat().st_mode & 0o777 == 0o755 & ~umask
    sb.upload("/root/plain", "x")
    sb.download("/root/plain", tmp_path / "plain")
    assert (tmp_path / "plain").stat().st_mode & 0o777 == 0o644 & ~umask


def test_large_file_streams_both_ways(sb, tmp_path):
    src = tmp_path / "big"
    block = os.urandom(1 << 20)
    h = hashlib.sha256()
    with open(src, "wb") as f:
        for i in range(24):
            chunk = block[i:] + block[:i]
            f.write(chunk)
            h.update(chunk)
    sb.upload("/root/big", src)
    assert sb.exec("wc -c < /root/big").stdout.strip() == str(24 << 20)
    out = tmp_path / "back"
    assert sb.download("/root/big", out) == 24 << 20
    hb = hashlib.sha256()
    with open(out, "rb") as f:
        for c in iter(lambda: f.read(1 << 20), b""):
            hb.update(c)
    assert hb.hexdigest() == h.hexdigest()
    buf = io.BytesIO()
    assert sb.download("/root/big", buf) == 24 << 20
    assert hashlib.sha256(buf.getvalue()).hexdigest() == h.hexdigest()


def test_download_to_path_is_atomic_on_error(sb, tmp_path):
    target = tmp_path / "keep"
    target.write_text("old")
    with pytest.raises(brig.NotFound):
        sb.download("/root/nope", target)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["keep"]


def test_fs_ops(sb):
    sb.mkdir("/root/d")
    with pytest.raises(brig.Conflict):
        sb.mkdir("/root/d")
    sb.mkdir("/root/d", exist_ok=True)
    sb.mkdir("/root/a/b/c", parents=True, mode=0o700)
    assert sb.stat("/root/a/b/c").mode == 0o700
    sb.upload("/root/d/one.txt", "1")
    sb.upload("/root/d/two.txt", "22")
    entries = sb.ls("/root/d")
    assert [(e.name, e.type, e.size) for e in entries] == [("one.txt", "file", 1),
                                                           ("two.txt", "file", 2)]
    assert entries[0].path == "/root/d/one.txt" and entries[0].mtime is not None
    st = sb.stat("/root/d")
    assert st.is_dir and st.name == "d"
    sb.exec("ln -s one.txt /root/d/link")
    link = sb.stat("/root/d/link")
    assert link.is_symlink and link.target == "one.txt"
    sb.move("/root/d/two.txt", "/root/d/three.txt")
    assert not sb.exists("/root/d/two.txt") and sb.read_text("/root/d/three.txt") == "22"
    with pytest.raises(brig.Conflict):
        sb.remove("/root/d")
    sb.remove("/root/d/one.txt")
    sb.remove("/root/d", recursive=True)
    assert not sb.exists("/root/d")
    with pytest.raises(brig.NotFound):
        sb.stat("/root/d")
    with pytest.raises(brig.InvalidRequest):
        sb.ls("relative/path")


def test_upload_dir_and_download_dir(sb, tmp_path):
    src = tmp_path / "proj"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / "README").write_text("readme")
    (src / "pkg" / "__init__.py").write_text("x = 1\n")
    (src / "pkg" / "sub" / "data.bin").write_bytes(os.urandom(300_000))
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("README")
    sb.upload_dir(src, "/root/proj")
    assert sb.exec("cat /root/proj/README; /root/proj/run.sh").stdout == "readmehi\n"
    assert sb.stat("/root/proj/link").target == "README"
    assert sb.stat("/root/proj/pkg/sub/data.bin").size == 300_000

    dest = tmp_path / "back"
    n = sb.download_dir("/root/proj", dest)
    assert n >= 6
    assert (dest / "README").read_text() == "readme"
    assert (dest / "pkg" / "sub" / "data.bin").read_bytes() == \
        (src / "pkg" / "sub" / "data.bin").read_bytes()
    assert os.access(dest / "run.sh", os.X_OK)
    assert (dest / "link").is_symlink() and os.readlink(dest / "link") == "README"
    with pytest.raises(brig.NotFound):
        sb.download_dir("/root/nothing-here", tmp_path / "x")


def test_large_upload_refused_early_raises_the_answer(daemon, tmp_path):
    """brigd answers 404 before reading the body: the SDK reports the 404,
    not a broken pipe (sync and async)."""
    import asyncio

    from brig import aio

    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(64 << 20)
    ghost = brig.SandboxInfo(id="sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa")
    with brig.Client() as c:
        with pytest.raises(brig.NotFound, match="sbx_aaaa"):
            brig.Sandbox(c, ghost).upload("/root/big", big)
        # the client still works afterwards
        assert c.list_sandboxes() == []

    async def go():
        c = aio.Client()
        with pytest.raises(brig.NotFound, match="sbx_aaaa"):
            await aio.Sandbox(c, ghost).upload("/root/big", big)
        assert await c.list_sandboxes() == []
        await c.aclose()

    asyncio.run(go())
