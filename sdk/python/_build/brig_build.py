"""A minimal PEP 517 / PEP 660 build backend using only the standard library.

It builds a pure-Python wheel of the package in ``src/brig`` (every ``.py``
file plus ``py.typed``), an sdist, and an editable wheel (a ``.pth`` file
pointing at ``src``).  Metadata comes from ``[project]`` in pyproject.toml.
No network, no setuptools: ``pip install ./sdk/python`` works offline.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import time
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)
    proj = data["project"]
    pkg_dir = data.get("tool", {}).get("brig-build", {}).get("package-dir", "src/" + proj["name"])
    return {**proj, "_pkg_dir": pkg_dir}


def _dist(proj: dict) -> str:
    return proj["name"].replace("-", "_")


def _metadata(proj: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {proj['name']}",
        f"Version: {proj['version']}",
        f"Summary: {proj.get('description', '')}",
    ]
    if "requires-python" in proj:
        lines.append(f"Requires-Python: {proj['requires-python']}")
    lic = proj.get("license", {})
    if isinstance(lic, dict) and "text" in lic:
        lines.append(f"License: {lic['text']}")
    for c in proj.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for d in proj.get("dependencies", []):
        lines.append(f"Requires-Dist: {d}")
    body = ""
    readme = proj.get("readme")
    if isinstance(readme, str) and os.path.exists(os.path.join(ROOT, readme)):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: brig_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"


def _package_files(proj: dict) -> list[tuple[str, str]]:
    """(archive name, source path) of the package's files."""
    pkg_dir = os.path.join(ROOT, proj["_pkg_dir"])
    pkg = os.path.basename(pkg_dir)
    out = []
    for dirpath, dirnames, filenames in os.walk(pkg_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py") or fn == "py.typed":
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, os.path.dirname(pkg_dir))
                out.append((rel.replace(os.sep, "/"), full))
    if not any(n == f"{pkg}/__init__.py" for n, _ in out):
        raise RuntimeError(f"no {pkg}/__init__.py under {pkg_dir}")
    return out


class _Wheel:
    def __init__(self, path: str) -> None:
        self.zf = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.records: list[str] = []

    def add(self, name: str, data: bytes) -> None:
        zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        zi.external_attr = 0o644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(zi, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{name},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        rec = f"{dist_info}/RECORD"
        self.records.append(f"{rec},,")
        zi = zipfile.ZipInfo(rec, date_time=(2020, 1, 1, 0, 0, 0))
        zi.external_attr = 0o644 << 16
        self.zf.writestr(zi, "\n".join(self.records) + "\n")
        self.zf.close()


def _dist_info_files(proj: dict) -> dict[str, bytes]:
    return {
        "METADATA": _metadata(proj).encode(),
        "WHEEL": _wheel_file().encode(),
        "top_level.txt": (os.path.basename(proj["_pkg_dir"]) + "\n").encode(),
    }


def _build(wheel_directory: str, editable: bool) -> str:
    proj = _project()
    name = f"{_dist(proj)}-{proj['version']}-{TAG}.whl"
    dist_info = f"{_dist(proj)}-{proj['version']}.dist-info"
    w = _Wheel(os.path.join(wheel_directory, name))
    if editable:
        src = os.path.dirname(os.path.join(ROOT, proj["_pkg_dir"]))
        w.add(f"__editable__.{_dist(proj)}.pth", (os.path.abspath(src) + "\n").encode())
    else:
        for arc, full in _package_files(proj):
            with open(full, "rb") as f:
                w.add(arc, f.read())
    for fn, data in _dist_info_files(proj).items():
        w.add(f"{dist_info}/{fn}", data)
    w.close(dist_info)
    return name


# ---- PEP 517 hooks -----------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):  # noqa: ARG001
    return []


def get_requires_for_build_sdist(config_settings=None):  # noqa: ARG001
    return []


def get_requires_for_build_editable(config_settings=None):  # noqa: ARG001
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):  # noqa: ARG001
    proj = _project()
    dist_info = f"{_dist(proj)}-{proj['version']}.dist-info"
    d = os.path.join(metadata_directory, dist_info)
    os.makedirs(d, exist_ok=True)
    for fn, data in _dist_info_files(proj).items():
        with open(os.path.join(d, fn), "wb") as f:
            f.write(data)
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # noqa: ARG001
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):  # noqa: ARG001
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):  # noqa: ARG001
    proj = _project()
    base = f"{_dist(proj)}-{proj['version']}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        def add(rel: str) -> None:
            full = os.path.join(ROOT, rel)
            if os.path.exists(full):
                tar.add(full, f"{base}/{rel}", filter=_clean)
        for rel in ("pyproject.toml", "README.md", "_build", "src", "tests"):
            add(rel)
        data = _metadata(proj).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        ti.mtime = int(time.time())
        ti.mode = 0o644
        tar.addfile(ti, io.BytesIO(data))
    return name


def _clean(ti: tarfile.TarInfo):
    if "__pycache__" in ti.name or ti.name.endswith(".pyc"):
        return None
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti
