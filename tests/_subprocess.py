"""Tests that run code in a fresh process, on a path of their choosing."""

from __future__ import annotations

import os
import subprocess
import sys

from tagged_ops._switches import FALLBACK_ENV_VAR


def env_for_path(*, fallback: bool) -> dict[str, str]:
    """This process's environment with ``TAGGED_OPS_FALLBACK=1`` (``fallback``) or without it."""
    env = dict(os.environ)
    env.pop(FALLBACK_ENV_VAR, None)
    if fallback:
        env[FALLBACK_ENV_VAR] = "1"
    return env


def run_program(code: str, *, fallback: bool) -> str:
    """Run ``code`` in a fresh interpreter on the path chosen; assert it exited cleanly, return its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], env=env_for_path(fallback=fallback), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout
