"""brigd's own secrets on disk: the API key files and the secrets vault's master key
(docs/secrets.md "The model", docs/operations.md "The state directory").

- operator.key, admin.key and master.key are written 0600, owned by root, even
  under a umask that would allow more, and are not rewritten by a restart;
- brigd refuses to start (a message, a non-zero exit) when master.key can be read
  by group or others, and does not replace the key;
- with BRIG_MASTER_KEY (base64 of 32 bytes) in its environment brigd uses that key
  and writes no master.key; secrets sealed under it open again after a restart with
  the same key, a restart with another key opens none of them (and loses none);
  a malformed BRIG_MASTER_KEY stops start-up."""

import base64
import os
import stat

import pytest

import sectest  # noqa: F401  (puts tests/integration on sys.path)
import brigtest  # noqa: E402
from brigtest import Brigd  # noqa: E402

PROJECT_SECRET = "pg-pass-7c1e9a0b55d2"
SANDBOX_SECRET = "tok_3a9d4f1e8b7c6a5d"
KEY_FILES = ("operator.key", "admin.key", "master.key")


@pytest.fixture
def brigds(tmp_path, monkeypatch):
    """brigds of the test's own (BRIG_MASTER_KEY set with monkeypatch is still in
    place while this tears down).  Every sandbox is deleted and nothing may be left."""
    made = []

    def new(name="state"):
        d = Brigd(str(tmp_path / name))
        made.append(d)
        return d

    yield new
    for d in made:
        if d.proc is not None:
            if d.proc.poll() is None:
                a = d.api()
                for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
                    a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
                d.stop()
            else:
                d.proc = None
        if d.live_sandboxes():
            monkeypatch.delenv("BRIG_MASTER_KEY", raising=False)
            d.destroy_all()
        left = brigtest.leftovers(d.state_dir)
        assert not left, f"test leaked: {left}"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def assert_private(path):
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode), f"{path} is not a regular file"
    assert stat.S_IMODE(st.st_mode) == 0o600, f"{path}: mode {stat.S_IMODE(st.st_mode):04o}"
    assert st.st_uid == 0, f"{path} is owned by uid {st.st_uid}"


def refused_start(d):
    """Starts d expecting brigd to refuse: returns (exit status, what it logged)."""
    before = len(d.log())
    with pytest.raises(RuntimeError, match="exited during start-up"):
        d.start()
    rc = d.proc.wait(timeout=60)
    d.proc = None
    log = d.log()[before:]
    for mark in brigtest.SANITIZER_MARKS:
        assert mark.decode() not in log, log
    assert "listening on" not in log, log
    return rc, log


def project_with_secret(a):
    p = a.ok("POST", "/v1/projects", {"name": "vaulted"}).json()
    a.ok("PUT", f"/v1/projects/{p['id']}/secrets/DB_PASSWORD", {"value": PROJECT_SECRET},
         expect=(204,))
    return p["id"]


def create_with_ref(a, project):
    return a.request("POST", "/v1/sandboxes", {"template": "minimal", "project": project,
                                               "secret_refs": ["DB_PASSWORD"]})


def project_secret_opens(a, project):
    """A new sandbox that refers to the project's secret gets its value."""
    r = create_with_ref(a, project)
    assert r.status == 201, r.body
    sid = r.json()["id"]
    assert sees(a, sid, "DB_PASSWORD", PROJECT_SECRET)
    a.delete(sid)


def sees(a, sid, name, value):
    """Whether a command in the sandbox gets `value` in $name (compared inside the
    sandbox: the output is redacted)."""
    r = a.exec(sid, f'test "${name}" = "{value}" && echo same || echo "len ${{#{name}}}"')
    assert value not in r["stdout"] + r["stderr"]
    return r["stdout"] == "same\n"


# ---- key files ----------------------------------------------------------------------------

def test_key_files_are_0600_and_owned_by_root(brigds):
    d = brigds()
    old = os.umask(0)  # brigd inherits it: the files' mode must not depend on it
    try:
        d.start()
    finally:
        os.umask(old)
    contents = {}
    for name in KEY_FILES:
        path = os.path.join(d.state_dir, name)
        assert_private(path)
        contents[name] = read(path)
    assert len(contents["master.key"]) == 32
    assert d.operator().request("POST", "/v1/accounts", {"name": "x"}).status == 201
    assert d.api().request("GET", "/v1/account").status == 200
    # A restart writes none of them again: same keys, same modes.
    d.stop()
    d.start()
    for name in KEY_FILES:
        path = os.path.join(d.state_dir, name)
        assert_private(path)
        assert read(path) == contents[name], f"{name} was rewritten by a restart"
    assert d.api().request("GET", "/v1/account").status == 200


def test_first_start_creates_a_new_random_master_key(brigds):
    one, two = brigds("one").start(), brigds("two").start()
    k1, k2 = (read(os.path.join(d.state_dir, "master.key")) for d in (one, two))
    assert len(k1) == len(k2) == 32 and k1 != k2
    assert "created the master key" in one.log()


# ---- master.key readable by others --------------------------------------------------------

@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620], ids=lambda m: f"{m:04o}")
def test_refuses_to_start_with_a_master_key_others_can_read(brigds, mode):
    d = brigds().start()
    a = d.api()
    project = project_with_secret(a)
    d.stop()
    path = os.path.join(d.state_dir, "master.key")
    key = read(path)
    os.chmod(path, mode)
    rc, log = refused_start(d)
    assert rc == 1, (rc, log)
    assert f"{path} is readable by others (mode {mode:04o}): chmod 600 it" in log, log
    assert read(path) == key, "brigd replaced the master key"
    # Fixed as the message says, brigd starts and the old secrets still open.
    os.chmod(path, 0o600)
    d.start()
    project_secret_opens(d.api(), project)


# ---- BRIG_MASTER_KEY --------------------------------------------------------------------

def test_master_key_from_the_environment(brigds, monkeypatch):
    key_a = base64.b64encode(os.urandom(32)).decode()
    key_b = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("BRIG_MASTER_KEY", key_a)
    d = brigds().start()
    master = os.path.join(d.state_dir, "master.key")
    assert not os.path.exists(master), "brigd wrote master.key although BRIG_MASTER_KEY is set"
    a = d.api()
    project = project_with_secret(a)
    # A sandbox of its own secret, alive across the restarts below.
    kept = a.create("minimal", secrets={"TOKEN": SANDBOX_SECRET})["id"]
    assert sees(a, kept, "TOKEN", SANDBOX_SECRET)

    # Same key after a restart: everything opens.
    d.stop()
    d.start()
    assert not os.path.exists(master)
    a = d.api()
    project_secret_opens(a, project)
    assert sees(a, kept, "TOKEN", SANDBOX_SECRET)

    # Another key: nothing opens, and nothing is revealed.
    d.stop()
    monkeypatch.setenv("BRIG_MASTER_KEY", key_b)
    d.start()
    assert not os.path.exists(master)
    a = d.api()
    r = create_with_ref(a, project)
    assert r.status == 500, r.body
    err = r.json()["error"]
    assert err["code"] == "internal", err
    assert f"a stored secret of {project} does not open with this master key" in err["message"]
    assert PROJECT_SECRET not in r.body.decode()
    assert d.live_sandboxes() == [kept]  # the refused create left none
    assert a.ok("GET", f"/v1/projects/{project}/secrets").json() == {"names": ["DB_PASSWORD"]}
    # The re-attached sandbox's commands are refused, not run without their secret:
    # neither their env nor the redaction of their output could be right.
    r = a.request("POST", f"/v1/sandboxes/{kept}/exec", {"cmd": "echo \"[$TOKEN]\""})
    assert r.status == 500, r.body
    msg = r.json()["error"]["message"]
    assert f"sandbox {kept}: its secrets cannot be used" in msg, msg
    assert "does not open with this master key" in msg, msg
    assert SANDBOX_SECRET.encode() not in r.body, r.body
    assert PROJECT_SECRET not in d.log() and SANDBOX_SECRET not in d.log()

    # Back to the first key: the wrong one destroyed nothing.
    d.stop()
    monkeypatch.setenv("BRIG_MASTER_KEY", key_a)
    d.start()
    a = d.api()
    project_secret_opens(a, project)
    assert sees(a, kept, "TOKEN", SANDBOX_SECRET)
    a.delete(kept)


@pytest.mark.parametrize("value", [
    base64.b64encode(bytes(16)).decode(),
    base64.b64encode(bytes(33)).decode(),
    "not base64 at all!",
], ids=["16-bytes", "33-bytes", "not-base64"])
def test_refuses_to_start_with_a_malformed_master_key(brigds, monkeypatch, value):
    monkeypatch.setenv("BRIG_MASTER_KEY", value)
    d = brigds()
    rc, log = refused_start(d)
    assert rc == 1, (rc, log)
    assert "BRIG_MASTER_KEY must be the base64 of exactly 32 bytes" in log, log
    assert not os.path.exists(os.path.join(d.state_dir, "master.key"))
    assert not os.path.exists(os.path.join(d.state_dir, "admin.key"))
