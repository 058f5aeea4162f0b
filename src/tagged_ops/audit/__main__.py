"""``python -m tagged_ops.audit NAMESPACE [NAMESPACE ...] [--json FILE] -- PYTEST_ARGS...``: see ``tagged_ops.audit``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from . import OBSERVE_PER_KIND, Audit


class _Plugin:
    """Watches the ops while each test runs, its fixtures' setup and teardown included."""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Iterator[None]:
        with self.audit:
            yield


def _workers(pytest_args: list[str]) -> bool:
    """Whether the pytest arguments spread the tests over worker processes (pytest-xdist's ``-n``)."""
    for i, arg in enumerate(pytest_args):
        if arg in ("-n", "--numprocesses"):
            value = pytest_args[i + 1] if i + 1 < len(pytest_args) else ""
        elif arg.startswith("--numprocesses="):
            value = arg.partition("=")[2]
        elif arg.startswith("-n") and not arg.startswith("--"):
            value = arg[2:].lstrip("=")  # -n2, -n=2, -nauto
        else:
            continue
        if value != "0":
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        prog="python -m tagged_ops.audit",
        description="Run a test suite and report, op by op, what each op of NAMESPACE does to its arguments.",
        epilog="Arguments after -- go to pytest, which runs in this process (no -n: the watch sees this process only).",
    )
    parser.add_argument("namespaces", nargs="+", metavar="NAMESPACE", help="the op namespaces to watch")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    parser.add_argument(
        "--observe",
        type=int,
        default=OBSERVE_PER_KIND,
        metavar="N",
        help=f"calls observed per op and kind of call, the rest only counted (default {OBSERVE_PER_KIND}; 0: all)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="OP",
        help="an op never rerun, only counted (ns::name or ns::name.overload), once per op: collectives, "
        "ops with effects beyond their arguments",
    )
    args = parser.parse_args(ours)
    if _workers(pytest_args):
        parser.error("the audit watches this process only: leave -n out of the pytest arguments (or pass -n 0)")

    audit = Audit(args.namespaces, observe_per_kind=args.observe or None, skip=args.skip)
    start = time.perf_counter()
    code = pytest.main(pytest_args, plugins=[_Plugin(audit)])
    elapsed = time.perf_counter() - start
    print(f"\ntagged_ops.audit of {', '.join(args.namespaces)} ({elapsed:.1f} s, pytest exit code {int(code)}):\n")
    print(audit.report.table())
    if args.json is not None:
        report: dict[str, Any] = {**audit.report.to_json(), "pytest_exit_code": int(code), "seconds": elapsed}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
