"""The README's main job, ``python -m tagged_ops``, and the self-check behind results/*.json."""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import tagged_ops
from tagged_ops._selfcheck import describe_paths, main


def test_the_main_job_reports_this_torch_and_passes_its_self_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main() == 0
    out = capsys.readouterr().out
    assert f"torch {torch.__version__}" in out
    assert f"NATIVE_TAGS: {tagged_ops.NATIVE_TAGS}" in out
    for check in ("eager", "opcheck", "compile", "export"):
        assert f"self-check {check:8s} PASS" in out


def test_every_path_of_this_torch_passes_the_self_check(record_property: Callable[[str, object], None]) -> None:
    paths = describe_paths()
    assert set(paths) == ({"native", "fallback"} if tagged_ops.NATIVE_TAGS else {"fallback"})
    for path, described in paths.items():
        assert described["self_check"] == dict.fromkeys(("eager", "opcheck", "compile", "export"), "PASS"), path
    record_property("tagged_ops_paths", paths)  # results/*.json take it from here (tests/_results.py)
