"""Issue 15: a user template's `apt`, `npm` and `pip` packages BY NAME, from registries, through
the build project's egress policy (docs/templates.md, "Packages by name").

The suites run in network namespaces with no route to the Debian mirror or the npm
registry, so the registries are the test's own, in test_network.py's "internet"
(brigtest-inet): pkgs.test (198.51.100.60, in its DNS zone) serves a flat apt repository
(two .debs made here with dpkg-deb, one depending on the other, a Packages and a Release
file written here) at /debian/, and a minimal npm registry (metadata JSON at /npm/NAME
with dist.tarball, dist.integrity and dist.shasum, and the tarballs; one package depending
on the other) at /npm/, and a simple pip index (PEP 503: a page per project linking its
wheels with their SHA-256) at /pypi/simple/.  The spec points apt and npm at them through its
`files` (an /etc/apt/sources.list with `[trusted=yes]`, npm's global npmrc) and pip through
its `env` (PIP_INDEX_URL, PIP_TRUSTED_HOST: plain HTTP), as a user with a private mirror
would.  The build runs in a real brigd in the test host namespace (brigtest-host),
in a project whose egress allowlists pkgs.test only; the same spec in a project with
egress `none` fails at its apt step.
"""

import base64
import email.utils
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import brigtest  # noqa: E402
from test_network import (INET, OTHER, PKGS_ADDR, inet, sandbox_links,  # noqa: E402,F401
                          start_in_hostns, stopped_clean, table_elements)
from test_user_templates import b64, probe_deb, probe_npm, probe_wheel, unique  # noqa: E402

REGISTRY = r'''
import http.server, os, socketserver, sys
ROOT, LOG, ADDR = sys.argv[1:4]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(LOG, "a") as f: f.write(self.path + "\n")
        path = os.path.normpath("/" + self.path.split("?")[0]).lstrip("/")
        # a file as it is, else NAME.json as JSON (npm's package documents), else a
        # directory's index.html (pip's simple index)
        for p, ctype in ((path, "application/octet-stream"), (path + ".json", "application/json"),
                         (path + "/index.html", "text/html")):
            full = os.path.join(ROOT, p)
            if p and os.path.isfile(full):
                with open(full, "rb") as f: body = f.read()
                self.send_response(200); self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body))); self.end_headers()
                self.wfile.write(body)
                return
        self.send_error(404)
    def log_message(self, *a): pass
S = socketserver.ThreadingTCPServer  # not HTTPServer: no reverse lookup of our own address
S.daemon_threads = S.allow_reuse_address = True
s = S((ADDR, 80), H)
print("ready", flush=True)
s.serve_forever()
'''

URL = "http://pkgs.test"
SOURCES = f"deb [trusted=yes] {URL}/debian ./\n"
NPMRC = f"registry={URL}/npm/\n"


def apt_repo(root):
    """A flat repository: brig-tplprobe-app depends on brig-tplprobe (probe_deb's)."""
    debs = {"brig-tplprobe": probe_deb(),
            "brig-tplprobe-app": probe_deb(
                "brig-tplprobe-app", depends="brig-tplprobe",
                files={"usr/bin/brig-tplprobe-app":
                       (b"#!/bin/sh\necho app; cat /usr/share/brig-tplprobe/hello\n", 0o755)})}
    root.mkdir(parents=True)
    packages = ""
    for name, data in debs.items():
        fn = f"{name}_1.0_all.deb"
        (root / fn).write_bytes(data)
        control = subprocess.run(["dpkg-deb", "-f", str(root / fn)], check=True,
                                 capture_output=True, text=True).stdout
        packages += (control.rstrip("\n") + f"\nFilename: ./{fn}\nSize: {len(data)}\n"
                     f"SHA256: {hashlib.sha256(data).hexdigest()}\n\n")
    (root / "Packages").write_text(packages)
    p = packages.encode()
    (root / "Release").write_text(
        f"Origin: brig-tests\nLabel: brig-tests\nDate: {email.utils.formatdate(usegmt=True)}\n"
        f"SHA256:\n {hashlib.sha256(p).hexdigest()} {len(p)} Packages\n")


def npm_registry(root):
    """brig-tplprobe-npm (a bin) depends on brig-tplprobe-npmlib: two documents, two tarballs."""
    lib = ({"name": "brig-tplprobe-npmlib", "version": "1.0.0", "main": "index.js"},
           {"index.js": b"module.exports = 'npmlib-ok';\n"})
    cli = ({"name": "brig-tplprobe-npm", "version": "1.0.0", "bin": {"brig-tplprobe-npm": "cli.js"},
            "dependencies": {"brig-tplprobe-npmlib": "^1.0.0"}},
           {"cli.js": b"#!/usr/bin/env node\nconsole.log('npm-ok ' + require('brig-tplprobe-npmlib'));\n"})
    for package, files in (lib, cli):
        name, version = package["name"], package["version"]
        data = probe_npm(package, files)
        tgz = root / name / "-" / f"{name}-{version}.tgz"
        tgz.parent.mkdir(parents=True)
        tgz.write_bytes(data)
        dist = {"tarball": f"{URL}/npm/{name}/-/{tgz.name}",
                "shasum": hashlib.sha1(data).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}
        (root / f"{name}.json").write_text(json.dumps({
            "name": name, "dist-tags": {"latest": version},
            "versions": {version: {**package, "dist": dist}}}))


def pip_index(root):
    """A simple index (PEP 503) with one project, tplprobe: probe_wheel's wheel."""
    whl = probe_wheel()
    d = root / "simple" / "tplprobe"
    d.mkdir(parents=True)
    fn = "tplprobe-1.0-py3-none-any.whl"
    (d / fn).write_bytes(whl)
    (d / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="{fn}#sha256={hashlib.sha256(whl).hexdigest()}">'
        f"{fn}</a></body></html>\n")


@pytest.fixture(scope="module")
def registry(inet):
    """The registries on pkgs.test; yields the file of the paths they were asked for."""
    tmp = pathlib.Path(inet["tmp"])
    root = tmp / "registry"
    apt_repo(root / "debian")
    npm_registry(root / "npm")
    pip_index(root / "pypi")
    (tmp / "registry.py").write_text(REGISTRY)
    log = tmp / "registry.log"
    log.write_text("")
    p = subprocess.Popen(["ip", "netns", "exec", INET, "/usr/bin/python3", str(tmp / "registry.py"),
                          str(root), str(log), PKGS_ADDR], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield log
    p.kill()
    p.wait()


@pytest.fixture(scope="module")
def pkgd(inet):
    """A brigd of this module's own in the test host namespace."""
    d = brigtest.Brigd(os.path.join(inet["tmp"], "brigd-pkgs"))
    start_in_hostns(d)
    yield d
    stopped_clean(d)


def project_api(pkgd, egress):
    """An admin key of a new project with this egress policy: builds with it run there."""
    a = pkgd.net_api
    p = a.ok("POST", "/v1/projects", {"name": unique("pkgs")}).json()["id"]
    a.ok("PATCH", f"/v1/projects/{p}", {"egress": egress})
    key = a.ok("POST", f"/v1/projects/{p}/keys", {"scope": "admin"}).json()["key"]
    return type(a)(a.base_url, key)


@pytest.mark.base
def test_apt_and_npm_packages_by_name_from_registries_the_egress_allows(pkgd, registry):
    a = pkgd.net_api
    name = unique()
    spec = {"name": name, "from": "base",
            "files": [{"path": "/etc/apt/sources.list", "content_b64": b64(SOURCES.encode())},
                      {"path": "/usr/local/etc/npmrc", "content_b64": b64(NPMRC.encode())}],
            "apt": ["brig-tplprobe-app"], "npm": ["brig-tplprobe-npm"], "pip": ["tplprobe==1.0"],
            "env": {"PIP_INDEX_URL": f"{URL}/pypi/simple/", "PIP_TRUSTED_HOST": "pkgs.test"},
            # the egress reaches the registry only
            "run": [f"! curl -sS -m 2 http://other.test/ && ! curl -sS -m 2 http://{OTHER}/"]}
    try:
        # egress none: apt cannot reach the repository; the build says so at its apt step
        shut = project_api(pkgd, {"mode": "none"})
        r = shut.request("POST", "/v1/templates", spec, timeout=600)
        assert r.status == 422, r.body
        failed = r.json()["build"]
        assert failed["kind"] == "apt" and failed["exit_code"] != 0, failed
        assert "pkgs.test" in failed["output_tail"], failed  # apt-get update warns, goes on
        assert "Unable to locate package brig-tplprobe-app" in failed["output_tail"], failed
        assert registry.read_text() == ""
        assert a.request("GET", f"/v1/templates/{name}").status == 404

        builder = project_api(pkgd, {"mode": "allowlist", "domains": ["pkgs.test"]})
        t = builder.request("POST", "/v1/templates", spec, timeout=600)
        assert t.status == 201, t.body
        steps = a.ok("GET", f"/v1/templates/{name}/log").json()["steps"]
        assert [(s["kind"], s["exit_code"]) for s in steps] == [("apt", 0), ("pip", 0), ("npm", 0),
                                                                ("run", 0)]
        assert steps[0]["command"].startswith("export DEBIAN_FRONTEND=noninteractive; apt-get update")
        asked = registry.read_text().split()
        for path in ("/debian/Packages", "/debian/brig-tplprobe_1.0_all.deb",
                     "/debian/brig-tplprobe-app_1.0_all.deb", "/npm/brig-tplprobe-npm",
                     "/npm/brig-tplprobe-npmlib",
                     "/npm/brig-tplprobe-npm/-/brig-tplprobe-npm-1.0.0.tgz",
                     "/npm/brig-tplprobe-npmlib/-/brig-tplprobe-npmlib-1.0.0.tgz",
                     "/pypi/simple/tplprobe/", "/pypi/simple/tplprobe/tplprobe-1.0-py3-none-any.whl"):
            assert any(p.replace("/./", "/") == path for p in asked), (path, asked)

        # a sandbox of the template (the account's admin key, the default project)
        with brigtest.Sandbox(a, name) as sb:
            r = sb.exec("brig-tplprobe-app; dpkg -s brig-tplprobe | grep Status; brig-tplprobe-npm;"
                        " cd / && python3 -c 'import tplprobe; print(tplprobe.VALUE)';"
                        " ls -A /var/lib/apt/lists | wc -l", timeout=60)
            assert r["exit_code"] == 0, r
            assert r["stdout"] == ("app\ndeb-ok\nStatus: install ok installed\nnpm-ok npmlib-ok\n"
                                   "wheel-ok\n0\n"), r
    finally:
        a.request("DELETE", f"/v1/templates/{name}")
        for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
            a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
        brigtest.wait_for(lambda: sandbox_links() == [], what="sandbox links gone")
        brigtest.wait_for(lambda: table_elements() == [], what="firewall elements gone")
        assert not brigtest.leftovers(pkgd.state_dir)
