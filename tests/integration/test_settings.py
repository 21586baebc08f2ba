"""brigd's settings are declared once (src/brigd/core/settings.c's table): the config
file, the flags, --help and docs/operations.md's table all follow it.

- `brigd --print-settings` prints the table (key, flag, type, default, range, help) and
  the value brigd would run with; docs/operations.md's settings table must list every
  setting with its flag and default, and nothing the table does not know.
- Every setting parses from a config file ([brigd] section) into that value, and a
  value out of its range, or of the wrong form, is refused with the message that names
  the setting and its range, before brigd does anything (exit status 2).

brigd here never starts serving: --print-settings exits once the settings are read.
"""

import json
import os
import re
import subprocess

import pytest

from brigtest import BUILD, REPO, Brigd

BRIGD = os.path.join(BUILD, "brigd")
OPERATIONS = os.path.join(REPO, "docs", "operations.md")
NUMBERS = ("int", "bytes", "MiB", "seconds")
# The flags that only answer and exit: not worth a row of the operations table.
UNDOCUMENTED_FLAGS = {"--help", "--version"}


def print_settings(*args):
    """(exit status, the JSON printed or None, stderr) of brigd ARGS --print-settings."""
    r = subprocess.run([BRIGD, *args, "--print-settings"], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, json.loads(r.stdout) if r.returncode == 0 else None, r.stderr


def table():
    status, out, err = print_settings()
    assert status == 0, err
    return out


def with_file(tmp_path, text):
    """brigd --config FILE --print-settings, FILE holding a [brigd] section of text."""
    path = tmp_path / "brigd.conf"
    path.write_text("[brigd]\n" + text + "\n")
    return print_settings("--config", str(path))


# ---- docs/operations.md's table ----------------------------------------------------------


def ticked(cell):
    """The `code` spans of a table cell."""
    return re.findall(r"`([^`]*)`", cell)


def doc_rows():
    """The rows of the settings table: (flag or None, [keys], [defaults] or None where
    the default is prose such as "(none)")."""
    with open(OPERATIONS) as f:
        lines = f.read().splitlines()
    start = lines.index("| flag | config key | default | meaning |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        flag, key, default, _meaning = [c.strip() for c in line.strip("|").split("|", 3)]
        flag = ticked(flag)[0].split()[0] if flag else None
        defaults = ticked(default) or None
        rows.append((flag, ticked(key), defaults))
    assert rows, "no settings table in docs/operations.md"
    return rows


def test_the_doc_lists_every_setting_with_its_flag_and_default():
    settings = {s["key"]: s for s in table()["settings"]}
    documented = {}
    for flag, keys, defaults in doc_rows():
        assert defaults is None or len(defaults) == len(keys) or not keys, \
            f"docs/operations.md: {keys} has defaults {defaults}, not one each"
        for i, key in enumerate(keys):
            assert key not in documented, f"docs/operations.md lists {key} twice"
            documented[key] = (flag, defaults[i] if defaults else None)
    unknown = sorted(set(documented) - set(settings))
    missing = sorted(set(settings) - set(documented))
    assert not unknown, f"docs/operations.md lists settings brigd does not have: {unknown}"
    assert not missing, f"settings missing from docs/operations.md: {missing}"
    for key, (flag, default) in documented.items():
        s = settings[key]
        assert flag == s["flag"], f"{key}: the doc's flag is {flag}, brigd's {s['flag']}"
        # No default (null): the doc says what then happens, in words.
        assert default == s["default"], \
            f"{key}: the doc's default is {default!r}, brigd's {s['default']!r}"


def test_the_doc_lists_every_option_and_no_other():
    t = table()
    flags = {s["flag"] for s in t["settings"] if s["flag"]}
    options = {o["flag"] for o in t["options"]}
    documented = {flag for flag, _, _ in doc_rows() if flag}
    assert documented <= flags | options, \
        f"flags in docs/operations.md that brigd does not have: {documented - flags - options}"
    missing = (flags | options) - UNDOCUMENTED_FLAGS - documented
    assert not missing, f"flags missing from docs/operations.md: {sorted(missing)}"


def test_help_shows_every_flag_and_points_to_the_rest():
    r = subprocess.run([BRIGD, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    t = table()
    for s in t["settings"]:
        if s["flag"]:
            assert re.search(rf"^  {re.escape(s['flag'])} .*\(.*default {re.escape(s['default'])}\)$",
                             r.stdout, re.M), f"--help: no line for {s['flag']}"
    for o in t["options"]:
        assert re.search(rf"^  {re.escape(o['flag'])}\b", r.stdout, re.M), o["flag"]
    assert "--print-settings" in r.stdout and "docs/operations.md" in r.stdout


# ---- the config file ---------------------------------------------------------------------


def test_every_setting_parses_from_the_file(tmp_path):
    """Each setting set to another value than its default, all in one file: brigd runs
    with every one of them."""
    settings = table()["settings"]
    want = {}
    for s in settings:
        if s["type"] in NUMBERS:
            middle = (s["min"] + s["max"]) // 2  # never a default
            assert middle != s["value"], s["key"]
            want[s["key"]] = middle
        elif s["type"] == "ratio":
            want[s["key"]] = 2.5
        elif s["type"] == "enum":
            want[s["key"]] = [c for c in s["choices"].split("|") if c != s["value"]][0]
        elif s["key"] == "warm_pool":
            want[s["key"]] = "minimal:small:2"
        elif s["key"] == "default_tariff":
            want[s["key"]] = "medium"
        else:
            want[s["key"]] = "/some/where:1"
    # What bounds another (docs/operations.md): the defaults below their maximum, the
    # waiting connections below all, uid ranges within 2^32.
    for low, high in [("exec_timeout_default", "exec_timeout_max"),
                      ("idle_timeout_default", "idle_timeout_max"),
                      ("lifetime_default", "lifetime_max"),
                      ("max_waiting_connections", "max_connections"),
                      ("max_waiting_per_address", "max_waiting_connections"),
                      ("max_requests_per_account", "max_connections"),
                      ("exec_output_budget_per_account", "exec_output_budget")]:
        want[low] = min(want[low], want[high] - 1)
    want["uid_base"], want["uid_ranges"] = 65536, 2
    text = "\n".join(f"{k} = {v}" for k, v in want.items())
    status, out, err = with_file(tmp_path, text)
    assert status == 0, err
    got = {s["key"]: s["value"] for s in out["settings"]}
    assert got == want


@pytest.mark.parametrize("case", ["below", "above", "not a number"])
def test_every_number_is_refused_out_of_its_range(tmp_path, case):
    for s in table()["settings"]:
        if s["type"] in NUMBERS:
            v = {"below": s["min"] - 1, "above": s["max"] + 1, "not a number": "12x"}[case]
            said = f"{s['key']}: '{v}' is not an integer in [{s['min']}, {s['max']}]"
        elif s["type"] == "ratio":
            v = {"below": s["min"] / 2, "above": s["max"] + 1, "not a number": "lots"}[case]
            said = f"{s['key']}: '{v}' is not 0 (no bound) or a ratio in [{s['min']:g}, {s['max']}]"
        else:
            continue
        status, _, err = with_file(tmp_path, f"{s['key']} = {v}")
        assert status == 2 and f"brigd.conf line 2: {said}" in err, (s["key"], v, err)


def test_every_number_takes_its_bounds(tmp_path):
    """min and max themselves are accepted by the range; where another setting then
    bounds it (exec_timeout_default <= exec_timeout_max, ...), that check says so."""
    for s in table()["settings"]:
        if s["type"] not in NUMBERS:
            continue
        for v in (s["min"], s["max"]):
            status, out, err = with_file(tmp_path, f"{s['key']} = {v}")
            if status == 0:
                assert {r["key"]: r["value"] for r in out["settings"]}[s["key"]] == v
            else:
                assert status == 2 and "is not an integer" not in err, (s["key"], v, err)


def test_text_settings_are_refused_empty_and_out_of_their_choices(tmp_path):
    for s in table()["settings"]:
        if s["type"] in ("string", "list"):
            status, _, err = with_file(tmp_path, f"{s['key']} =")
            assert status == 2 and f"{s['key']} must not be empty" in err, (s["key"], err)
        elif s["type"] == "enum":
            status, _, err = with_file(tmp_path, f"{s['key']} = bogus")
            choices = s["choices"].split("|")
            said = ", ".join(choices[:-1]) + " or " + choices[-1]
            assert status == 2 and f"{s['key']} must be {said}" in err, (s["key"], err)
    status, _, err = with_file(tmp_path, "no_such_setting = 1")
    assert status == 2 and "unknown setting 'no_such_setting'" in err


def test_flags_win_over_the_file(tmp_path):
    path = tmp_path / "brigd.conf"
    path.write_text("[brigd]\nlisten = 127.0.0.1:1\nagent_path = /file/agent\n")
    status, out, err = print_settings("--listen", "127.0.0.1:2", "--config", str(path))
    assert status == 0, err
    got = {s["key"]: s["value"] for s in out["settings"]}
    assert got["listen"] == "127.0.0.1:2" and got["agent_path"] == "/file/agent"


def test_a_default_above_its_maximum_is_refused_at_start(tmp_path):
    cfg = tmp_path / "brigd.conf"
    cfg.write_text("[brigd]\nexec_timeout_default = 120\nexec_timeout_max = 60\n")
    status, said = Brigd(str(tmp_path / "state"), ["--config", str(cfg)]).refused()
    assert "exec_timeout_default exceeds exec_timeout_max" in said
    assert status == 2
