"""`pip install ./sdk/python` works offline (in-tree stdlib build backend),
ships py.typed, and the installed package talks to brigd."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from sdk_helpers import SDK


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    d = tmp_path_factory.mktemp("venv")
    p = subprocess.run([sys.executable, "-m", "venv", str(d)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"no venv with pip here: {p.stderr[-300:]}")
    return d


def test_pip_install_offline(venv, daemon, tmp_path):
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    p = subprocess.run([*pip, "install", "--no-index", SDK], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # nothing was written into the source tree by the build
    assert not [f for f in os.listdir(SDK) if f.endswith(".egg-info") or f in ("build", "dist")]
    check = textwrap.dedent("""\
        import os, brig, brig.aio
        from brig import Sandbox
        pkg = os.path.dirname(brig.__file__)
        assert "site-packages" in pkg, pkg
        assert os.path.exists(os.path.join(pkg, "py.typed"))
        with Sandbox.create("minimal") as sb:
            print(sb.exec("echo installed; exit 4").exit_code)
    """)
    p = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True,
                       text=True, cwd=str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "4\n"
    p = subprocess.run([*pip, "wheel", "--no-index", "--no-deps", "-w", str(tmp_path / "w"),
                        SDK], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.listdir(tmp_path / "w") == ["brig-0.1.0-py3-none-any.whl"]
