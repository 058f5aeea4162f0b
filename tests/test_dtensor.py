"""Tagged ops on DTensors: one sharding rule through the handle, every path, eager and compiled.

Two gloo ranks on CPU, spawned once for the module (tests/_dtensor_worker.py runs every
scenario on both ranks); each test asserts one scenario on both. On both paths where the
release has native tags: in-place and out= on ``Shard(0)``, ``Shard(1)`` and
``Replicate()`` return the very DTensor they were given, placements unchanged, with the
single-process values; ``torch.ops`` calls behave as on plain tensors; compiled
(``fullgraph=True``) programs that write inputs and intermediates equal eager; a read
input is redistributed where the rule asks, a written one never is (refused, loudly, with
every tensor untouched), and a rule that does not fit the op is refused naming the op and
its parameters. Then a tensor-parallel module and an FSDP2 optimizer step.
"""

from __future__ import annotations

import json
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import tagged_ops
from tagged_ops import _compat_dtensor

pytestmark = pytest.mark.xdist_group("dtensor")  # one spawn for the module (noxfile: --dist loadgroup)

HAS_RULES = _compat_dtensor.register_sharding() is not None
PATHS = ["native", "fallback"] if tagged_ops.NATIVE_TAGS else ["fallback"]
PLACEMENTS = ["Shard(0)", "Shard(1)", "Replicate()"]
PROGRAMS = ["inplace_on_an_input", "out_into_an_input", "writes_to_intermediates"]
SPAWN_LIMIT_S = 300  # every scenario on both ranks takes 20-90 s on 2 cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ranks() -> list[dict[str, Any]]:
    if not HAS_RULES:
        pytest.skip(f"torch {torch.__version__} has no DTensor register_sharding (2.5+)")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    import torch.multiprocessing as mp

    from ._dtensor_worker import run

    with tempfile.TemporaryDirectory() as folder:
        context = mp.spawn(run, args=(2, _free_port(), folder), nprocs=2, join=False)
        deadline = time.monotonic() + SPAWN_LIMIT_S
        while not context.join(timeout=5):  # a hung collective must fail the module, not the whole run
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                pytest.fail(f"the two ranks did not finish within {SPAWN_LIMIT_S} s")
        return [json.loads((Path(folder) / f"rank{r}.json").read_text()) for r in range(2)]


def _assert_scenario(ranks: list[dict[str, Any]], name: str) -> None:
    for rank, results in enumerate(ranks):
        assert "worker" not in results, results["worker"]
        assert name in results, f"rank {rank} did not run {name!r}"
        ok, detail = results[name]
        if ok is None:
            pytest.skip(detail)
        assert ok, f"rank {rank}: {name}: {detail}"


@pytest.mark.skipif(HAS_RULES, reason="this torch has register_sharding: the other tests use it")
def test_register_sharding_is_refused_clearly_without_dtensor_rules(ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::scale_")
    def scale_(x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)

    with pytest.raises(
        RuntimeError, match=rf"{ns}::scale_: register_sharding needs .* torch {re.escape(torch.__version__)}"
    ):
        scale_.register_sharding(tagged_ops.pointwise_sharding)
    x = torch.ones(2)
    assert scale_(x) is x and x.tolist() == [2.0, 2.0]  # the op itself is untouched


def test_canary_dtensor_takes_ops_returning_nothing(ranks: list[dict[str, Any]]) -> None:
    """A raw op that returns nothing fails under DTensor exactly where the probe says
    (_fixes/dtensor_ops_returning_nothing.py acts there): 2.5.1 fails, 2.13.0 does not."""
    _assert_scenario(ranks, "canary: returning nothing")


def test_canary_dtensor_keys_its_cache_without_keyword_tensors(ranks: list[dict[str, Any]]) -> None:
    """A raw op with a keyword-only out buffer, called again with ``out`` placed otherwise,
    reuses the first call's sharding (_fixes/dtensor_keyword_tensors_in_cache_key.py): 2.15.0
    silently re-places ``out``, 2.13.0 and 2.5.1 fail. Fails once DTensor keys its cache by
    keyword-only Tensors: then retire the fix."""
    _assert_scenario(ranks, "canary: keyword tensors")


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("form", ["eager in-place", "eager out=", "torch.ops calls"])
def test_eager_calls_keep_the_dtensors_they_write(
    ranks: list[dict[str, Any]], form: str, path: str, placement: str
) -> None:
    _assert_scenario(ranks, f"{path}: {form} on {placement}")


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_compiled_programs_equal_eager(ranks: list[dict[str, Any]], program: str, path: str, placement: str) -> None:
    _assert_scenario(ranks, f"{path}: compiled {program} on {placement}")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "case",
    [
        "reads are redistributed, writes are not",
        "a write that would need a redistribution is refused",
        "a rule that does not fit is refused",
        "a written DTensor on a 2-D mesh is refused",
    ],
)
def test_redistribution_and_refusals(ranks: list[dict[str, Any]], case: str, path: str) -> None:
    _assert_scenario(ranks, f"{path}: {case}")


@pytest.mark.parametrize("path", PATHS)
def test_local_map_around_the_ops(ranks: list[dict[str, Any]], path: str) -> None:
    """``local_map`` hands each rank its local shards: the handles write them in place there."""
    _assert_scenario(ranks, f"{path}: local_map around the ops")


@pytest.mark.parametrize("path", PATHS)
def test_exported_programs_equal_eager(ranks: list[dict[str, Any]], path: str) -> None:
    """``torch.export`` (strict and not) of modules writing DTensor inputs and intermediates, on
    each placement, equals eager; skipped where torch cannot export a DTensor program with a raw
    functional custom op either (2.5.1-2.9.1), naming the error."""
    _assert_scenario(ranks, f"{path}: exported programs equal eager")


@pytest.mark.parametrize("path", PATHS)
def test_the_test_kit_checks_a_handle_on_dtensors(ranks: list[dict[str, Any]], path: str) -> None:
    """``tagged_ops.testing.check_sharded`` passes the ops whose rules are right, and fails an
    in-place cumsum along dimension 1 given the pointwise rule on ``Shard(1)`` only, naming
    the placement and the wrong values."""
    _assert_scenario(ranks, f"{path}: the test kit checks the ops on DTensors")


def test_a_tensor_parallel_module(ranks: list[dict[str, Any]]) -> None:
    _assert_scenario(ranks, "tensor parallel: colwise, the op on the DTensor activation, rowwise")


def test_an_fsdp2_optimizer_step(ranks: list[dict[str, Any]]) -> None:
    """The tagged step equals the same step with ATen's ops under FSDP2, and one process's. Skipped,
    naming torch's error, where FSDP2 runs no step on CPU with ATen's ops (2.5.1, 2.6.0), or where that
    step leaves other parameters than one process does (2.7.1, 2.8.0), the tagged step equal to it."""
    _assert_scenario(ranks, "FSDP2: an optimizer step updating sharded parameters in place")
