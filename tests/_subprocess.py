"""Tests that run code in a fresh process, on a path of their choosing."""

from __future__ import annotations

import os

from tagged_ops._switches import FALLBACK_ENV_VAR


def env_for_path(*, fallback: bool) -> dict[str, str]:
    """This process's environment with ``TAGGED_OPS_FALLBACK=1`` (``fallback``) or without it."""
    env = dict(os.environ)
    env.pop(FALLBACK_ENV_VAR, None)
    if fallback:
        env[FALLBACK_ENV_VAR] = "1"
    return env
