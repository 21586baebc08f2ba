"""Isolation "microvm" on the network: the guest's NIC is a tap bridged to the sandbox's
own link, so the same veth, firewall, DNS proxy and network log apply as to a container.
The policies' end-to-end test of test_network.py (open, allowlist, none, the network log)
runs here with every create asking for a microVM, on test_network.py's namespaces
(brigtest-inet, brigtest-host: do not run beside another network test).  Under TCG
(microvm_accel = tcg) like test_microvm.py."""

import os

import pytest

import brigtest
from test_network import NsApi, inet, start_in_hostns, stopped_clean  # noqa: F401
from test_network import napi, test_e2e_policies_through_the_api  # noqa: F401

pytestmark = pytest.mark.skipif(brigtest.microvm_missing() is not None,
                                reason=str(brigtest.microvm_missing()))

_plain_request = NsApi.request


@pytest.fixture(scope="module")
def netd(inet):  # noqa: F811
    """test_network's brigd, running microVMs under TCG."""
    conf = os.path.join(inet["tmp"], "brigd-vm.conf")
    with open(conf, "w") as f:
        f.write(f"[brigd]\nmicrovm_accel = {brigtest.MICROVM_ACCEL}\n")
    d = brigtest.Brigd(os.path.join(inet["tmp"], "brigd-vm"), ["--config", conf])
    start_in_hostns(d)
    yield d
    stopped_clean(d)


@pytest.fixture(autouse=True)
def microvm_creates(monkeypatch):
    """Every create asks for isolation microvm (and the answer says it got one)."""
    def request(self, method, path, body=None, *a, **kw):
        create = method == "POST" and path == "/v1/sandboxes" and isinstance(body, dict)
        if create:
            body = {"isolation": "microvm", **body}
        r = _plain_request(self, method, path, body, *a, **kw)
        if create and r.status == 201:
            assert r.json()["isolation"] == "microvm", r.json()
        return r
    monkeypatch.setattr(NsApi, "request", request)
