"""Shared fixtures: run a test on the native path and on the forced fallback.

``path`` defines ops with ``TAGGED_OPS_FALLBACK`` unset (native tags, where this
torch has them) or set (the fallback). Native is skipped, with the reason, on a
torch without native tags or when the whole run was started with the fallback
forced. Devices come from our own pytest plugin's ``tagged_ops_device`` (CPU,
and CUDA or a skip with the reason; ``TAGGED_OPS_REQUIRE_CUDA=1`` or
``--tagged-ops-require-cuda`` turns that skip into a failure).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from typing import Iterator

import pytest
import torch

import tagged_ops
from tagged_ops._switches import FALLBACK_ENV_VAR, env_flag

# Registered by the pytest11 entry point when tagged-ops is installed; named here
# for runs against a source tree (nox -s tests-installed). Same name: loaded once.
pytest_plugins = ["tagged_ops.testing.pytest_plugin"]

_FORCED_AT_START = env_flag(FALLBACK_ENV_VAR)
_counter = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    # Each run compiles into its own Inductor cache: results never depend on
    # what an earlier run (another release, another path) left behind.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tagged_ops_inductor_"))
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker:
        # pytest-xdist: workers number their op namespaces alike (see ``ns``), and a
        # cache entry names ops only by name, so each worker gets a cache of its own.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], worker)
    target = os.environ.get("TAGGED_OPS_RESULTS")
    if target:
        from ._results import ResultsRecorder

        config.pluginmanager.register(ResultsRecorder(target), "tagged_ops_results")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"torch {torch.__version__}; tagged_ops.NATIVE_TAGS={tagged_ops.NATIVE_TAGS}; "
        f"{FALLBACK_ENV_VAR}={'1' if _FORCED_AT_START else 'unset'}; cuda={torch.cuda.is_available()}"
    ]


@pytest.fixture(params=["native", "fallback"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path that ops defined in this test take."""
    if request.param == "native":
        if not tagged_ops.NATIVE_TAGS:
            pytest.skip(f"torch {torch.__version__} has no native tagged custom ops")
        if _FORCED_AT_START:
            pytest.skip(f"{FALLBACK_ENV_VAR}=1 forces the fallback for this run")
        monkeypatch.delenv(FALLBACK_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(FALLBACK_ENV_VAR, "1")
    return str(request.param)


@pytest.fixture
def sets_the_fallback_switch_itself() -> None:
    """For tests whose subprocesses get ``TAGGED_OPS_FALLBACK`` set or unset by the test itself.

    Their commands and environments do not depend on the run's switch, so a run
    started with the fallback forced would repeat the regular run's subprocesses
    exactly; it skips them, saying so.
    """
    if _FORCED_AT_START:
        pytest.skip(f"sets {FALLBACK_ENV_VAR} for its own subprocesses: the run without it forced runs the same ones")


@pytest.fixture
def ns() -> str:
    """A fresh op namespace, so tests never see each other's definitions."""
    return f"tagged_ops_test{next(_counter)}"


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
