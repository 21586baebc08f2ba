"""microVMs started from a memory snapshot (microvm_memsnap = on), and the guest's clock after
a pause: a real brigd under QEMU's emulation (microvm_accel = tcg), like test_microvm.py.

The first create of a template and tariff boots its VM and saves it; later creates start
from that snapshot (QEMU -incoming) and their agent is told the sandbox's time, entropy and
link (guest_sync).  The VMs are shared by the tests below (module fixtures)."""

import os
import re
import time

import pytest

import brigtest

pytestmark = pytest.mark.skipif(brigtest.microvm_missing() is not None,
                                reason=str(brigtest.microvm_missing()))

NIC_MAC = "52:54:00:00:00:02"  # the snapshot's NIC (microvm_internal.h)
AGENT_MAC = "52:54:00:00:00:01"


@pytest.fixture(scope="module")
def snapd(tmp_path_factory):
    d = brigtest.microvm_brigd(str(tmp_path_factory.mktemp("microvm-snap")),
                               "microvm_memsnap = on\n")
    yield d
    brigtest.microvm_brigd_end(d)


@pytest.fixture(scope="module")
def api(snapd):
    return snapd.api()


def create(api):
    t = time.monotonic()
    sb = api.ok("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "microvm",
                                          "env": {"WHO": "vm"}}).json()
    return sb["id"], time.monotonic() - t


@pytest.fixture(scope="module")
def pair(api, snapd):
    """Two VMs: the first takes the snapshot (a boot, a save, a start from it), the second
    only starts from it."""
    a, a_s = create(api)
    b, b_s = create(api)
    yield a, b, a_s, b_s
    if snapd.proc is not None:  # the restart test's brigd has another port
        for sb in (a, b):
            snapd.api().request("DELETE", f"/v1/sandboxes/{sb}")


def taken(d):
    """The snapshots d's brigd took so far (its whole log, every run)."""
    with open(d.log_path, encoding="utf-8", errors="replace") as f:
        return len(re.findall(r"memory snapshot \S+ taken", f.read()))


def guest_clock_lag(api, sb):
    r = api.exec(sb, "date +%s")  # whole seconds: busybox date has no %N
    assert r["exit_code"] == 0, r
    return time.time() - float(r["stdout"])


def test_the_second_create_starts_from_the_snapshot(api, snapd, pair):
    a, b, a_s, b_s = pair
    log = snapd.log()
    assert taken(snapd) == 1, log[-3000:]
    assert "did not start from it" not in log
    # A start skips the guest's boot: the second create is far quicker than the first
    # (a boot, a save and a start); not a benchmark (the host is shared), a sanity check.
    assert b_s < a_s, (a_s, b_s)
    for sb in (a, b):
        r = api.exec(sb, "echo $WHO; uname -r")
        assert r["exit_code"] == 0 and r["stdout"].startswith("vm\n"), r


def test_each_vm_has_its_own_disk_clock_and_randomness(api, pair):
    a, b = pair[:2]
    w = api.exec(a, "head -c 8388608 /dev/zero >/root/only-a && sync && echo ok")
    assert w["stdout"] == "ok\n", w["stderr"]
    assert api.exec(b, "test -e /root/only-a; echo $?")["stdout"] == "1\n"
    assert api.exec(a, "wc -c </root/only-a")["stdout"].strip() == str(8 << 20)
    for sb in (a, b):  # the snapshot's clock is seconds old: guest_sync set the host's
        assert abs(guest_clock_lag(api, sb)) < 2, sb
    # Their generators were reseeded with bytes of their own: not the snapshot's state.
    rnd = [api.exec(sb, "od -An -tx1 -N16 /dev/urandom")["stdout"] for sb in (a, b)]
    assert rnd[0] != rnd[1], rnd


def test_the_sandbox_link_is_configured_after_the_start(api, pair):
    """The snapshot's guest had no address; guest_sync gave its NIC the sandbox's MAC,
    address and default route (where brigd has a network at all)."""
    b = pair[1]
    macs = api.exec(b, "cat /sys/class/net/*/address")["stdout"].split()
    assert AGENT_MAC in macs, macs
    assert NIC_MAC not in macs, macs  # renamed to eth0's MAC of the sandbox's namespace
    routes = api.exec(b, "cat /proc/net/route")["stdout"].splitlines()[1:]
    has_nic = len([m for m in macs if m != "00:00:00:00:00:00"]) > 1
    default = [r for r in routes if r.split()[1] == "00000000"]
    assert bool(default) == has_nic, (macs, routes)


def test_guest_clock_is_the_hosts_after_a_pause(api, pair):
    b = pair[1]
    base = f"/v1/sandboxes/{b}"
    assert abs(guest_clock_lag(api, b)) < 2
    api.ok("POST", f"{base}/pause")
    time.sleep(5)  # the pause itself: the guest's clock stands still meanwhile
    assert api.ok("POST", f"{base}/resume").json()["state"] == "running"
    lag = guest_clock_lag(api, b)
    assert abs(lag) < 2, lag


def test_file_system_snapshot_create_and_fork_of_a_vm(api, snapd, pair):
    """The API's snapshot of a VM: its disk, the guest's root flushed and frozen first (a
    file written and not synced is in it); a microVM starts from it, a container does not
    (400); a fork's children have it; a damaged one is refused (409)."""
    b = pair[1]
    api.exec(b, "echo kept > /root/snapped")  # no sync: the freeze flushes it
    snap = api.ok("POST", f"/v1/sandboxes/{b}/snapshot", {"name": "vm"}).json()
    api.exec(b, "echo later > /root/after")
    assert api.exec(b, "echo alive")["stdout"] == "alive\n"  # thawed, running
    r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"], "isolation": "container"})
    assert r.status == 400 and "microvm" in r.json()["error"]["message"], r.body
    c = api.ok("POST", "/v1/sandboxes", {"snapshot": snap["id"], "isolation": "microvm"}
               ).json()["id"]
    r = api.exec(c, "cat /root/snapped; test -e /root/after; echo $?")
    assert r["stdout"] == "kept\n1\n", r
    api.ok("DELETE", f"/v1/sandboxes/{c}", expect=(200, 204))
    kids = api.ok("POST", f"/v1/sandboxes/{b}/fork", {"count": 1}, expect=(201,)).json()
    kid = kids["sandboxes"][0]["id"]
    assert api.exec(kid, "cat /root/after")["stdout"] == "later\n"
    api.ok("DELETE", f"/v1/sandboxes/{kid}", expect=(200, 204))
    img = os.path.join(snapd.state_dir, "snapshots", snap["id"], "vm.qcow2")
    with open(img, "r+b") as f:
        f.seek(os.path.getsize(img) // 2)
        x = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([x[0] ^ 0xFF]))
    r = api.request("POST", "/v1/sandboxes", {"snapshot": snap["id"], "isolation": "microvm"})
    assert r.status == 409 and "damaged" in r.json()["error"]["message"], r.body
    api.ok("DELETE", f"/v1/snapshots/{snap['id']}", expect=(204,))


def test_a_create_with_a_volume_boots(api, snapd):
    """A volume is one more disk on the device line, which a snapshot's is not: such a
    create boots as without memsnap (no snapshot taken, none used), its volume mounted."""
    before = taken(snapd)
    name = f"v-{os.urandom(4).hex()}"
    v = api.ok("POST", "/v1/volumes", {"name": name, "size_mib": 32}).json()
    try:
        sb = api.ok("POST", "/v1/sandboxes", {"template": "minimal", "isolation": "microvm",
                                              "volumes": [{"name": name, "path": "/data"}]}
                    ).json()["id"]
        r = api.exec(sb, "echo v > /data/f && cat /data/f && grep -c ' /data ' /proc/mounts")
        assert r["stdout"] == "v\n1\n", r
        assert abs(guest_clock_lag(api, sb)) < 2
        api.ok("DELETE", f"/v1/sandboxes/{sb}", expect=(200, 204))
    finally:
        gone = api.request("DELETE", f"/v1/volumes/{v['id']}?project={v['project_id']}")
    assert gone.status == 204, gone.body
    assert taken(snapd) == before
    log = snapd.log()
    assert re.search(rf"{sb}: VM ready", log) and "did not start from it" not in log


def test_a_new_brigd_takes_a_new_snapshot(api, snapd, pair):
    """Snapshots hold this brigd's agent: a restarted one removes them at its first VM and
    takes its own; its VMs still answer."""
    a = pair[0]
    snapd.stop()
    snapd.start()
    api2 = snapd.api()
    assert api2.exec(a, "echo back")["stdout"] == "back\n"
    c, _ = create(api2)
    assert taken(snapd) == 2, snapd.log()[-3000:]
    assert api2.exec(c, "echo $WHO")["stdout"] == "vm\n"
    api2.ok("DELETE", f"/v1/sandboxes/{c}")
