"""The brig CLI against a real brigd: streaming exec, processes, directory
transfer, file-system operations and an interactive shell on a real pty.

Every test deletes the sandboxes it made (try/finally with `brig rm`); the `api`
fixture then checks that nothing leaked.  Nothing here synchronises with sleeps:
tests wait for output they expect, with a deadline.
"""

import os
import pty
import select
import signal
import stat
import struct
import subprocess
import termios
import fcntl
import json
import time

from brigtest import BUILD, Api

BRIG = os.path.join(BUILD, "brig")
DEADLINE = 60  # seconds any single expected event may take


def env_for(api):
    return dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)


def brig(api, *args, input=None, check=True, timeout=120):
    r = subprocess.run([BRIG, *args], input=input, env=env_for(api), capture_output=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"brig {args}: exit {r.returncode}\n{r.stderr.decode()}")
    return r


def spawn(api, *args, **kw):
    return subprocess.Popen([BRIG, *args], env=env_for(api), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def read_until(fd, needle, proc=None, deadline=DEADLINE):
    """Reads fd until needle shows up; returns everything read.  Fails at the deadline, at
    EOF, or (when proc is given) once proc exited and nothing more came."""
    buf = b""
    end = time.monotonic() + deadline
    while needle not in buf:
        left = end - time.monotonic()
        assert left > 0, f"no {needle!r} within {deadline}s; got {buf!r}"
        r, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not r:
            assert proc is None or proc.poll() is None, \
                f"brig exited {proc.returncode} before {needle!r}; got {buf!r}"
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the pty's other side is gone
            chunk = b""
        assert chunk, f"EOF before {needle!r}; got {buf!r}"
        buf += chunk
    return buf


def create(api):
    return brig(api, "create", "--template", "minimal").stdout.decode().strip()


def remove(api, sid):
    brig(api, "rm", sid)


# ---- exec ----------------------------------------------------------------------


def test_exec_streams_output_while_the_command_runs(api):
    sid = create(api)
    try:
        p = spawn(api, "exec", sid, "--", "sh", "-c", "echo first; sleep 2; echo second")
        got = read_until(p.stdout.fileno(), b"first\n")
        assert p.poll() is None, "brig ended before the command did: output was not streamed"
        assert b"second" not in got
        out, err = p.communicate(timeout=DEADLINE)
        assert p.returncode == 0, err
        assert got + out == b"first\nsecond\n"
    finally:
        remove(api, sid)


def test_exec_exit_codes_streams_and_stdin(api):
    sid = create(api)
    try:
        r = brig(api, "exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 7", check=False)
        assert (r.returncode, r.stdout, r.stderr) == (7, b"out\n", b"err\n")
        # killed by a signal: 128 + n
        r = brig(api, "exec", sid, "--", "sh", "-c", "kill -9 $$", check=False)
        assert r.returncode == 137
        # a timeout: 124 and a message, after the output so far
        r = brig(api, "exec", "--timeout", "1", sid, "--", "sh", "-c", "echo before; sleep 30",
                 check=False)
        assert r.returncode == 124 and r.stdout == b"before\n"
        assert b"timed out" in r.stderr
        # bytes that are not UTF-8 survive both ways (base64 on the wire)
        blob = bytes(range(256)) * 4
        r = brig(api, "exec", "--stdin", sid, "--", "cat", input=blob)
        assert r.stdout == blob
        r = brig(api, "exec", "--stdin", "--shell", sid, "--", "tr a-z A-Z; exit 3",
                 input=b"hello\n", check=False)
        assert (r.returncode, r.stdout) == (3, b"HELLO\n")
        # --json stays buffered and keeps the exit code
        r = brig(api, "exec", "--json", sid, "--", "sh", "-c", "echo hi; exit 2", check=False)
        assert r.returncode == 2 and b'"exit_code": 2' in r.stdout and b'"hi\\n"' in r.stdout
        # too much stdin for one request is refused before anything runs
        r = brig(api, "exec", "--stdin", sid, "--", "cat", input=b"x" * (2 << 20), check=False)
        assert r.returncode == 1 and b"--background" in r.stderr
        # the reader of our stdout goes away: brig stops (141) and brigd kills the command
        p = spawn(api, "exec", sid, "--", "yes")
        read_until(p.stdout.fileno(), b"y\ny\n")
        p.stdout.close()
        assert p.wait(timeout=DEADLINE) == 128 + signal.SIGPIPE
        # usage errors exit 2
        assert brig(api, "exec", sid, check=False).returncode == 2
    finally:
        remove(api, sid)


def test_exec_sigint_aborts_and_brigd_kills_the_command(api):
    sid = create(api)
    try:
        p = spawn(api, "exec", sid, "--", "sh", "-c", "echo pid=$$; exec sleep 300")
        got = read_until(p.stdout.fileno(), b"\n")
        pid = got.split(b"pid=")[1].split()[0].decode()
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=DEADLINE)
        assert p.returncode == 130
        # brigd kills a foreground command whose client went away
        end = time.monotonic() + DEADLINE
        while brig(api, "exec", sid, "--", "kill", "-0", pid, check=False).returncode == 0:
            assert time.monotonic() < end, "the command outlived its client"
            time.sleep(0.2)  # polling the outcome, not synchronising
    finally:
        remove(api, sid)


# ---- processes -----------------------------------------------------------------


def test_background_ps_logs_kill_wait(api):
    sid = create(api)
    try:
        r = brig(api, "exec", "--background", sid, "--", "sh", "-c",
                 "while :; do echo tick; echo tock >&2; sleep 0.2; done")
        pid = r.stdout.decode().strip()
        assert pid.isdigit()
        table = brig(api, "ps", sid).stdout.decode()
        assert table.splitlines()[0].split() == ["PID", "STATE", "STARTED", "COMMAND"]
        row = next(l for l in table.splitlines()[1:] if l.split()[0] == pid)
        assert row.split()[1] == "running" and "while :; do echo tick" in row

        follow = spawn(api, "logs", "--follow", sid, pid)
        read_until(follow.stdout.fileno(), b"tick\ntick\n", follow)
        read_until(follow.stderr.fileno(), b"tock\n")
        assert follow.poll() is None

        # a snapshot of a running process ends at once, exit 0
        r = brig(api, "logs", sid, pid)
        assert r.stdout.startswith(b"tick\n") and b"tock" in r.stderr

        # wait with a timeout on a running process: 124
        r = brig(api, "wait", "--timeout", "0.5", sid, pid, check=False)
        assert r.returncode == 124 and b"still running" in r.stderr

        brig(api, "kill", sid, pid)
        assert brig(api, "wait", sid, pid, check=False).returncode == 128 + signal.SIGTERM
        follow.communicate(timeout=DEADLINE)
        assert follow.returncode == 128 + signal.SIGTERM
        row = next(l for l in brig(api, "ps", sid).stdout.decode().splitlines()[1:]
                   if l.split()[0] == pid)
        assert row.split()[1] == "killed(TERM)"
        assert brig(api, "kill", "--signal", "BOGUS", sid, pid, check=False).returncode == 2
        assert brig(api, "logs", sid, "99999", check=False).returncode == 1
    finally:
        remove(api, sid)


def test_background_stdin(api):
    sid = create(api)
    try:
        pid = brig(api, "exec", "--background", sid, "--", "sh", "-c",
                   "read a; echo got:$a; cat >/root/rest; echo done; exit 5").stdout.decode().strip()
        brig(api, "stdin", sid, pid, input=b"hello\n")
        brig(api, "stdin", "--close", sid, pid, input=b"more\nlines\n")
        assert brig(api, "wait", sid, pid, check=False).returncode == 5
        r = brig(api, "logs", sid, pid, check=False)
        assert (r.returncode, r.stdout) == (5, b"got:hello\ndone\n")
        r = brig(api, "exec", sid, "--", "cat", "/root/rest")
        assert r.stdout == b"more\nlines\n"
        # --background --stdin: starts, prints the pid, streams stdin and closes it
        r = brig(api, "exec", "--background", "--stdin", sid, "--", "sh", "-c",
                 "wc -c >/root/n", input=b"y" * 300000)
        pid = r.stdout.decode().strip()
        assert brig(api, "wait", sid, pid, check=False).returncode == 0
        assert brig(api, "exec", sid, "--", "cat", "/root/n").stdout.strip() == b"300000"
    finally:
        remove(api, sid)


def test_logs_of_a_large_output(api):
    """More output than one chunk: the snapshot and --follow both deliver all of it, in
    order, and end with the exit code."""
    sid = create(api)
    try:
        script = "i=0; while [ $i -lt 5000 ]; do echo line-$i-................................; " \
                 "i=$((i+1)); done; exit 6"
        expected = b"".join(b"line-%d-................................\n" % i for i in range(5000))
        pid = brig(api, "exec", "--background", sid, "--", "sh", "-c", script).stdout.strip()
        assert brig(api, "wait", sid, pid, check=False).returncode == 6
        r = brig(api, "logs", sid, pid, check=False, timeout=20)
        assert (r.returncode, len(r.stdout)) == (6, len(expected)) and r.stdout == expected
        r = brig(api, "logs", "--follow", sid, pid, check=False, timeout=20)
        assert (r.returncode, r.stdout == expected) == (6, True)
    finally:
        remove(api, sid)


# ---- files ---------------------------------------------------------------------


def make_tree(root):
    os.makedirs(os.path.join(root, "sub", "deep"))
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write("alpha\n")
    with open(os.path.join(root, "sub", "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(root, "sub", "run.sh"), 0o755)
    with open(os.path.join(root, "sub", "deep", "secret"), "wb") as f:
        f.write(os.urandom(100000))
    os.chmod(os.path.join(root, "sub", "deep", "secret"), 0o600)
    os.symlink("a.txt", os.path.join(root, "link"))
    os.symlink("../a.txt", os.path.join(root, "sub", "up"))


def tree_of(root):
    """{relative path: (kind, mode, content or link target)}"""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", None, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), f.read())
    return out


def test_upload_download_tree_round_trip(api, tmp_path):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    make_tree(src)
    sid = create(api)
    try:
        brig(api, "upload", "-r", sid, src, "/root/tree")
        r = brig(api, "exec", sid, "--", "sh", "-c",
                 "cd /root/tree && ./sub/run.sh && readlink link && stat -c %a sub/deep/secret")
        assert r.stdout == b"ran\na.txt\n600\n"
        brig(api, "download", "-r", sid, "/root/tree", dst)
        assert tree_of(dst) == tree_of(src)
        # refusals: a missing remote directory extracts nothing and leaves nothing
        r = brig(api, "download", "-r", sid, "/root/missing", str(tmp_path / "none"), check=False)
        assert r.returncode == 1 and not os.path.exists(tmp_path / "none")
        r = brig(api, "upload", "-r", sid, str(tmp_path / "missing"), "/root/x", check=False)
        assert r.returncode == 1
        r = brig(api, "upload", "-r", sid, src, "relative", check=False)
        assert r.returncode == 2
    finally:
        remove(api, sid)


def test_file_system_operations(api):
    sid = create(api)
    try:
        brig(api, "mkdir", sid, "/root/d")
        r = brig(api, "mkdir", sid, "/root/d", check=False)
        assert r.returncode == 1 and b"409" in r.stderr
        brig(api, "mkdir", "-p", sid, "/root/d")  # exists: fine with -p
        brig(api, "mkdir", "-p", "--mode", "0700", sid, "/root/d/e/f")
        brig(api, "upload", sid, "-", "/root/d/file.txt", input=b"12345")
        brig(api, "exec", sid, "--", "ln", "-s", "file.txt", "/root/d/ln")

        lines = brig(api, "ls-files", sid, "/root/d").stdout.decode().splitlines()
        assert lines[0].split() == ["MODE", "SIZE", "MODIFIED", "NAME"]
        rows = {l.split()[3]: l.split() for l in lines[1:]}
        assert set(rows) == {"e", "file.txt", "ln"}
        assert rows["e"][0].startswith("d") and rows["file.txt"][:2] == ["-rw-r--r--", "5"]
        assert rows["ln"][0].startswith("l") and rows["ln"][4:] == ["->", "file.txt"]
        r = brig(api, "ls-files", "--json", sid, "/root/d/e")
        assert b'"name": "f"' in r.stdout and b'"mode": "0700"' in r.stdout
        r = brig(api, "stat", sid, "/root/d/ln")
        assert b'"type": "symlink"' in r.stdout and b'"target": "file.txt"' in r.stdout

        brig(api, "mv", sid, "/root/d/file.txt", "/root/d/moved.txt")
        assert brig(api, "download", sid, "/root/d/moved.txt", "-").stdout == b"12345"
        assert brig(api, "stat", sid, "/root/d/file.txt", check=False).returncode == 1

        brig(api, "rm-file", sid, "/root/d/moved.txt")
        r = brig(api, "rm-file", sid, "/root/d", check=False)
        assert r.returncode == 1 and b"--recursive" in r.stderr
        brig(api, "rm-file", "-r", sid, "/root/d")
        assert brig(api, "stat", sid, "/root/d", check=False).returncode == 1
        assert brig(api, "ls-files", sid, "root", check=False).returncode == 2
    finally:
        remove(api, sid)


# ---- shell ---------------------------------------------------------------------


def test_shell_on_a_real_pty(api):
    sid = create(api)
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        before = termios.tcgetattr(slave)
        p = subprocess.Popen([BRIG, "shell", sid], env=env_for(api), stdin=slave, stdout=slave,
                             stderr=slave, start_new_session=True)
        try:
            # the terminal goes raw while the session runs
            end = time.monotonic() + DEADLINE
            while termios.tcgetattr(slave)[3] & termios.ECHO:
                assert time.monotonic() < end and p.poll() is None, "terminal never went raw"
                time.sleep(0.05)
            os.write(master, b"stty size; echo hi-$((6*7))\r")
            got = read_until(master, b"hi-42", p)
            assert b"30 100" in got, got  # the pty has our terminal's size
            # a new size follows SIGWINCH
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            p.send_signal(signal.SIGWINCH)
            os.write(master, b"stty size\r")
            read_until(master, b"40 120", p)
            os.write(master, b"exit 3\r")
            assert p.wait(timeout=DEADLINE) == 3
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert termios.tcgetattr(slave) == before, "terminal mode not restored"

        # no terminal: a clear refusal
        r = brig(api, "shell", sid, check=False)
        assert r.returncode == 1 and b"terminal" in r.stderr
    finally:
        os.close(master)
        os.close(slave)
        remove(api, sid)


def test_shell_restores_the_terminal_when_killed(api):
    sid = create(api)
    master, slave = os.openpty()
    try:
        before = termios.tcgetattr(slave)
        p = subprocess.Popen([BRIG, "shell", sid, "--", "sh"], env=env_for(api), stdin=slave,
                             stdout=slave, stderr=slave, start_new_session=True)
        os.write(master, b"echo up-$((1+1))\r")
        read_until(master, b"up-2", p)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=DEADLINE) == 128 + signal.SIGTERM
        assert termios.tcgetattr(slave) == before
        # the session's process got SIGHUP: nothing of it keeps running
        end = time.monotonic() + DEADLINE
        while "running" in brig(api, "ps", sid).stdout.decode():
            assert time.monotonic() < end, "the shell's process outlived the session"
            time.sleep(0.2)  # polling the outcome, not synchronising
    finally:
        os.close(master)
        os.close(slave)
        remove(api, sid)


# ---- the account and ended sandboxes ---------------------------------------------------

def test_account_usage_ledger_and_accounts(api, daemon):
    """account show, usage, ledger (pages), ls (the operator's), each against the API's answer;
    ls --ended lists a sandbox that ended."""
    sid = create(api)
    remove(api, sid)
    acc = api.ok("GET", "/v1/account").json()
    show = brig(api, "account", "show").stdout.decode()
    assert f"balance     {acc['balance']}\n" in show and acc["id"] in show
    assert f"today       {acc['usage_today']}" in show
    assert json.loads(brig(api, "account", "show", "--json").stdout) == \
        api.ok("GET", "/v1/account").json()

    usage = brig(api, "account", "usage", "--days", "3").stdout.decode().splitlines()
    assert usage[0].split() == ["DATE", "SPENT"] and len(usage) == 4
    assert usage[-1].split()[0] == time.strftime("%Y-%m-%d", time.gmtime())
    assert json.loads(brig(api, "account", "usage", "--days", "3", "--json").stdout) == \
        api.ok("GET", "/v1/account/usage?days=3").json()

    r = brig(api, "account", "ledger", "--limit", "1")
    rows = r.stdout.decode().splitlines()
    assert rows[0].split() == ["SEQ", "AT", "KIND", "AMOUNT", "SANDBOX", "SECONDS", "NOTE"]
    seq, _, kind, amount, sandbox = rows[1].split()[:5]
    assert (kind, sandbox) == ("charge", sid), rows
    # the 60-second minimum, in one charge or two (when brigd's 10-second tick billed a
    # second of it while it lived)
    charges = [e for e in api.ok("GET", "/v1/account/ledger?limit=1000").json()["entries"]
               if e["sandbox_id"] == sid]
    assert sum(e["seconds"] for e in charges) == 60 and charges[0]["amount"] == amount, charges
    assert r.stderr.decode() == f"brig: more: --before {seq}\n"
    older = json.loads(brig(api, "account", "ledger", "--before", seq, "--limit", "1000",
                            "--json").stdout)
    assert older == api.ok("GET", f"/v1/account/ledger?before={seq}&limit=1000").json()
    assert older["entries"] and all(e["seq"] < int(seq) for e in older["entries"])
    for bad in (["ledger", "--limit", "0"], ["ledger", "--before", "x"], ["usage", "--days", "367"]):
        assert brig(api, "account", *bad, check=False).returncode == 2, bad

    ended = brig(api, "ls", "--ended").stdout.decode().splitlines()
    assert ended[0].split() == ["ID", "TEMPLATE", "STATE", "CREATED", "ENDED", "REASON", "COST"]
    mine = [line.split() for line in ended[1:] if line.startswith(sid)]
    assert mine and mine[0][2] == "deleted" and mine[0][5:] == ["deleted", "$0.000600"], ended
    listed = json.loads(brig(api, "ls", "--ended", "--json").stdout)["sandboxes"]
    assert sid in [s["id"] for s in listed]
    assert brig(api, "ls", "--ended", "--since", "2999-01-01T00:00:00Z").stdout.decode() \
        .splitlines()[1:] == []
    assert brig(api, "ls", "--since", "0", check=False).returncode == 2

    # account ls is the operator's; an account's admin key is refused by brigd
    r = brig(api, "account", "ls", check=False)
    assert r.returncode == 1 and b"needs the operator key (HTTP 403" in r.stderr, r.stderr
    op = Api(api.base_url, daemon.operator_key)
    out = brig(op, "account", "ls").stdout.decode().splitlines()
    assert out[0].split() == ["ID", "NAME", "BALANCE", "TODAY", "LIVE", "CREATED"]
    assert any(line.startswith(acc["id"]) for line in out[1:])
    assert json.loads(brig(op, "account", "ls", "--json").stdout) == \
        op.ok("GET", "/v1/accounts").json()
    # the ledger is an admin's: a sandbox key is refused
    k = api.ok("POST", f"/v1/projects/{acc['default_project_id']}/keys", {"scope": "sandbox"}).json()
    try:
        r = brig(Api(api.base_url, k["key"]), "account", "ledger", check=False)
        assert r.returncode == 1 and b"(HTTP 403 forbidden)" in r.stderr, r.stderr
    finally:
        api.ok("DELETE", f"/v1/projects/{acc['default_project_id']}/keys/{k['id']}",
               expect=(204,))
