"""Against a real brigd: templates declared by users through the SDK (docs/templates.md)."""

from __future__ import annotations

import secrets

import pytest

import brig
from brig import Sandbox, Template


def test_template_build_use_log_and_delete(daemon):
    name = f"sdk-{secrets.token_hex(3)}"
    t = Template.build(name, tag="v1", from_="minimal",
                       files={"/opt/hi.sh": (b"#!/bin/sh\necho hi $WHO\n", 0o755)},
                       run=["echo made > made"], env={"WHO": "sdk"}, workdir="/w")
    try:
        assert t.ref == f"{name}:v1" and not t.cached and len(t.key) == 16
        again = Template.build(name, tag="v1", from_="minimal",
                               files={"/opt/hi.sh": (b"#!/bin/sh\necho hi $WHO\n", 0o755)},
                               run=["echo made > made"], env={"WHO": "sdk"}, workdir="/w")
        assert again.cached and again.key == t.key
        assert [s["exit_code"] for s in t.log()] == [0]
        assert Template.get(t.ref).info["spec"]["workdir"] == "/w"
        with Sandbox.create(t.ref) as sb:
            assert sb.exec("cat made; /opt/hi.sh").stdout == "made\nhi sdk\n"
        with pytest.raises(brig.BuildFailed) as e:
            Template.build(f"{name}-bad", from_="minimal", run=["echo nope; exit 4"])
        assert e.value.step == 1 and e.value.exit_code == 4 and "nope" in e.value.output_tail
        assert e.value.status == 422 and e.value.code == "build_failed"
    finally:
        t.delete(missing_ok=True)
    with pytest.raises(brig.NotFound):
        Template.get(t.ref)


def test_template_build_log_live(daemon):
    """on_log gets the build's log as it is written (here: every line of it, in order),
    and the outcome is the same as without it."""
    name = f"sdk-{secrets.token_hex(3)}"
    got = []
    t = Template.build(name, from_="minimal", run=["echo one", "echo two"], on_log=got.append)
    try:
        log = "".join(got)
        assert "==> step 1 (run): echo one\none\n" in log and "==> step 2: exit code 0" in log
        assert not t.cached and t.ref == f"{name}:latest"
        assert Template.build(name, from_="minimal", run=["echo one", "echo two"],
                              on_log=got.append).cached
        with pytest.raises(brig.BuildFailed) as e:
            Template.build(f"{name}-bad", from_="minimal", run=["echo nope; exit 4"],
                           on_log=got.append)
        assert e.value.step == 1 and e.value.exit_code == 4 and "nope" in e.value.output_tail
        assert "nope" in "".join(got)
    finally:
        t.delete(missing_ok=True)


def test_template_asyncio(daemon):
    import asyncio
    from brig import aio
    name = f"aio-{secrets.token_hex(3)}"

    async def main():
        t = await aio.Template.build(name, from_="minimal", files={"/f": "x"}, run=["cat /f > /g"])
        try:
            assert not t.cached and t.ref == f"{name}:latest"
            assert (await aio.Template.get(name)).key == t.key
            assert [s["exit_code"] for s in await t.log()] == [0]
            async with aio.Sandbox.create(t.ref) as sb:
                assert (await sb.exec("cat /g")).stdout == "x"
            with pytest.raises(brig.BuildFailed):
                await aio.Template.build(f"{name}-bad", from_="minimal", run=["false"])
        finally:
            await t.delete(missing_ok=True)
    asyncio.run(main())


def test_template_asyncio_build_log_live(daemon):
    """aio's on_log (a function or a coroutine function) gets the followed build's log;
    a failing step still raises BuildFailed with its step."""
    import asyncio
    from brig import aio
    name = f"aio-{secrets.token_hex(3)}"
    got = []

    async def collect(piece):
        await asyncio.sleep(0)
        got.append(piece)

    async def main():
        t = await aio.Template.build(name, from_="minimal", run=["echo one", "echo two"],
                                     on_log=collect)
        try:
            log = "".join(got)
            assert "==> step 1 (run): echo one\none\n" in log and "==> step 2: exit code 0" in log
            assert not t.cached and t.ref == f"{name}:latest"
            assert [s["exit_code"] for s in await t.log()] == [0, 0]
            plain = []
            assert (await aio.Template.build(name, from_="minimal", run=["echo one", "echo two"],
                                             on_log=plain.append)).cached
            with pytest.raises(brig.BuildFailed) as e:
                await aio.Template.build(f"{name}-bad", from_="minimal",
                                         run=["echo nope; exit 4"], on_log=plain.append)
            assert e.value.step == 1 and e.value.exit_code == 4
            assert "nope" in "".join(plain)
        finally:
            await t.delete(missing_ok=True)
    asyncio.run(main())
