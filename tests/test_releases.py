"""The release table (tools/releases.py): every release takes the path the table says, and
every other list of releases, Pythons or CI sessions agrees with the table."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from packaging.version import Version

import tagged_ops._compat as caps
from tagged_ops.testing.nox import PYTHON_RANGES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
try:
    import compat_matrix
    import releases
finally:
    sys.path.pop(0)


def test_this_torch_takes_its_expected_path() -> None:
    """A torch whose probe answer changes (a renamed keyword, a moved tag) fails here, loudly,
    instead of every op quietly taking the other path while the native tests skip."""
    problem = releases.path_problem(torch.__version__, caps.NATIVE_TAGS)
    assert problem is None, problem


def test_a_probe_that_stops_seeing_native_tags_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = releases.expected_path(torch.__version__)
    if expected is None:
        pytest.skip(f"torch {torch.__version__} is between the table's rows: no expected path")
    if expected == "native":
        # What a future torch could do: drop infer_schema's tags= keyword.
        real = torch.library.infer_schema

        def infer_schema(prototype_function, /, *, mutates_args, op_name=None):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
            return real(prototype_function, mutates_args=mutates_args, op_name=op_name)

        monkeypatch.setattr(torch.library, "infer_schema", infer_schema)
    else:
        # What a backport could do: give torch.Tag both names and infer_schema/define a tags= keyword.
        monkeypatch.setattr(caps, "accepts_keyword", lambda fn, name: True)
        monkeypatch.setattr(torch, "Tag", type("Tag", (), {"inplace": object(), "out": object()}))
    answer = caps._probe_native_tags()
    assert answer is (expected != "native")
    problem = releases.path_problem(torch.__version__, answer)
    assert problem is not None and f"must take the {expected} path" in problem


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("2.4.1+cu121", "fallback"),
        ("2.12.1", "fallback"),
        ("2.13.0+cpu", "native"),
        ("2.16.0.dev20270101+cpu", "native"),  # the next torch's nightly
        ("2.16.0rc1", "native"),
        ("2.13.0a0+git1234abc", None),  # a pre-release of a tabled release: not the release
        ("2.12.0", None),  # between rows
    ],
)
def test_expected_path_of_builds(version: str, path: str | None) -> None:
    assert releases.expected_path(version) == path


def test_the_table_is_ordered_and_native_from_one_release_on() -> None:
    versions = [Version(r) for r in releases.RELEASES]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    paths = [releases.EXPECTED_PATH[r] for r in releases.RELEASES]
    assert paths == sorted(paths, key=lambda p: p == "native")  # fallback rows, then native rows
    assert releases.FALLBACK_FORCED_RELEASE == next(
        r for r in releases.RELEASES if releases.EXPECTED_PATH[r] == "native"
    )


def test_every_release_runs_on_a_python_it_has_wheels_for() -> None:
    for release, python in releases.PYTHON.items():
        minor = ".".join(release.split(".")[:2])
        assert minor in PYTHON_RANGES, f"testing/nox.py PYTHON_RANGES has no row for torch {minor}"
        low, high = PYTHON_RANGES[minor]
        assert Version(low) <= Version(python) <= Version(high), (release, python)


def test_the_classifiers_name_the_pythons_the_matrix_runs() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    classified = set(re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text))
    assert classified == set(releases.PYTHON.values()) | {releases.PYTHON[releases.TOOLING_RELEASE]}
    assert f'requires-python = ">={min(releases.PYTHON.values(), key=Version)}"' in text


def test_the_compat_matrix_rows_are_the_table() -> None:
    assert compat_matrix.RELEASES == releases.RELEASES


def test_the_noxfile_sessions_are_the_table() -> None:
    pytest.importorskip("nox")
    listing = json.loads(
        subprocess.run(
            [sys.executable, "-m", "nox", "-l", "--json", "-t", "matrix", "ci", "next"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    by_name = {s["session"]: s for s in listing}
    for release in releases.RELEASES:
        session = by_name[f"tests-{release}"]
        assert session["python"] == releases.PYTHON[release]
        assert ("ci" in session["tags"]) is (release in releases.CI_RELEASES)
    forced = by_name[f"tests-{releases.FALLBACK_FORCED_RELEASE}-fallback"]
    assert "matrix" in forced["tags"] and forced["python"] == releases.PYTHON[releases.FALLBACK_FORCED_RELEASE]
    ci = {s["session"] for s in listing if "ci" in (s.get("tags") or [])}
    assert ci == {f"tests-{r}" for r in releases.CI_RELEASES} | {"build", "docs", "lint", "cuda_check-dry-run"}
    assert "tests-next" in by_name and "ci" not in by_name["tests-next"]["tags"]


def test_the_support_policy_lists_the_table() -> None:
    text = (ROOT / "docs" / "SUPPORT.md").read_text()
    assert ", ".join(releases.RELEASES) in text
    for release, python in releases.PYTHON.items():
        if python != "3.11":
            assert f"{python} (torch {release})" in text
