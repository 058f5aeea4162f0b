"""What a downstream library's pytest run reported, read from its JUnit XML (both run.py scripts)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

OUTCOMES = ("passed", "failed", "skipped", "xfailed")


def outcomes(junit: Path) -> dict[str, str]:
    """``classname::name`` -> passed, failed (failure or error), skipped or xfailed."""
    result = {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        result[name] = outcome
    return result


def tally(outcomes: dict[str, str]) -> dict[str, int]:
    """How many tests ended each way."""
    return {k: sum(1 for o in outcomes.values() if o == k) for k in OUTCOMES}
