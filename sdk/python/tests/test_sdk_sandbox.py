"""Against a real brigd: the seed program, lifecycle, and errors mapped to
their exception types."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import brig
from brig import Sandbox
from sdk_helpers import SDK, gone

AGENT_CODE = textwrap.dedent("""\
    import sys
    print("hello from", sys.version_info[0])
    print("warning", file=sys.stderr)
    sys.exit(3)
""")

SEED = textwrap.dedent("""\
    from brig import Sandbox

    with Sandbox.create(tariff="small") as sb:
        sb.upload("/root/task.py", agent_generated_code)
        result = sb.exec("python3 /root/task.py", timeout=55)
        print(result.exit_code, result.stdout[-2000:])
    # the sandbox is deleted here, also if anything above raised
""")


def run_program(src: str) -> subprocess.CompletedProcess:
    """Runs a user program in a fresh interpreter, configured only by
    BRIG_URL / BRIG_API_KEY from the environment."""
    prog = f"agent_generated_code = {AGENT_CODE!r}\n" + src
    env = dict(os.environ, PYTHONPATH=os.path.join(SDK, "src"))
    return subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.base
def test_seed_program_exactly_as_written(daemon):
    """DESIGN.md §1, verbatim (tariff="small")."""
    p = run_program(SEED)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "3 hello from 3\n\n"


@pytest.mark.base
def test_seed_program_without_tariff(daemon):
    p = run_program(SEED.replace('tariff="small"', ""))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "3 hello from 3\n\n"


def test_create_connect_list_delete(daemon):
    sb = Sandbox.create("minimal")
    try:
        assert sb.id.startswith("sbx_") and sb.template == "minimal"
        assert sb.info.state == "running" and sb.info.created_at is not None
        assert [s.id for s in Sandbox.list()] == [sb.id]
        other = Sandbox.connect(sb.id)
        assert other.id == sb.id and other.exec("echo via-connect").stdout == "via-connect\n"
        other.close()
        assert other.exec("true").ok  # close() only dropped connections
        other.close()
        assert sb.refresh().id == sb.id
    finally:
        sb.delete()
    assert Sandbox.list() == []
    assert gone(sb.id)
    try:
        info = sb.refresh()
    except brig.NotFound:
        pass  # a brigd without retention
    else:
        assert info.deleted and info.reason == "deleted_by_api" and info.deleted_at
        assert info.end_reason == "deleted"
    with pytest.raises(brig.NotFound):
        sb.delete()
    sb.delete(missing_ok=True)


def test_with_deletes_on_exception_and_reraises_it(daemon):
    class Boom(Exception):
        pass

    with pytest.raises(Boom) as ei:
        with Sandbox.create("minimal") as sb:
            sid = sb.id
            sb.exec("echo hi")
            raise Boom("the agent's code broke")
    assert str(ei.value) == "the agent's code broke"
    assert not getattr(ei.value, "__notes__", None)
    assert Sandbox.list() == [] and gone(sid)


def test_with_deletes_on_keyboard_interrupt(daemon):
    with pytest.raises(KeyboardInterrupt):
        with Sandbox.create("minimal"):
            raise KeyboardInterrupt
    assert Sandbox.list() == []


def test_with_tolerates_deletion_inside(daemon):
    with Sandbox.create("minimal") as sb:
        sb.delete()
    assert Sandbox.list() == []


def test_connect_unknown_is_not_found(daemon):
    with pytest.raises(brig.NotFound) as ei:
        Sandbox.connect("sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa")
    assert ei.value.status == 404 and ei.value.code == "not_found"
    assert "sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa" in ei.value.message


def test_bad_key_is_auth_error(daemon):
    with pytest.raises(brig.AuthError) as ei:
        Sandbox.create("minimal", api_key="brig_not_a_real_key")
    assert ei.value.status == 401 and ei.value.code == "unauthorized" and ei.value.message
    with pytest.raises(brig.AuthError):
        Sandbox.list(api_key="brig_not_a_real_key")


def test_unknown_template_is_invalid_request(daemon):
    with pytest.raises(brig.InvalidRequest) as ei:
        Sandbox.create("no-such-template")
    assert ei.value.status == 400 and "no-such-template" in ei.value.message


def test_errors_inside_a_sandbox(sb):
    with pytest.raises(brig.InvalidRequest, match="absolute"):
        sb.exec("true", cwd="relative")
    with pytest.raises(brig.Forbidden) as ei:
        sb.exec("true", user="user", cwd="/root")
    assert ei.value.status == 403
    with pytest.raises(brig.Forbidden):
        sb.upload("/sys/brig-test", "x")
    with pytest.raises(brig.TooLarge) as ei:
        sb.exec("x" * (2 << 20))
    assert ei.value.status == 413
    with pytest.raises(brig.Conflict) as ei:
        sb.mkdir("/root")
    assert ei.value.status == 409
    with pytest.raises(brig.NotFound):
        sb.download("/root/missing")
    with pytest.raises(brig.NotFound):
        sb.process(999999).info()


def test_health_and_templates(client):
    assert client.health()["status"] == "ok"
    names = {t["name"] for t in client.templates()}
    assert {"minimal", "base"} <= names


def test_env_and_secrets_at_create(daemon):
    s = Sandbox.create("minimal", env={"GREETING": "hello env"})
    with s:
        assert s.exec("echo $GREETING").stdout == "hello env\n"
        assert s.info.env in (None, ["GREETING"])  # names only
    s = Sandbox.create("minimal", secrets={"API_TOKEN": "s3cret"})
    with s:
        assert "s3cret" not in repr(s.refresh().raw)
        assert s.exec("test \"$API_TOKEN\" = s3cret").exit_code == 0
        out = s.exec("echo $API_TOKEN").stdout
        assert "s3cret" not in out  # redacted from output


def test_set_timeout(sb):
    info = sb.set_timeout(600)
    assert info.id == sb.id and not info.deleted


def test_pause_and_resume(sb):
    with pytest.raises(brig.InvalidRequest, match="cannot checkpoint"):
        sb.pause(memory="checkpoint")  # a container: it can only be frozen
    info = sb.pause(memory="resident")
    assert info.paused and info.state == "paused" and info.raw["memory"] == "resident"
    assert sb.pause().paused  # idempotent
    with pytest.raises(brig.Conflict, match="paused"):
        sb.exec("true")
    info = sb.resume()
    assert info.state == "running" and not info.paused
    assert sb.exec("echo back").stdout == "back\n"


def test_snapshot_and_fork(sb, client):
    sb.exec("echo from-source > /root/s")
    snap = sb.snapshot("sdk")
    assert snap["id"].startswith("snp_") and snap["name"] == "sdk"
    assert snap["id"] in [x["id"] for x in client.snapshots()]
    with Sandbox.create(snapshot=snap["id"], client=client) as child:
        assert child.exec("cat /root/s").stdout == "from-source\n"
    client.delete_snapshot(snap["id"])
    client.delete_snapshot(snap["id"], missing_ok=True)
    kids = sb.fork(2)
    try:
        assert len(kids) == 2
        assert all(k.exec("cat /root/s").stdout == "from-source\n" for k in kids)
    finally:
        for k in kids:
            k.delete()


def test_tariff_and_account_routes(client):
    tariffs = client.tariffs()
    names = [t["name"] for t in tariffs["tariffs"]]
    assert "small" in names
    with Sandbox.create("minimal", tariff="small", client=client) as s:
        assert s.info.tariff == "small"
        assert isinstance(s.network_log(), list)
        m = s.metrics()
        assert m["id"] == s.id and m["state"] == "running" and isinstance(m["samples"], list)
    acct = client.account()
    assert "balance_micro_usd" in acct
    projects = client.call("GET", "/v1/projects")
    assert projects["projects"]
    with pytest.raises(brig.InvalidRequest):
        Sandbox.create("minimal", tariff="no-such-tariff", client=client)


def test_timeline_and_black_box_after_the_end(client):
    s = Sandbox.create("minimal", client=client)
    s.exec("exit 4")
    s.exec("kill -9 $$")
    s.delete()
    tl = s.timeline()  # every page, also after it ended
    assert [e["kind"] for e in tl] == ["sandbox.created", "exec", "exec", "sandbox.ended"]
    assert [e["data"]["reason"] for e in tl[1:3]] == ["exited", "signal"]
    assert tl[-1]["data"]["end_reason"] == "deleted"
    m = s.metrics()
    assert m["state"] == "ended" and m["end_reason"] == "deleted" and m["execs"] == 2


def test_money_routes_and_ended_sandboxes(daemon, client):
    """usage, ledger (page by page), accounts (the operator's) and the ended sandboxes, each
    against brigd's own answer."""
    with Sandbox.create("minimal", client=client) as s:
        sid = s.id
    days = client.usage(days=3)
    assert len(days) == 3 and days == client.call("GET", "/v1/account/usage",
                                                  query={"days": 3})["days"]
    assert days[-1]["spent_micro_usd"] == client.account()["usage_today_micro_usd"]
    first = client.ledger(limit=1)
    assert first["entries"][0]["kind"] == "charge" and first["entries"][0]["sandbox_id"] == sid
    assert first["next_before"] == first["entries"][0]["seq"]
    rest = client.ledger(before=first["next_before"])
    assert all(e["seq"] < first["next_before"] for e in rest["entries"])
    every = list(client.ledger_entries(page=1))
    assert every[0] == first["entries"][0] and every[-1]["kind"] == "credit"
    assert [e["seq"] for e in every] == sorted((e["seq"] for e in every), reverse=True)
    with pytest.raises(brig.InvalidRequest):
        client.usage(days=0)
    with pytest.raises(brig.Forbidden):
        client.accounts()  # an admin key: the operator's route
    op = brig.Client(daemon.url, daemon.operator_key)
    assert client.account()["id"] in [a["id"] for a in op.accounts()]

    ended = client.ended_sandboxes()
    mine = [e for e in ended if e.id == sid]
    assert mine and mine[0].deleted and mine[0].end_reason == "deleted"
    assert mine[0].raw["cost"] == "$0.000600" and mine[0].deleted_at is not None
    assert ended == sorted(ended, key=lambda e: e.deleted_at, reverse=True)
    assert sid in [e.id for e in client.ended_sandboxes(since=mine[0].deleted_at)]
    assert client.ended_sandboxes(since="2999-01-01T00:00:00Z") == []
    with pytest.raises(brig.InvalidRequest):
        client.ended_sandboxes(since="never")


def test_on_idle(client):
    with Sandbox.create("minimal", on_idle="pause", client=client) as s:
        assert s.info.on_idle == "pause"
    with Sandbox.create("minimal", client=client) as s:
        assert s.info.on_idle == "delete"
    with pytest.raises(brig.InvalidRequest) as ei:
        Sandbox.create("minimal", on_idle="sleep", client=client)
    assert "'on_idle' must be" in ei.value.message


def test_isolation(client):
    with Sandbox.create("minimal", isolation="container", client=client) as s:
        assert s.info.isolation == "container"
    with pytest.raises(brig.InvalidRequest) as ei:
        Sandbox.create("minimal", isolation="kvm", client=client)
    assert "'isolation' must be" in ei.value.message
    # A project that requires gvisor: a sandbox key cannot ask for less.
    p = client.call("POST", "/v1/projects", json={"name": "sdk-gvisor"})
    client.call("PATCH", f"/v1/projects/{p['id']}", json={"isolation": {"allowed": ["gvisor"]}})
    key = client.call("POST", f"/v1/projects/{p['id']}/keys", json={"scope": "sandbox"})["key"]
    with brig.Client(url=client.url, api_key=key) as agent:
        with pytest.raises(brig.Forbidden) as ei:
            Sandbox.create("minimal", isolation="container", client=agent)
        assert "allowed modes are gvisor" in ei.value.message


def test_limits_map_to_limit_exceeded_and_payment_required(daemon, client):
    client.call("PATCH", "/v1/account", json={"daily_limit_micro_usd": 0})
    try:
        with pytest.raises(brig.LimitExceeded) as ei:
            Sandbox.create("minimal")
        assert ei.value.status == 429 and ei.value.code == "limit_exceeded"
        assert "daily spend limit" in ei.value.message
        assert not isinstance(ei.value, brig.PaymentRequired)
    finally:
        client.call("PATCH", "/v1/account", json={"daily_limit_micro_usd": None})



def test_no_balance_and_concurrency_limit(daemon, tmp_path):
    """A brigd of its own, whose accounts start with no credit and may have
    one live sandbox: 402 → PaymentRequired, then 429 → LimitExceeded."""
    import brigtest

    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\ninitial_credit_micro_usd = 0\nmax_live_per_account = 1\n")
    d = brigtest.Brigd(str(tmp_path / "state"), ["--config", str(cfg)])
    d.start()
    try:
        with brig.Client(d.url, d.key) as c:
            with pytest.raises(brig.PaymentRequired) as ei:
                Sandbox.create("minimal", client=c)
            assert ei.value.status == 402 and ei.value.code == "payment_required"
            assert isinstance(ei.value, brig.LimitExceeded) and ei.value.message
            with open(os.path.join(d.state_dir, "operator.key")) as f:
                operator = brig.Client(d.url, f.read().strip())
            operator.call("POST", f"/v1/accounts/{c.account()['id']}/credits",
                          json={"amount_micro_usd": 1_000_000, "note": "sdk test"})
            operator.close()
            with Sandbox.create("minimal", client=c) as sb:
                with pytest.raises(brig.LimitExceeded) as ei:
                    Sandbox.create("minimal", client=c)
                assert ei.value.status == 429 and not isinstance(ei.value, brig.PaymentRequired)
                assert sb.exec("true").ok
            assert c.list_sandboxes() == []
    finally:
        d.stop()
    assert not brigtest.leftovers(d.state_dir)
