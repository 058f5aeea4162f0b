"""tools/cuda_check.sh's results fill compat_matrix.md's CUDA column and runs table.

The check itself runs on a GPU machine (and, as a dry run, in ``nox -s cuda_check-dry-run``);
here a result in its format, as the GPU run writes it, is fed to tools/compat_matrix.py.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import compat_matrix  # noqa: E402
import cuda_check  # noqa: E402


def _check(*, failed_stage: str | None = None, dry_run: bool = False) -> dict[str, Any]:
    stages = [
        dataclasses.asdict(
            cuda_check.Stage(name, status="failed" if name == failed_stage else "passed", counts={"passed": 3})
        )
        for name in cuda_check.LIMITS
    ]
    return {
        "torch": "2.11.0+cu130",
        "torch_build": {"cuda": "13.0"},
        "gpu": "NVIDIA H100 80GB HBM3",
        "driver": "580.65.06",
        "dry_run": dry_run,
        "python": "3.12.3",
        "machine": "Linux x86_64, 16 CPUs",
        "date": "2026-12-06",
        "commit": "abc1234",
        "seconds": 200.0,
        "passed": failed_stage is None,
        "stages": stages,
    }


def _suite(passed: int, failed: int = 0) -> dict[str, Any]:
    return {"areas": {"cuda": {"native": {"passed": passed, "failed": failed}}, "other": {"any": {"passed": 9}}}}


def _write(folder: Path, check: dict[str, Any], native: dict[str, Any], fallback: dict[str, Any]) -> None:
    (folder / "cuda").mkdir(parents=True)
    (folder / "cuda" / "check-2.11.0.json").write_text(json.dumps(check))
    (folder / "cuda" / "2.11.0.json").write_text(json.dumps(native))
    (folder / "cuda" / "2.11.0-fallback.json").write_text(json.dumps(fallback))


def _row(text: str, release: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {release} |"))


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(compat_matrix, "RESULTS", tmp_path)
    return tmp_path


def test_a_gpu_run_fills_the_cuda_column_and_the_runs_table(results: Path) -> None:
    _write(results, _check(), _suite(30), _suite(28))
    text = compat_matrix.generate()
    assert _row(text, "2.11.0").endswith("| ✓ 58 |")
    assert _row(text, "2.10.0").endswith("| not run |")
    assert "**CUDA: not run.**" not in text
    run = next(line for line in text.splitlines() if line.startswith("| cuda/check-2.11.0 |"))
    assert "NVIDIA H100 80GB HBM3" in run and "driver 580.65.06" in run and "CUDA 13.0" in run


def test_a_failed_stage_or_test_shows_in_the_column(results: Path) -> None:
    _write(results, _check(failed_stage="C++ kernels"), _suite(30), _suite(27, failed=1))
    assert _row(compat_matrix.generate(), "2.11.0").endswith("| ✗ C++ kernels |")


def test_a_dry_run_fills_nothing(results: Path) -> None:
    _write(results, _check(dry_run=True), _suite(0), _suite(0))
    text = compat_matrix.generate()
    assert _row(text, "2.11.0").endswith("| not run |")
    assert "**CUDA: not run.**" in text


def test_pytest_tallies_are_read_from_the_closing_line() -> None:
    assert cuda_check._pytest_counts("...\n24 passed, 21 skipped, 42 warnings in 63.19s (0:01:03)\n") == {
        "passed": 24,
        "skipped": 21,
    }
    assert cuda_check._pytest_counts("1 failed, 3 passed in 2.0s") == {"failed": 1, "passed": 3}
