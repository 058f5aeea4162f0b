"""The CI fan-out: which nox sessions the workflow runs, read from the noxfile itself.

    nox -l --json -t matrix | python tools/ci_sessions.py

prints ``[{"session": "tests-2.2.2", "python": "3.11"}, ...]`` for a GitHub
Actions matrix, so the workflow never keeps a list of its own.
"""

from __future__ import annotations

import json
import sys


def sessions(listing: list[dict[str, object]]) -> list[dict[str, object]]:
    """The sessions tagged ``matrix``, with the Python each asks for."""
    return [{"session": s["session"], "python": s["python"]} for s in listing if "matrix" in (s.get("tags") or [])]


if __name__ == "__main__":
    print(json.dumps(sessions(json.load(sys.stdin)), separators=(",", ":")))
