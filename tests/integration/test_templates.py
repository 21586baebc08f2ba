"""Light checks of the template builder (templates/build), see docs/templates.md.

Uses the shared template cache (BRIG_TEMPLATE_CACHE, default /var/cache/brig/templates) for the
real templates, as `make check` does; experiments with modified specs use a temporary cache.
The builder itself runs the in-rootfs checks (node, npm, python3, git, curl, id user) with
chroot, so these tests only look at files.
"""

import hashlib
import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "templates" / "build"
CACHE = Path(os.environ.get("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates"))

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="building templates needs root")


def documented_key(spec: Path, builder: Path = BUILDER) -> str:
    data = spec.read_bytes() + b"\0" + builder.read_bytes()
    return hashlib.sha256(data).hexdigest()[:16]


def run_builder(*args, env=None, timeout=1800):
    return subprocess.run(
        [str(BUILDER), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def build(name, cache=CACHE, *args, **kw):
    r = run_builder("--cache", cache, *args, name, **kw)
    assert r.returncode == 0, f"templates/build {name} failed:\n{r.stderr[-4000:]}"
    lines = r.stdout.strip().splitlines()
    assert lines, "templates/build printed no path"
    return Path(lines[-1]), r


def spec_of(name):
    return REPO / "templates" / name / "spec"


@pytest.mark.parametrize("name", ["base", "minimal"])
def test_print_key_is_the_documented_sha256(name):
    r = run_builder("--print-key", name)
    assert r.returncode == 0, r.stderr
    assert r.stdout == documented_key(spec_of(name)) + "\n"


def host_apt_uris():
    """Every URI of the host's apt sources (one-line and deb822)."""
    uris = set()
    files = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*.list"),
             *Path("/etc/apt/sources.list.d").glob("*.sources")]
    for f in files:
        if not f.is_file():
            continue
        for line in f.read_text().splitlines():
            words = line.split("#")[0].split()
            if f.suffix == ".sources" and words[:1] == ["URIs:"]:
                uris.update(words[1:])
            elif words[:1] == ["deb"]:
                uris.update(w for w in words[1:] if "://" in w)
    return uris


@needs_root
def test_base_apt_sources_are_the_hosts_mirror_for_the_specs_suite():
    # The host (Debian 12) may name another release than the spec: the builder then derives
    # SUITE's entries from the host's own; either way they point at the host's mirror.
    rootfs, _ = build("base")
    suite = next(line.split("=", 1)[1] for line in spec_of("base").read_text().splitlines()
                 if line.startswith("SUITE="))
    entries = [line.split() for line in (rootfs / "etc/apt/sources.list").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert entries
    suites = set()
    for e in entries:
        assert e[0] == "deb" and e[-1] == "main", e
        if len(e) == 5:  # a host entry with Signed-By: the keyring must be in the rootfs too
            assert e[1].startswith("[signed-by=") and e[1].endswith("]"), e
            keyring = e.pop(1)[len("[signed-by="):-1]
            assert (rootfs / keyring.lstrip("/")).is_file(), f"{keyring} is not in the rootfs"
        assert len(e) == 4, e
        assert e[1] in host_apt_uris(), e
        suites.add(e[2])
    assert suite in suites
    assert suites <= {suite, suite + "-updates", suite + "-security"}


def test_bad_names_are_refused(tmp_path):
    for bad in ["../base", "no-such-template", ""]:
        r = run_builder("--cache", tmp_path, bad)
        assert r.returncode != 0
    assert list(tmp_path.iterdir()) == []


def test_modified_spec_gets_another_key(tmp_path):
    templates = tmp_path / "templates"
    (templates / "minimal").mkdir(parents=True)
    modified = templates / "minimal" / "spec"
    modified.write_bytes(spec_of("minimal").read_bytes() + b"\n# changed\n")

    original = run_builder("--print-key", "minimal").stdout.strip()
    by_option = run_builder("--templates-dir", templates, "--print-key", "minimal")
    env = dict(os.environ, BRIG_TEMPLATES_DIR=str(templates))
    by_env = run_builder("--print-key", "minimal", env=env)
    assert by_option.returncode == 0 and by_env.returncode == 0
    assert by_option.stdout.strip() == by_env.stdout.strip() == documented_key(modified)
    assert by_option.stdout.strip() != original


@needs_root
def test_modified_spec_builds_into_its_own_key(tmp_path):
    templates = tmp_path / "templates"
    (templates / "minimal").mkdir(parents=True)
    modified = templates / "minimal" / "spec"
    modified.write_bytes(spec_of("minimal").read_bytes() + b"\n# changed\n")
    cache = tmp_path / "cache"

    rootfs, r = build("minimal", cache, "--templates-dir", templates)
    assert rootfs == cache / "minimal" / documented_key(modified) / "rootfs"
    assert r.stdout == f"{rootfs}\n", "progress belongs on stderr, the path alone on stdout"
    assert (rootfs.parent / "ok").is_file()
    assert not [p for p in (cache / "minimal").iterdir() if p.name.startswith(".tmp-")]


@needs_root
def test_minimal_is_built_once_then_cached():
    key = documented_key(spec_of("minimal"))
    first, _ = build("minimal")
    second, r = build("minimal")
    assert first == second == CACHE.resolve() / "minimal" / key / "rootfs"
    assert (first.parent / "ok").is_file()
    assert r.stderr == "", "a cached template should be found without building"

    assert (first / "bin" / "busybox").is_file()
    assert os.readlink(first / "bin" / "sh") == "/bin/busybox"
    for applet in ["usr/bin/env", "bin/ls", "sbin/ip"]:
        assert (first / applet).is_symlink(), applet
    passwd = (first / "etc" / "passwd").read_text()
    assert "\nuser:x:1000:1000:" in passwd and passwd.startswith("root:x:0:0:")
    assert stat.S_IMODE((first / "tmp").stat().st_mode) == 0o1777
    for d in ["proc", "sys", "dev", "root", "home/user"]:
        assert (first / d).is_dir(), d
    assert not (first / ".brig").exists()


@needs_root
def test_concurrent_builders_agree(tmp_path):
    results = []

    def one():
        results.append(build("minimal", tmp_path))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    assert len({path for path, _ in results}) == 1
    assert sum("building 'minimal'" in r.stderr for _, r in results) == 1
    names = sorted(p.name for p in (tmp_path / "minimal").iterdir())
    assert names == [".lock", documented_key(spec_of("minimal"))]


@needs_root
def test_base_rootfs_contents():
    # Builds the base template into the shared cache unless it is there (about a minute).
    rootfs, _ = build("base")
    assert rootfs == CACHE.resolve() / "base" / documented_key(spec_of("base")) / "rootfs"
    assert (rootfs.parent / "ok").is_file()

    for f in ["usr/local/bin/node", "usr/bin/python3", "usr/bin/git", "usr/bin/curl", "bin/bash"]:
        assert (rootfs / f).exists(), f
        assert os.access(rootfs / f, os.X_OK), f
    assert os.readlink(rootfs / "usr/local/bin/npm") == "../lib/node_modules/npm/bin/npm-cli.js"
    assert (rootfs / "usr/local/lib/node_modules/npm/package.json").is_file()

    passwd = (rootfs / "etc" / "passwd").read_text().splitlines()
    assert "user:x:1000:1000:user:/home/user:/bin/bash" in passwd
    assert any(line.startswith("root:x:0:0:") for line in passwd)
    assert (rootfs / "home" / "user").is_dir()
    assert (rootfs / "root").is_dir()
    assert stat.S_IMODE((rootfs / "tmp").stat().st_mode) == 0o1777

    # Nothing from the build host: no ssh keys, no hostname, no resolver, no apt lists.
    assert not list((rootfs / "etc").glob("ssh/ssh_host_*"))
    for host_key in Path("/etc/ssh").glob("ssh_host_*"):
        assert not (rootfs / "etc" / "ssh" / host_key.name).exists()
    assert (rootfs / "etc" / "hostname").read_text() == "sandbox\n"
    assert "sandbox" in (rootfs / "etc" / "hosts").read_text()
    assert "nameserver" not in (rootfs / "etc" / "resolv.conf").read_text()
    assert not list((rootfs / "var" / "lib" / "apt" / "lists").glob("*_Packages*"))
    assert not list((rootfs / "usr" / "lib").glob("python3*/EXTERNALLY-MANAGED"))
    assert not (rootfs / ".brig").exists()
