"""Kernel-level attacks from inside a microVM (isolation "microvm", QEMU under TCG here):
they reach only the guest's own kernel and disk.  Each asserts the host is unharmed: brigd
answers, a bystander VM still runs commands, a host sentinel process lives, the template's
disk image is unchanged, and the attacked VM leaves nothing behind.

The rest of the suite is parametrised over container and gvisor (conftest.py): its attacks
aim at the host kernel's interfaces a container shares, which a VM does not reach at all.
Needs QEMU and the guest kernel (scripts/setup); skipped, with the reason, without them."""

import glob
import hashlib
import os
import subprocess

import pytest

import brigtest
from brigtest import wait_for

pytestmark = pytest.mark.skipif(brigtest.microvm_missing() is not None,
                                reason=str(brigtest.microvm_missing()))


def image_state(path):
    """What any write to the image changes: its inode's mtime, ctime and size, and the hash
    of its first 64 MiB (where the file system's metadata and first files are)."""
    st = os.stat(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(64 << 20))
    return st.st_mtime_ns, st.st_ctime_ns, st.st_size, h.hexdigest()


@pytest.fixture(scope="module")
def vmd(tmp_path_factory):
    d = brigtest.microvm_brigd(str(tmp_path_factory.mktemp("sec-microvm")))
    yield d
    brigtest.microvm_brigd_end(d)


@pytest.fixture(scope="module")
def api(vmd):
    return vmd.api()


@pytest.fixture(scope="module")
def bystander(api):
    sid = api.ok("POST", "/v1/sandboxes", {"template": "minimal",
                                           "isolation": "microvm"}).json()["id"]
    api.put_file(sid, "/root/marker", b"bystander\n")
    yield sid
    api.request("DELETE", f"/v1/sandboxes/{sid}")


@pytest.fixture
def host_ok(api, bystander, vmd):
    """After the attack: brigd, the bystander VM, a host process, the template image."""
    sentinel = subprocess.Popen(["sleep", "3600"])
    image = glob.glob(os.path.join(brigtest.TEMPLATE_CACHE, "minimal", "*", "rootfs.*M.ext4"))
    assert image, "the bystander's VM made the template's disk image"
    image = image[0]
    before = image_state(image)
    yield
    assert sentinel.poll() is None
    sentinel.kill()
    sentinel.wait()
    assert api.ok("GET", "/healthz", key=None).status == 200
    assert api.exec(bystander, "cat /root/marker")["stdout"] == "bystander\n"
    assert image_state(image) == before


def attacker(api):
    return api.ok("POST", "/v1/sandboxes", {"template": "minimal",
                                            "isolation": "microvm"}).json()["id"]


def gone(api, sid, vmd):
    api.request("DELETE", f"/v1/sandboxes/{sid}")
    wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sid}").json().get("state")
             in ("deleted", "failed", None) or
             api.request("GET", f"/v1/sandboxes/{sid}").status == 404, timeout=30,
             what="the attacker gone")
    wait_for(lambda: not os.path.exists(os.path.join(vmd.state_dir, "microvm", "vms", sid)),
             timeout=30, what="its VM dir gone")
    assert not brigtest.sandbox_processes([sid])


def test_guest_kernel_panic_ends_only_that_vm(api, vmd, host_ok):
    """Root in the guest crashes its kernel (sysrq c): the VM ends; nothing else does."""
    sid = attacker(api)
    qemu = brigtest.sandbox_processes([sid])
    assert qemu
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec",
                    {"cmd": "echo 1 > /proc/sys/kernel/sysrq; echo c > /proc/sysrq-trigger",
                     "timeout": 30})
    assert r.status != 200 or r.json().get("exit_code") != 0, r.body
    # panic=-1 reboot=t with -no-reboot: QEMU exits with its guest
    wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and
                             not brigtest.reaped_by_init(str(p)) for p in qemu),
             timeout=30, what="the crashed VM's QEMU gone")
    gone(api, sid, vmd)


def test_guest_writes_its_raw_disk_not_the_template(api, vmd, host_ok):
    """Root in the guest overwrites its block device: only its copy-on-write layer changes
    (the template's image, shared by every VM, is checked by host_ok)."""
    sid = attacker(api)
    r = api.exec(sid, "dd if=/dev/urandom of=/dev/vda bs=1M count=8 seek=1 conv=fsync "
                      "2>&1; sync; echo written", timeout=60)
    assert "written" in r["stdout"], r
    gone(api, sid, vmd)


def test_fork_bomb_stays_in_the_guest(api, vmd, host_ok):
    """A fork bomb fills the guest's process table; the host's tasks do not move (QEMU's
    threads stay bounded by the VM's cgroup pids limit)."""
    sid = attacker(api)
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec",
                    {"cmd": "b() { b | b & }; b; sleep 5", "timeout": 20}, timeout=90)
    assert r.status in (200, 409, 503), r.body
    pids = open(f"/sys/fs/cgroup/pids/brig/{sid}/pids.current").read().strip() \
        if os.path.exists(f"/sys/fs/cgroup/pids/brig/{sid}/pids.current") else "0"
    assert int(pids) <= 512
    gone(api, sid, vmd)
