"""tagged_ops.testing.nox: a user's torch matrix in a few lines of their noxfile."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version

from tagged_ops.testing.nox import NUMPY_1_RELEASES, PYTHON_RANGES, install_torch, python_for, torch_matrix


@pytest.mark.parametrize(
    ("release", "prefer", "expected"),
    [
        ("2.15.0", "3.11", "3.11"),
        ("2.15.0", "3.10", "3.11"),  # 2.15 has no 3.10 wheels
        ("2.14.1", "3.10", "3.10"),
        ("2.2.2", "3.13", "3.12"),  # 2.2-2.4 stop at 3.12
        ("2.5.1", "3.13", "3.13"),
        ("2.9.1", "3.14", "3.14"),
        ("2.4.1", "3.14", "3.12"),
    ],
)
def test_python_for_picks_a_python_the_release_has_wheels_for(release: str, prefer: str, expected: str) -> None:
    assert python_for(release, prefer) == expected


def test_every_matrix_release_has_a_python_range() -> None:
    for minor in range(2, 16):
        low, high = PYTHON_RANGES[f"2.{minor}"]
        assert Version(low) <= Version("3.11") <= Version(high)  # the default Python serves every release we support


class _Session:
    def __init__(self) -> None:
        self.installs: list[tuple[str, ...]] = []

    def install(self, *args: str, env: Any = None) -> None:
        self.installs.append(args)


@pytest.mark.parametrize("release", ["2.2.2", "2.3.1", "2.4.1", "2.13.0"])
def test_install_torch_pins_numpy_1_where_the_release_needs_it(release: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAGGED_OPS_TORCH_INDEX_URL", raising=False)
    session = _Session()
    install_torch(session, release, "pytest", "numpy")
    (args,) = session.installs
    assert args[0] == f"torch=={release}"
    assert ("numpy<2" in args) is (release.rsplit(".", 1)[0] in NUMPY_1_RELEASES)


def test_install_torch_takes_the_torch_index_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAGGED_OPS_TORCH_INDEX_URL", "https://example.invalid/whl/cpu")
    session = _Session()
    install_torch(session, "2.4.1")
    (args,) = session.installs
    assert args[:2] == ("--index-url", "https://example.invalid/whl/cpu") and "torch==2.4.1" in args


def test_torch_matrix_declares_a_session_per_release_and_a_fallback_run() -> None:
    nox = pytest.importorskip("nox")
    names = torch_matrix(["2.13.0", "2.4.1"], name="kernel-lib-tests")
    assert names == ["kernel-lib-tests-2.13.0", "kernel-lib-tests-2.4.1", "kernel-lib-tests-2.13.0-fallback"]
    registry = nox.registry.get()
    for name in names:
        assert name in registry
        assert "torch-matrix" in registry[name].tags
    assert registry["kernel-lib-tests-2.4.1"].python == "3.11"
    assert registry["kernel-lib-tests-2.13.0-fallback"].venv_backend == "uv"


def test_the_helper_runs_in_a_nox_runner_without_torch(tmp_path: Any, sets_the_fallback_switch_itself: None) -> None:
    """The documented install of a nox runner (docs/testing.md): nox, uv and packaging, then tagged-ops
    without its dependencies. The example's noxfile lists its sessions, and no torch was installed."""
    import shutil
    import subprocess
    import sys
    import venv
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    runner = tmp_path / "runner"
    venv.EnvBuilder(with_pip=True).create(runner)
    python = runner / "bin" / "python"
    here = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp_path / "w"), "nox", "packaging"],
        capture_output=True,
        text=True,
    )
    if here.returncode != 0:
        # the reason is recorded in results/: it names what is missing, never a path of this machine
        missing = (
            "no pip beside this interpreter" if "No module named pip" in here.stderr else "no package registry here"
        )
        pytest.skip(f"{missing}: `pip download nox` failed")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "nox", "packaging"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(root)], check=True)
    listed = subprocess.run(
        [str(python), "-m", "nox", "-l", "-f", str(root / "examples" / "kernel_lib" / "noxfile.py")],
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    for name in ("tests-2.4.1", "tests-2.13.0", "tests-2.13.0-fallback"):
        assert name in listed.stdout
    has_torch = subprocess.run([str(python), "-c", "import torch"], capture_output=True)
    assert has_torch.returncode != 0  # the runner has no torch
    shutil.rmtree(runner)
