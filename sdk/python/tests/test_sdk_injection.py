"""Against a real brigd: credential injection rules and per-step credentials through
the SDK, sync and asyncio (docs/secrets.md).  What the egress proxy does with them is
tests/integration/test_injection.py's; here, that the SDK sends and reads them."""

from __future__ import annotations

import asyncio
import secrets

import pytest

import brig
from brig import Sandbox, aio

RULE = {"host": "api.example.test", "headers": {"X-Temp": "{{secret:TEMP_KEY}}"}}


def project(client):
    p = client.call("POST", "/v1/projects", json={"name": f"sdk-inj-{secrets.token_hex(3)}"})["id"]
    client.call("PUT", f"/v1/projects/{p}/secrets/TEMP_KEY", json={"value": "tmp_4Xk9Qw2Lr7Zp"})
    return p


def test_injection_rules_for_admin_keys(daemon, client):
    p = project(client)
    assert client.injection_rules(p) == []
    assert client.set_injection_rules(p, [RULE]) == [RULE]
    assert client.injection_rules(p) == [RULE]
    with pytest.raises(brig.InvalidRequest):
        client.set_injection_rules(p, [{"host": "API.example.test", "headers": {"A": "b"}}])
    with pytest.raises(TypeError):
        client.set_injection_rules(p, RULE)  # one rule, not a list of them
    assert client.injection_rules(p) == [RULE]
    key = client.call("POST", f"/v1/projects/{p}/keys", json={"scope": "sandbox"})["key"]
    with brig.Client(daemon.url, key) as sk:
        with pytest.raises(brig.Forbidden):
            sk.injection_rules(p)
        with pytest.raises(brig.Forbidden):
            sk.delete_injection_rules(p)
    assert client.injection_rules(p) == [RULE]
    client.delete_injection_rules(p)
    assert client.injection_rules(p) == []


def test_exec_with_per_step_credentials(daemon, client):
    p = project(client)
    client.set_injection_rules(p, [RULE])
    with Sandbox.create("minimal", project=p) as sb:
        # the project's secret for 30 s, then a value for this step only: the command
        # holds a placeholder either way, never the value
        for creds in ({"TEMP_KEY": 30}, {"TEMP_KEY": {"ttl_seconds": 30, "value": "given-77"}},
                      {"TEMP_KEY": {"exec_only": True}}):
            r = sb.exec("echo $TEMP_KEY", credentials=creds)
            assert r.exit_code == 0 and r.stdout.startswith("brig-placeholder-"), r
        with sb.exec_stream("echo $TEMP_KEY", credentials={"TEMP_KEY": 5}) as st:
            assert st.wait().stdout.startswith("brig-placeholder-")
        for bad in ({"OTHER": 5}, {"TEMP_KEY": 0}, {"TEMP_KEY": {"ttl": 5}},
                    {"TEMP_KEY": {"exec_only": False}}):
            with pytest.raises(brig.InvalidRequest):
                sb.exec("true", credentials=bad)
        with pytest.raises(TypeError):
            sb.exec("true", credentials={"TEMP_KEY": "60"})
        grants = [e for e in sb.network_log() if e.get("verdict") == "granted"]
        assert "tmp_4Xk9Qw2Lr7Zp" not in repr(grants) and "given-77" not in repr(grants)

    async def run():
        async with aio.Client() as ac:
            assert await ac.injection_rules(p) == [RULE]
            sb = await aio.Sandbox.create("minimal", project=p, client=ac)
            try:
                r = await sb.exec("echo $TEMP_KEY", credentials={"TEMP_KEY": 30})
                assert r.stdout.startswith("brig-placeholder-"), r
            finally:
                await sb.delete()
            await ac.delete_injection_rules(p)
            assert await ac.set_injection_rules(p, [RULE]) == [RULE]
    asyncio.run(run())
    client.delete_injection_rules(p)
