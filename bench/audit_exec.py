"""bench/audit_exec.py BUILD_DIR - exec `true` round trips (keep-alive, 1500 after 200 of
warm-up) against the brigd of BUILD_DIR: p50, p90 and mean in ms, and brigd's own CPU time
per round trip (user + system, every thread: the audit writer's too), which a loaded host
inflates far less than wall time.  Run it for two builds, interleaved, to see what a change
costs (docs/benchmarks.md, the audit timeline)."""
import http.client, json, os, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
build = sys.argv[1]
os.environ["BRIG_BUILD"] = build
os.environ.setdefault("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates")
import brigtest
d = brigtest.Brigd(tempfile.mkdtemp(prefix="brig-bench-") + "/state")
d.start()
try:
    a = d.api()
    sid = a.create("minimal")["id"]
    c = http.client.HTTPConnection(a.host, a.port)
    body = json.dumps({"argv": ["true"]})
    h = {"Authorization": f"Bearer {a.key}", "Content-Type": "application/json"}
    t = []

    def cpu_ms():
        with open(f"/proc/{d.proc.pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        return (int(st[11]) + int(st[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    for i in range(1700):
        if i == 200:
            c0 = cpu_ms()
        t0 = time.perf_counter()
        c.request("POST", f"/v1/sandboxes/{sid}/exec", body=body, headers=h)
        r = c.getresponse(); r.read()
        assert r.status == 200
        if i >= 200:
            t.append((time.perf_counter() - t0) * 1000)
    cpu = (cpu_ms() - c0) / len(t)
    t.sort()
    print(f"{build}: n={len(t)} p50={t[len(t)//2]:.3f} p90={t[int(len(t)*.9)]:.3f} "
          f"mean={statistics.mean(t):.3f} ms, brigd cpu {cpu:.3f} ms per exec")
    a.delete(sid)
finally:
    d.stop()
