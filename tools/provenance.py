"""Which tagged_ops a measurement ran (the benchmarks, both downstream/*/run.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def tagged_ops_commit() -> str | None:
    """This checkout's commit (``-dirty``: with uncommitted changes); None outside a git checkout.

    The benchmarks and the downstream sessions run tagged_ops from the checkout they are in,
    so its commit is the tagged_ops they measured.
    """
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"],
        cwd=Path(__file__).resolve().parent,
        capture_output=True,
        text=True,
        check=False,
    )
    return (done.stdout.strip() or None) if done.returncode == 0 else None
