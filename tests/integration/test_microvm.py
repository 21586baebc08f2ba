"""Isolation "microvm" end to end: a real brigd whose sandboxes are QEMU microVMs with
Debian's cloud kernel, under QEMU's emulation (microvm_accel = tcg: this host has no
hardware KVM; scripts/verify-kvm runs this file with BRIG_MICROVM_ACCEL=kvm on a KVM host).
VMs are shared between tests (module fixtures): the file stays within about two minutes.

Needs qemu-system-x86 and the guest kernel where scripts/setup (scripts/setup-vm) puts
them; skipped, with the reason, only where they are truly missing."""

import base64
import os
import signal
import time

import pytest

import brigtest
from brigtest import leftovers, qemu_processes, wait_for

SECRET = "sk-microvm-7f3a9c1e5b2d"
ACCEL = brigtest.MICROVM_ACCEL

pytestmark = pytest.mark.skipif(brigtest.microvm_missing() is not None,
                                reason=str(brigtest.microvm_missing()))


def host_has_kvm():
    flags = open("/proc/cpuinfo").read()
    return (os.path.exists("/dev/kvm") and not os.path.exists("/sys/module/kvm_pvm")
            and (" vmx" in flags or " svm" in flags))


@pytest.fixture(scope="module")
def vmd(tmp_path_factory):
    """One brigd running microVMs under TCG, with a warm pool of one minimal VM."""
    d = brigtest.microvm_brigd(str(tmp_path_factory.mktemp("microvm")),
                               "warm_pool = minimal:small:1:microvm\n")
    yield d
    brigtest.microvm_brigd_end(d)


@pytest.fixture(scope="module")
def api(vmd):
    return vmd.api()


@pytest.fixture(scope="module")
def vm(api, vmd):
    """A base microVM with a secret, shared by the tests below."""
    r = api.ok("POST", "/v1/sandboxes", {"template": "base", "isolation": "microvm",
                                         "env": {"PLAIN": "visible"},
                                         "secrets": {"TOKEN": SECRET}})
    sb = r.json()
    assert SECRET not in r.body.decode()
    yield sb["id"]
    if vmd.proc is not None:  # a restart test's brigd has another port
        vmd.api().request("DELETE", f"/v1/sandboxes/{sb['id']}")


def test_without_tcg_a_host_without_kvm_refuses_microvm(tmp_path):
    if host_has_kvm():
        pytest.skip("this host has hardware KVM: microvm is not refused here")
    d = brigtest.Brigd(str(tmp_path / "state")).start()
    try:
        r = d.api().request("POST", "/v1/sandboxes", {"template": "minimal",
                                                      "isolation": "microvm"})
        assert r.status == 400, r.body
        msg = r.json()["error"]["message"]
        assert "hardware KVM" in msg and "microvm_accel = tcg" in msg, msg
    finally:
        d.stop()
    assert not leftovers(d.state_dir)


def test_its_own_kernel_and_the_sandbox_says_emulated(api, vm):
    info = api.ok("GET", f"/v1/sandboxes/{vm}").json()
    assert info["isolation"] == "microvm" and info["accel"] == ACCEL
    r = api.exec(vm, "uname -r; tr '\\0' ' ' </proc/1/cmdline; echo; id -u")
    assert r["exit_code"] == 0, r
    kernel, init, uid = r["stdout"].splitlines()
    assert kernel.endswith("-cloud-amd64") and kernel != os.uname().release
    assert init.startswith("/.brig/brig-agent")
    assert uid == "0"
    # Its disk: the template's files and the tariff's disk (small: 2 GiB) free to write.
    avail_kib = int(api.exec(vm, "df -k / | tail -n 1")["stdout"].split()[3])
    assert 1800 << 10 < avail_kib < 2300 << 10, avail_kib
    # Its processes are the guest's: nothing of it runs on the host but QEMU.
    pids = brigtest.sandbox_processes([vm])
    assert pids and all(b"qemu-system" in open(f"/proc/{p}/cmdline", "rb").read() for p in pids)


def test_exec_exit_codes_stream_background_and_stdin(api, vm):
    from test_exec import events, proc_path, stream
    assert api.exec(vm, "exit 7")["exit_code"] == 7
    assert api.exec(vm, "python3 -c 'print(6*7)'")["stdout"] == "42\n"
    conn, r = stream(api, f"/v1/sandboxes/{vm}/exec",
                     {"cmd": "echo first; while [ ! -e /tmp/go ]; do sleep 0.01; done; "
                             "echo second >&2; exit 5"})
    ev = events(r)
    assert next(ev)["type"] == "start"
    assert next(ev) == {"type": "stdout", "data": "first\n"}
    assert api.exec(vm, "touch /tmp/go")["exit_code"] == 0  # a second connection, meanwhile
    assert next(ev) == {"type": "stderr", "data": "second\n"}
    end = next(ev)
    assert end["type"] == "exit" and end["exit_code"] == 5
    conn.close()

    class S:
        id = vm
    pid = api.ok("POST", f"/v1/sandboxes/{vm}/exec",
                 {"argv": ["sh", "-c", "cat > /tmp/got; echo done"], "background": True},
                 expect=(202,)).json()["pid"]
    api.ok("POST", proc_path(S, pid, "/stdin"), b"part one,")
    api.ok("POST", proc_path(S, pid, "/stdin"), b" part two")
    api.ok("POST", proc_path(S, pid, "/stdin/close"), expect=(204,))
    p = api.ok("POST", proc_path(S, pid, "/wait"), {"timeout": 30}).json()
    assert p["exit_code"] == 0
    assert api.get_file(vm, "/tmp/got") == b"part one, part two"


def test_64mib_file_round_trip(api, vm):
    data = os.urandom(64 << 20)
    api.put_file(vm, "/root/big.bin", data)
    r = api.exec(vm, "sha256sum /root/big.bin | cut -d' ' -f1; stat -c %s /root/big.bin")
    import hashlib
    assert r["stdout"].split() == [hashlib.sha256(data).hexdigest(), str(64 << 20)]
    assert api.get_file(vm, "/root/big.bin") == data
    api.exec(vm, "rm /root/big.bin")


def test_secret_is_in_env_and_redacted(api, vm):
    assert api.exec(vm, f"test \"$TOKEN\" = {SECRET} && echo same")["stdout"] == "same\n"
    for cmd in ["echo $TOKEN", "echo $TOKEN >&2", "printenv | base64"]:
        out = api.exec(vm, cmd)
        both = out["stdout"] + out["stderr"]
        assert SECRET not in both and "[REDACTED:TOKEN]" in both, (cmd, both)
        assert base64.b64encode(SECRET.encode()).decode()[:16] not in both


def test_pause_stops_the_vm_and_resume_goes_on(api, vm):
    """QMP stop/cont: the guest's vCPUs halt with its memory resident; the same processes
    go on after the resume, nothing lost (test_pause.py's contract)."""
    from test_pause import cpu_ns, output, refused_paused, start_counter, ticks
    pid = start_counter(api, vm)
    spin = start_counter(api, vm, "while :; do :; done")  # a guest that burns its CPU
    wait_for(lambda: len(ticks(output(api, vm, pid))) >= 5, what="the counter counting")
    base = f"/v1/sandboxes/{vm}"
    p = api.ok("POST", f"{base}/pause").json()
    assert p["state"] == "paused" and p["memory"] == "resident", p
    assert api.ok("POST", f"{base}/pause").json()["state"] == "paused"  # idempotent
    # Nothing of the guest runs: its VMM, which burnt a CPU for it, all but stands still.
    t, before = time.monotonic(), cpu_ns(vm)
    time.sleep(0.5)
    used_s = (cpu_ns(vm) - before) / 1e9
    assert used_s < 0.1 * (time.monotonic() - t), used_s
    refused_paused(api, "POST", f"{base}/exec", {"cmd": "true"})
    refused_paused(api, "GET", f"{base}/files?path=/etc/hostname")
    assert api.ok("POST", f"{base}/resume").json()["state"] == "running"
    assert api.ok("POST", f"{base}/resume").json()["state"] == "running"
    seen = ticks(output(api, vm, pid))
    wait_for(lambda: len(ticks(output(api, vm, pid))) > len(seen) + 3, timeout=30,
             what="the counter going on")
    got = ticks(output(api, vm, pid))
    assert got == list(range(1, len(got) + 1)), got  # never restarted, nothing lost
    assert api.exec(vm, f"kill -9 {pid} {spin}; echo awake")["stdout"] == "awake\n"


def test_volume_written_in_a_vm_is_seen_by_a_container(api):
    """A volume is one more disk of the VM, mounted by its /init at the path (a path with a
    space: escaped on the kernel's command line); its files keep the sandbox's ids, so a
    container sandbox mounting it afterwards sees them as its own.  One file system over an
    image at a time: while a VM has it, a container's mount of it is a 409."""
    name = f"v-{os.urandom(4).hex()}"
    v = api.ok("POST", "/v1/volumes", {"name": name, "size_mib": 32}).json()

    def create(iso, path, ro=False, expect=(201,)):
        return api.ok("POST", "/v1/sandboxes", {"template": "minimal", "isolation": iso,
                                                "volumes": [{"name": name, "path": path,
                                                             "read_only": ro}]}, expect=expect)
    try:
        sb = create("microvm", "/my data").json()["id"]
        r = api.exec(sb, "echo from-vm > '/my data/f' && stat -c %u '/my data/f'")
        assert r == {**r, "exit_code": 0, "stdout": "0\n"}, r
        api.ok("DELETE", f"/v1/sandboxes/{sb}", expect=(200, 204))
        ro = create("microvm", "/data", ro=True).json()["id"]
        r = api.exec(ro, "cat /data/f; echo x > /data/g")
        assert r["stdout"] == "from-vm\n" and "Read-only" in r["stderr"], r
        r = api.request("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "container",
                                                  "volumes": [{"name": name, "path": "/data",
                                                               "read_only": True}]})
        assert r.status == 409 and "microVM" in r.json()["error"]["message"], r.body
        api.ok("DELETE", f"/v1/sandboxes/{ro}", expect=(200, 204))
        c = create("container", "/data").json()["id"]
        r = api.exec(c, "cat /data/f; stat -c %u /data/f")
        assert r["stdout"] == "from-vm\n0\n", r
        api.ok("DELETE", f"/v1/sandboxes/{c}", expect=(200, 204))
    finally:
        gone = api.request("DELETE", f"/v1/volumes/{v['id']}?project={v['project_id']}")
    assert gone.status == 204, gone.body


def test_memory_bomb_stays_inside_the_vm(api, vm):
    qemu = brigtest.sandbox_processes([vm])
    r = api.exec(vm, "python3 -c 'a = []\nwhile True: a.append(bytearray(32 << 20))'",
                 timeout=120)
    assert r["exit_code"] != 0 and r["signal"] in ("SIGKILL", 9, "KILL"), r
    # The guest's kernel killed it; the VM (the same QEMU process) goes on.
    assert brigtest.sandbox_processes([vm]) == qemu
    assert api.exec(vm, "echo alive")["stdout"] == "alive\n"
    assert api.ok("GET", f"/v1/sandboxes/{vm}").json()["state"] == "running"


def test_pool_hit_is_a_warm_vm(api):
    def ready():
        h = api.request("GET", "/healthz", key=None).json()["warm_pool"]
        return any(v.get("ready", 0) >= 1 for k, v in h.items() if "microvm" in k)
    wait_for(ready, timeout=90, what="a warm microVM")
    t = time.monotonic()
    sb = api.ok("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "microvm"}).json()
    took = time.monotonic() - t
    try:
        assert took < 1.0, f"a pool hit took {took:.3f}s"
        assert api.exec(sb["id"], "uname -r")["stdout"].strip().endswith("-cloud-amd64")
    finally:
        api.ok("DELETE", f"/v1/sandboxes/{sb['id']}", expect=(200, 204))


def test_delete_of_a_paused_vm_leaves_nothing(api, vmd):
    sb = api.ok("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "microvm"}).json()
    qemu = brigtest.sandbox_processes([sb["id"]])
    assert qemu
    api.ok("POST", f"/v1/sandboxes/{sb['id']}/pause")
    api.ok("DELETE", f"/v1/sandboxes/{sb['id']}", expect=(200, 204))
    wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and not brigtest.reaped_by_init(str(p))
                             for p in qemu), timeout=20, what="QEMU gone")
    vdir = os.path.join(vmd.state_dir, "microvm", "vms", sb["id"])
    wait_for(lambda: not os.path.exists(vdir), timeout=20, what="its VM dir gone")
    assert not os.path.exists(f"/sys/fs/cgroup/memory/brig/{sb['id']}")


def test_kill9_restart_reattaches_the_vm(api, vmd, vm):
    """Last: brigd dies with a live VM, paused; the next one re-attaches it paused (the VM
    outlived it; its VMM says it is paused, its agent is not asked), and it resumes."""
    from test_pause import refused_paused
    api.exec(vm, "echo kept > /root/kept")
    api.ok("POST", f"/v1/sandboxes/{vm}/pause")
    before = brigtest.sandbox_processes([vm])
    vmd.proc.send_signal(signal.SIGKILL)
    vmd.proc.wait()
    vmd.proc = None
    vmd.start()
    api2 = vmd.api()
    assert brigtest.sandbox_processes([vm]) == before
    assert api2.ok("GET", f"/v1/sandboxes/{vm}").json()["state"] == "paused"
    refused_paused(api2, "POST", f"/v1/sandboxes/{vm}/exec", {"cmd": "true"})
    assert api2.ok("POST", f"/v1/sandboxes/{vm}/resume").json()["state"] == "running"
    assert api2.exec(vm, "cat /root/kept")["stdout"] == "kept\n"
    api2.ok("DELETE", f"/v1/sandboxes/{vm}", expect=(200, 204))
    wait_for(lambda: not qemu_processes(vmd.state_dir) or len(qemu_processes(vmd.state_dir)) <= 1,
             timeout=20, what="the VM's QEMU gone")
