"""docs/openapi.json against brigd: a valid OpenAPI 3.1 document (checked by an npm
validator, tests/openapi), the same routes as brigd's route table both ways, served
byte for byte at GET /openapi.json, scopes and request fields as brigd enforces them,
and real answers that match the document's schemas (checked strictly: a field brigd
sends that the document does not list fails)."""

import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

from brigtest import BUILD, REPO, Api, Brigd, wait_for

DOC_PATH = os.path.join(REPO, "docs", "openapi.json")
NPM_DIR = os.path.join(REPO, "tests", "openapi")
CHECK = os.path.join(NPM_DIR, "check.mjs")
# brig's own Node.js (scripts/setup-node, like scripts/node-env): the host's node may be too old.
NODE_BIN = os.path.join(os.environ.get("BRIG_NODE_DIR") or "/usr/lib/brig/node", "bin")
NODE_ENV = dict(os.environ, PATH=NODE_BIN + os.pathsep + os.environ.get("PATH", ""))
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
SCOPES = ("public", "any", "admin", "operator", "admin+operator", "any+operator")
FAKE = {
    "sandbox_id": "sbx_" + "a" * 26,
    "pid": "1",
    "account_id": "acc_" + "a" * 26,
    "key_id": "key_" + "a" * 26,
    "secret_name": "NO_SUCH_SECRET",
    "template_name": "no-such-template",
    "build_id": "bld_" + "a" * 26,
    "file": "main.js",
    "volume_name": "no-such-volume",
    "snapshot_id": "snp_" + "a" * 26,
}


def load_doc():
    with open(DOC_PATH, "rb") as f:
        return json.loads(f.read())


DOC = load_doc()


def norm(pattern):
    """Path parameters are positional: /v1/sandboxes/{id} == /v1/sandboxes/{sandbox_id}."""
    return re.sub(r"\{[^}/]*\}", "{}", pattern)


def operations(doc=DOC):
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def resolve(node, doc=DOC):
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        parts = node["$ref"].lstrip("#/").split("/")
        node = doc
        for p in parts:
            node = node[p.replace("~1", "/").replace("~0", "~")]
    return node


def parameters(path, op):
    item = DOC["paths"][path]
    return [resolve(p) for p in item.get("parameters", []) + op.get("parameters", [])]


def json_body_schema(op):
    body = resolve(op.get("requestBody", {}))
    media = body.get("content", {}).get("application/json")
    return resolve(media["schema"]) if media else None


def find_op(method, url_path):
    """The document's operation for a concrete request path."""
    for m, path, op in operations():
        rx = "^" + re.sub(r"\\\{[^}/]*\\\}", "[^/]+", re.escape(path)) + "$"
        if m == method and re.match(rx, url_path):
            return path, op
    raise AssertionError(f"{method} {url_path}: no operation in docs/openapi.json")


def fill(path, project_id):
    def sub(m):
        name = m.group(1)
        return project_id if name == "project_id" else FAKE[name]
    return re.sub(r"\{([^}/]*)\}", sub, path)


# ---- the npm validator ------------------------------------------------------------------

def npm_ready():
    """Installs tests/openapi's locked packages when node_modules is missing or stale."""
    lock = os.path.join(NPM_DIR, "package-lock.json")
    installed = os.path.join(NPM_DIR, "node_modules", ".package-lock.json")
    stale = True
    if os.path.exists(installed):
        with open(lock) as a, open(installed) as b:
            want = {k: v.get("version") for k, v in json.load(a)["packages"].items() if k}
            have = {k: v.get("version") for k, v in json.load(b)["packages"].items() if k}
        stale = want != have
    if stale:
        r = subprocess.run([os.path.join(NODE_BIN, "npm"), "ci", "--prefix", NPM_DIR,
                            "--no-audit", "--no-fund"],
                           capture_output=True, text=True, timeout=600, env=NODE_ENV)
        assert r.returncode == 0, f"npm ci --prefix tests/openapi failed:\n{r.stdout}\n{r.stderr}"


@pytest.fixture(scope="module")
def node():
    npm_ready()

    def run(*args, stdin=None):
        return subprocess.run([os.path.join(NODE_BIN, "node"), CHECK, *args], input=stdin,
                              capture_output=True, text=True, timeout=300, cwd=NPM_DIR, env=NODE_ENV)
    return run


def test_document_is_valid_openapi_31(node):
    assert DOC["openapi"].startswith("3.1.")
    r = node("validate", DOC_PATH)
    assert r.returncode == 0, f"docs/openapi.json is invalid:\n{r.stdout}\n{r.stderr}"


def test_lock_file_names_no_registry():
    with open(os.path.join(NPM_DIR, ".npmrc")) as f:
        assert "omit-lockfile-registry-resolved=true" in f.read()
    with open(os.path.join(NPM_DIR, "package-lock.json")) as f:
        lock = f.read()
    assert '"resolved"' not in lock and "registry" not in lock


# ---- the document against the route table -----------------------------------------------

def brigd_routes():
    r = subprocess.run([os.path.join(BUILD, "brigd"), "--print-routes"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    routes = [tuple(l.split(None, 1)) for l in r.stdout.splitlines() if l.strip()]
    assert routes, "brigd --print-routes printed nothing"
    return routes


def test_routes_match_brigd_both_ways():
    routes = {(m, norm(p)) for m, p in brigd_routes()}
    documented = [(m, norm(p)) for m, p, _ in operations()]
    assert len(documented) == len(set(documented)), "two paths of the document are one route"
    missing = sorted(routes - set(documented))
    extra = sorted(set(documented) - routes)
    assert not missing, f"routes of brigd missing from docs/openapi.json: {missing}"
    assert not extra, f"operations in docs/openapi.json that brigd does not have: {extra}"


def test_operations_are_complete():
    """What the validator cannot see: path parameters declared, scopes stated, bodies strict."""
    ids = set()
    for method, path, op in operations():
        where = f"{method} {path}"
        assert op.get("operationId") and op["operationId"] not in ids, where
        ids.add(op["operationId"])
        scope = op.get("x-brig-scope")
        assert scope in SCOPES, f"{where}: x-brig-scope {scope!r}"
        assert "Scope:" in op.get("description", ""), f"{where}: no scope in the description"
        assert (op.get("security") == []) == (scope == "public"), where
        names = re.findall(r"\{([^}/]*)\}", path)
        params = parameters(path, op)
        declared = [p["name"] for p in params if p["in"] == "path"]
        assert sorted(declared) == sorted(names), f"{where}: path parameters {declared}"
        assert all(p["required"] for p in params if p["in"] == "path"), where
        statuses = set(op["responses"])
        assert any(s[0] in "23" for s in statuses), f"{where}: no success answer"
        if scope != "public":
            assert {"401", "403"} <= statuses, f"{where}: 401/403 not documented"
        for status, resp in op["responses"].items():
            resp = resolve(resp)
            if status[0] not in "23":
                schema = resp["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, f"{where} {status}"
        schema = json_body_schema(op)
        if schema is not None:
            assert schema.get("additionalProperties") is False, \
                f"{where}: brigd refuses unknown fields; say additionalProperties: false"


# ---- the live daemon ----------------------------------------------------------------------

def raw(api, method, path, body=None, key=..., headers=None):
    return api.request(method, path, body, key=key, headers=headers)


def test_served_document_is_the_file(daemon):
    api = daemon.api()
    r = raw(api, "GET", "/openapi.json", key=None)
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    with open(DOC_PATH, "rb") as f:
        want = f.read()
    assert r.body == want, ("brigd serves another docs/openapi.json than the file: rebuild it "
                            "(ninja -C build) after editing the document")


@pytest.fixture
def keys(daemon):
    """The three kinds of key: operator, the account's admin, and a sandbox key of the
    default project (revoked afterwards)."""
    admin = daemon.api()
    project = admin.ok("GET", "/v1/account").json()["default_project_id"]
    k = admin.ok("POST", f"/v1/projects/{project}/keys", {"scope": "sandbox"}).json()
    yield {"operator": daemon.operator_key, "admin": admin.key, "sandbox": k["key"],
           "project": project}
    admin.ok("DELETE", f"/v1/projects/{project}/keys/{k['id']}", expect=(204,))


def test_scopes_are_what_brigd_enforces(daemon, keys):
    """Each operation's x-brig-scope against brigd: no key is 401, a key of the wrong scope
    403 (brigd refuses both before the handler runs, so nothing happens)."""
    api = daemon.api()
    refused = {"operator": ("admin", "sandbox"), "admin": ("sandbox", "operator"),
               "any": ("operator",), "admin+operator": ("sandbox",), "any+operator": (),
               "public": ()}
    for method, path, op in operations():
        url = fill(path, keys["project"])
        scope = op["x-brig-scope"]
        if scope == "public":
            r = raw(api, method, url, key=None)
            success = [int(s) for s in op["responses"] if s[0] in "23"]
            assert r.status in success, (method, path, r.status, r.body[:300])
            continue
        r = raw(api, method, url, key=None)
        assert r.status == 401 and r.headers.get("www-authenticate") == "Bearer", \
            (method, path, r.status, r.body[:300])
        for who in refused[scope]:
            r = raw(api, method, url, key=keys[who])
            assert r.status == 403, f"{method} {path} is {scope!r}, but a {who} key got " \
                                    f"{r.status}: {r.body[:300]}"
            assert json.loads(r.body)["error"]["code"] == "forbidden"


def body_probe_key(op, keys):
    return keys["operator"] if op["x-brig-scope"] == "operator" else keys["admin"]


def test_request_fields_are_what_brigd_accepts(daemon, keys):
    """Both ways for JSON bodies: a field the document does not list is refused ('unknown
    field'), and every field it lists is known to brigd (a wrong value of it is refused for
    its value, never as unknown).  Ids in the paths are fakes and every probe carries a bad
    value, so nothing is created or changed."""
    api = daemon.api()
    bad = {"zz": [None]}  # the wrong type for every field brigd takes
    for method, path, op in operations():
        schema = json_body_schema(op)
        if schema is None:
            continue
        url, key = fill(path, keys["project"]), body_probe_key(op, keys)
        r = raw(api, method, url, {"zz_not_a_field": 1}, key=key)
        assert r.status == 400, (method, path, r.status, r.body[:300])
        assert "unknown field 'zz_not_a_field'" in json.loads(r.body)["error"]["message"]
        for name in schema.get("properties", {}):
            body = {name: bad}
            if op["operationId"] == "createSandbox" and name != "template":
                body["template"] = "no-such-template"  # refused before anything is made
            r = raw(api, method, url, body, key=key)
            msg = json.loads(r.body)["error"]["message"] if r.status >= 400 else ""
            assert r.status in (400, 404) and "unknown field" not in msg, \
                f"{method} {path}: documented field {name!r}: {r.status} {r.body[:300]}"


class Checker:
    """Calls brigd, checks each answer's status and content type against the document, and
    collects its JSON (and NDJSON lines) for the schema check by node."""

    def __init__(self, api):
        self.api = api
        self.checks = []

    def call(self, method, path, body=None, expect=None, headers=None, key=...):
        r = self.api.request(method, path, body, key=key, headers=headers)
        url_path = urllib.parse.urlsplit(path).path
        tpl, op = find_op(method, url_path)
        what = f"{method} {path} -> {r.status}"
        if expect is not None:
            assert r.status == expect, f"{what}: {r.body[:500]}"
        resp = op["responses"].get(str(r.status))
        assert resp is not None, f"{what}: status {r.status} is not documented for {method} {tpl}"
        resp = resolve(resp)
        ctype = r.headers.get("content-type", "").split(";")[0].strip()
        content = resp.get("content", {})
        if not content:
            assert r.body == b"", f"{what}: documented without a body, got {r.body[:200]}"
            return r
        assert ctype in content, f"{what}: content type {ctype!r} not in {sorted(content)}"
        schema = content[ctype].get("schema")
        if schema is not None and ctype == "application/json":
            self.checks.append({"what": what, "schema": schema, "instance": json.loads(r.body)})
        elif schema is not None and ctype == "application/x-ndjson":
            lines = r.body.decode().splitlines()
            assert lines, f"{what}: an empty stream"
            for i, line in enumerate(lines):
                self.checks.append({"what": f"{what} line {i + 1}", "schema": schema,
                                    "instance": json.loads(line)})
        return r

    def verify(self, node):
        assert self.checks
        r = node("instances", DOC_PATH, stdin=json.dumps(self.checks))
        assert r.returncode == 0, f"answers that do not match docs/openapi.json:\n{r.stdout}\n{r.stderr}"


def test_answers_match_the_schemas(api, daemon, node):
    c = Checker(api)
    c.call("GET", "/healthz", key=None, expect=200)
    c.call("GET", "/openapi.json", key=None, expect=200)
    c.call("GET", "/v1/tariffs", expect=200)
    c.call("GET", "/v1/templates", expect=200)
    account = c.call("GET", "/v1/account", expect=200).json()
    prj = account["default_project_id"]
    c.call("GET", "/v1/projects", expect=200)
    c.call("GET", f"/v1/projects/{prj}", expect=200)
    c.call("GET", f"/v1/projects/{prj}/secrets", expect=200)
    c.call("PATCH", "/v1/account", {}, expect=200)
    c.call("GET", "/v1/account/usage?days=3", expect=200)
    c.call("GET", "/v1/account/usage?days=0", expect=400)
    c.call("GET", "/v1/account/ledger?limit=0", expect=400)

    # The dashboard's files and the ways to them.
    assert c.call("GET", "/", key=None, expect=302).headers["location"] == "/ui/"
    assert c.call("GET", "/ui", key=None, expect=301).headers["location"] == "/ui/"
    c.call("GET", "/ui/", key=None, expect=200)
    c.call("GET", "/ui/main.js", key=None, expect=200)
    c.call("GET", "/ui/xterm.mjs", key=None, expect=200)
    c.call("GET", "/ui/xterm.css", key=None, expect=200)
    c.call("GET", "/ui/no-such-file.js", key=None, expect=404)

    # Errors: each one the shared Error shape, with a documented status.
    c.call("GET", "/v1/sandboxes", key=None, expect=401)
    c.call("GET", f"/v1/sandboxes/{FAKE['sandbox_id']}", expect=404)
    c.call("POST", "/v1/sandboxes", {"template": "minimal", "timout": 5}, expect=400)
    c.call("POST", "/v1/sandboxes", {"template": "no-such-template"}, expect=400)
    c.call("POST", "/v1/accounts", {"name": "x"}, expect=403)

    sb = c.call("POST", "/v1/sandboxes", {"template": "minimal", "env": {"K": "v"},
                                          "secrets": {"TOKEN": "s3cret-value"}}, expect=201).json()
    sid = sb["id"]
    try:
        base = f"/v1/sandboxes/{sid}"
        c.call("GET", "/v1/sandboxes", expect=200)
        c.call("GET", base, expect=200)
        c.call("POST", f"{base}/timeout", {"timeout": 600}, expect=200)
        c.call("POST", f"{base}/pause", expect=200)
        c.call("GET", "/v1/sandboxes", expect=200)
        c.call("POST", f"{base}/exec", {"cmd": "true"}, expect=409)
        c.call("POST", f"{base}/resume", {}, expect=200)
        snap = c.call("POST", f"{base}/snapshot", {"name": "openapi"}, expect=201).json()
        c.call("GET", "/v1/snapshots", expect=200)
        c.call("GET", f"/v1/snapshots/{snap['id']}", expect=200)
        forked = c.call("POST", f"{base}/fork", {"count": 1}, expect=201).json()
        c.call("DELETE", f"/v1/sandboxes/{forked['sandboxes'][0]['id']}", expect=204)
        c.call("DELETE", f"/v1/snapshots/{snap['id']}", expect=204)
        c.call("GET", f"/v1/snapshots/{snap['id']}", expect=404)
        c.call("GET", f"{base}/network-log", expect=200)
        c.call("GET", f"{base}/timeline?limit=2", expect=200)
        c.call("GET", f"{base}/timeline?limit=0", expect=400)
        c.call("GET", f"{base}/metrics", expect=200)
        c.call("GET", "/metrics", expect=200)
        c.call("GET", "/v1/audit?limit=3", expect=200)
        c.call("GET", "/v1/audit?since=never", expect=400)
        c.call("GET", "/v1/audit/verify", expect=200)

        # Commands: buffered (text and bytes), refused, streamed.
        c.call("POST", f"{base}/exec", {"cmd": "echo hi; echo oops >&2; exit 3"}, expect=200)
        r = c.call("POST", f"{base}/exec", {"argv": ["printf", "\\377\\000"]}, expect=200)
        assert r.json().get("stdout_encoding") == "base64"
        c.call("POST", f"{base}/exec", {"cmd": "true", "argv": ["true"]}, expect=400)
        c.call("POST", f"{base}/exec", {"cmd": "true", "cwd": "/no/such/dir"}, expect=400)
        r = c.call("POST", f"{base}/exec", {"cmd": "echo out; printf '\\377' >&2; echo $TOKEN"},
                   headers={"Accept": "application/x-ndjson"}, expect=200)
        assert r.headers["content-type"] == "application/x-ndjson"

        # A background process: its object, output (snapshot and followed), stdin, signals.
        p = c.call("POST", f"{base}/exec", {"cmd": "read line; echo got $line; sleep 0.2",
                                            "background": True}, expect=202).json()
        pid = p["pid"]
        pbase = f"{base}/processes/{pid}"
        c.call("GET", f"{base}/processes", expect=200)
        c.call("GET", pbase, expect=200)
        c.call("POST", f"{pbase}/stdin", b"hello\n", expect=200)
        c.call("POST", f"{pbase}/stdin/close", expect=204)
        c.call("POST", f"{pbase}/wait", {"timeout": 30}, expect=200)
        c.call("GET", f"{pbase}/output?follow=0", expect=200)
        c.call("GET", f"{pbase}/output", expect=200)
        c.call("POST", f"{pbase}/resize", {"cols": 80, "rows": 24}, expect=400)  # no pty
        c.call("GET", f"{base}/processes/999999", expect=404)
        p = c.call("POST", f"{base}/exec", {"cmd": "sleep 60", "background": True,
                                            "pty": {"cols": 80, "rows": 24}}, expect=202).json()
        c.call("POST", f"{base}/processes/{p['pid']}/resize", {"cols": 100, "rows": 30}, expect=204)
        c.call("POST", f"{base}/processes/{p['pid']}/signal", {"signal": "KILL"}, expect=204)
        wait_for(lambda: not api.ok("GET", f"{base}/processes/{p['pid']}").json()["running"],
                 what="the killed process to end")

        # Files.
        q = urllib.parse.urlencode
        c.call("PUT", f"{base}/files?{q({'path': '/root/d/f.txt', 'mode': '0600'})}", b"data\n",
               expect=204)
        r = c.call("GET", f"{base}/files?{q({'path': '/root/d/f.txt'})}", expect=200)
        assert r.body == b"data\n" and r.headers["x-brig-file-mode"] == "0600"
        c.call("GET", f"{base}/files?{q({'path': '/root/d/f.txt', 'stat': 1})}", expect=200)
        c.call("GET", f"{base}/files?{q({'path': '/root/d', 'list': 1})}", expect=200)
        c.call("GET", f"{base}/files?{q({'path': '/root/none'})}", expect=404)
        c.call("GET", f"{base}/files?{q({'path': 'relative'})}", expect=400)
        c.call("POST", f"{base}/files/mkdir", {"path": "/root/e", "mode": "0755"}, expect=201)
        c.call("POST", f"{base}/files/mkdir", {"path": "/root/e"}, expect=409)
        c.call("POST", f"{base}/files/move", {"from": "/root/d/f.txt", "to": "/root/e/g.txt"},
               expect=204)
        r = c.call("GET", f"{base}/files/tar?{q({'path': '/root/e'})}", expect=200)
        assert r.headers["content-type"] == "application/x-tar"
        c.call("PUT", f"{base}/files/tar?{q({'path': '/root/t'})}", r.body, expect=204)
        c.call("DELETE", f"{base}/files?{q({'path': '/root/e'})}", expect=409)
        c.call("DELETE", f"{base}/files?{q({'path': '/root/e', 'recursive': 1})}", expect=204)
    finally:
        c.call("DELETE", f"/v1/sandboxes/{sid}", expect=204)
    ended = c.call("GET", f"/v1/sandboxes/{sid}", expect=200).json()
    assert ended["state"] == "deleted" and ended["reason"] == "deleted_by_api"
    page = c.call("GET", "/v1/sandboxes?state=ended&limit=1", expect=200).json()
    assert [s["id"] for s in page["sandboxes"]] == [sid] and page["next_before"] == sid
    c.call("GET", "/v1/sandboxes?state=ended&limit=0", expect=400)
    c.call("GET", "/v1/sandboxes?state=gone", expect=400)
    c.call("GET", "/v1/account/ledger?limit=3", expect=200)
    c.verify(node)


def test_tenant_answers_match_the_schemas(daemon, node):
    """Accounts, projects, keys and secrets, in an account of the test's own."""
    op = daemon.operator()
    c = Checker(op)
    acc = c.call("POST", "/v1/accounts", {"name": "openapi-test"}, expect=201).json()
    c.call("POST", f"/v1/accounts/{acc['id']}/credits", {"amount_micro_usd": 5, "note": "t"},
           expect=200)
    c.call("POST", f"/v1/accounts/{FAKE['account_id']}/credits", {"amount_micro_usd": 5},
           expect=404)
    c.call("POST", f"/v1/accounts/{acc['id']}/credits", {"amount_micro_usd": 10**12 + 1},
           expect=400)
    c.call("PATCH", f"/v1/accounts/{acc['id']}", {"tariffs": ["small", "medium"],
                                                   "max_live_sandboxes": 3}, expect=200)
    c.call("PATCH", f"/v1/accounts/{acc['id']}", {"tariffs": None}, expect=200)
    c.call("PATCH", f"/v1/accounts/{acc['id']}", {"tariffs": ["no-such-tariff"]}, expect=400)
    c.call("PATCH", f"/v1/accounts/{FAKE['account_id']}", {"max_live_sandboxes": 1}, expect=404)
    c.call("GET", "/v1/account", expect=403)
    listed = c.call("GET", "/v1/accounts", expect=200).json()["accounts"]
    assert acc["id"] in [x["id"] for x in listed]
    a = Checker(Api(daemon.url, acc["api_key"]))
    a.checks = c.checks
    a.call("PATCH", "/v1/account", {"daily_limit_micro_usd": 1000, "monthly_limit_micro_usd": None},
           expect=200)
    p = a.call("POST", "/v1/projects", {"name": "openapi"}, expect=201).json()
    a.call("PATCH", f"/v1/projects/{p['id']}", {"name": "openapi2",
                                                "egress": {"mode": "allowlist",
                                                           "domains": ["example.com"],
                                                           "cidrs": ["10.0.0.0/8"],
                                                           "ports": [443]}}, expect=200)
    a.call("PATCH", f"/v1/projects/{p['id']}", {"egress": {"mode": "open", "ports": [1]}},
           expect=400)
    k = a.call("POST", f"/v1/projects/{p['id']}/keys", {"scope": "sandbox"}, expect=201).json()
    a.call("PUT", f"/v1/projects/{p['id']}/secrets/DB_PASSWORD", {"value": "hunter22"}, expect=204)
    a.call("GET", f"/v1/projects/{p['id']}/secrets", expect=200)
    a.call("GET", f"/v1/projects/{p['id']}", expect=200)
    a.call("DELETE", f"/v1/projects/{p['id']}/secrets/DB_PASSWORD", expect=204)
    a.call("DELETE", f"/v1/projects/{p['id']}/secrets/DB_PASSWORD", expect=404)
    a.call("DELETE", f"/v1/projects/{p['id']}/keys/{k['id']}", expect=204)
    a.call("DELETE", f"/v1/projects/{p['id']}/keys/{k['id']}", expect=404)
    a.call("GET", f"/v1/projects/{FAKE['account_id'].replace('acc', 'prj')}", expect=404)
    a.call("GET", "/v1/projects", expect=200)
    a.call("GET", "/v1/account", expect=200)

    # Volumes: made, mounted, listed, refused, deleted; a volume's charge in the ledger.
    v = a.call("POST", "/v1/volumes", {"name": "data", "size_mib": 16}, expect=201).json()
    a.call("POST", "/v1/volumes", {"name": "data", "size_mib": 16}, expect=409)
    a.call("POST", "/v1/volumes", {"name": "../x", "size_mib": 16}, expect=400)
    sb = a.call("POST", "/v1/sandboxes", {"template": "minimal", "volumes": [
        {"name": "data", "path": "/data", "read_only": False}]}, expect=201).json()
    a.call("GET", "/v1/volumes", expect=200)
    a.call("GET", f"/v1/volumes/data?project={p['id']}", expect=404)
    a.call("GET", f"/v1/volumes/{v['id']}", expect=200)
    a.call("DELETE", "/v1/volumes/data", expect=409)
    a.call("GET", f"/v1/sandboxes/{sb['id']}", expect=200)
    a.call("DELETE", f"/v1/sandboxes/{sb['id']}", expect=204)
    a.call("DELETE", "/v1/volumes/data", expect=204)
    a.call("GET", "/v1/volumes/data", expect=404)
    a.call("GET", "/v1/account/ledger?limit=5", expect=200)
    c.verify(node)


def test_template_build_answers_match_the_schemas(tmp_path, node):
    """A real build of minimal by a brigd of the test's own, into a template cache of its own
    (never the shared one): the 202 with its Location, the followed output, the record."""
    cache = tmp_path / "cache"
    cache.mkdir()
    d = Brigd(str(tmp_path / "state"), ["--template-cache", str(cache)]).start()
    try:
        c = Checker(d.operator())
        c.call("POST", "/v1/templates/no-such-template/build", expect=404)
        c.call("GET", f"/v1/templates/minimal/builds/{FAKE['build_id']}", expect=404)
        loc = c.call("POST", "/v1/templates/minimal/build", expect=202).headers["location"]
        lines = c.call("GET", f"{loc}?follow=1", expect=200).body.decode().splitlines()
        assert json.loads(lines[-1])["state"] == "succeeded", lines
        c.call("GET", loc, expect=200)
        c.call("GET", f"{loc}?follow=0", expect=200)
        c.verify(node)
    finally:
        d.stop()
        shutil.rmtree(cache, ignore_errors=True)
