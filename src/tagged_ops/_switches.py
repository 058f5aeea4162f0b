"""Environment switches: one parser for every ``TAGGED_OPS_*`` on/off variable.

Used by the package, the pytest plugin, the nox helper and the tests, and
imports nothing heavy (no torch), so a noxfile or a pytest start-up can read it.
"""

from __future__ import annotations

import os

__all__ = [
    "COMPILE_FUNCTIONAL_ENV_VAR",
    "FALLBACK_ENV_VAR",
    "PRUNE_ENVS_ENV_VAR",
    "REQUIRE_CUDA_ENV_VAR",
    "TORCH_INDEX_ENV_VAR",
    "compile_functional_forced",
    "env_flag",
    "fallback_forced",
]

#: ``TAGGED_OPS_FALLBACK=1``: ops defined from now on take the fallback path.
FALLBACK_ENV_VAR = "TAGGED_OPS_FALLBACK"
#: ``TAGGED_OPS_COMPILE_FUNCTIONAL=1``: compiled calls of every op go through its functional
#: twin (see ``define_out(compile_functional=...)``), whatever the op was defined with.
COMPILE_FUNCTIONAL_ENV_VAR = "TAGGED_OPS_COMPILE_FUNCTIONAL"
#: ``TAGGED_OPS_REQUIRE_CUDA=1``: a missing GPU fails the CUDA tests instead of skipping them.
REQUIRE_CUDA_ENV_VAR = "TAGGED_OPS_REQUIRE_CUDA"
#: ``TAGGED_OPS_PRUNE_ENVS=1``: the nox helper removes each release's environment after its run.
PRUNE_ENVS_ENV_VAR = "TAGGED_OPS_PRUNE_ENVS"
#: ``TAGGED_OPS_TORCH_INDEX_URL``: the index the nox helper installs torch from (a URL, not a switch).
TORCH_INDEX_ENV_VAR = "TAGGED_OPS_TORCH_INDEX_URL"

_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    """Whether switch ``name`` is on: ``1``/``true``/``yes``/``on`` (any case) are on; unset, ``0``,
    ``false``, ``no`` and ``off`` are off; anything else is refused, naming the variable."""
    value = os.environ.get(name, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(
        f"{name}={os.environ[name]!r} is neither on (1, true, yes, on) nor off (0, false, no, off, unset)."
    )


def fallback_forced() -> bool:
    """``TAGGED_OPS_FALLBACK=1`` asks for the fallback even where native tags exist.

    Read when an op is defined, so a test suite can flip it between definitions.
    """
    return env_flag(FALLBACK_ENV_VAR)


def compile_functional_forced() -> bool:
    """``TAGGED_OPS_COMPILE_FUNCTIONAL=1`` routes every compiled call through the functional twin.

    Read while Dynamo traces a call: set it before the first compile (or after
    ``torch._dynamo.reset()``); graphs compiled earlier keep what they were traced with.
    """
    return env_flag(COMPILE_FUNCTIONAL_ENV_VAR)
