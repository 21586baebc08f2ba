"""Credential injection (docs/secrets.md): brigd's egress proxy adds a project's
rule headers, with secret values the sandbox never holds, to requests toward the
rule's host, and refuses a secret's placeholder toward any other host.

The "internet" is test_network.py's (brigtest-inet, its DNS zone .test); this
module adds a server there that records the headers it receives, on api.test
(198.51.100.30) and second.test (198.51.100.40), HTTP on port 80 and HTTPS on
443 with certificates of a test CA of its own (which this module's brigd trusts
upstream through proxy_upstream_ca; the sandboxes do not).  wrong.test has
second.test's address, so its server shows a certificate for another name.  The
path /echo sends the request's Authorization header back in the body.
"""

import base64
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import brigtest  # noqa: E402
from test_network import (API_ADDR, HOST_ADDR, HOSTNS, INET, SECOND_ADDR,  # noqa: E402,F401
                          gateway, in_netns, inet, sandbox_links, sbexec, start_in_hostns,
                          stopped_clean, table_elements)

VALUE = "sk_live_7Hq2vN9xR4tLm8Pw3Zy6Kb1D"  # the real secret
RULE = {"host": "api.test", "headers": {"Authorization": "Bearer {{secret:API_KEY}}"}}

RECORDER = r'''
import http.server, json, socketserver, ssl, sys, threading
LOG = sys.argv[1]
DROPPED = set()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # its head and body go in two writes
    def body(self):
        if self.headers.get("Transfer-Encoding") != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))
        b = b""
        while True:
            n = int(self.rfile.readline().split(b";")[0], 16)
            if n == 0:
                while self.rfile.readline() not in (b"\r\n", b""): pass
                return b
            b += self.rfile.read(n); self.rfile.readline()
    def do_GET(self):
        got = self.body()
        with open(LOG, "a") as f:
            f.write(json.dumps({"server": self.server.server_address[0], "path": self.path,
                                "conn": self.client_address[1], "body": got.decode(),
                                "headers": dict(self.headers.items())}) + "\n")
        if self.path.startswith("/drop") and self.path not in DROPPED:
            DROPPED.add(self.path)  # the first time: the connection closes, no answer
            self.close_connection = True
            return
        body = ("auth=%s\n" % self.headers.get("Authorization", "")).encode() \
            if self.path.startswith("/echo") else b"ok\n"
        self.send_response(200)
        if self.path.startswith("/chunked"):
            self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            for part in (b"o", b"k\n", b""):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    do_POST = do_GET
    def do_HEAD(self):
        self.send_response(200); self.send_header("Content-Length", "3"); self.end_headers()
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
for spec in sys.argv[2:]:  # ADDR: HTTP on 80; ADDR:CERT:KEY: HTTPS on 443
    a, *tls = spec.split(":")
    s = S((a, 443 if tls else 80), H)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(*tls)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
'''


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(inet):
    """A test CA and a certificate of it for api.test and second.test."""
    d = pathlib.Path(inet["tmp"]) / "pki"
    d.mkdir(exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj",
            "/CN=brigtest upstream CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    for name in ("api.test", "second.test"):
        (d / f"{name}.ext").write_text(f"subjectAltName=DNS:{name}\n")
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                f"/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile",
                f"{name}.ext", cwd=d)
    return d


@pytest.fixture(scope="module")
def injd(inet, pki):
    """A brigd of this module's own in the test host namespace, trusting the test CA
    upstream (test_network's own brigd, module-scoped there, is not running now)."""
    cfg = pathlib.Path(inet["tmp"]) / "inject.conf"
    cfg.write_text(f"[brigd]\nproxy_upstream_ca = {pki / 'ca.pem'}\n")
    d = brigtest.Brigd(os.path.join(inet["tmp"], "brigd-inject"), ["--config", str(cfg)])
    start_in_hostns(d)
    yield d
    stopped_clean(d)


@pytest.fixture
def napi(injd):
    a = injd.net_api
    yield a
    for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
        if sb.get("state") not in ("deleted", "ended"):
            a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    brigtest.wait_for(lambda: sandbox_links() == [], what="sandbox links gone")
    brigtest.wait_for(lambda: table_elements() == [], what="firewall elements gone")
    assert not brigtest.leftovers(injd.state_dir)
    assert "ERROR: AddressSanitizer" not in injd.log()


@pytest.fixture(scope="module")
def recorder(inet, pki):
    tmp = pathlib.Path(inet["tmp"])
    (tmp / "recorder.py").write_text(RECORDER)
    log = tmp / "recorded.jsonl"
    log.write_text("")
    tls = [f"{a}:{pki / n}.pem:{pki / n}.key" for a, n in ((API_ADDR, "api.test"),
                                                         (SECOND_ADDR, "second.test"))]
    p = subprocess.Popen(["ip", "netns", "exec", INET, "/usr/bin/python3", str(tmp / "recorder.py"),
                          str(log), API_ADDR, SECOND_ADDR, *tls], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    yield log
    p.kill()
    p.wait()


def recorded(log):
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def hidden(value):
    """A Python expression for value that no redactor recognises (reversed base64)."""
    return f"__import__('base64').b64decode('{base64.b64encode(value.encode()).decode()[::-1]}'[::-1]).decode()"


def disk_image_holds(d, sb, needles):
    """Whether the sandbox's disk image (its writable layer, an ext4 image on the host)
    holds each of needles; only its allocated extents are read."""
    path = os.path.join(d.state_dir, "sandboxes", sb, "disk.img")
    want = {n: n.encode() for n in needles}
    found = dict.fromkeys(needles, False)
    keep = max(len(b) for b in want.values()) - 1
    with open(path, "rb") as f:
        fd, end, pos = f.fileno(), os.fstat(f.fileno()).st_size, 0
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # no data after pos
            hole = os.lseek(fd, pos, os.SEEK_HOLE)
            tail = b""
            while pos < hole:
                chunk = os.pread(fd, min(1 << 20, hole - pos), pos)
                buf = tail + chunk
                for n, b in want.items():
                    found[n] = found[n] or b in buf
                tail = buf[-keep:]
                pos += len(chunk)
    return found


def project_with_rule(napi, rules=(RULE,)):
    p = napi.ok("POST", "/v1/projects", {"name": "inject"}).json()["id"]
    napi.ok("PUT", f"/v1/projects/{p}/secrets/API_KEY", {"value": VALUE}, expect=(204,))
    r = napi.ok("PUT", f"/v1/projects/{p}/injections", {"rules": list(rules)}).json()
    assert r["rules"] == list(rules)
    return p


def test_rules_are_for_admin_keys_only(napi):
    p = project_with_rule(napi)
    assert napi.ok("GET", f"/v1/projects/{p}/injections").json()["rules"] == [RULE]
    k = napi.ok("POST", f"/v1/projects/{p}/keys", {"scope": "sandbox"}).json()["key"]
    sbk = type(napi)(napi.base_url, k)
    assert sbk.request("GET", f"/v1/projects/{p}/injections").status == 403
    assert sbk.request("PUT", f"/v1/projects/{p}/injections", {"rules": []}).status == 403
    for bad in ([{"host": "API.test", "headers": {"A": "b"}}],
                [{"host": "api.test", "headers": {"Host": "x"}}],
                [{"host": "api.test", "headers": {"A": "{{secret:bad name}}"}}],
                [{"host": "api.test", "headers": {"A": "x\r\nB: y"}}],
                [{"host": "api.test", "headers": {}}], {"host": "api.test"}):
        r = napi.request("PUT", f"/v1/projects/{p}/injections", {"rules": bad})
        assert r.status == 400, (bad, r.body)
        assert "error" in r.json()
    assert napi.ok("GET", f"/v1/projects/{p}/injections").json()["rules"] == [RULE]


@pytest.mark.base
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_injection_from_curl_python_and_node(injd, napi, recorder, scheme):
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    rc, ph = sbexec(napi, sb, "printenv API_KEY")
    assert rc == 0 and ph.startswith("brig-placeholder-"), ph
    ph = ph.strip()
    # over HTTPS, each client trusts the brig CA that signed the proxy's certificate
    # (the system store or the variables brigd sets), never the upstream's test CA
    u = f"{scheme}://api.test/"
    clients = {
        "curl": f'curl -sS -m 5 -H "Authorization: Bearer $API_KEY" {u}curl-{scheme}',
        "python": "python3 -c \"import os, urllib.request as u; print(u.urlopen(u.Request("
                  f"'{u}python-{scheme}', headers={{'Authorization': 'Bearer ' + "
                  "os.environ['API_KEY']}), timeout=5).read().decode())\"",
        "node": f"node -e \"fetch('{u}node-{scheme}', {{headers: {{Authorization: 'Bearer ' + "
                "process.env.API_KEY}}).then(r => r.text()).then(t => console.log(t))\"",
    }
    for name, cmd in clients.items():
        rc, out = sbexec(napi, sb, cmd)
        assert rc == 0 and out.strip() == "ok", (name, out)
        got = [r for r in recorded(recorder) if r["path"] == f"/{name}-{scheme}"]
        assert got and got[-1]["headers"]["Authorization"] == f"Bearer {VALUE}", (name, got)
    # the sandbox never held the value: no process's environment, no file it has
    scan = (f"import glob, os; v = {hidden(VALUE)}.encode(); n = 0\n"
            "for f in glob.glob('/proc/[0-9]*/environ'):\n"
            "    try: n += v in open(f, 'rb').read()\n"
            "    except OSError: pass\n"
            "for top in ('/tmp', '/root', '/home', '/etc', '/var', '/usr/local', '/opt'):\n"
            "    for d, _, fs in os.walk(top):\n"
            "        for f in fs:\n"
            "            try: n += v in open(os.path.join(d, f), 'rb').read()\n"
            "            except OSError: pass\n"
            "print(n)")
    r = napi.exec(sb, argv=["python3", "-c", scan], timeout=60)
    assert (r["exit_code"], r["stdout"].strip()) == (0, "0"), r
    # nor its disk image, read from the host: a marker the sandbox wrote is found there
    # (the scan can see what the sandbox's files hold), the value is not
    marker = f"brig-disk-marker-{os.urandom(8).hex()}"
    rc, out = sbexec(napi, sb, f"echo {marker} > /root/marker && sync && echo synced")
    assert out.strip() == "synced", out
    found = disk_image_holds(injd, sb, [marker, VALUE])
    assert found == {marker: True, VALUE: False}, found
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    used = [e for e in log if e["kind"] == "proxy" and e["verdict"] == "injected"]
    assert {e["path"] for e in used} >= {f"/{c}-{scheme}" for c in clients}, log
    assert {e["scheme"] for e in used} == {scheme}
    assert all(e["host"] == "api.test" and e["secrets"] == ["API_KEY"] for e in used)
    assert VALUE not in json.dumps(log)
    napi.delete(sb)


CA_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NPM_CONFIG_CAFILE",
           "NODE_EXTRA_CA_CERTS")
CA_CHECK = r"""
import json, os, sys
ca = open("/usr/local/share/ca-certificates/brig-egress-ca.crt").read().strip()
def holds(path):
    try:
        return ca in open(path).read()
    except OSError:
        return False
print(json.dumps({"ca": ca.startswith("-----BEGIN CERTIFICATE-----"),
                  "store": holds("/etc/ssl/certs/ca-certificates.crt"),
                  "vars": {v: [os.environ.get(v), holds(os.environ.get(v, "/nonexistent"))]
                           for v in sys.argv[1:]}}))
"""


@pytest.mark.base
def test_the_brig_ca_is_trusted_inside_and_its_key_sealed(injd, napi, recorder):
    """The brig CA is in the sandbox's system store and in the variables curl, Python,
    pip, npm and Node read; a client with none of those variables still trusts the
    proxy's certificate (the system store), which the brig CA issued; its key is
    nowhere in brigd's state in the clear."""
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    napi.put_file(sb, "/tmp/ca_check.py", CA_CHECK.encode())
    r = napi.exec(sb, argv=["python3", "/tmp/ca_check.py", *CA_VARS])
    assert r["exit_code"] == 0, r
    got = json.loads(r["stdout"])
    store = "/etc/ssl/certs/ca-certificates.crt"
    assert got["ca"] and got["store"], got
    assert got["vars"] == {v: [store, True] for v in CA_VARS[:-1]} | {
        "NODE_EXTRA_CA_CERTS": ["/usr/local/share/ca-certificates/brig-egress-ca.crt", True]}, got
    # npm and pip read theirs (what each says its setting is, and where it came from)
    rc, out = sbexec(napi, sb, "npm config get cafile")
    assert rc == 0 and out.strip() == store, out
    rc, out = sbexec(napi, sb, "python3 -m pip config debug")
    assert rc == 0 and f"PIP_CERT='{store}'" in out, out
    unset = " ".join(f"-u {v}" for v in CA_VARS)
    rc, out = sbexec(napi, sb, f"env {unset} curl -sS -v -m 5 -o /dev/null "
                               f"https://api.test/system-store 2>&1")
    assert rc == 0 and "issuer: O=brig; CN=brig egress proxy CA" in out, out
    rc, out = sbexec(napi, sb, f"env {unset} python3 -c \"import urllib.request as u; "
                               f"print(u.urlopen('https://api.test/system-py').read().decode())\"")
    assert out.strip() == "ok", out
    napi.delete(sb)
    for f in sorted(pathlib.Path(injd.state_dir).glob("*")):
        if f.is_file():
            assert b"PRIVATE KEY" not in f.read_bytes(), f


KEEPALIVE = r'''
import http.client, json, os, sys
scheme = sys.argv[1]
c = (http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection)(
    "api.test", timeout=5)
auth = {"Authorization": "Bearer " + os.environ["API_KEY"]}
out = []
def one(method, path, **kw):
    c.request(method, path, **kw)
    r = c.getresponse()
    out.append([r.status, r.read().decode(), c.sock.getsockname()[1] if c.sock else None])
one("GET", f"/keep-{scheme}-0", headers=auth)
one("POST", f"/keep-{scheme}-1", headers=auth, body="a body of some length")
one("POST", f"/chunked-{scheme}-2", headers=auth, body=iter([b"in ", b"chunks"]),
    encode_chunked=True)
one("HEAD", f"/keep-{scheme}-3", headers=auth)
one("GET", f"/drop-{scheme}-4", headers=auth)
one("GET", f"/keep-{scheme}-5", headers={"Host": "second.test", **auth})
print(json.dumps(out))
'''


@pytest.mark.base
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_one_connection_carries_several_requests(napi, recorder, scheme):
    """HTTP/1.1 keep-alive through the proxy: GET, POST with a length, POST in chunks
    (answered in chunks), HEAD on one sandbox connection, each injected, over one
    upstream connection; a request that meets the kept upstream connection's end is sent
    again on a new one; then another Host on the same connection: refused over TLS
    (421), a request of its own over plain HTTP (the placeholder toward second.test:
    403)."""
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    napi.put_file(sb, "/tmp/keep.py", KEEPALIVE.encode())
    r = napi.exec(sb, argv=["python3", "/tmp/keep.py", scheme], timeout=60)
    assert r["exit_code"] == 0, r
    out = json.loads(r["stdout"])
    assert [o[:2] for o in out[:5]] == [[200, "ok\n"], [200, "ok\n"], [200, "ok\n"], [200, ""],
                                        [200, "ok\n"]], out
    assert len({o[2] for o in out[:5]}) == 1, out  # the sandbox's one connection
    want = 421 if scheme == "https" else 403
    assert out[5][0] == want and out[5][2] is None, out  # refused, and closed after
    got = [x for x in recorded(recorder) if f"-{scheme}-" in x["path"]]
    assert [x["path"] for x in got] == [f"/keep-{scheme}-0", f"/keep-{scheme}-1",
                                        f"/chunked-{scheme}-2", f"/drop-{scheme}-4",
                                        f"/drop-{scheme}-4"], got  # (HEAD: not recorded)
    assert all(x["headers"]["Authorization"] == f"Bearer {VALUE}" for x in got), got
    assert [x["body"] for x in got[:3]] == ["", "a body of some length", "in chunks"], got
    # one upstream connection, and a new one for the request sent again
    assert len({x["conn"] for x in got[:4]}) == 1 and got[4]["conn"] != got[3]["conn"], got
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    used = [e["path"] for e in log if e["kind"] == "proxy" and e["verdict"] == "injected"]
    assert used == [f"/keep-{scheme}-{i}" for i in (0, 1)] + [
        f"/chunked-{scheme}-2", f"/keep-{scheme}-3", f"/drop-{scheme}-4"], log
    napi.delete(sb)


BOUND = r"""
import http.client, json
c = http.client.HTTPSConnection("api.test", timeout=5)
ports, statuses = [], set()
for i in range(1001):
    c.request("GET", "/bound")
    try:
        r = c.getresponse()
    except Exception as e:
        raise SystemExit(f"request {i}: {e!r}")
    r.read()
    statuses.add(r.status)
    ports.append(c.sock.getsockname()[1] if c.sock else None)
print(json.dumps({"statuses": sorted(statuses), "ports": ports}))
"""


@pytest.mark.base
def test_a_connection_carries_at_most_1000_requests(napi, recorder):
    """The 1000th request of a kept-alive connection is asked upstream with Connection:
    close, whose answer tells the client: it opens a new connection for the 1001st."""
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    napi.put_file(sb, "/tmp/bound.py", BOUND.encode())
    r = napi.exec(sb, argv=["python3", "/tmp/bound.py"], timeout=120)
    assert r["exit_code"] == 0, r["stderr"]
    got = json.loads(r["stdout"])
    assert got["statuses"] == [200], got["statuses"]
    ports = got["ports"]
    assert len(set(ports[:999])) == 1 and ports[999] is None and ports[1000] not in (None, ports[0])
    napi.delete(sb)


CAP = r"""
import json, socket
REQ = b"GET /cap-%d HTTP/1.1\r\nHost: api.test\r\n\r\n"
def ask(s, i):
    s.sendall(REQ % i)
    try:
        return s.recv(4096).split(b"\r\n")[0].decode()
    except ConnectionResetError:
        return "reset"
socks = [socket.create_connection(("api.test", 80), timeout=10) for _ in range(64)]
# the 65th: accepted by the kernel, then closed by the proxy before it reads a byte
extra = socket.create_connection(("api.test", 80), timeout=10)
over = ask(extra, 65) or "closed"
# the 64 are live, each answered on its own connection
answers = [ask(s, i) for i, s in enumerate(socks)]
for s in socks + [extra]:
    s.close()
print(json.dumps({"over": over, "answers": sorted(set(answers))}))
"""


def brigd_counts(d):
    """brigd's threads and open file descriptors."""
    pid = d.proc.pid
    return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.base
def test_the_65th_connection_is_refused_and_nothing_leaks(injd, napi, recorder):
    """A sandbox has at most 64 connections through the proxy at once: the 65th is
    closed at once (no answer, no hang), the 64 are served, and once they are closed
    brigd's threads and descriptors are back where they were and new connections are
    served again."""
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    napi.put_file(sb, "/tmp/cap.py", CAP.encode())
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 http://api.test/warm')  # the proxy's first use
    assert out.strip() == "ok", out
    before = brigd_counts(injd)
    r = napi.exec(sb, argv=["python3", "/tmp/cap.py"], timeout=60)
    assert r["exit_code"] == 0, r
    got = json.loads(r["stdout"])
    assert got == {"over": "closed", "answers": ["HTTP/1.1 200 OK"]} or \
        got == {"over": "reset", "answers": ["HTTP/1.1 200 OK"]}, got
    assert len([x for x in recorded(recorder) if x["path"].startswith("/cap-")]) == 64
    brigtest.wait_for(lambda: brigd_counts(injd) <= before, timeout=20,
                      what=f"brigd's threads and fds back to {before}")
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 http://api.test/after')
    assert out.strip() == "ok", out
    napi.delete(sb)


@pytest.mark.base
def test_connect_from_a_client_told_to_use_the_proxy(napi, recorder):
    """A client with a proxy variable (or -x) sends CONNECT to the proxy on its gateway:
    toward port 443 of a host with a rule it is a tunnel, intercepted and injected like
    the transparent path; toward a host without a rule, or another port, a 403 that says
    why (logged)."""
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    proxy = f"http://{gateway(napi, sb)}:15080"
    rc, out = sbexec(napi, sb, f'curl -sS -m 5 -x {proxy} -H "Authorization: Bearer $API_KEY" '
                               f'https://api.test/connect-curl')
    assert rc == 0 and out.strip() == "ok", out
    py = ("python3 -c \"import os, urllib.request as u; print(u.urlopen(u.Request("
          "'https://api.test/connect-python', headers={'Authorization': 'Bearer ' + "
          "os.environ['API_KEY']}), timeout=5).read().decode())\"")
    rc, out = sbexec(napi, sb, f"HTTPS_PROXY={proxy} {py}")
    assert rc == 0 and out.strip() == "ok", out
    for name in ("curl", "python"):
        got = [r for r in recorded(recorder) if r["path"] == f"/connect-{name}"]
        assert got and got[-1]["headers"]["Authorization"] == f"Bearer {VALUE}", (name, got)
    for target in ("https://second.test/no-rule", "https://api.test:8443/other-port"):
        rc, out = sbexec(napi, sb, f'curl -sS -m 5 -x {proxy} {target}')
        assert rc != 0 and "CONNECT tunnel failed, response 403" in out, (target, out)
    # under an allowlist the name CONNECT gives is what the list must hold (the sandbox
    # asked its DNS nothing)
    for domains, want in ((["api.test"], "ok"), (["other.test"], "response 403")):
        napi.ok("PATCH", f"/v1/projects/{p}", {"egress": {"mode": "allowlist",
                                                          "domains": domains}})
        rc, out = sbexec(napi, sb, f'curl -sS -m 5 -x {proxy} https://api.test/connect-allow')
        assert want in out, (domains, out)
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    refused = [e for e in log if e["kind"] == "proxy" and e["verdict"] == "refused"]
    assert [e["method"] for e in refused] == ["CONNECT"] * 3, log
    assert all("CONNECT goes only to port 443" in e["reason"] for e in refused[:2]), refused
    assert "egress policy" in refused[2]["reason"], refused
    used = [e for e in log if e["kind"] == "proxy" and e["verdict"] == "injected"]
    assert {e["path"] for e in used} == {"/connect-curl", "/connect-python", "/connect-allow"}, log
    assert {e["scheme"] for e in used} == {"https"}, log
    napi.delete(sb)


@pytest.mark.base
def test_placeholder_toward_another_host_is_refused_and_logged(napi, recorder):
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    before = len(recorded(recorder))
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 -w "%{http_code}" -H "X-Key: $API_KEY" '
                               'http://second.test/steal')
    assert out.endswith("403") and "placeholder of API_KEY" in out, out
    # the address of another host with api.test's name: no injection either
    rc, out = sbexec(napi, sb, f'curl -sS -m 5 -w "%{{http_code}}" -H "Host: api.test" '
                               f'http://{SECOND_ADDR}/spoof')
    assert out.endswith("403") and "does not resolve" in out, out
    assert not [r for r in recorded(recorder)[before:] if r["path"] in ("/steal", "/spoof")]
    # without a placeholder, a host without a rule is reached untouched
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 -H "Authorization: Bearer mine" http://second.test/plain')
    assert out.strip() == "ok", out
    plain = [r for r in recorded(recorder) if r["path"] == "/plain"][-1]
    assert plain["headers"]["Authorization"] == "Bearer mine"
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    refused = [e for e in log if e["kind"] == "proxy" and e["verdict"] == "refused"]
    assert any(e["host"] == "second.test" and e["path"] == "/steal" for e in refused), log
    napi.delete(sb)


@pytest.mark.base
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_an_echoed_secret_is_masked_before_the_sandbox_sees_it(napi, recorder, scheme):
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    # into a file, not stdout: the exec output's own redactor must not be what hides it
    rc, out = sbexec(napi, sb, f"curl -sS -m 5 -o /tmp/echo {scheme}://api.test/echo && "
                               f"python3 -c \"d = open('/tmp/echo').read(); "
                               f"print(len(d), {hidden(VALUE)} in d, '[REDACTED:API_KEY]' in d)\"")
    assert rc == 0 and out.split() == [str(len(f"auth=Bearer {VALUE}\n")), "False", "True"], out
    napi.delete(sb)


@pytest.mark.base
def test_rules_apply_to_running_sandboxes_and_stop_when_removed(napi, recorder):
    p = project_with_rule(napi, rules=())
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    rc, out = sbexec(napi, sb, "printenv API_KEY")
    assert out.strip() == VALUE.replace(VALUE, "[REDACTED:API_KEY]"), out  # plain env: no rule
    napi.ok("PUT", f"/v1/projects/{p}/injections", {"rules": [RULE]})
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 -H "Authorization: x" http://api.test/late')
    assert out.strip() == "ok", out
    assert [r for r in recorded(recorder) if r["path"] == "/late"][-1]["headers"][
        "Authorization"] == f"Bearer {VALUE}"
    napi.ok("PUT", f"/v1/projects/{p}/injections", {"rules": []})
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 -H "Authorization: x" http://api.test/off')
    assert out.strip() == "ok", out
    assert [r for r in recorded(recorder) if r["path"] == "/off"][-1]["headers"][
        "Authorization"] == "x"
    napi.delete(sb)


@pytest.mark.base
def test_https_without_a_rule_is_relayed_untouched_and_a_bad_upstream_refused(napi, recorder):
    wrong = {"host": "wrong.test", "headers": {"Authorization": "Bearer {{secret:API_KEY}}"}}
    p = project_with_rule(napi, rules=(RULE, wrong))
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    # second.test has no rule: its own certificate (the test CA's, which the sandbox
    # does not trust: -k) reaches the sandbox, and its headers are the sandbox's
    rc, out = sbexec(napi, sb, 'curl -sS -kv -m 5 -H "Authorization: Bearer mine" '
                               'https://second.test/relayed')
    assert rc == 0 and "brigtest upstream CA" in out and out.startswith("ok\n"), out
    got = [r for r in recorded(recorder) if r["path"] == "/relayed"][-1]
    assert got["headers"]["Authorization"] == "Bearer mine"
    # wrong.test's server shows a certificate for second.test: the proxy refuses it
    before = len(recorded(recorder))
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 -w "%{http_code}" https://wrong.test/bad')
    assert out.endswith("502") and "does not verify" in out, out
    assert not [r for r in recorded(recorder)[before:] if r["path"] == "/bad"]
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    assert any(e["kind"] == "proxy" and e["verdict"] == "refused" and e["host"] == "wrong.test"
               for e in log), log
    # the SNI names the rule's host, the Host header another: refused
    rc, out = sbexec(napi, sb, 'curl -sS -m 5 -w "%{http_code}" -H "Host: second.test" '
                               'https://api.test/mixed')
    assert out.endswith("421"), out
    napi.delete(sb)


def with_temp_rule(napi):
    """A sandbox of a project whose rules also inject TEMP_KEY (a project secret the
    sandbox does not hold: for grants) as X-Temp, and a curl that sends $TEMP_KEY as
    X-Temp to a path of api.test and prints the status."""
    temp = {"host": "api.test", "headers": {"X-Temp": "{{secret:TEMP_KEY}}"}}
    p = project_with_rule(napi, rules=(RULE, temp))
    napi.ok("PUT", f"/v1/projects/{p}/secrets/TEMP_KEY", {"value": "tmp_4Xk9Qw2Lr7Zp"},
            expect=(204,))
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    return sb, 'curl -sS -m 5 -w " %{http_code}" -H "X-Temp: $TEMP_KEY" http://api.test/'


@pytest.mark.base
def test_per_step_credentials_expire(napi, recorder):
    sb, curl = with_temp_rule(napi)

    def step(path, creds=None):
        body = {"cmd": curl + path + '; echo " $TEMP_KEY"'}
        if creds is not None:
            body["credentials"] = creds
        return napi.ok("POST", f"/v1/sandboxes/{sb}/exec", body).json()

    # granted for this step (the project's secret of that name), a placeholder in the env
    r = step("granted", {"TEMP_KEY": {"ttl_seconds": 1}})
    assert " 200 brig-placeholder-" in r["stdout"], r
    assert [x for x in recorded(recorder) if x["path"] == "/granted"][-1]["headers"][
        "X-Temp"] == "tmp_4Xk9Qw2Lr7Zp"
    # a second of life: its expiry is recorded when it comes, with no request made
    # (the proxy's timer), then the proxy refuses, and says why

    def proxy_log(verdict):
        log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
        return [e for e in log if e["kind"] == "proxy" and e["verdict"] == verdict]
    brigtest.wait_for(lambda: proxy_log("expired"), timeout=10, what="the expiry recorded")
    assert not any("expired" in e.get("reason", "") for e in proxy_log("refused"))
    r = step("later")
    assert " 403 " in r["stdout"] and "TEMP_KEY expired" in r["stdout"], r
    # a value given just for this step
    r = step("inline", {"TEMP_KEY": {"ttl_seconds": 60, "value": "given-just-now-77"}})
    assert " 200 " in r["stdout"], r
    assert [x for x in recorded(recorder) if x["path"] == "/inline"][-1]["headers"][
        "X-Temp"] == "given-just-now-77"
    # names no rule uses, the sandbox's own secrets, bad TTLs: 400 before anything runs
    for creds in ({"OTHER": {"ttl_seconds": 5}}, {"API_KEY": {"ttl_seconds": 5}},
                  {"TEMP_KEY": {"ttl_seconds": 0}}, {"TEMP_KEY": {"ttl": 5}}, {"TEMP_KEY": 5}):
        rr = napi.request("POST", f"/v1/sandboxes/{sb}/exec", {"cmd": "true", "credentials": creds})
        assert rr.status == 400, (creds, rr.body)
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    grants = [e for e in log if e["kind"] == "proxy" and e["verdict"] == "granted"]
    assert [g["secrets"] for g in grants] == [["TEMP_KEY"], ["TEMP_KEY"]], log
    # one expiry record for the first grant (the second lives on), also in the audit timeline
    expired = proxy_log("expired")
    assert [(e["secrets"], e["expires_at_ms"]) for e in expired] == [
        (["TEMP_KEY"], grants[0]["expires_at_ms"])], log
    brigtest.wait_for(lambda: [e for e in napi.ok(
        "GET", f"/v1/sandboxes/{sb}/timeline?limit=1000").json()["events"]
        if e["kind"] == "proxy.expired"], timeout=10, what="the expiry in the timeline")
    tl = napi.ok("GET", f"/v1/sandboxes/{sb}/timeline?limit=1000").json()["events"]
    assert [e["data"]["secrets"] for e in tl if e["kind"] == "proxy.expired"] == [["TEMP_KEY"]]
    assert {e["kind"] for e in tl} >= {"proxy.granted", "proxy.injected", "proxy.refused"}
    assert "tmp_4Xk9Qw2Lr7Zp" not in json.dumps(tl) and "given-just-now-77" not in json.dumps(tl)
    assert any(e["verdict"] == "refused" and "expired" in e["reason"] for e in log
               if e["kind"] == "proxy")
    assert "tmp_4Xk9Qw2Lr7Zp" not in json.dumps(log) and "given-just-now-77" not in json.dumps(log)
    napi.delete(sb)


@pytest.mark.base
def test_credentials_for_one_exec_only(napi, recorder):
    """"exec_only": the proxy injects the credential while the exec runs and stops when
    it ends (buffered and streamed), its end recorded with why; not for a background
    command, whose end brigd does not wait for."""
    from test_exec import events, stream
    sb, curl = with_temp_rule(napi)

    def sent(path):
        return [x for x in recorded(recorder) if x["path"] == path][-1]["headers"].get("X-Temp")

    once = {"TEMP_KEY": {"exec_only": True}}
    r = napi.ok("POST", f"/v1/sandboxes/{sb}/exec", {"cmd": curl + "once-1",
                                                     "credentials": once}).json()
    assert r["stdout"].endswith(" 200"), r
    assert sent("/once-1") == "tmp_4Xk9Qw2Lr7Zp"
    r = napi.ok("POST", f"/v1/sandboxes/{sb}/exec", {"cmd": curl + "after-1"}).json()
    assert " 403" in r["stdout"] and "TEMP_KEY expired" in r["stdout"], r
    # streamed, with a value of its own and a TTL that would outlive it
    with in_netns(HOSTNS):  # brigd's API is in the test host namespace
        conn, resp = stream(napi, f"/v1/sandboxes/{sb}/exec", {
            "cmd": curl + "once-2", "credentials": {"TEMP_KEY": {
                "exec_only": True, "ttl_seconds": 600, "value": "for-one-exec-55"}}})
        evs = list(events(resp))
        conn.close()
    out = "".join(e.get("data", "") for e in evs if e["type"] == "stdout")
    assert out.endswith(" 200") and evs[-1]["type"] == "exit", evs
    assert sent("/once-2") == "for-one-exec-55"
    r = napi.ok("POST", f"/v1/sandboxes/{sb}/exec", {"cmd": curl + "after-2"}).json()
    assert " 403" in r["stdout"] and "TEMP_KEY expired" in r["stdout"], r
    for bad in ({"cmd": "true", "background": True, "credentials": once},
                {"cmd": "true", "credentials": {"TEMP_KEY": {"exec_only": False}}},
                {"cmd": "true", "credentials": {"TEMP_KEY": {"exec_only": 1}}}):
        rr = napi.request("POST", f"/v1/sandboxes/{sb}/exec", bad)
        assert rr.status == 400 and "exec_only" in rr.json()["error"]["message"], (bad, rr.body)
    log = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    ended = [e for e in log if e["kind"] == "proxy" and e["verdict"] == "expired"]
    assert [(e["secrets"], e["reason"]) for e in ended] == [(["TEMP_KEY"], "its exec ended")] * 2
    assert "for-one-exec-55" not in json.dumps(log)
    brigtest.wait_for(lambda: len([e for e in napi.ok(
        "GET", f"/v1/sandboxes/{sb}/timeline?limit=1000").json()["events"]
        if e["kind"] == "proxy.expired"]) == 2, timeout=10, what="the ends in the timeline")
    napi.delete(sb)


@pytest.mark.base
def test_a_sandbox_reaches_only_its_own_proxy(injd, napi, recorder):
    p = project_with_rule(napi)
    a = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    b = napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    b_gw = gateway(napi, b)
    for port in (15080, 15443):  # b's proxy, from a: dropped (curl times out, 28)
        rc, out = sbexec(napi, a, f"curl -sS -m 2 -o /dev/null http://{b_gw}:{port}/")
        assert rc == 28, out
    # a's own, addressed directly, is the same proxy its redirect reaches: the policy
    # applies to where it would go (its own gateway: never), nothing is relayed
    a_gw = gateway(napi, a)
    rc, out = sbexec(napi, a, f"curl -sS -m 2 -w ' %{{http_code}}' http://{a_gw}:15080/")
    assert out.endswith(" 403") and "egress policy" in out, out
    # the admin side (brigd's API, where the rules are set): not reachable, neither
    # directly (dropped: curl times out) nor through the proxy (CONNECT refused, and a
    # request with its Host relayed nowhere)
    api_port = injd.url.rstrip("/").rsplit(":", 1)[1]
    for host in (a_gw, HOST_ADDR, "127.0.0.1"):
        rc, out = sbexec(napi, a, f"curl -sS -m 2 -o /dev/null http://{host}:{api_port}/healthz")
        assert rc in (7, 28), (host, rc, out)  # 127.0.0.1: the sandbox's own, refused
    rc, out = sbexec(napi, a, f"curl -sS -m 5 -x http://{a_gw}:15080 "
                              f"https://{a_gw}:{api_port}/v1/projects/{p}/injections")
    assert rc != 0 and "CONNECT tunnel failed, response 403" in out, out
    rc, out = sbexec(napi, a, f"curl -sS -m 5 -w ' %{{http_code}}' -H 'Host: {a_gw}:{api_port}' "
                              f"http://{a_gw}:15080/v1/projects/{p}/injections")
    assert out.endswith(" 403"), out
    napi.delete(a)
    napi.delete(b)


BENCH = r"""
import http.client, json, ssl, sys, time
scheme, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=sys.argv[4] if len(sys.argv) > 4 else None)
def conn():
    return (http.client.HTTPSConnection("api.test", context=ctx, timeout=5) if scheme == "https"
            else http.client.HTTPConnection("api.test", timeout=5))
kept = conn()
def one():
    c = kept if mode == "keep" else conn()
    t = time.perf_counter()
    c.request("GET", "/bench", headers={"Authorization": "Bearer x"}); r = c.getresponse()
    assert r.status == 200, r.status
    r.read()
    if mode != "keep":
        c.close()
    return (time.perf_counter() - t) * 1000
for _ in range(5): one()
print(json.dumps([one() for _ in range(n)]))
"""


def pct(xs, q):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * q))], 3)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmRSS:")))


@pytest.mark.base
@pytest.mark.skipif(os.environ.get("BRIG_BENCH_INJECT") != "1",
                    reason="a measurement (bench/inject_proxy.py, docs/benchmarks.md)")
def test_bench_proxy_latency(injd, napi, recorder, pki):
    """Per request from Python in a sandbox, on a kept-alive connection and on a new one
    each time: through the proxy with injection, and the same request from a sandbox of
    a project without rules (direct, trusting the test CA itself), in interleaved
    rounds.  Then brigd's memory for the proxy of idle sandboxes: its RSS before and
    after rules are given to the project of K running sandboxes (each then has its
    proxy: two listeners and the rules)."""
    n, rounds = int(os.environ.get("BRIG_BENCH_N", "200")), 4
    direct = napi.ok("POST", "/v1/projects", {"name": "direct"}).json()["id"]
    sbs = {"proxied": napi.create(template="base", project=project_with_rule(napi),
                                  secret_refs=["API_KEY"])["id"],
           "direct": napi.create(template="base", project=direct)["id"]}
    napi.put_file(sbs["direct"], "/tmp/ca.pem", (pki / "ca.pem").read_bytes())
    for sb in sbs.values():
        napi.put_file(sb, "/tmp/bench.py", BENCH.encode())
    samples = {}
    for _ in range(rounds):
        for scheme in ("http", "https"):
            for mode in ("keep", "new"):
                for kind, sb in sbs.items():
                    argv = ["python3", "/tmp/bench.py", scheme, mode, str(n // rounds)]
                    if kind == "direct" and scheme == "https":
                        argv.append("/tmp/ca.pem")
                    r = napi.exec(sb, argv=argv, timeout=300)
                    assert r["exit_code"] == 0, r
                    samples.setdefault(f"{scheme} {mode} {kind}", []).extend(
                        json.loads(r["stdout"]))
    out = {k: {"n": len(v), "p50": pct(v, 0.5), "p90": pct(v, 0.9)} for k, v in samples.items()}
    for sb in sbs.values():
        napi.delete(sb)
    k = int(os.environ.get("BRIG_BENCH_IDLE", "20"))
    p = napi.ok("POST", "/v1/projects", {"name": "idle"}).json()["id"]
    napi.ok("PUT", f"/v1/projects/{p}/secrets/API_KEY", {"value": VALUE}, expect=(204,))
    idle = [napi.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
            for _ in range(k)]
    before = rss_kib(injd.proc.pid)
    napi.ok("PUT", f"/v1/projects/{p}/injections", {"rules": [RULE]})
    after = rss_kib(injd.proc.pid)
    out["idle"] = {"sandboxes": k, "rss_before_kib": before, "rss_after_kib": after,
                   "per_sandbox_kib": round((after - before) / k, 2),
                   "listeners_per_sandbox": 2}
    for sb in idle:
        napi.delete(sb)
    print("\nBENCH", json.dumps(out))


@pytest.mark.base
def test_rules_survive_a_brigd_restart(injd, recorder):
    """A sandbox outlives brigd's restart: its rules, placeholders and proxy come back
    (the same placeholder: it is derived from the master key)."""
    a = injd.net_api
    p = project_with_rule(a)
    sb = a.create(template="base", project=p, secret_refs=["API_KEY"])["id"]
    ph = sbexec(a, sb, "printenv API_KEY")[1]
    injd.stop()
    start_in_hostns(injd)
    a = injd.net_api
    try:
        assert sbexec(a, sb, "printenv API_KEY")[1] == ph
        for scheme in ("http", "https"):
            rc, out = sbexec(a, sb, f'curl -sS -m 5 -H "Authorization: x" '
                                    f'{scheme}://api.test/restarted-{scheme}')
            assert out.strip() == "ok", out
            got = [r for r in recorded(recorder) if r["path"] == f"/restarted-{scheme}"][-1]
            assert got["headers"]["Authorization"] == f"Bearer {VALUE}"
    finally:
        a.delete(sb)
        brigtest.wait_for(lambda: sandbox_links() == [], what="sandbox links gone")


@pytest.mark.base
def test_injection_in_a_gvisor_sandbox(napi, recorder):
    """gVisor's own network stack reaches the same redirect and proxy."""
    brigtest.needs_gvisor(napi)
    p = project_with_rule(napi)
    sb = napi.create(template="base", project=p, secret_refs=["API_KEY"], isolation="gvisor")["id"]
    for scheme in ("http", "https"):
        rc, out = sbexec(napi, sb, f'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" '
                                   f'{scheme}://api.test/gvisor-{scheme}', timeout=60)
        assert out.strip() == "ok", out
        got = [r for r in recorded(recorder) if r["path"] == f"/gvisor-{scheme}"][-1]
        assert got["headers"]["Authorization"] == f"Bearer {VALUE}"
    napi.delete(sb)
