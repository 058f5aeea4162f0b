"""The CI workflow fans out over exactly the noxfile's sessions, and the Python edges are in them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "matrix.yml"


def _matrix_listing() -> list[dict[str, object]]:
    pytest.importorskip("nox")
    out = subprocess.run(
        [sys.executable, "-m", "nox", "-l", "--json", "-t", "matrix"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def test_workflow_reads_its_session_list_from_the_noxfile() -> None:
    text = WORKFLOW.read_text()
    assert "nox -l --json -t matrix | python tools/ci_sessions.py" in text
    assert "fromJSON(needs.sessions.outputs.sessions)" in text
    assert "tests-2." not in text  # no hand-kept list to drift from the noxfile


def test_the_fanned_out_sessions_are_the_noxfiles_matrix() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import ci_sessions
    finally:
        sys.path.pop(0)
    listing = _matrix_listing()
    fanned = ci_sessions.sessions(listing)
    assert [s["session"] for s in fanned] == [s["session"] for s in listing]
    by_name = {s["session"]: s["python"] for s in fanned}
    assert "tests-2.13.0-fallback" in by_name and "tests-2.2.2" in by_name and "tests-2.15.0" in by_name
    # one Python per release, and the matrix as a whole reaches both edges we claim and have
    assert by_name["tests-2.14.1"] == "3.10" and by_name["tests-2.15.0"] == "3.13"
    assert len(by_name) == len(listing)


def test_the_release_workflow_builds_once_checks_and_publishes_without_a_token() -> None:
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert 'tags: ["v*"]' in text
    assert text.count("run: nox -s build") == 1  # built once; the same files are published
    assert "pypa/gh-action-pypi-publish@" in text and "attestations: true" in text
    assert "id-token: write" in text and "secrets." not in text and "password" not in text
    assert '"v$version" != "$GITHUB_REF_NAME"' in text  # the tag is pyproject.toml's version


def test_the_next_torch_workflow_runs_nightly_and_reports_failures() -> None:
    text = (ROOT / ".github" / "workflows" / "next-torch.yml").read_text()
    assert "schedule:" in text and "nox -s tests-next" in text
    assert "TAGGED_OPS_TORCH_INDEX_URL: ${{ vars.TORCH_PRERELEASE_INDEX_URL" in text
    assert "if: failure()" in text and "gh issue create" in text and "gh issue comment" in text
