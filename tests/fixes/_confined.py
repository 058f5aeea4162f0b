"""Fixes for bugs that only some old releases have, and the releases measured to have them.

Each such fix's canary measures torch's own answer (a raw classic op, no tagged_ops) on the
release it runs on, and fails where that answer differs from this table: a listed release
that no longer shows the bug, or an unlisted one that does. The fix retires with the last
listed release of the matrix (tests/fixes/test_canaries_exist.py checks the table against
tools/releases.py).
"""

from __future__ import annotations

from packaging.version import Version

#: fix module -> the torch minor releases whose raw ops show its bug, as the matrix measured them
CONFINED: dict[str, tuple[str, ...]] = {
    "reuse_of_mutated_alias": ("2.3",),
    "saved_export_loading": ("2.3", "2.4", "2.5", "2.6"),
}


def minor(version: str) -> str:
    """``"2.13"`` for ``"2.13.0+cu130"``."""
    major, minor_, *_ = Version(version).release
    return f"{major}.{minor_}"


def has_the_bug(fix: str, version: str) -> bool:
    """Whether torch ``version`` (as ``torch.__version__`` spells it) is listed with ``fix``'s bug."""
    return minor(version) in CONFINED[fix]
