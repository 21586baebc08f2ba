"""The brig CLI's account, project, key, secret, policy, tariff, timeout and network-log
commands, and its transfer meter, against a real brigd (docs/cli.md).

Each command's happy path is checked against the API's own answer, and each refuses what it
must: a key of the wrong scope (brigd's 403, exit 1, its message), bad input (exit 2 before
anything is sent, or brigd's 400 as exit 1).  The meter is checked with stderr on a real pty
and on a pipe.  Accounts and projects made here stay in the session's store (nothing of the
host); sandboxes are deleted by each test.
"""

import json
import os
import select
import subprocess
import time

import pytest

from brigtest import BUILD, Api

BRIG = os.path.join(BUILD, "brig")
DEADLINE = 60


def env_for(api, **extra):
    return dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key, **extra)


def brig(api, *args, input=None, check=True, env=None, timeout=120):
    r = subprocess.run([BRIG, *args], input=input, env=env or env_for(api), capture_output=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"brig {args}: exit {r.returncode}\n{r.stderr.decode()}")
    return r


def refused(api, *args, code=1, says=b"", input=None):
    """brig exits with code and says `says` on stderr; returns its stderr."""
    r = brig(api, *args, input=input, check=False)
    assert r.returncode == code, (args, r.returncode, r.stderr)
    assert says in r.stderr, (args, r.stderr)
    return r.stderr


def lines(r):
    return r.stdout.decode().splitlines()


def field(out, label):
    """The value of a `label      value` line of a show command's output."""
    for line in out.splitlines():
        if line.startswith(label + " ") and line[:12].rstrip() == label:
            return line[12:]
    raise AssertionError(f"no {label!r} in {out!r}")


def sandbox_key(api, project):
    k = api.ok("POST", f"/v1/projects/{project}/keys", {"scope": "sandbox"}).json()
    return Api(api.base_url, k["key"])


def read_until(fd, needle, proc, deadline=DEADLINE):
    """Reads the pty master fd until needle shows up; fails at the deadline or at EOF."""
    buf = b""
    end = time.monotonic() + deadline
    while needle not in buf:
        left = end - time.monotonic()
        assert left > 0, f"no {needle!r} within {deadline}s; got {buf!r}"
        if not select.select([fd], [], [], min(left, 0.5))[0]:
            assert proc.poll() is None or needle in buf, f"brig exited; got {buf!r}"
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        assert chunk, f"EOF before {needle!r}; got {buf!r}"
        buf += chunk
    return buf


def run_on_pty(args, env, input=None):
    """Runs brig with its stderr on a new pty (stdout and stdin pipes); (exit, stdout,
    everything the terminal showed)."""
    master, slave = os.openpty()
    try:
        p = subprocess.Popen([BRIG, *args], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=slave, start_new_session=True)
        os.close(slave)
        slave = -1
        out = p.communicate(input=input, timeout=DEADLINE)[0]
        shown = b""
        while select.select([master], [], [], 0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the pty
                break
            if not chunk:
                break
            shown += chunk
        return p.returncode, out, shown
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


# ---- accounts: the operator's ------------------------------------------------------------

def test_operator_creates_credits_configures_and_shows_accounts(api, daemon):
    op = Api(api.base_url, daemon.operator_key)
    r = brig(op, "account", "create", "cli-acme")
    out = r.stdout.decode()
    acc_id = field(out, "account").split()[0]
    assert field(out, "account").endswith("(cli-acme)") and acc_id.startswith("acc_")
    key = field(out, "admin key")
    assert key.startswith("brig_") and field(out, "balance") == "$1.000000"
    assert b"shown this once" in r.stderr
    admin = Api(api.base_url, key)
    assert admin.ok("GET", "/v1/account").json()["id"] == acc_id  # the printed key works
    assert field(out, "project") == \
        admin.ok("GET", "/v1/account").json()["default_project_id"] + " (default)"

    # --json: brigd's answer (with the key); without BRIG_API_KEY: $BRIG_STATE_DIR/operator.key
    env = {k: v for k, v in env_for(op).items() if k != "BRIG_API_KEY"}
    env["BRIG_STATE_DIR"] = daemon.state_dir
    made = json.loads(brig(op, "account", "create", "--json", env=env).stdout)
    assert made["name"] == "account" and made["api_key"].startswith("brig_")

    # credit: dollars in, micro-dollars on the wire, a note in the ledger
    out = brig(op, "account", "credit", "--note", "invoice 7", acc_id, "$2.25").stdout.decode()
    assert field(out, "balance") == "$3.250000"
    ledger = admin.ok("GET", "/v1/account/ledger").json()["entries"]
    assert (ledger[0]["amount_micro_usd"], ledger[0]["note"]) == (2250000, "invoice 7")
    assert json.loads(brig(op, "account", "credit", "--json", acc_id, "0.000001").stdout)[
        "balance_micro_usd"] == 3250001

    # configure: the concurrency limit and the tariffs
    tariff = admin.ok("GET", "/v1/tariffs").json()["default"]
    out = brig(op, "account", "configure", "--max-live", "3", "--tariffs", tariff,
               acc_id).stdout.decode()
    assert field(out, "sandboxes") == "0 of 3" and field(out, "tariffs") == tariff
    got = admin.ok("GET", "/v1/account").json()
    assert (got["max_live_sandboxes"], got["tariffs"]) == (3, [tariff])
    brig(op, "account", "configure", "--tariffs", "all", acc_id)
    assert admin.ok("GET", "/v1/account").json()["tariffs"] is None

    # show ACCOUNT (the operator's view) is the account's own view
    shown = json.loads(brig(op, "account", "show", "--json", acc_id).stdout)
    own = admin.ok("GET", "/v1/account").json()
    assert shown == own
    assert field(brig(op, "account", "show", acc_id).stdout.decode(), "balance") == own["balance"]

    # refusals
    refused(api, "account", "create", "x", says=b"(HTTP 403 forbidden)")  # an admin key
    refused(api, "account", "credit", acc_id, "1", says=b"(HTTP 403 forbidden)")
    refused(op, "account", "show", "acc_nosuchaccount", says=b"no account 'acc_nosuchaccount'")
    for bad in ("abc", "-1", "1.0000001", "", "$", "1e3"):
        refused(op, "account", "credit", acc_id, bad, code=2, says=b"USD")
    refused(op, "account", "credit", acc_id, "0", says=b"(HTTP 400 invalid_request)")
    refused(op, "account", "credit", acc_id, "1000001", says=b"at most $1000000 per credit")
    refused(op, "account", "credit", "acc_nosuchaccount", "1", says=b"HTTP 404")
    refused(op, "account", "configure", acc_id, code=2, says=b"nothing to set")
    refused(op, "account", "configure", "--max-live", "-1", acc_id, code=2, says=b"--max-live")
    refused(op, "account", "configure", "--tariffs", "a,,b", acc_id, code=2, says=b"--tariffs")
    refused(op, "account", "configure", "--tariffs", "nosuchtariff", acc_id,
            says=b"(HTTP 400 invalid_request)")


# ---- spend limits -----------------------------------------------------------------------

def test_spend_limits_show_and_set(api, daemon):
    op = Api(api.base_url, daemon.operator_key)
    key = json.loads(brig(op, "account", "create", "--json", "cli-limits").stdout)["api_key"]
    admin = Api(api.base_url, key)
    out = brig(admin, "account", "limits").stdout.decode()
    assert field(out, "today") == "$0.000000 (no limit)"
    assert field(out, "this month") == "$0.000000 (no limit)"

    out = brig(admin, "account", "limits", "--daily", "2.5", "--monthly", "$10").stdout.decode()
    assert field(out, "today") == "$0.000000 of $2.500000"
    assert field(out, "this month") == "$0.000000 of $10.000000"
    acc = admin.ok("GET", "/v1/account").json()
    assert (acc["daily_limit_micro_usd"], acc["monthly_limit_micro_usd"]) == (2500000, 10000000)
    # one at a time; none removes it; --json is brigd's account
    got = json.loads(brig(admin, "account", "limits", "--daily", "none", "--json").stdout)
    assert got == admin.ok("GET", "/v1/account").json()
    assert (got["daily_limit_micro_usd"], got["monthly_limit_micro_usd"]) == (None, 10000000)
    assert "of $10.000000" in brig(admin, "account", "show").stdout.decode()

    for bad in (["--daily", "x"], ["--monthly", "-5"], ["--daily", "0.1234567"]):
        refused(admin, "account", "limits", *bad, code=2, says=bad[0].encode())
    refused(admin, "account", "limits", "--daily", "2000000000", says=b"(HTTP 400")
    sk = sandbox_key(admin, acc["default_project_id"])
    refused(sk, "account", "limits", "--daily", "1", says=b"(HTTP 403 forbidden)")
    assert admin.ok("GET", "/v1/account").json()["monthly_limit_micro_usd"] == 10000000


# ---- projects and keys -------------------------------------------------------------------

def test_projects_and_keys(api):
    acc = api.ok("GET", "/v1/account").json()
    pid = brig(api, "project", "create", "cli-proj").stdout.decode().strip()
    assert pid.startswith("prj_")
    assert api.ok("GET", f"/v1/projects/{pid}").json()["name"] == "cli-proj"
    assert json.loads(brig(api, "project", "create", "--json", "cli-proj2").stdout)["name"] == \
        "cli-proj2"

    rows = lines(brig(api, "project", "ls"))
    assert rows[0].split() == ["ID", "NAME", "EGRESS", "ISOLATION", "CREATED"]
    mine = [r.split() for r in rows[1:] if r.startswith(pid)]
    assert mine and mine[0][1:4] == ["cli-proj", "open", "container,gvisor,microvm"], rows
    assert json.loads(brig(api, "project", "ls", "--json").stdout) == \
        api.ok("GET", "/v1/projects").json()

    out = brig(api, "project", "show", pid).stdout.decode()
    assert field(out, "project") == f"{pid} (cli-proj)"
    assert field(out, "account") == acc["id"] and field(out, "egress") == "open"
    assert field(out, "isolation") == "container,gvisor,microvm (default: -)"
    assert json.loads(brig(api, "project", "show", "--json", pid).stdout) == \
        api.ok("GET", f"/v1/projects/{pid}").json()
    # without ID: the account's default project
    assert field(brig(api, "project", "show").stdout.decode(), "project").startswith(
        acc["default_project_id"])

    # rename; the isolation policy: a list and a default, then all (no policy)
    out = brig(api, "project", "rename", pid, "cli-renamed").stdout.decode()
    assert field(out, "project") == f"{pid} (cli-renamed)"
    out = brig(api, "project", "isolation", "--default", "gvisor", pid,
               "gvisor,container").stdout.decode()
    assert field(out, "isolation") == "container,gvisor (default: gvisor)"  # brigd's order
    assert api.ok("GET", f"/v1/projects/{pid}").json()["isolation"] == \
        {"allowed": ["container", "gvisor"], "default": "gvisor"}
    got = json.loads(brig(api, "project", "isolation", "--json", pid, "container").stdout)
    assert got["isolation"] == {"allowed": ["container"], "default": None}
    brig(api, "project", "isolation", pid, "all")
    assert api.ok("GET", f"/v1/projects/{pid}").json()["isolation"] == \
        {"allowed": ["container", "gvisor", "microvm"], "default": None}
    refused(api, "project", "isolation", pid, "kvm", says=b"(HTTP 400 invalid_request)")
    refused(api, "project", "isolation", "--default", "gvisor", pid, "container",
            says=b"(HTTP 400 invalid_request)")
    refused(api, "project", "isolation", pid, "container,", code=2, says=b"MODES")
    refused(api, "project", "isolation", "--default", "gvisor", pid, "all", code=2,
            says=b"--default")
    refused(api, "project", "rename", pid, "", says=b"(HTTP 400 invalid_request)")

    # key create: the key alone on stdout, usable at once; revoke: it stops working
    r = brig(api, "key", "create", "--project", pid)
    key = r.stdout.decode().strip()
    assert key.startswith("brig_") and b"(scope sandbox)" in r.stderr
    key_id = r.stderr.decode().split()[2]
    sk = Api(api.base_url, key)
    assert brig(sk, "ls").returncode == 0
    rows = lines(brig(sk, "project", "ls"))
    assert len(rows) == 2 and rows[1].startswith(pid)  # a sandbox key sees its own project
    made = json.loads(brig(api, "key", "create", "--project", pid, "--scope", "admin",
                           "--json").stdout)
    assert (made["scope"], made["project_id"]) == ("admin", pid)
    brig(api, "key", "revoke", "--project", pid, key_id)
    refused(sk, "ls", says=b"(HTTP 401 unauthorized)")
    refused(api, "key", "revoke", "--project", pid, key_id, says=b"HTTP 404")
    brig(api, "key", "revoke", "--project", pid, made["id"])
    # key ls: ids, scopes and times, the revoked ones with their revocation; never a key
    rows = [r.split() for r in lines(brig(api, "key", "ls", "--project", pid))]
    assert rows[0] == ["ID", "SCOPE", "CREATED", "REVOKED"]
    assert [(r[0], r[1]) for r in rows[1:]] == [(key_id, "sandbox"), (made["id"], "admin")]
    assert all(len(r) == 4 and r[3] != "-" for r in rows[1:]), rows  # both revoked
    listed = brig(api, "key", "ls", "--json", "--project", pid).stdout
    assert json.loads(listed) == api.ok("GET", f"/v1/projects/{pid}/keys").json()
    assert key.encode() not in listed and made["key"].encode() not in listed

    # refusals: scope, input, another's project
    sk = sandbox_key(api, pid)
    refused(sk, "project", "create", "nope", says=b"(HTTP 403 forbidden)")
    refused(sk, "project", "isolation", pid, "container", says=b"(HTTP 403 forbidden)")
    refused(sk, "key", "create", "--project", pid, says=b"(HTTP 403 forbidden)")
    refused(sk, "key", "ls", "--project", pid, says=b"(HTTP 403 forbidden)")
    refused(api, "key", "create", "--scope", "root", code=2, says=b"--scope")
    refused(api, "key", "revoke", code=2, says=b"missing operand")
    refused(api, "project", "create", "x" * 65, says=b"(HTTP 400 invalid_request)")
    refused(api, "project", "show", "prj_nosuchproject", says=b"HTTP 404")
    refused(api, "key", "create", "--project", "prj_nosuchproject", says=b"HTTP 404")


# ---- secrets -----------------------------------------------------------------------------

def test_secrets_from_stdin_a_file_and_a_terminal(api, tmp_path):
    pid = api.ok("POST", "/v1/projects", {"name": "cli-secrets"}).json()["id"]
    brig(api, "secret", "set", "--project", pid, "PIPED", input=b"s3cr3t value\n")
    f = tmp_path / "token"
    f.write_bytes(b"from-a-file")
    brig(api, "secret", "set", "--project", pid, "--file", str(f), "FILED")
    # a terminal: a prompt on stderr, no echo, one line without its newline
    master, slave = os.openpty()
    try:
        p = subprocess.Popen([BRIG, "secret", "set", "--project", pid, "TYPED"],
                             env=env_for(api), stdin=slave, stdout=subprocess.PIPE,
                             stderr=slave, start_new_session=True)
        shown = read_until(master, b"(not echoed): ", p)
        os.write(master, b"typed-value\n")
        assert p.wait(timeout=DEADLINE) == 0
        shown += read_until(master, b"\n", p)
        assert b"typed-value" not in shown, shown
    finally:
        os.close(master)
        os.close(slave)
    assert lines(brig(api, "secret", "ls", "--project", pid)) == ["FILED", "PIPED", "TYPED"]
    assert json.loads(brig(api, "secret", "ls", "--project", pid, "--json").stdout) == \
        api.ok("GET", f"/v1/projects/{pid}/secrets").json()

    # the values arrived byte for byte (the piped one with its newline)
    sid = api.create(project=pid, secret_refs=["PIPED", "FILED", "TYPED"])["id"]
    try:
        res = api.exec(sid, cmd='test "${#PIPED}" = 13 && test "${PIPED%?}" = "s3cr3t value" && '
                                'test "$FILED" = from-a-file && test "$TYPED" = typed-value')
        assert res["exit_code"] == 0, res
    finally:
        api.delete(sid)

    brig(api, "secret", "rm", "--project", pid, "PIPED")
    assert lines(brig(api, "secret", "ls", "--project", pid)) == ["FILED", "TYPED"]

    # refusals: never from the command line; brigd's checks; scope
    refused(api, "secret", "set", "--project", pid, "NAME", "value", code=2,
            says=b"unexpected operand 'value'")
    refused(api, "secret", "set", "--project", pid, "SHORT", input=b"abc",
            says=b"at least 4 bytes")
    refused(api, "secret", "set", "--project", pid, "1BAD", input=b"value",
            says=b"environment variable name")
    refused(api, "secret", "set", "--project", pid, "BIN", input=b"\xff\xfe\x00\x01",
            says=b"UTF-8 text without NUL bytes")
    refused(api, "secret", "set", "--project", pid, "--file", str(tmp_path / "missing"), "X",
            says=b"cannot open")
    refused(api, "secret", "rm", "--project", pid, "PIPED", says=b"HTTP 404")
    sk = sandbox_key(api, pid)
    refused(sk, "secret", "ls", "--project", pid, says=b"(HTTP 403 forbidden)")
    refused(sk, "secret", "set", "--project", pid, "X", input=b"value",
            says=b"(HTTP 403 forbidden)")


# ---- egress policy -----------------------------------------------------------------------

def test_egress_policy_mode_and_allowlist(api):
    pid = api.ok("POST", "/v1/projects", {"name": "cli-policy"}).json()["id"]

    def egress():
        return api.ok("GET", f"/v1/projects/{pid}").json()["egress"]

    assert brig(api, "policy", "show", "--project", pid).stdout == b"egress      open\n"
    # an allowlist edit needs mode allowlist: a hint, nothing changed
    refused(api, "policy", "add", "--project", pid, "example.com",
            says=b"mode is open, not allowlist")
    out = brig(api, "policy", "mode", "--project", pid, "allowlist").stdout.decode()
    assert out == "egress      allowlist\ndomains     -\ncidrs       -\nports       -\n"
    out = brig(api, "policy", "add", "--project", pid, "example.com", "*.files.test",
               "198.51.100.0/24", "203.0.113.7", "443", "8443").stdout.decode()
    assert field(out, "domains") == "example.com, *.files.test"
    assert field(out, "cidrs") == "198.51.100.0/24, 203.0.113.7"
    assert field(out, "ports") == "443, 8443"
    assert egress() == {"mode": "allowlist", "domains": ["example.com", "*.files.test"],
                        "cidrs": ["198.51.100.0/24", "203.0.113.7"], "ports": [443, 8443]}
    brig(api, "policy", "add", "--project", pid, "example.com")  # already there: no change
    got = json.loads(brig(api, "policy", "remove", "--project", pid, "--json", "example.com",
                          "8443", "203.0.113.7").stdout)
    assert got == egress() == {"mode": "allowlist", "domains": ["*.files.test"],
                               "cidrs": ["198.51.100.0/24"], "ports": [443]}
    assert json.loads(brig(api, "policy", "show", "--project", pid, "--json").stdout) == egress()
    # allowlist again keeps the lists; another mode starts afresh
    brig(api, "policy", "mode", "--project", pid, "allowlist")
    assert egress()["domains"] == ["*.files.test"]
    brig(api, "policy", "mode", "--project", pid, "none")
    assert egress() == {"mode": "none"}
    assert field(brig(api, "project", "show", pid).stdout.decode(), "egress") == "none"

    brig(api, "policy", "mode", "--project", pid, "allowlist")
    refused(api, "policy", "remove", "--project", pid, "gone.test", says=b"nothing changed")
    refused(api, "policy", "mode", "--project", pid, "closed", code=2, says=b"MODE")
    refused(api, "policy", "add", "--project", pid, "70000", code=2, says=b"port 70000")
    refused(api, "policy", "add", "--project", pid, "com", says=b"(HTTP 400 invalid_request)")
    refused(api, "policy", "add", "--project", pid, "10.0.0.0/33",
            says=b"(HTTP 400 invalid_request)")
    assert egress() == {"mode": "allowlist", "domains": [], "cidrs": [], "ports": []}
    sk = sandbox_key(api, pid)
    assert json.loads(brig(sk, "policy", "show", "--project", pid, "--json").stdout) == egress()
    refused(sk, "policy", "mode", "--project", pid, "open", says=b"(HTTP 403 forbidden)")
    refused(sk, "policy", "add", "--project", pid, "example.com", says=b"(HTTP 403 forbidden)")


# ---- tariffs -----------------------------------------------------------------------------

def test_tariffs(api, daemon):
    want = api.ok("GET", "/v1/tariffs").json()
    rows = lines(brig(api, "tariff", "ls"))
    assert rows[0].split() == ["NAME", "VCPUS", "MEMORY", "DISK", "PRICE/S", "DEFAULT"]
    assert len(rows) == len(want["tariffs"]) + 1
    for t, row in zip(want["tariffs"], rows[1:]):
        cells = row.split()
        assert cells[:2] == [t["name"], f"{t['vcpus']:g}"]
        assert cells[2:7] == [str(t["memory_mib"]), "MiB", str(t["disk_mib"]), "MiB",
                              t["price_per_second"]]
        assert cells[7:] == (["yes"] if t["name"] == want["default"] else ["no"])
    assert json.loads(brig(api, "tariff", "ls", "--json").stdout) == want
    refused(Api(api.base_url, daemon.operator_key), "tariff", "ls", says=b"(HTTP 403 forbidden)")


# ---- a sandbox's timeout and network log ---------------------------------------------------

def test_timeout_set_and_extend(api):
    sid = api.create()["id"]
    try:
        out = brig(api, "timeout", sid, "600").stdout.decode().split()
        assert out[:3] == [sid, "expires", "at"]
        sb = api.ok("GET", f"/v1/sandboxes/{sid}").json()
        assert out[3] == sb["expires_at"]
        left = (time.mktime(time.strptime(out[3][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
                - time.time())
        assert 590 < left <= 601, left
        # --add: beyond the end it has now
        got = json.loads(brig(api, "timeout", "--add", "--json", sid, "60.5").stdout)
        assert got == api.ok("GET", f"/v1/sandboxes/{sid}").json()

        def ms(t):
            return time.mktime(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(t[20:23])
        assert 60000 <= ms(got["expires_at"]) - ms(sb["expires_at"]) <= 62000

        refused(api, "timeout", sid, "0", code=2, says=b"SECONDS")
        refused(api, "timeout", sid, "soon", code=2, says=b"SECONDS")
        refused(api, "timeout", sid, "86400", says=b"can be extended by at most")
        refused(api, "timeout", sid, "86401", says=b"(HTTP 400 invalid_request)")
        refused(api, "timeout", "sbx_nosuchsandbox", "60", says=b"(HTTP 404 not_found)")
    finally:
        api.delete(sid)


def test_network_log(api):
    pid = api.ok("POST", "/v1/projects", {"name": "cli-netlog"}).json()["id"]
    brig(api, "policy", "mode", "--project", pid, "allowlist")
    brig(api, "policy", "add", "--project", pid, "allowed.test")
    sid = api.create(project=pid)["id"]
    try:
        rows = lines(brig(api, "netlog", sid))
        assert rows[0].split() == ["TIME", "KIND", "VERDICT", "DETAIL"]
        if not api.ok("GET", "/healthz").json()["network"]:
            assert rows[1:] == []
            pytest.skip("brigd has no sandbox networking here: the log stays empty")
        api.exec(sid, cmd="nslookup refused.test")
        rows = lines(brig(api, "netlog", sid))
        dns = [r.split() for r in rows[1:] if " refused.test " in r]
        assert dns and dns[0][1:3] == ["dns", "refused"] and "REFUSED" in dns[0], rows
        assert json.loads(brig(api, "netlog", "--json", sid).stdout) == \
            api.ok("GET", f"/v1/sandboxes/{sid}/network-log").json()
        refused(api, "netlog", "sbx_nosuchsandbox", says=b"(HTTP 404 not_found)")
        other = sandbox_key(api, api.ok("POST", "/v1/projects", {"name": "x"}).json()["id"])
        refused(other, "netlog", sid, says=b"(HTTP 404 not_found)")  # another project's
    finally:
        api.delete(sid)


# ---- the transfer meter ------------------------------------------------------------------

def test_progress_on_a_terminal_and_silence_in_a_pipe(api, tmp_path):
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.write(os.urandom(1 << 20) * 24)  # 24 MiB
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a").write_bytes(b"x" * (3 << 20))
    sid = api.create()["id"]
    env = env_for(api)
    try:
        rc, _, shown = run_on_pty(["upload", sid, str(big), "/root/big"], env)
        assert rc == 0 and b"brig: sent 24.0 MiB in " in shown and b"MiB/s" in shown, shown
        rc, _, shown = run_on_pty(["download", sid, "/root/big", str(tmp_path / "back")], env)
        assert rc == 0 and b"brig: received 24.0 MiB in " in shown, shown
        assert (tmp_path / "back").read_bytes() == big.read_bytes()
        rc, out, shown = run_on_pty(["download", sid, "/root/big", "-"], env)
        assert rc == 0 and len(out) == 24 << 20 and b"brig: received 24.0 MiB" in shown
        # trees: the size is not known in advance, the bytes and the rate are
        rc, _, shown = run_on_pty(["upload", "-r", sid, str(tree), "/root/tree"], env)
        assert rc == 0 and b"brig: sent 3.0 MiB in " in shown, shown
        rc, _, shown = run_on_pty(["download", "-r", sid, "/root/tree", str(tmp_path / "t2")],
                                  env)
        assert rc == 0 and b"brig: received 3.0 MiB in " in shown, shown
        # a failed transfer ends the meter's line before the message
        rc, _, shown = run_on_pty(["download", sid, "/root/nothing", str(tmp_path / "n")], env)
        assert rc == 1 and shown.startswith(b"brig: download /root/nothing: "), shown

        # not a terminal: silent
        for args in (["upload", sid, str(big), "/root/big2"],
                     ["download", sid, "/root/big2", str(tmp_path / "back2")],
                     ["upload", "-r", sid, str(tree), "/root/tree2"],
                     ["download", "-r", sid, "/root/tree2", str(tmp_path / "t3")]):
            r = brig(api, *args)
            assert r.stderr == b"", (args, r.stderr)
    finally:
        api.delete(sid)


# ---- help -----------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", [
    "account create", "account credit", "account configure", "account limits", "project ls",
    "project create", "project show", "project rename", "project isolation", "project on-idle",
    "template show", "template log", "template rm", "key create", "key revoke", "secret set", "secret ls",
    "secret rm", "policy show", "policy mode", "policy add", "policy remove", "tariff ls",
    "timeout", "netlog"])
def test_every_new_command_has_help(cmd):
    r = subprocess.run([BRIG, *cmd.split(), "--help"], capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith(f"usage: brig {cmd}".encode()), r
    assert f"  {cmd} ".encode() in subprocess.run([BRIG, "help"], capture_output=True).stdout


def test_inject_rules(api):
    pid = api.ok("POST", "/v1/projects", {"name": "cli-inject"}).json()["id"]
    assert json.loads(brig(api, "inject", "show", "--project", pid).stdout) == []
    brig(api, "inject", "set", "--project", pid, "api.example.com",
         "Authorization=Bearer {{secret:KEY}}")
    brig(api, "inject", "set", "--project", pid, "*.example.org", "X-Key={{secret:OTHER}}")
    # a second set of a host replaces its rule
    out = brig(api, "inject", "set", "--project", pid, "api.example.com", "X-A=1", "X-B=b=c")
    want = [{"host": "api.example.com", "headers": {"X-A": "1", "X-B": "b=c"}},
            {"host": "*.example.org", "headers": {"X-Key": "{{secret:OTHER}}"}}]
    assert json.loads(out.stdout) == want
    assert api.ok("GET", f"/v1/projects/{pid}/injections").json()["rules"] == want
    brig(api, "inject", "remove", "--project", pid, "*.example.org")
    assert json.loads(brig(api, "inject", "show", "--project", pid).stdout) == want[:1]
    refused(api, "inject", "remove", "--project", pid, "nope.example.com", says=b"no rule for")
    refused(api, "inject", "set", "--project", pid, "api.example.com", "novalue", code=2)
    refused(api, "inject", "set", "--project", pid, "API.example.com", "A=1", says=b"rule 1")
    sk = sandbox_key(api, pid)
    refused(sk, "inject", "show", "--project", pid, says=b"403")


def test_project_on_idle(api):
    """project on-idle: the default of the project's new sandboxes; project show says it."""
    pid = api.ok("POST", "/v1/projects", {"name": "cli-on-idle"}).json()["id"]
    assert field(brig(api, "project", "show", pid).stdout.decode(), "on idle") == "delete"
    out = brig(api, "project", "on-idle", pid, "pause").stdout.decode()
    assert field(out, "on idle") == "pause"
    assert api.ok("GET", f"/v1/projects/{pid}").json()["on_idle"] == "pause"
    sb = api.create("minimal", project=pid)
    try:
        assert sb["on_idle"] == "pause"
    finally:
        api.delete(sb["id"])
    got = json.loads(brig(api, "project", "on-idle", "--json", pid, "delete").stdout)
    assert got["on_idle"] == "delete"
    refused(api, "project", "on-idle", pid, "sleep", says=b"(HTTP 400 invalid_request)")
    refused(sandbox_key(api, pid), "project", "on-idle", pid, "pause",
            says=b"(HTTP 403 forbidden)")
    refused(api, "project", "on-idle", pid, code=2, says=b"missing operand")


def test_exec_grants_per_step_credentials(api):
    """exec --grant NAME:SECONDS (the project's secret), NAME:SECONDS:VAR (brig's own
    variable's value, which brigd otherwise lacks) and NAME:exec (for this exec only): the
    command holds a placeholder."""
    pid = api.ok("POST", "/v1/projects", {"name": "cli-grant"}).json()["id"]
    api.ok("PUT", f"/v1/projects/{pid}/secrets/TEMP_KEY", {"value": "tmp_4Xk9Qw2Lr7Zp"})
    api.ok("PUT", f"/v1/projects/{pid}/injections", {"rules": [
        {"host": "api.example.test",
         "headers": {"X-Temp": "{{secret:TEMP_KEY}}", "X-Given": "{{secret:GIVEN}}"}}]})
    sb = api.create("minimal", project=pid)
    try:
        sid = sb["id"]
        r = brig(api, "exec", "--grant", "TEMP_KEY:30", sid, "--", "sh", "-c", "echo $TEMP_KEY")
        assert r.stdout.startswith(b"brig-placeholder-"), r
        # GIVEN is no secret of the project: without a value brigd refuses it
        refused(api, "exec", "--grant", "GIVEN:30", sid, "--", "true",
                says=b"no 'value' given")
        r = brig(api, "exec", "--grant", "GIVEN:5:MY_VALUE", "--grant", "TEMP_KEY:10", sid, "--",
                 "sh", "-c", "echo $GIVEN $TEMP_KEY", env=env_for(api, MY_VALUE="given-77"))
        given, temp = r.stdout.decode().split()
        assert given.startswith("brig-placeholder-") and temp.startswith("brig-placeholder-")
        assert b"given-77" not in r.stdout
        r = brig(api, "run", "--grant", "TEMP_KEY:30", "--", "true", check=False)
        assert r.returncode == 1 and b"no rule of the project names it" in r.stderr, r
        # NAME:exec: for this exec only, ended (and recorded so) when it ends
        r = brig(api, "exec", "--grant", "TEMP_KEY:exec", sid, "--", "sh", "-c", "echo $TEMP_KEY")
        assert r.stdout.startswith(b"brig-placeholder-"), r
        refused(api, "exec", "--background", "--grant", "TEMP_KEY:exec", sid, "--", "true",
                says=b"exec_only")
        log = api.ok("GET", f"/v1/sandboxes/{sid}/network-log").json()["entries"]
        grants = [e for e in log if e.get("verdict") == "granted"]
        assert len(grants) == 4, grants
        assert [e.get("reason") for e in log if e.get("verdict") == "expired"] == [
            "its exec ended"], log
        for bad in ("TEMP_KEY", "TEMP_KEY:", ":30", "TEMP_KEY:0", "TEMP_KEY:-5", "TEMP_KEY:3x",
                    "TEMP_KEY:30:NO_SUCH_VARIABLE_HERE", "TEMP_KEY:execx", ":exec",
                    "TEMP_KEY:exec:NO_SUCH_VARIABLE_HERE"):
            refused(api, "exec", "--grant", bad, sid, "--", "true", code=2, says=b"--grant")
        refused(api, "exec", "--grant", "TEMP_KEY:86401", sid, "--", "true",
                says=b"(HTTP 400 invalid_request)")
    finally:
        api.delete(sid)
