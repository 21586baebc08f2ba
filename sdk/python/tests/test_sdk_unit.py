"""Tests without brigd: error mapping for every status, transport failures,
what create/exec send, stream decoding, and the async HTTP client's body
framings — against the scripted server in fakeserver.py."""

from __future__ import annotations

import asyncio
import builtins
import io
import json
import socket
import tarfile
import time

import pytest

import brig
import brig.aio
from brig import _common
from fakeserver import FakeServer

STATUSES = [
    (400, "invalid_request", brig.InvalidRequest),
    (401, "unauthorized", brig.AuthError),
    (402, "payment_required", brig.PaymentRequired),
    (403, "forbidden", brig.Forbidden),
    (404, "not_found", brig.NotFound),
    (405, "method_not_allowed", brig.MethodNotAllowed),
    (409, "conflict", brig.Conflict),
    (413, "too_large", brig.TooLarge),
    (429, "limit_exceeded", brig.LimitExceeded),
    (500, "internal", brig.ServerError),
    (502, "agent_protocol", brig.AgentProtocolError),
    (503, "unavailable", brig.Unavailable),
    (504, "timeout", brig.Timeout),
    (507, "no_space", brig.NoSpace),
]


def status_route(h, body):
    """GET /v1/sandboxes/sbx_<status> answers that status with brigd's error shape."""
    sid = h.path.rsplit("/", 1)[-1]
    if sid.startswith("sbx_") and sid[4:].isdigit():
        st = int(sid[4:])
        code = dict((s, c) for s, c, _ in STATUSES).get(st, "weird")
        h.send_error_json(st, code, f"message for {st}")
    elif sid == "sbx_html":
        h.send(502, b"<html>Bad Gateway</html>", ctype="text/html")
    elif sid == "sbx_garbage":
        h.send(200, b"this is not json")
    else:
        h.send_json(200, {"id": sid, "template": "minimal", "state": "running",
                          "created_at": "2026-12-01T10:00:00.123Z"})


@pytest.fixture
def fake():
    with FakeServer(status_route) as f:
        yield f


@pytest.mark.parametrize("status,code,cls", STATUSES)
def test_status_maps_to_exception(fake, status, code, cls):
    with pytest.raises(cls) as ei:
        brig.Sandbox.connect(f"sbx_{status}", url=fake.url, api_key="k")
    e = ei.value
    assert isinstance(e, brig.BrigError)
    assert e.status == status and e.code == code and e.message == f"message for {status}"
    assert f"message for {status}" in str(e)


@pytest.mark.parametrize("status,code,cls", STATUSES)
def test_status_maps_to_exception_async(fake, status, code, cls):
    async def go():
        await brig.aio.Sandbox.connect(f"sbx_{status}", url=fake.url, api_key="k")

    with pytest.raises(cls) as ei:
        asyncio.run(go())
    assert ei.value.status == status and ei.value.message == f"message for {status}"


def test_hierarchy():
    assert issubclass(brig.PaymentRequired, brig.LimitExceeded)
    assert issubclass(brig.Unavailable, brig.ServerError)
    assert issubclass(brig.ConnectionError, builtins.ConnectionError)
    assert issubclass(brig.Timeout, builtins.TimeoutError)
    for cls in (brig.InvalidRequest, brig.AuthError, brig.NotFound, brig.ConnectionError,
                brig.Timeout, brig.ProtocolError):
        assert issubclass(cls, brig.BrigError)


def test_unknown_statuses_and_bodies(fake):
    with pytest.raises(brig.ServerError) as ei:
        brig.Sandbox.connect("sbx_html", url=fake.url, api_key="k")
    assert ei.value.status == 502 and "Bad Gateway" in ei.value.message
    with pytest.raises(brig.ServerError):
        brig.Sandbox.connect("sbx_599", url=fake.url, api_key="k")
    with pytest.raises(brig.InvalidRequest) as ei:
        brig.Sandbox.connect("sbx_418", url=fake.url, api_key="k")
    assert ei.value.status == 418
    with pytest.raises(brig.ProtocolError):
        brig.Sandbox.connect("sbx_garbage", url=fake.url, api_key="k")


def test_key_and_url_from_env_and_arguments(fake, monkeypatch):
    monkeypatch.setenv("BRIG_URL", fake.url)
    monkeypatch.setenv("BRIG_API_KEY", "from-env")
    brig.Sandbox.connect("sbx_a").close()
    assert fake.requests[-1]["headers"]["Authorization"] == "Bearer from-env"
    brig.Sandbox.connect("sbx_a", api_key="explicit").close()
    assert fake.requests[-1]["headers"]["Authorization"] == "Bearer explicit"
    monkeypatch.setenv("BRIG_URL", "http://127.0.0.1:1")  # explicit url wins
    brig.Sandbox.connect("sbx_a", url=fake.url).close()
    monkeypatch.delenv("BRIG_API_KEY")
    with pytest.raises(brig.AuthError, match="BRIG_API_KEY"):
        brig.Sandbox.connect("sbx_a", url=fake.url)


def test_default_url(monkeypatch):
    monkeypatch.delenv("BRIG_URL", raising=False)
    assert brig.Client(api_key="k").url == "http://127.0.0.1:7070"


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_connection_refused_is_connection_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(brig.ConnectionError) as ei:
        brig.Sandbox.create(url=url, api_key="k")
    assert isinstance(ei.value, builtins.ConnectionError)
    assert ei.value.code == "connection" and url in ei.value.message

    async def go():
        await brig.aio.Sandbox.create(url=url, api_key="k")

    with pytest.raises(brig.ConnectionError):
        asyncio.run(go())


def test_stalled_server_is_timeout():
    def route(h, body):
        time.sleep(1.5)
        h.send_json(200, {"sandboxes": []})

    with FakeServer(route) as f:
        c = brig.Client(f.url, "k", timeout=0.3)
        t0 = time.monotonic()
        with pytest.raises(brig.Timeout) as ei:
            c.list_sandboxes()
        assert time.monotonic() - t0 < 1.2
        assert isinstance(ei.value, TimeoutError)

        async def go():
            await brig.aio.Client(f.url, "k", timeout=0.3).list_sandboxes()

        with pytest.raises(brig.Timeout):
            asyncio.run(go())


def capture_route(h, body):
    if h.command == "POST" and h.path == "/v1/sandboxes":
        h.send_json(201, {"id": "sbx_new", "template": "base", "state": "running"})
    elif h.command == "DELETE":
        h.send(204)
    elif h.path.endswith("/exec"):
        h.send_json(200, {"exit_code": 0, "stdout": "", "stderr": "", "timed_out": False,
                          "duration_ms": 1, "signal": None})
    else:
        h.send(204)


def test_create_sends_only_given_fields():
    with FakeServer(capture_route) as f:
        with brig.Sandbox.create(url=f.url, api_key="k"):
            pass
        assert json.loads(f.requests[0]["body"]) == {}
        with brig.Sandbox.create("minimal", tariff="small", env={"A": "1"},
                                 secrets={"TOKEN": "s3cret"}, secret_refs=["DB"],
                                 idle_timeout=60, max_lifetime=3600, isolation="gvisor",
                                 url=f.url, api_key="k"):
            pass
        sent = json.loads(f.requests[2]["body"])
        assert sent == {"template": "minimal", "tariff": "small", "env": {"A": "1"},
                        "secrets": {"TOKEN": "s3cret"}, "secret_refs": ["DB"],
                        "idle_timeout": 60, "max_lifetime": 3600, "isolation": "gvisor"}
        assert [r["method"] for r in f.requests] == ["POST", "DELETE", "POST", "DELETE"]


def test_snapshots_and_a_fork_with_memory_are_sent():
    def route(h, body):
        if h.path.endswith("/fork"):
            h.send_json(201, {"source_id": "sbx_new", "sandboxes": [], "refused": 0,
                              "error": None})
        else:
            capture_route(h, body)
    with FakeServer(route) as f:
        with brig.Sandbox.create(isolation="gvisor", snapshots=True, url=f.url,
                                 api_key="k") as sb:
            sb.fork(2, memory=True)
            sb.fork(3)
        assert json.loads(f.requests[0]["body"]) == {"isolation": "gvisor", "snapshots": True}
        assert json.loads(f.requests[1]["body"]) == {"count": 2, "memory": True}
        assert json.loads(f.requests[2]["body"]) == {"count": 3}


def test_exec_body_and_set_timeout():
    with FakeServer(capture_route) as f:
        with brig.Sandbox.create(url=f.url, api_key="k") as sb:
            sb.exec("echo hi")
            sb.exec(["ls", "-l"], cwd="/tmp", env={"X": "y"}, timeout=5, stdin=b"\xff",
                    user="user", pty=(80, 24))
            sb.set_timeout(600)
        bodies = [json.loads(r["body"] or b"null") for r in f.requests]
        assert bodies[1] == {"cmd": "echo hi"}
        assert bodies[2] == {"argv": ["ls", "-l"], "cwd": "/tmp", "env": {"X": "y"},
                             "timeout": 5, "stdin": "/w==", "stdin_encoding": "base64",
                             "user": "user", "pty": {"cols": 80, "rows": 24}}
        assert f.requests[3]["path"] == "/v1/sandboxes/sbx_new/timeout"
        assert bodies[3] == {"timeout": 600}


def test_exit_deletes_and_keeps_the_original_exception():
    def route(h, body):
        if h.command == "POST":
            h.send_json(201, {"id": "sbx_x"})
        else:
            h.send_error_json(500, "internal", "delete broke")

    with FakeServer(route) as f:
        with pytest.raises(KeyError) as ei:
            with brig.Sandbox.create(url=f.url, api_key="k"):
                raise KeyError("mine")
        assert any("delete broke" in n for n in getattr(ei.value, "__notes__", []))
        assert f.requests[-1]["method"] == "DELETE"
        # without an exception in flight the failure to delete is reported
        with pytest.raises(brig.ServerError):
            with brig.Sandbox.create(url=f.url, api_key="k"):
                pass


def ndjson(*objs) -> list[bytes]:
    return [json.dumps(o).encode() + b"\n" for o in objs]


def stream_route(h, body):
    if h.command == "POST" and h.path == "/v1/sandboxes":
        h.send_json(201, {"id": "sbx_s"})
    elif h.command == "DELETE":
        h.send(204)
    elif h.path.endswith("/exec"):
        cmd = json.loads(body)["cmd"]
        assert h.headers["Accept"] == "application/x-ndjson"
        if cmd == "error":
            h.send_chunked(200, ndjson({"type": "start", "pid": 3},
                                       {"type": "error", "code": "unavailable",
                                        "message": "agent gone"}))
        elif cmd == "plain":  # a brigd that does not stream
            h.send_json(200, {"exit_code": 1, "stdout": "all at once\n", "stderr": "/w==",
                              "stderr_encoding": "base64", "timed_out": False,
                              "duration_ms": 3, "signal": None})
        elif cmd == "cut":
            h.send_chunked(200, ndjson({"type": "start", "pid": 3}))
        else:
            # one line split over two chunks, text, base64 text, base64 binary
            lines = b"".join(ndjson(
                {"type": "start", "pid": 7},
                {"type": "stdout", "data": "héllo\n"},
                {"type": "stderr", "data": "d29ybGQ=", "encoding": "base64"},
                {"type": "stdout", "data": "/w==", "encoding": "base64"},
                {"type": "exit", "exit_code": 2, "signal": None, "timed_out": False,
                 "duration_ms": 5}))
            h.send_chunked(200, [lines[:10], lines[10:50], lines[50:]], delay=0.01)


def test_stream_decoding_sync_and_async():
    with FakeServer(stream_route) as f:
        out, err = [], []
        with brig.Sandbox.create(url=f.url, api_key="k") as sb:
            r = sb.exec("ok", on_stdout=out.append, on_stderr=err.append)
            assert out == ["héllo\n", b"\xff"] and err == ["world"]
            assert r.exit_code == 2 and r.pid == 7
            assert r.stdout_bytes == "héllo\n".encode() + b"\xff" and r.stderr == "world"
            with pytest.raises(brig.Unavailable, match="agent gone"):
                sb.exec("error", on_stdout=out.append)
            with pytest.raises(brig.ProtocolError):
                sb.exec("cut", on_stdout=out.append)
            out.clear()
            err.clear()
            r = sb.exec("plain", on_stdout=out.append, on_stderr=err.append)
            assert (out, err, r.exit_code, r.stderr_bytes) == (["all at once\n"], [b"\xff"], 1,
                                                               b"\xff")
            events = list(sb.exec_stream("ok"))
            assert [e.type for e in events] == ["start", "stdout", "stderr", "stdout", "exit"]

        async def go():
            aout = []

            async def acb(c):
                aout.append(c)

            async with brig.aio.Sandbox.create(url=f.url, api_key="k") as asb:
                r = await asb.exec("ok", on_stdout=acb, on_stderr=aout.append)
                assert aout == ["héllo\n", "world", b"\xff"] and r.exit_code == 2
                aout.clear()
                r = await asb.exec("plain", on_stdout=acb)
                assert aout == ["all at once\n"] and r.exit_code == 1
                with pytest.raises(brig.Unavailable):
                    await asb.exec("error", on_stdout=acb)
                with pytest.raises(brig.ProtocolError):
                    await asb.exec("cut", on_stdout=acb)

        asyncio.run(go())


def test_async_http_framings():
    """Content-Length, chunked and read-until-close answers; keep-alive reuse."""
    def route(h, body):
        if h.path.endswith("/chunked"):
            h.send_chunked(200, [b'{"sandboxes"', b': []}'], ctype="application/json")
        elif h.path.endswith("/close"):
            h.send_until_close(200, b'{"sandboxes": []}')
        else:
            h.send_json(200, {"echo": body.decode()})

    async def go(url):
        t = brig.aio.Client(url, "k").transport
        for p in ("/chunked", "/close", "/len", "/chunked", "/len"):
            j = (await t.request("GET", p)).json()
            assert j in ({"sandboxes": []}, {"echo": ""})
        src = _common.make_source(iter([b"ab", b"cd"]))  # unknown length: chunked upload
        assert (await t.request("PUT", "/up", body=src)).json() == {"echo": "abcd"}
        src = _common.make_source(io.BytesIO(b"xyz"))  # known length
        assert (await t.request("PUT", "/up", body=src)).json() == {"echo": "xyz"}
        await t.aclose()

    with FakeServer(route) as f:
        asyncio.run(go(f.url))
        # the first connection ends with the until-close answer; the second
        # serves the rest but the streamed uploads, which get new ones
        assert len({r["client"] for r in f.requests}) == 4


def test_sync_keepalive_survives_server_closing_idle_connections():
    closes = {"n": 0}

    def route(h, body):
        closes["n"] += 1
        # every answer says close: the pool must not reuse a dead connection
        h.send(200, b'{"sandboxes": []}', close=closes["n"] % 2 == 0)

    with FakeServer(route) as f:
        c = brig.Client(f.url, "k")
        for _ in range(6):
            assert c.list_sandboxes() == []


def test_tar_stream_round_trip(tmp_path):
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.txt").write_text("hello")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)) * 5000)
    (src / "sub" / "deeper" / "empty").write_bytes(b"")
    (src / "link").symlink_to("a.txt")
    (src / "a.txt").chmod(0o640)
    data = b"".join(_common.tar_chunks(src))
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        names = sorted(t.getnames())
    assert names == ["a.txt", "link", "sub", "sub/b.bin", "sub/deeper", "sub/deeper/empty"]
    dest = tmp_path / "dest"
    assert _common.extract_tar(io.BytesIO(data), dest) == 6
    assert (dest / "a.txt").read_text() == "hello"
    assert (dest / "a.txt").stat().st_mode & 0o777 == 0o640
    assert (dest / "sub" / "b.bin").read_bytes() == bytes(range(256)) * 5000
    assert (dest / "link").is_symlink() and (dest / "link").read_text() == "hello"


def test_extract_tar_refuses_escapes(tmp_path):
    for name in ("../evil", "/abs/evil", "a/../../evil"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            ti = tarfile.TarInfo(name)
            ti.size = 1
            t.addfile(ti, io.BytesIO(b"x"))
        buf.seek(0)
        with pytest.raises(brig.ProtocolError):
            _common.extract_tar(buf, tmp_path / "d")
    assert not (tmp_path / "evil").exists()
    # a symlink pointing out is not recreated, and cannot be written through
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        ti = tarfile.TarInfo("out")
        ti.type = tarfile.SYMTYPE
        ti.linkname = str(tmp_path)
        t.addfile(ti)
        ti = tarfile.TarInfo("out/evil")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
    buf.seek(0)
    _common.extract_tar(buf, tmp_path / "d2")
    assert not (tmp_path / "d2" / "out").is_symlink()
    assert not (tmp_path / "evil").exists()


def test_exec_result_from_json():
    r = brig.ExecResult.from_json({"exit_code": 1, "stdout": "aGk=", "stdout_encoding": "base64",
                                   "stderr": "x", "timed_out": False, "duration_ms": 3,
                                   "signal": None, "stdout_truncated": True})
    assert r.stdout == "hi" and r.stdout_bytes == b"hi" and r.stdout_truncated
    assert r.exit_code == 1 and not r.ok and r.output == "hix"


def test_connections_are_reused_after_empty_answers():
    def route(h, body):
        if h.command == "DELETE":
            h.send(204)
        else:
            h.send_json(200, {"sandboxes": []})

    async def go(url):
        c = brig.aio.Client(url, "k")
        for i in range(5):
            await brig.aio.Sandbox(c, brig.SandboxInfo(id=f"sbx_{i}")).delete()
            await c.list_sandboxes()
        assert len(c.transport._idle) == 1
        await c.aclose()

    with FakeServer(route) as f:
        asyncio.run(go(f.url))
        assert len({r["client"] for r in f.requests}) == 1
        f.requests.clear()
        c = brig.Client(f.url, "k")
        for i in range(5):
            brig.Sandbox(c, brig.SandboxInfo(id=f"sbx_{i}")).delete()
            c.list_sandboxes()
        c.close()
        assert len({r["client"] for r in f.requests}) == 1


def test_time_and_ended_query():
    import datetime as dt
    assert _common.time_param(None) is None
    assert _common.time_param("2026-12-01T10:00:00Z") == "2026-12-01T10:00:00Z"
    assert _common.time_param(1700000000123) == "1700000000123"
    assert _common.time_param(dt.datetime(1970, 1, 1, 0, 0, 1)) == "1000"  # naive: UTC
    utc2 = dt.timezone(dt.timedelta(hours=2))
    assert _common.time_param(dt.datetime(1970, 1, 1, 2, 0, 1, tzinfo=utc2)) == "1000"
    with pytest.raises(TypeError):
        _common.time_param(True)
    assert _common.ended_query(None, None, 5) == {"state": "ended", "limit": 5}
    assert _common.ended_query(7, "sbx_x", 5) == {"state": "ended", "limit": 5, "since": "7",
                                                  "before": "sbx_x"}
