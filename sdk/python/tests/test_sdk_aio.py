"""Against a real brigd: the asyncio flavour."""

from __future__ import annotations

import asyncio
import time

import pytest

import brig
from brig import aio


def run(coro):
    return asyncio.run(coro)


def test_ten_concurrent_execs_in_one_loop(daemon):
    async def main():
        async with aio.Sandbox.create("minimal") as sb:
            t0 = time.monotonic()
            results = await asyncio.gather(*(sb.exec(f"sleep 1; echo {i}; exit {i}")
                                             for i in range(10)))
            elapsed = time.monotonic() - t0
            assert [r.stdout for r in results] == [f"{i}\n" for i in range(10)]
            assert [r.exit_code for r in results] == list(range(10))
            assert elapsed < 4, f"10 × 1 s execs took {elapsed:.1f}s: not concurrent"

    run(main())


def test_concurrent_streams_and_sandboxes(daemon):
    async def one(i):
        chunks = []

        async def on_out(c):
            chunks.append(c)

        async with aio.Sandbox.create("minimal") as sb:
            r = await sb.exec(f"echo a{i}; sleep 0.5; echo b{i}", on_stdout=on_out)
            assert r.exit_code == 0 and "".join(chunks) == f"a{i}\nb{i}\n"
            return sb.id

    async def main():
        ids = await asyncio.gather(*(one(i) for i in range(3)))
        assert len(set(ids)) == 3

    run(main())


def test_streaming_callbacks_before_the_end(daemon):
    async def main():
        async with aio.Sandbox.create("minimal") as sb:
            seen = []
            t0 = time.monotonic()
            r = await sb.exec("echo first; sleep 1.5; echo second",
                              on_stdout=lambda c: seen.append((time.monotonic() - t0, c)))
            assert seen[0][1] == "first\n" and seen[0][0] < 1.0
            assert time.monotonic() - t0 >= 1.5 and r.stdout == "first\nsecond\n"
            async with await sb.exec_stream("echo x; exit 2") as st:
                types = [ev.type async for ev in st]
            assert types[0] == "start" and types[-1] == "exit" and st.result.exit_code == 2

    run(main())


def test_deletes_on_exception_and_cancellation(daemon):
    class Boom(Exception):
        pass

    async def boom():
        async with aio.Sandbox.create("minimal") as sb:
            await sb.exec("true")
            raise Boom("x")

    async def cancelled():
        async with aio.Sandbox.create("minimal") as sb:
            await sb.exec("sleep 30")

    async def main():
        with pytest.raises(Boom):
            await boom()
        t = asyncio.create_task(cancelled())
        await asyncio.sleep(1.0)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert await aio.Sandbox.list() == []
        sb = await aio.Sandbox.create("minimal")  # plain await works too
        async with sb:
            assert (await sb.exec("echo ok")).stdout == "ok\n"

    run(main())


def test_errors_and_files(daemon, tmp_path):
    async def main():
        with pytest.raises(brig.NotFound):
            await aio.Sandbox.connect("sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa")
        with pytest.raises(brig.AuthError):
            await aio.Sandbox.list(api_key="brig_bad")
        async with aio.Sandbox.create("minimal") as sb:
            assert (await sb.exec("exit 9")).exit_code == 9
            with pytest.raises(brig.InvalidRequest):
                await sb.exec("true", cwd="rel")
            with pytest.raises(brig.NotFound):
                await sb.download("/root/none")
            await sb.upload("/root/a.txt", "héllo")
            assert await sb.read_text("/root/a.txt") == "héllo"
            big = tmp_path / "big"
            big.write_bytes(b"z" * (3 << 20))
            await sb.upload("/root/big", big, mode=0o600)
            st = await sb.stat("/root/big")
            assert st.size == 3 << 20 and st.mode == 0o600
            assert await sb.download("/root/big", tmp_path / "back") == 3 << 20
            assert (tmp_path / "back").read_bytes() == big.read_bytes()
            await sb.mkdir("/root/d/e", parents=True)
            await sb.move("/root/a.txt", "/root/d/a.txt")
            assert [e.name for e in await sb.ls("/root/d")] == ["a.txt", "e"]
            with pytest.raises(brig.Conflict):
                await sb.remove("/root/d")
            await sb.remove("/root/d", recursive=True)
            assert not await sb.exists("/root/d")
            src = tmp_path / "tree"
            (src / "x").mkdir(parents=True)
            (src / "x" / "f").write_text("in tree")
            await sb.upload_dir(src, "/root/tree")
            assert await sb.read_text("/root/tree/x/f") == "in tree"
            assert await sb.download_dir("/root/tree", tmp_path / "tree2") == 2
            assert (tmp_path / "tree2" / "x" / "f").read_text() == "in tree"

    run(main())


def test_timeline_and_exec_reason(daemon):
    async def main():
        sb = await aio.Sandbox.create("minimal")
        try:
            r = await sb.exec("sleep 5", timeout=0.2)
            assert r.timed_out and r.reason == "timeout"
        finally:
            await sb.delete()
        tl = await sb.timeline()
        assert [e["kind"] for e in tl] == ["sandbox.created", "exec", "sandbox.ended"]
        assert tl[1]["data"]["reason"] == "timeout"

    run(main())


def test_background_process(daemon):
    async def main():
        async with aio.Sandbox.create("minimal") as sb:
            p = await sb.exec("cat; echo end", background=True)
            assert isinstance(p, aio.Process)
            assert await p.send_stdin("abc\n") == 4
            await p.close_stdin()
            info = await p.wait(timeout=10)
            assert info.exit_code == 0
            r = await p.collect()
            assert r.stdout == "abc\nend\n"
            q = await sb.exec("echo start; sleep 30", background=True)
            with pytest.raises(brig.Timeout):
                await q.wait(timeout=0.3)
            out = await q.output()
            first = [await out.__anext__(), await out.__anext__()]
            assert first[1].type == "stdout" and first[1].data == "start\n"
            await q.kill()
            rest = [ev.type async for ev in out]
            assert rest[-1] == "exit"
            assert (await q.info()).signal == 9
            assert {p.pid, q.pid} <= {x.pid for x in await sb.processes()}

    run(main())


def test_cancelled_create_leaves_no_sandbox(daemon):
    async def main():
        cancelled = 0
        for delay in (0.005, 0.02, 0.05, 0.1):
            try:
                sb = await asyncio.wait_for(aio.Sandbox.create("minimal"), delay)
            except asyncio.TimeoutError:
                cancelled += 1
            else:  # brigd was quicker than the timeout
                await sb.delete()
        assert cancelled >= 2
        deadline = time.monotonic() + 15
        while await aio.Sandbox.list() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert await aio.Sandbox.list() == []

    run(main())


def test_money_routes_and_ended_sandboxes(daemon):
    async def main():
        c = aio.Client()
        try:
            async with aio.Sandbox.create("minimal", client=c) as sb:
                sid = sb.id
            assert len(await c.usage(days=2)) == 2
            page = await c.ledger(limit=1)
            assert page["entries"][0]["sandbox_id"] == sid
            every = [e async for e in c.ledger_entries(page=2)]
            assert every[0] == page["entries"][0] and every[-1]["kind"] == "credit"
            with pytest.raises(brig.Forbidden):
                await c.accounts()
            op = aio.Client(daemon.url, daemon.operator_key)
            try:
                assert (await c.account())["id"] in [a["id"] for a in await op.accounts()]
            finally:
                await op.aclose()
            ended = await c.ended_sandboxes()
            assert sid in [e.id for e in ended] and all(e.deleted_at for e in ended)
        finally:
            await c.aclose()

    run(main())


def test_pause_and_resume(daemon):
    async def main():
        async with aio.Sandbox.create("minimal") as sb:
            assert (await sb.pause()).paused
            with pytest.raises(brig.Conflict, match="paused"):
                await sb.exec("true")
            assert (await sb.resume()).state == "running"
            assert (await sb.exec("echo back")).stdout == "back\n"

    run(main())
