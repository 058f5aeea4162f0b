"""The CI fan-out: which nox sessions the workflow runs, read from the noxfile itself.

    nox -l --json -t matrix | python tools/ci_sessions.py
    nox -l --json -t downstream | python tools/ci_sessions.py downstream

prints ``[{"session": "tests-2.2.2", "python": "3.11"}, ...]`` for a GitHub
Actions matrix, so the workflow never keeps a list of its own.
"""

from __future__ import annotations

import json
import sys


def sessions(listing: list[dict[str, object]], tag: str = "matrix") -> list[dict[str, object]]:
    """The sessions tagged ``tag``, with the Python each asks for."""
    return [{"session": s["session"], "python": s["python"]} for s in listing if tag in (s.get("tags") or [])]  # type: ignore[operator]


if __name__ == "__main__":
    print(json.dumps(sessions(json.load(sys.stdin), *sys.argv[1:2]), separators=(",", ":")))
