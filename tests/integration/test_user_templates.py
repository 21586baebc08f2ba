"""Issue 15: templates declared by users (docs/templates.md, "Templates declared by users").

An account posts a spec (JSON); brigd builds it inside a sandbox of its parent (a normal
sandbox of the caller's project: its limits, its egress policy), through the agent, and
the sandbox's writable layer over its parent becomes the template's layer, named
name:tag in the account and kept by content key.  Everything here runs real builds in
real sandboxes (runc) against the session brigd; the `api` fixture's leak check finds a
build sandbox left behind.

The test machines run the suites in network namespaces without a route to the Debian
mirror or the npm registry (and PyPI is unreachable everywhere here): apt, npm and pip are
tested here with packages made by the test and uploaded with the build as files (a .deb,
an npm tarball, a wheel), which the package managers install offline.  Packages by name,
from registries through the build project's egress, are tested hermetically in
test_user_templates_net.py (the test's own apt repository and npm registry in its own
"internet" namespace); the last test here tries the real ones where they are reachable.
"""

import base64
import hashlib
import http.client
import io
import json
import os
import secrets
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
import zipfile

import pytest

import brigtest
from brigtest import BUILD, Api, Sandbox, wait_for
from test_openapi import Checker, node  # noqa: F401 (node: the schema checker's fixture)


def b64(data):
    return base64.b64encode(data).decode()


def unique(prefix="t"):
    return f"{prefix}-{secrets.token_hex(4)}"


@pytest.fixture
def templates(api):
    """Builds templates of the test's own (POST /v1/templates) and deletes them after."""
    made = []

    def build(spec, a=api, expect=(200, 201)):
        r = a.request("POST", "/v1/templates", spec, timeout=600)
        if r.status in (200, 201):
            made.append((a, r.json()["ref"]))
        assert r.status in expect, (r.status, r.body)
        return r

    yield build
    for a, ref in reversed(made):
        r = a.request("DELETE", f"/v1/templates/{ref}")
        assert r.status in (204, 404), r.body


def layer_dir(daemon, api, key):
    acct = api.ok("GET", "/v1/account").json()["id"]
    return os.path.join(daemon.state_dir, "templates", acct, key)


def test_run_steps_files_env_and_workdir(api, daemon, templates):
    name = unique()
    spec = {
        "name": name, "tag": "v1", "from": "minimal",
        "files": [{"path": "/opt/tool/hello.sh", "mode": 0o755,
                   "content_b64": b64(b"#!/bin/sh\necho \"hello $GREETING\"\n")}],
        "env": {"GREETING": "brig", "LANG": "C"},
        "workdir": "/app",
        "run": ["echo built > made.txt", "rm /etc/hostname", "mkdir -p /srv/x && echo y > /srv/x/y",
                "test \"$GREETING\" = brig"],
    }
    t0 = time.monotonic()
    t = templates(spec, expect=(201,)).json()
    print(f"built {name} from minimal in {time.monotonic() - t0:.2f} s")
    assert t["ref"] == f"{name}:v1" and t["parent"] == "minimal" and not t["cached"]
    assert len(t["key"]) == 16 and t["size_bytes"] > 0 and t["built_by"]
    got = api.ok("GET", f"/v1/templates/{name}:v1").json()
    assert got["spec"]["workdir"] == "/app" and got["spec"]["env"]["GREETING"] == "brig"
    assert got["spec"]["files"][0]["sha256"] == hashlib.sha256(
        b"#!/bin/sh\necho \"hello $GREETING\"\n").hexdigest()
    assert "content_b64" not in json.dumps(got["spec"])
    refs = [x.get("ref") for x in api.ok("GET", "/v1/templates").json()["templates"]]
    assert f"{name}:v1" in refs and "minimal" in [x["name"] for x in
                                                 api.ok("GET", "/v1/templates").json()["templates"]]
    log = api.ok("GET", f"/v1/templates/{name}:v1/log").json()
    assert [s["exit_code"] for s in log["steps"]] == [0, 0, 0, 0]
    assert log["steps"][0]["command"] == "echo built > made.txt"

    with Sandbox(api, f"{name}:v1") as sb:
        r = sb.exec("pwd; cat made.txt; /opt/tool/hello.sh; stat -c %a /opt/tool/hello.sh;"
                    " test -e /etc/hostname || echo gone; cat /srv/x/y; stat -c %u /app/made.txt")
        assert r["exit_code"] == 0, r
        assert r["stdout"].split("\n")[:7] == ["/app", "built", "hello brig", "755", "gone", "y",
                                               "0"], r
        # the request's env wins over the template's
    with Sandbox(api, f"{name}:v1", env={"GREETING": "you"}) as sb:
        assert sb.exec("/opt/tool/hello.sh")["stdout"] == "hello you\n"
    # the parent is untouched
    with Sandbox(api, "minimal") as sb:
        assert sb.exec("test -e /etc/hostname && test ! -e /opt/tool")["exit_code"] == 0


def test_failing_step_says_which_with_exit_code_and_tail(api, daemon, templates):
    name = unique()
    r = templates({"name": name, "from": "minimal",
                   "run": ["echo one", "echo boom-output; echo to-stderr >&2; exit 3", "echo never"]},
                  expect=(422,))
    body = r.json()
    assert body["error"]["code"] == "build_failed"
    assert "step 2" in body["error"]["message"] and "exited with 3" in body["error"]["message"]
    body = body["build"]
    assert body["step"] == 2 and body["exit_code"] == 3 and body["kind"] == "run"
    assert "boom-output" in body["output_tail"] and "to-stderr" in body["output_tail"]
    assert [s["exit_code"] for s in body["steps"]] == [0, 3]
    assert api.request("GET", f"/v1/templates/{name}").status == 404


def follow(api, location):
    """GET location?follow=1: the open NDJSON answer (read it line by line)."""
    conn = http.client.HTTPConnection(api.host, api.port, timeout=120)
    conn.request("GET", location + "?follow=1", headers={"Authorization": f"Bearer {api.key}"})
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("content-type") == "application/x-ndjson", r.status
    return conn, r


def test_build_log_streams_live_and_is_kept(api, daemon):
    """POST ?wait=0 answers 202 at once; its Location?follow=1 gives a step's output as the
    step writes it.  The slow step waits for a file that the test writes (files API, into
    the build's sandbox) only after it read the step's first line: a log that came at the
    step's end would never release it, and the read would time out."""
    name = unique()
    spec = {"name": name, "from": "minimal",
            "run": ["echo one",
                    "echo first-line; while [ ! -e /tmp/go ]; do sleep 0.05; done; rm /tmp/go;"
                    " echo released"]}
    r = api.request("POST", "/v1/templates?wait=0", spec)
    assert r.status == 202, r.body
    rec, loc = r.json(), r.headers["location"]
    try:
        assert rec["state"] == "running" and rec["template"] == f"{name}:latest"
        assert loc == f"/v1/templates/{name}:latest/builds/{rec['build_id']}"
        conn, resp = follow(api, loc)
        seen = ""
        for line in resp:
            ev = json.loads(line)
            assert ev["type"] == "log", ev
            seen += ev["data"]
            if "first-line\n" in seen:
                break
        assert "\nreleased" not in seen and "==> step 1: exit code 0" in seen, seen
        running = api.ok("GET", loc).json()
        assert running["state"] == "running" and running["sandbox_id"].startswith("sbx_")
        api.put_file(running["sandbox_id"], "/tmp/go", b"")
        events = [json.loads(line) for line in resp]
        conn.close()
        *logs, end = events
        text = seen + "".join(e["data"] for e in logs)
        assert "==> step 2 (run): echo first-line" in text and "released\n" in text
        assert "==> step 2: exit code 0" in text, text
        assert end["type"] == "end" and end["state"] == "succeeded" and end["status"] == 201
        assert end["result"]["ref"] == f"{name}:latest" and not end["result"]["cached"]
        # kept after the end: the record with its log (an hour), the steps (stored)
        kept = api.ok("GET", loc).json()
        assert kept["state"] == "succeeded" and "released" in kept["log_tail"]
        steps = api.ok("GET", f"/v1/templates/{name}/log").json()["steps"]
        assert [s["exit_code"] for s in steps] == [0, 0] and "released" in steps[1]["output"]
        # another account cannot follow it, nor learn it exists
        other = Api(daemon.url, daemon.operator().ok(
            "POST", "/v1/accounts", {"name": unique("acct")}).json()["api_key"])
        assert other.request("GET", loc).status == 404
        assert other.request("GET", loc + "?follow=1").status == 404
    finally:
        api.request("DELETE", f"/v1/templates/{name}")
    # a failed build ends with what the synchronous request answers (422, the step)
    r = api.ok("POST", "/v1/templates?wait=0", {"name": unique(), "from": "minimal",
                                                "run": ["echo boom; exit 4"]}, expect=(202,))
    conn, resp = follow(api, r.headers["location"])
    *logs, end = [json.loads(line) for line in resp]
    conn.close()
    assert "boom" in "".join(e["data"] for e in logs)
    assert end["state"] == "failed" and end["status"] == 422 and "step 1 (run)" in end["error"]
    assert end["result"]["build"]["exit_code"] == 4


def test_files_fetched_from_a_sandbox_of_the_account(api, daemon, templates):
    """A `files` entry may name a file in a running sandbox of the same account
    (from_sandbox + source): its bytes are read when the build starts and hashed into the
    key like uploaded ones (its source's mode unless given).  Another account naming that
    sandbox gets 404, like a sandbox that does not exist; a missing source path is 400."""
    data = os.urandom(300 << 10)  # more than a request body could carry as base64 anyway
    with Sandbox(api, "minimal") as src:
        api.put_file(src.id, "/root/tool.bin", data)
        assert src.exec("chmod 750 /root/tool.bin")["exit_code"] == 0
        name = unique()
        spec = {"name": name, "from": "minimal",
                "files": [{"path": "/opt/tool.bin", "from_sandbox": src.id, "source": "/root/tool.bin"},
                          {"path": "/opt/ro.bin", "from_sandbox": src.id, "source": "/root/tool.bin",
                           "mode": 0o400}],
                "run": ["test -x /opt/tool.bin && cmp /opt/tool.bin /opt/ro.bin"]}
        t = templates(spec, expect=(201,)).json()
        files = api.ok("GET", f"/v1/templates/{t['ref']}").json()["spec"]["files"]
        digest = hashlib.sha256(data).hexdigest()
        assert files == [{"path": "/opt/tool.bin", "mode": 0o750, "sha256": digest},
                         {"path": "/opt/ro.bin", "mode": 0o400, "sha256": digest}], files
        # the same bytes: the same key, nothing built
        assert templates(spec, expect=(200,)).json()["key"] == t["key"]
        # other bytes at the same path: another key
        api.put_file(src.id, "/root/tool.bin", data[:1000])
        assert src.exec("chmod 750 /root/tool.bin")["exit_code"] == 0
        other_key = templates(dict(spec, name=unique()), expect=(201,)).json()["key"]
        assert other_key != t["key"]
        r = api.request("POST", "/v1/templates", dict(spec, files=[
            {"path": "/x", "from_sandbox": src.id, "source": "/root/nosuch"}]))
        assert r.status == 400 and "files[0]" in r.json()["error"]["message"], r.body
        r = api.request("POST", "/v1/templates", dict(spec, files=[
            {"path": "/x", "from_sandbox": src.id}]))
        assert r.status == 400 and "'source'" in r.json()["error"]["message"], r.body
        # another account: not found, as a sandbox that never existed
        op = daemon.operator()
        other = Api(daemon.url, op.ok("POST", "/v1/accounts", {"name": unique("acct")}).json()["api_key"])
        r = other.request("POST", "/v1/templates", dict(spec, name=unique()))
        assert r.status == 404 and "files[0]" in r.json()["error"]["message"], r.body
        gone = other.request("POST", "/v1/templates", dict(spec, name=unique(), files=[
            {"path": "/x", "from_sandbox": "sbx_" + "a" * 26, "source": "/root/tool.bin"}]))
        assert gone.status == 404
        assert r.json()["error"]["message"].replace(src.id, "ID") == \
            gone.json()["error"]["message"].replace("sbx_" + "a" * 26, "ID")
    with Sandbox(api, t["ref"]) as sb:
        assert sb.exec("sha256sum /opt/tool.bin; stat -c %a /opt/ro.bin")["stdout"] == \
            f"{digest}  /opt/tool.bin\n400\n"


def test_rebuild_hits_the_cache(api, daemon, templates):
    name, other = unique(), unique()
    spec = {"name": name, "from": "minimal", "run": ["echo $RANDOM > /stamp"]}
    first = templates(spec, expect=(201,)).json()
    t0 = time.monotonic()
    again = templates(spec, expect=(200,)).json()
    took = time.monotonic() - t0
    print(f"cache hit answered in {took * 1000:.1f} ms")
    assert again["cached"] and again["key"] == first["key"] and took < 1.0
    # the same spec under another name builds nothing either: one layer, two names
    twin = templates({**spec, "name": other}, expect=(200,)).json()
    assert twin["cached"] and twin["key"] == first["key"]
    stamps = set()
    for ref in (name, other):
        with Sandbox(api, ref) as sb:
            stamps.add(sb.exec("cat /stamp")["stdout"])
    assert len(stamps) == 1
    # another spec is another key
    changed = templates({**spec, "run": ["echo changed > /stamp"]}, expect=(201,)).json()
    assert changed["key"] != first["key"]
    assert os.path.isdir(layer_dir(daemon, api, first["key"]))  # still named by `other`


def test_template_from_a_template(api, templates):
    a, b = unique("a"), unique("b")
    ta = templates({"name": a, "from": "minimal", "run": ["echo a > /a"],
                    "env": {"FROM_A": "1"}}, expect=(201,)).json()
    tb = templates({"name": b, "from": f"{a}:latest", "run": ["cat /a > /b; echo b >> /b"]},
                   expect=(201,)).json()
    assert tb["parent"] == f"{a}:latest" and tb["parent_key"] == ta["key"]
    with Sandbox(api, b) as sb:
        assert sb.exec("cat /a /b")["stdout"] == "a\na\nb\n"
    # a rebuilt parent is a new key, so the child's key changes too
    templates({"name": a, "from": "minimal", "run": ["echo A > /a"]}, expect=(201,))
    tb2 = templates({"name": b, "from": f"{a}:latest", "run": ["cat /a > /b; echo b >> /b"]},
                    expect=(201,)).json()
    assert tb2["key"] != tb["key"] and not tb2["cached"]


def test_delete_is_refused_while_sandboxes_use_it(api, daemon, templates):
    name = unique()
    t = templates({"name": name, "from": "minimal", "run": ["touch /x"]}, expect=(201,)).json()
    sb = api.create(name)
    try:
        r = api.request("DELETE", f"/v1/templates/{name}")
        assert r.status == 409 and "in use" in r.json()["error"]["message"], r.body
    finally:
        api.delete(sb["id"])
    api.ok("DELETE", f"/v1/templates/{name}", expect=(204,))
    assert api.request("GET", f"/v1/templates/{name}").status == 404
    assert not os.path.exists(layer_dir(daemon, api, t["key"]))
    r = api.request("POST", "/v1/sandboxes", {"template": name})
    assert r.status == 400 and "no template" in r.json()["error"]["message"]


def test_another_account_cannot_see_or_use_it(api, daemon, templates):
    name = unique()
    templates({"name": name, "from": "minimal", "run": ["touch /secret-layer"]}, expect=(201,))
    op = daemon.operator()
    other = Api(daemon.url, op.ok("POST", "/v1/accounts", {"name": unique("acct")}).json()["api_key"])
    for method, path in (("GET", f"/v1/templates/{name}"), ("GET", f"/v1/templates/{name}:latest"),
                         ("GET", f"/v1/templates/{name}/log"), ("DELETE", f"/v1/templates/{name}")):
        r = other.request(method, path)
        assert r.status == 404, (method, path, r.body)
        assert r.json()["error"]["message"] == f"no template named '{path.split('/')[3]}'"
    missing = other.request("GET", "/v1/templates/nosuch-name")
    assert missing.json()["error"]["message"] == "no template named 'nosuch-name'"
    r = other.request("POST", "/v1/sandboxes", {"template": name})
    assert r.status == 400 and "no template" in r.json()["error"]["message"], r.body
    r = other.request("POST", "/v1/templates", {"name": unique(), "from": name})
    assert r.status == 400 and "no template" in r.json()["error"]["message"], r.body
    assert name not in json.dumps(other.ok("GET", "/v1/templates").json())
    # the same name is free in the other account: its own template, its own layer
    t = other.ok("POST", "/v1/templates", {"name": name, "from": "minimal",
                                           "run": ["touch /other"]}).json()
    with Sandbox(other, name) as sb:
        assert sb.exec("test -e /other && test ! -e /secret-layer")["exit_code"] == 0
    other.ok("DELETE", f"/v1/templates/{t['ref']}", expect=(204,))


def test_start_command_and_ready_checks(api, templates):
    name = unique()
    templates({"name": name, "from": "minimal",
               "run": ["mkdir -p /www && echo page > /www/index.html"],
               "start": "sleep 0.5; echo up > /tmp/started; exec httpd -f -p 7000 -h /www",
               "ready": {"command": "test -f /tmp/started"}}, expect=(201,))
    with Sandbox(api, name) as sb:  # the create waited for the ready command
        assert sb.exec("cat /tmp/started")["stdout"] == "up\n"
        assert sb.exec("wget -q -O - http://127.0.0.1:7000/")["stdout"] == "page\n"
    port = unique()
    templates({"name": port, "from": "minimal",
               "start": "sleep 0.5; mkdir -p /w; exec httpd -f -p 7001 -h /w",
               "ready": {"port": 7001}}, expect=(201,))
    with Sandbox(api, port) as sb:  # listening when the create answers
        assert ":1B59 " in sb.exec("cat /proc/net/tcp /proc/net/tcp6")["stdout"]
    never = unique()
    templates({"name": never, "from": "minimal", "start": "sleep 1000",
               "ready": {"port": 7002, "timeout": 1}}, expect=(201,))
    r = api.request("POST", "/v1/sandboxes", {"template": never})
    assert r.status == 503 and "ready check (port 7002)" in r.json()["error"]["message"], r.body
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []


@pytest.mark.parametrize("spec, words", [
    ({"name": "x", "bogus": 1}, "unknown field 'bogus'"),
    ({"name": "Bad Name"}, "'name' must be"),
    ({"name": "base"}, "built-in template"),
    ({"name": "ok", "tag": "bad:tag"}, "'name' must be"),
    ({"name": "ok", "from": "nosuch"}, "no template named 'nosuch'"),
    ({"name": "ok", "run": "echo"}, "'run' must be an array"),
    ({"name": "ok", "apt": ["-oDebug=1"]}, "'apt'[0]"),
    ({"name": "ok", "files": [{"path": "rel", "content_b64": ""}]}, "absolute path"),
    ({"name": "ok", "files": [{"path": "/a/../b", "content_b64": ""}]}, "without '..'"),
    ({"name": "ok", "files": [{"path": "/a", "content_b64": "!!"}]}, "not base64"),
    ({"name": "ok", "files": [{"path": "/a", "content_b64": "", "mode": 4095}]}, "'mode'"),
    ({"name": "ok", "env": {"1X": "y"}}, "env '1X'"),
    ({"name": "ok", "workdir": "app"}, "'workdir'"),
    ({"name": "ok", "ready": {"port": 80}}, "needs a 'start'"),
    ({"name": "ok", "start": "x", "ready": {"port": 0}}, "'ready' must be"),
    ({"name": "ok", "start": "x", "ready": {"port": 1, "command": "y"}}, "'ready' must be"),
    ({"name": "ok", "isolation": "kvm"}, "'isolation'"),
])
def test_bad_specs_are_refused(api, spec, words):
    r = api.request("POST", "/v1/templates", spec)
    assert r.status == 400, (spec, r.body)
    assert words in r.json()["error"]["message"], (spec, r.body)


def probe_wheel():
    """A pure-Python wheel made here with the standard library: tplprobe 1.0."""
    files = {
        "tplprobe/__init__.py": b"VALUE = 'wheel-ok'\n",
        "tplprobe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tplprobe\nVersion: 1.0\n",
        "tplprobe-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: brig-test\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    files["tplprobe-1.0.dist-info/RECORD"] = (record + "tplprobe-1.0.dist-info/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def probe_deb(name="brig-tplprobe", files=None, depends=None):
    """A .deb made with dpkg-deb: by default brig-tplprobe, one file, no dependency."""
    if files is None:
        files = {"usr/share/brig-tplprobe/hello": (b"deb-ok\n", 0o644)}
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "pkg")
        os.makedirs(os.path.join(root, "DEBIAN"))
        with open(os.path.join(root, "DEBIAN/control"), "w") as f:
            f.write(f"Package: {name}\nVersion: 1.0\nArchitecture: all\n"
                    + (f"Depends: {depends}\n" if depends else "")
                    + "Maintainer: brig tests <tests@invalid>\nDescription: a probe\n")
        for path, (data, mode) in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "wb") as f:
                f.write(data)
            os.chmod(os.path.join(root, path), mode)
        out = os.path.join(d, "probe.deb")
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, out],
                       check=True, capture_output=True)
        with open(out, "rb") as f:
            return f.read()


def probe_npm(package=None, files=None):
    """An npm package tarball (npm pack's layout): by default brig-tplprobe-npm, a bin."""
    package = package or {"name": "brig-tplprobe-npm", "version": "1.0.0",
                          "bin": {"brig-tplprobe-npm": "cli.js"}}
    files = files or {"cli.js": b"#!/usr/bin/env node\nconsole.log('npm-ok');\n"}
    files = {"package.json": json.dumps(package).encode(), **files}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo("package/" + name)
            info.size, info.mode = len(data), 0o755
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.base
def test_apt_pip_and_npm_packages_from_uploaded_files_on_base(api, templates):
    name = unique()
    t0 = time.monotonic()
    templates({"name": name, "from": "base",
               "files": [{"path": "/tmp/pkgs/brig-tplprobe_1.0_all.deb", "content_b64": b64(probe_deb())},
                         {"path": "/tmp/pkgs/tplprobe-1.0-py3-none-any.whl",
                          "content_b64": b64(probe_wheel())},
                         {"path": "/tmp/pkgs/brig-tplprobe-npm-1.0.0.tgz",
                          "content_b64": b64(probe_npm())}],
               "apt": ["/tmp/pkgs/brig-tplprobe_1.0_all.deb"],
               "pip": ["/tmp/pkgs/tplprobe-1.0-py3-none-any.whl"],
               "npm": ["/tmp/pkgs/brig-tplprobe-npm-1.0.0.tgz"],
               "run": ["rm -rf /tmp/pkgs"]}, expect=(201,))
    print(f"built {name} from base in {time.monotonic() - t0:.2f} s")
    log = api.ok("GET", f"/v1/templates/{name}/log").json()["steps"]
    assert [s["kind"] for s in log] == ["apt", "pip", "npm", "run"]
    with Sandbox(api, name) as sb:
        r = sb.exec("cat /usr/share/brig-tplprobe/hello; dpkg -s brig-tplprobe | grep Status;"
                    " cd / && python3 -c 'import tplprobe; print(tplprobe.VALUE)';"
                    " brig-tplprobe-npm; test ! -e /tmp/pkgs && echo clean", timeout=60)
        assert r["exit_code"] == 0, r
        assert r["stdout"] == ("deb-ok\nStatus: install ok installed\nwheel-ok\nnpm-ok\nclean\n"), r


def test_answers_match_the_openapi_document(api, templates, node):
    """Every answer of these routes against docs/openapi.json's schemas (strict: a field
    brigd sends that the document does not list fails)."""
    c = Checker(api)
    name = unique()
    spec = {"name": name, "tag": "v2", "from": "minimal", "run": ["echo x > /x"],
            "env": {"A": "b"}, "workdir": "/w", "start": "sleep 100", "ready": {"command": "true"}}
    c.call("POST", "/v1/templates", spec, expect=201)
    templates(spec, expect=(200,))  # deleted after the test
    c.call("POST", "/v1/templates", spec, expect=200)
    c.call("POST", "/v1/templates", {"name": unique(), "from": "minimal", "run": ["exit 7"]},
           expect=422)
    c.call("POST", "/v1/templates", {"name": "base"}, expect=400)
    c.call("GET", "/v1/templates", expect=200)
    c.call("GET", f"/v1/templates/{name}:v2", expect=200)
    c.call("GET", "/v1/templates/minimal", expect=200)
    c.call("GET", f"/v1/templates/{name}:v2/log", expect=200)
    c.call("GET", f"/v1/templates/{name}", expect=404)
    sb = c.call("POST", "/v1/sandboxes", {"template": f"{name}:v2"}, expect=201).json()
    c.call("DELETE", f"/v1/templates/{name}:v2", expect=409)
    api.delete(sb["id"])
    c.call("DELETE", f"/v1/templates/{name}:v2", expect=204)
    c.verify(node)


def test_gvisor_sandbox_of_a_user_template(gvisor_api, templates):
    name = unique()
    templates({"name": name, "from": "minimal", "run": ["echo g > /g", "rm /etc/hostname"],
               "env": {"G": "1"}, "workdir": "/w"}, a=gvisor_api, expect=(201,))
    with Sandbox(gvisor_api, name, isolation="gvisor") as sb:
        r = sb.exec("pwd; cat /g; echo $G; test -e /etc/hostname || echo gone")
        assert r["stdout"] == "/w\ng\n1\ngone\n", r


def test_a_build_under_gvisor(gvisor_api, daemon, templates):
    """"isolation": "gvisor" builds in a gVisor sandbox: its writes go through runsc's gofer
    into the host's writable layer (--overlay2=none for the build's sandbox alone; the
    session brigd keeps runsc_overlay's default, self, where they would be out of reach),
    and the layer is the same as a container build's: files, removals, owners."""
    api = gvisor_api
    name = unique()
    spec = {"name": name, "from": "minimal", "isolation": "gvisor",
            "files": [{"path": "/opt/f", "content_b64": b64(b"from a file\n")}],
            "run": ["echo made > /made && mkdir -p /home/u && echo u > /home/u/x",
                    "chown -R 1000:1000 /home/u && rm /etc/hostname",
                    "dmesg 2>/dev/null | grep -qi gvisor || cat /proc/version | grep -q ."]}
    r = api.request("POST", "/v1/templates?wait=0", spec)
    assert r.status == 202, r.body
    conn, resp = follow(api, r.headers["location"])
    *logs, end = [json.loads(line) for line in resp]
    conn.close()
    text = "".join(e["data"] for e in logs)
    assert "(gvisor)" in text.split("\n")[0], text
    assert end["state"] == "succeeded" and end["status"] == 201, end
    t = end["result"]
    try:
        for iso in ("container", "gvisor"):
            with Sandbox(api, t["ref"], isolation=iso) as sb:
                out = sb.exec("cat /made /opt/f /home/u/x; stat -c %u:%g /home/u/x /made;"
                              " test -e /etc/hostname || echo gone")
                assert out["stdout"] == "made\nfrom a file\nu\n1000:1000\n0:0\ngone\n", out
        # where it was built is not the template: the same spec in a container is cached
        c = templates(dict(spec, name=unique(), isolation="container"), expect=(200,)).json()
        assert c["key"] == t["key"] and c["cached"]
    finally:
        api.request("DELETE", f"/v1/templates/{t['ref']}")


def test_cli_builds_a_spec_file(api, tmp_path):
    brig = os.path.join(BUILD, "brig")
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)
    name = unique()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": name, "from": "minimal", "run": ["echo cli > /cli"]}))
    try:
        r = subprocess.run([brig, "template", "build", "--file", str(spec)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "==> step 1 (run): echo cli > /cli\n" in r.stderr, r.stderr  # the log, live
        key = api.ok("GET", f"/v1/templates/{name}").json()["key"]
        assert r.stdout == f"built {name}:latest (key {key})\n"
        r = subprocess.run([brig, "template", "build", "--file", "-"], env=env, input=spec.read_text(),
                           capture_output=True, text=True, timeout=300)
        assert r.stdout == f"built before: {name}:latest (key {key})\n", r.stderr
        r = subprocess.run([brig, "template", "ls"], env=env, capture_output=True, text=True)
        assert f"{name}:latest" in r.stdout
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"name": unique(), "from": "minimal", "run": ["exit 5"]}))
        r = subprocess.run([brig, "template", "build", "--file", str(bad)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 1 and "step 1 (run) exited with 5" in r.stderr, r.stderr
    finally:
        api.request("DELETE", f"/v1/templates/{name}")


def test_cli_template_show_log_and_rm(api, templates):
    """brig template show (readable, and --json as brigd answers), log (the kept steps as the
    live log showed them) and rm (refused while a sandbox of it runs)."""
    brig = os.path.join(BUILD, "brig")
    env = dict(os.environ, BRIG_URL=api.base_url, BRIG_API_KEY=api.key)

    def cli(*args):
        return subprocess.run([brig, *args], env=env, capture_output=True, text=True, timeout=120)

    a, b = unique("a"), unique("b")
    ta = templates({"name": a, "from": "minimal", "run": ["echo a > /a"]}, expect=(201,)).json()
    tb = templates({"name": b, "tag": "v1", "from": f"{a}:latest", "workdir": "/w",
                    "files": [{"path": "/f", "content_b64": b64(b"f")}],
                    "run": ["echo out-of-step-1", "printf no-newline; exit 0"]},
                   expect=(201,)).json()
    minimal = api.ok("GET", "/v1/templates/minimal").json()
    r = cli("template", "show", f"{b}:v1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[:3] == [f"template    {b}:v1", f"key         {tb['key']}", f"from        {a}:latest"]
    assert lines[3] == f"size        {tb['size_bytes'] / 2**20:.1f} MiB ({tb['size_bytes']} bytes of its own)"
    assert lines[4] == f"build time  {tb['build_ms'] / 1000:.1f} s"
    assert lines[5:7] == [f"built at    {tb['built_at']}", f"built by    {tb['built_by']}"]
    assert lines[7:10] == [f"layers      {b}:v1  {tb['key']}",
                           f"            {a}:latest  {ta['key']}",
                           f"            minimal  {minimal['key']} (built-in)"], r.stdout
    spec = json.loads(r.stdout.split("spec        ", 1)[1])
    assert spec == api.ok("GET", f"/v1/templates/{b}:v1").json()["spec"] and spec["workdir"] == "/w"
    r = cli("template", "show", "--json", f"{b}:v1")
    assert r.returncode == 0 and json.loads(r.stdout) == api.ok("GET", f"/v1/templates/{b}:v1").json()
    r = cli("template", "show", "minimal")
    assert r.stdout == f"template    minimal\nkey         {minimal['key']}\nbuilt       yes\n", r
    # the parent rebuilt: the child's layers say it was built on the older key
    ta2 = templates({"name": a, "from": "minimal", "run": ["echo A > /a"]}, expect=(201,)).json()
    r = cli("template", "show", f"{b}:v1")
    assert f"            {a}:latest  {ta['key']} (rebuilt since: now {ta2['key']})\n" in r.stdout
    assert "(built-in)" not in r.stdout
    r = cli("template", "log", f"{b}:v1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    steps = api.ok("GET", f"/v1/templates/{b}:v1/log").json()["steps"]
    assert [s["exit_code"] for s in steps] == [0, 0]
    assert out.startswith(f"==> step 1 (run): echo out-of-step-1\nout-of-step-1\n==> step 1: exit "
                          f"code 0 ({steps[0]['duration_ms']} ms)\n"), out
    assert "==> step 2 (run): printf no-newline; exit 0\nno-newline\n==> step 2: exit code 0" in out
    r = cli("template", "log", "--json", f"{b}:v1")
    assert json.loads(r.stdout)["steps"] == steps
    for cmd in ("show", "log", "rm"):
        r = cli("template", cmd, f"{b}:nosuch")
        assert r.returncode == 1 and "(HTTP 404 not_found)" in r.stderr, (cmd, r)
    with Sandbox(api, f"{b}:v1"):
        r = cli("template", "rm", f"{b}:v1")
        assert r.returncode == 1 and "(HTTP 409 conflict)" in r.stderr, r
    r = cli("template", "rm", f"{b}:v1")
    assert r.returncode == 0 and r.stdout == "", r
    assert api.request("GET", f"/v1/templates/{b}:v1").status == 404


def followed_sandbox(api, r):
    return api.ok("GET", r.headers["location"]).json()["sandbox_id"]


def test_brigd_stopped_during_a_build_fails_it_cleanly(fresh_daemon):
    d = fresh_daemon.start()
    api = d.api()
    name = unique()
    answer = {}

    def build():
        try:
            answer["r"] = api.request("POST", "/v1/templates", {
                "name": name, "from": "minimal",
                "run": ["echo partial > /partial; touch /tmp/in-step; exec sleep 600"]},
                timeout=300)
        except ConnectionError as e:  # the server closed it: its answer raced the close
            answer["r"] = e

    # a second build, followed (wait=0): its follower gets the end, failed, before the close
    r2 = api.ok("POST", "/v1/templates?wait=0", {
        "name": unique(), "from": "minimal", "run": ["echo in-step-2; exec sleep 600"]},
        expect=(202,))
    followed, in_step_2 = [], threading.Event()

    def follower():
        try:
            conn, resp = follow(api, r2.headers["location"])
            for line in resp:
                followed.append(json.loads(line))
                if "in-step-2\n" in followed[-1].get("data", ""):
                    in_step_2.set()
            conn.close()
        except (ConnectionError, http.client.HTTPException) as e:
            followed.append(e)
        in_step_2.set()

    f = threading.Thread(target=follower)
    f.start()
    assert in_step_2.wait(60), followed
    t = threading.Thread(target=build)
    t.start()
    # the build's sandbox is a sandbox of the account: wait until its step runs
    sid = wait_for(lambda: next((s["id"] for s in api.ok("GET", "/v1/sandboxes").json()["sandboxes"]
                                 if s["id"] != followed_sandbox(api, r2)), None),
                   timeout=60, what="the build's sandbox")

    def in_step():  # 404 while it is still being created
        r = api.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "test -f /tmp/in-step"})
        return r.status == 200 and r.json()["exit_code"] == 0
    wait_for(in_step, timeout=60, what="the build's step")
    t0 = time.monotonic()
    d.stop(timeout=60)
    t.join(timeout=60)
    print(f"brigd stopped {time.monotonic() - t0:.2f} s into a build's step")
    r = answer["r"]
    print(f"the build's request got: {r if isinstance(r, Exception) else (r.status, r.body)}")
    # brigd answers 503 before its HTTP server closes the connections; a client may still
    # see the connection close first
    assert isinstance(r, ConnectionError) or (
        r.status == 503 and "brigd stopped during the build" in r.json()["error"]["message"]), r
    f.join(timeout=60)
    end = followed[-1]
    print(f"the follower's last event: {end}")
    assert isinstance(end, Exception) or (
        end["type"] == "end" and end["state"] == "failed" and end["status"] == 503 and
        "brigd stopped during the build" in end["error"]), end
    assert not d.live_sandboxes()
    d.start()
    api = d.api()
    assert api.request("GET", f"/v1/templates/{name}").status == 404
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
    tdir = os.path.join(d.state_dir, "templates")
    left = [os.path.join(p, f) for p, ds, fs in os.walk(tdir) for f in ds + fs] \
        if os.path.isdir(tdir) else []
    assert left == [], left
    # and builds work again
    built = api.ok("POST", "/v1/templates", {"name": name, "from": "minimal", "run": ["true"]})
    assert built.status == 201
    api.ok("DELETE", f"/v1/templates/{name}", expect=(204,))


def test_brigd_killed_during_a_build_leaves_nothing_after_its_restart(fresh_daemon):
    """SIGKILL: nothing answers, nothing stops the build's sandbox.  The next start
    re-attaches it like any sandbox, then ends it (it is marked as a build's: brigd's
    STATE/utpl-builds/), and removes what a layer being published left (planted here: a
    kill inside that moment is not something a test can aim at)."""
    d = fresh_daemon.start()
    api = d.api()
    name = unique()
    r = api.ok("POST", "/v1/templates?wait=0", {"name": name, "from": "minimal",
                                                "run": ["touch /tmp/in-step; exec sleep 600"]},
               expect=(202,))
    sid = wait_for(lambda: api.ok("GET", r.headers["location"]).json().get("sandbox_id"),
                   timeout=60, what="the build's sandbox")
    wait_for(lambda: api.request("POST", f"/v1/sandboxes/{sid}/exec",
                                 {"cmd": "test -f /tmp/in-step"}).json().get("exit_code") == 0,
             timeout=60, what="the build's step")
    assert os.listdir(os.path.join(d.state_dir, "utpl-builds")) == [sid]
    acct = api.ok("GET", "/v1/account").json()["id"]
    planted = os.path.join(d.state_dir, "templates", acct, ".0123456789abcdef-tmp_x", "rootfs")
    os.makedirs(os.path.join(planted, "etc"))
    d.stop(sig=signal.SIGKILL)
    assert d.live_sandboxes() == [sid]  # SIGKILL stops nothing
    d.start()
    api = d.api()
    assert api.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
    gone = api.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert gone["state"] == "deleted" and gone["end_reason"] == "brigd_restart", gone
    assert api.request("GET", f"/v1/templates/{name}").status == 404
    assert os.listdir(os.path.join(d.state_dir, "templates", acct)) == []
    assert not brigtest.leftovers(d.state_dir)
    assert "brigd died during it; sandbox ended" in d.log()


def test_a_sandbox_keeps_its_template_env_and_workdir_across_a_restart(fresh_daemon):
    d = fresh_daemon.start()
    api = d.api()
    name = unique()
    api.ok("POST", "/v1/templates", {"name": name, "from": "minimal", "workdir": "/w",
                                     "env": {"K": "v"}, "run": ["touch here"]})
    sid = api.create(name)["id"]
    d.stop()
    d.start()
    api = d.api()
    r = api.exec(sid, "pwd; ls; echo $K")
    assert r["stdout"] == "/w\nhere\nv\n", r
    api.delete(sid)
    api.ok("DELETE", f"/v1/templates/{name}", expect=(204,))


def test_layer_keeps_owners_but_no_setid_bits_devices_or_host_files(api, daemon, templates):
    minimal = next(t for t in api.ok("GET", "/v1/templates").json()["templates"]
                   if t["name"] == "minimal")
    group = os.path.join(os.environ.get("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates"),
                         "minimal", minimal["key"], "rootfs", "etc", "group")
    with open(group, "rb") as f:
        group_before = f.read()
    name = unique()
    t = templates({"name": name, "from": "minimal", "run": [
        "echo 'evil:x:4242:' >> /etc/group",
        "echo data > /owned && chown 1000:1000 /owned",
        "cp /bin/busybox /suid && chmod 4755 /suid",
        "ln -s /etc/shadow /link && mkfifo /fifo",
        "ln /bin/busybox /hardlink",
        "mkdir -p /etc2 && rm -rf /home && ln -s /etc2 /home",
        "mknod /dev-copy c 1 3 || true"]}, expect=(201,)).json()
    root = os.path.join(layer_dir(daemon, api, t["key"]), "rootfs")
    st = os.lstat(os.path.join(root, "owned"))
    assert (st.st_uid, st.st_gid) == (1000, 1000)  # the template's ids, not the sandbox's
    assert os.lstat(os.path.join(root, "suid")).st_mode & 0o7777 == 0o755
    assert os.readlink(os.path.join(root, "link")) == "/etc/shadow"
    assert os.readlink(os.path.join(root, "home")) == "/etc2"
    assert not os.path.exists(os.path.join(root, "dev-copy"))
    hl = os.lstat(os.path.join(root, "hardlink"))
    assert hl.st_nlink == 1  # a copy: never a link to a file outside the layer
    # the parent's files are shared (hard links), never changed
    passwd = os.lstat(os.path.join(root, "etc", "passwd"))
    assert passwd.st_nlink >= 2 and passwd.st_mode & 0o7777 == 0o644
    # a file the build changed is the layer's own copy: the parent's (hard-linked into
    # other layers too) is never written through
    with open(group, "rb") as f:
        assert f.read() == group_before
    with open(os.path.join(root, "etc", "group"), "rb") as f:
        assert f.read() == group_before + b"evil:x:4242:\n"
    with Sandbox(api, name) as sb:
        r = sb.exec("stat -c '%u %a' /owned /suid; test -p /fifo && echo fifo; readlink /home")
        assert r["stdout"] == "1000 644\n0 755\nfifo\n/etc2\n", r


@pytest.mark.base
def test_apt_and_npm_packages_by_name_where_the_registries_are_reachable(api, templates):
    """Packages by name from the real Debian mirror (the host's, in base's sources.list, as
    the builder wrote it) and the real npm registry, through the project's egress.  The
    suites here run in network namespaces without a route to either: then this test is
    skipped, saying so.  Packages by name are tested hermetically, always, in
    test_user_templates_net.py (a repository and a registry of the test's own); this one
    adds base's own apt sources and npm's default registry where a machine reaches them."""
    with Sandbox(api, "base") as sb:
        apt = sb.exec("apt-get update -o Acquire::Retries=0 -o Acquire::http::Timeout=5"
                      " >/dev/null 2>&1", timeout=60)
        npm = sb.exec("npm view is-number@7.0.0 version --fetch-retries=0 --fetch-timeout=10000",
                      timeout=60)
    if apt["exit_code"] != 0 or npm["stdout"].strip() != "7.0.0":
        pytest.skip("the Debian mirror or the npm registry is not reachable from a sandbox here")
    name = unique()
    templates({"name": name, "from": "base", "apt": ["hello"], "npm": ["is-number@7.0.0"]},
              expect=(201,))
    with Sandbox(api, name) as sb:
        r = sb.exec("hello; node -e \"console.log(require('/usr/local/lib/node_modules/is-number')(5))\"",
                    timeout=60)
        assert r["stdout"] == "Hello, world!\ntrue\n", r


def test_an_account_has_at_most_100_templates(api, daemon, templates):
    """Names of one layer (cache hits: cheap) up to the limit, then 429; a name it has may
    still be built again."""
    spec = {"from": "minimal", "run": ["true"]}
    have = [t for t in api.ok("GET", "/v1/templates").json()["templates"] if "ref" in t]
    first = unique("lim")
    templates({**spec, "name": first}, expect=(201,))
    for _ in range(100 - len(have) - 1):
        templates({**spec, "name": unique("lim")}, expect=(200,))
    r = api.request("POST", "/v1/templates", {**spec, "name": unique("lim")})
    assert r.status == 429 and "100 templates" in r.json()["error"]["message"], r.body
    templates({**spec, "name": first}, expect=(200,))
