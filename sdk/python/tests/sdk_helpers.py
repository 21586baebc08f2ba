"""Paths and small helpers shared by the SDK's tests (not in conftest.py, so
that running these tests together with tests/integration cannot pick up the
other directory's conftest module)."""

from __future__ import annotations

import os

import brig

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(SDK))


def gone(sandbox_id: str) -> bool:
    """The sandbox has ended: brigd answers 404, or (with a retention period)
    its record in state "deleted"."""
    try:
        sb = brig.Sandbox.connect(sandbox_id)
    except brig.NotFound:
        return True
    sb.close()
    return sb.info.deleted


def unknown_field(err: brig.BrigError, name: str) -> bool:
    """brigd refused a body field it does not know yet."""
    return isinstance(err, brig.InvalidRequest) and f"'{name}'" in err.message \
        and "unknown field" in err.message
