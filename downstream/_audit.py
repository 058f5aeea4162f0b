"""A library's suite under ``python -m tagged_ops.audit``, as an adopter runs it: shared by both libraries."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _junit


def run(tests: list[str], label: str, env: dict[str, str], namespace: str, cwd: str | None = None) -> dict[str, Any]:
    """The suite once plainly and once under ``python -m tagged_ops.audit NAMESPACE`` (one process
    each: the audit watches its own): the report's ops, both tallies and both times."""
    scratch = Path(tempfile.mkdtemp(prefix=f"audit-{label}-"))
    common = [*tests, "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    runs: dict[str, Any] = {}
    for how, prefix in (("plain", ["-m", "pytest"]), ("audited", ["-m", "tagged_ops.audit", namespace])):
        junit = scratch / f"{how}.xml"
        extra = ["--json", str(scratch / "report.json"), "--"] if how == "audited" else []
        command = [sys.executable, *prefix, *extra, *common, f"--junitxml={junit}"]
        print(f"[{label}]", " ".join(command), flush=True)
        start = time.perf_counter()
        subprocess.run(command, env=env, check=False, cwd=cwd or tempfile.gettempdir())
        runs[how] = {"seconds": round(time.perf_counter() - start, 1), "tally": _junit.tally(_junit.outcomes(junit))}
    report = json.loads((scratch / "report.json").read_text())
    return {
        "ops": report["ops"],
        "same_outcomes": runs["plain"]["tally"] == runs["audited"]["tally"],
        "tally": runs["audited"]["tally"],
        "seconds": {how: r["seconds"] for how, r in runs.items()},
        "ratio_seconds": round(runs["audited"]["seconds"] / runs["plain"]["seconds"], 2),
    }


def same_outcomes(audits: dict[str, dict[str, Any]]) -> bool:
    return all(a["same_outcomes"] for a in audits.values())


def write(path: Path, result: dict[str, Any], audits: dict[str, dict[str, Any]]) -> None:
    """The reports beside the session's result, with its provenance."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"torch": result["torch"], "commit": result["commit"], **audits}, indent=1) + "\n")
