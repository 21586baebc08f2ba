"""Against a real brigd: volumes through the SDK, sync and asyncio (docs/volumes.md)."""

from __future__ import annotations

import asyncio
import secrets

import pytest

import brig
from brig import Sandbox, Volume, aio


def test_volume_lifecycle_and_mounts(daemon, client):
    name = f"sdk-{secrets.token_hex(3)}"
    vol = Volume.create(name, size_mib=32)
    try:
        assert vol.id.startswith("vol_") and vol.name == name and vol.info.size_mib == 32
        assert vol.info.mounted_by == []
        assert Volume.get(name).id == vol.id and Volume.get(vol.id).name == name
        assert vol.id in [v.id for v in Volume.list()]
        assert vol.id in [v.id for v in client.volumes()]
        with pytest.raises(brig.Conflict):
            Volume.create(name, size_mib=16)
        with pytest.raises(brig.InvalidRequest):
            Volume.create("Bad Name", size_mib=16)
        with Sandbox.create("minimal", volumes=[vol.mount("/data")]) as sb:
            assert sb.info.raw["volumes"][0]["name"] == name
            sb.upload("/data/greeting", b"hello")
            assert vol.refresh().mounted_by == [
                {"sandbox_id": sb.id, "path": "/data", "read_only": False}]
            with pytest.raises(brig.Conflict):
                vol.delete()
            with pytest.raises(brig.Conflict):
                Sandbox.create("minimal", volumes=[f"{name}:/again:ro"])
        with Sandbox.create("minimal", volumes={name: "/v"}) as sb:
            assert sb.read_text("/v/greeting") == "hello"
        with Sandbox.create("minimal", volumes=[(vol, "/r", True)]) as sb:
            r = sb.exec("echo x > /r/other")
            assert r.exit_code != 0 and "Read-only" in r.stderr
        with pytest.raises(ValueError):
            Sandbox.create("minimal", volumes=["no-path"])
    finally:
        vol.delete(missing_ok=True)
    with pytest.raises(brig.NotFound):
        Volume.get(name)
    vol.delete(missing_ok=True)


def test_volume_asyncio(daemon):
    name = f"aio-{secrets.token_hex(3)}"

    async def main():
        vol = await aio.Volume.create(name, size_mib=16)
        try:
            async with aio.Sandbox.create("minimal", volumes=[vol.mount("/data")]) as sb:
                await sb.exec("echo async > /data/f")
            async with aio.Sandbox.create("minimal",
                                          volumes=[vol.mount("/data", read_only=True)]) as sb:
                r = await sb.exec("cat /data/f")
                assert r.stdout == "async\n"
            assert (await aio.Volume.get(name)).id == vol.id
            assert vol.id in [v.id for v in await aio.Volume.list()]
        finally:
            await vol.delete()
        with pytest.raises(brig.NotFound):
            await aio.Volume.get(name)

    asyncio.run(main())
