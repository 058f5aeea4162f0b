"""The tagged_ops pytest plugin, registered through the ``pytest11`` entry point.

Everything is prefixed ``tagged_ops`` / ``--tagged-ops-`` so it cannot clash with your names:

* fixture ``tagged_ops_device``: ``"cpu"``, and ``"cuda"`` (skipped with the
  reason when this machine has no GPU);
* ``--tagged-ops-require-cuda``: a missing GPU fails those tests instead
  (also ``TAGGED_OPS_REQUIRE_CUDA=1``);
* ``--tagged-ops-fallback``: sets ``TAGGED_OPS_FALLBACK=1`` before your
  conftest files and test modules are imported, so every op they define takes
  the fallback path: your whole suite on the old-torch path of a new torch.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# (tagged_ops loads lazily: this import does not import torch, so a pytest start-up pays nothing)
from .._switches import FALLBACK_ENV_VAR, REQUIRE_CUDA_ENV_VAR, env_flag


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tagged_ops")
    group.addoption(
        "--tagged-ops-require-cuda", action="store_true", help="fail, rather than skip, CUDA tests without a GPU"
    )
    group.addoption(
        "--tagged-ops-fallback", action="store_true", help=f"set {FALLBACK_ENV_VAR}=1 before test modules are imported"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    if getattr(early_config.known_args_namespace, "tagged_ops_fallback", False) or "--tagged-ops-fallback" in args:
        os.environ[FALLBACK_ENV_VAR] = "1"


def _require_cuda(config: pytest.Config) -> bool:
    return bool(config.getoption("--tagged-ops-require-cuda")) or env_flag(REQUIRE_CUDA_ENV_VAR)


@pytest.fixture(params=["cpu", "cuda"])
def tagged_ops_device(request: pytest.FixtureRequest) -> Any:
    """The device to test on: CPU always, CUDA where this machine has it."""
    if request.param == "cuda":
        import torch

        if not torch.cuda.is_available():
            if _require_cuda(request.config):
                pytest.fail("CUDA is required (--tagged-ops-require-cuda) but not available")
            pytest.skip("CUDA is not available on this machine")
    return request.param
