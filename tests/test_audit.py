"""``tagged_ops.audit``: a library's own suite, run once, says what each of its ops does to its arguments.

The ops are tests/_audit_ops.py's: every honest kind and every lie a schema can tell,
called as a library's tests would call them; the audit is told nothing else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest
import torch

import tagged_ops
from tagged_ops.audit import Audit

from . import _audit_ops

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def audited(ns: str) -> Iterator[Audit]:
    lib = _audit_ops.define(ns)  # alive while the test reads the report
    with Audit([ns]) as audit:
        _audit_ops.call_every_op(ns)  # its assertions hold under the audit: the calls behave as without it
    yield audit
    del lib


def test_every_op_is_classified_as_it_behaves(audited: Audit, ns: str) -> None:
    report = {e.op.split("::")[1].removesuffix(".default"): e for e in audited.report.ops.values()}
    assert set(report) == set(_audit_ops.EXPECTED) | set(_audit_ops.UNOBSERVABLE)
    for name, (verdict, suggestion, writes) in _audit_ops.EXPECTED.items():
        entry = report[name]
        assert (entry.verdict, entry.suggestion, entry.writes) == (verdict, suggestion, writes), name
    for name, reason in _audit_ops.UNOBSERVABLE.items():
        entry = report[name]
        assert entry.verdict == "not observed" and entry.suggestion is None, name
        assert all(problem.startswith(reason) for problem in entry.problems), entry.problems


def test_the_json_says_what_each_op_writes_and_returns(audited: Audit, ns: str) -> None:
    ops = {e["op"]: e for e in audited.report.to_json()["ops"]}
    hidden = ops[f"{ns}::hidden_add.default"]
    assert hidden["calls"] == 2 and hidden["observed"] == 2  # with and without out
    assert hidden["writes"] == {"out": "updates"} and hidden["undeclared_writes"] == ["out"]
    assert hidden["returns_alias_of"] == ["out"] and hidden["suggestion"] == "inplace"
    assert ops[f"{ns}::never_writes_.default"]["declared_unwritten"] == ["x"]
    assert ops[f"{ns}::hidden_view.default"]["returns_alias_of"] == ["x"]
    assert ops[f"{ns}::sin_out.default"]["undeclared_writes"] == []


def test_the_suggested_declarations_declare_the_op(audited: Audit, ns: str) -> None:
    """Each suggestion is code that runs: the op declared with what it does."""
    codes = {e.op.split("::")[1]: e.declaration() for e in audited.report.ops.values()}
    assert codes["hidden_add.default"] == (
        f'tagged_ops.declare_inplace("{ns}::hidden_add_", "(Tensor(a!) out, Tensor src) -> Tensor(a!)")'
    )
    assert codes["hidden_pair.default"] == (
        f'tagged_ops.declare_out("{ns}::hidden_pair.out", '
        '"(Tensor src, *, Tensor(a!) out, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))")'
    )
    assert codes["partial_write_.default"] == (  # its name already says in place: no second underscore
        f'tagged_ops.declare_inplace("{ns}::partial_write_", "(Tensor(a!) out, Tensor src, Tensor index) -> Tensor(a!)")'
    )
    assert codes["sin_out.default"] is None  # honest: nothing to port
    ported = f"{ns}_ported"
    lib = torch.library.Library(ported, "DEF")
    for name in ("hidden_add", "hidden_overwrite", "hidden_pair", "hidden_min", "partial_write_"):
        code = codes[f"{name}.default"]
        assert code is not None
        exec(code.replace(f'"{ns}::', f'"{ported}::'), {"tagged_ops": tagged_ops, "lib": lib})  # noqa: S102
    assert tagged_ops.is_native(getattr(torch.ops, ported).hidden_add_) in (True, False)


def test_random_state_is_as_without_the_audit(ns: str) -> None:
    lib = _audit_ops.define(ns)
    ops = getattr(torch.ops, ns)

    def draw() -> torch.Tensor:
        torch.manual_seed(0)
        o = torch.empty(3)
        ops.random_out(torch.zeros(3), out=o)
        return torch.cat([o, torch.rand(3)])

    plain = draw()
    with Audit([ns]):
        watched = draw()
    assert torch.equal(plain, watched)
    del lib


def test_compiled_calls_run_as_without_the_audit(ns: str) -> None:
    """Compiling under the audit traces no audit (Dynamo, fake tensors); compiled code that calls
    the op from Python at run time is watched like any call."""
    lib = _audit_ops.define(ns)
    ops = getattr(torch.ops, ns)

    def f(x: torch.Tensor) -> torch.Tensor:
        return ops.functional(x.sin()) + 1

    x = torch.randn(4)
    torch.compiler.reset()
    with Audit([ns]) as audit:
        got = torch.compile(f, fullgraph=True)(x)
    assert torch.allclose(got, x.sin() * 2 + 1)
    assert all(e.calls == e.observed for e in audit.report.ops.values())  # no call on fake tensors
    del lib


_SUITE = """
import torch
from tests import _audit_ops

lib = _audit_ops.define("{ns}")

def test_ops():
    _audit_ops.call_every_op("{ns}")

def test_fails_as_it_would():
    assert torch.ops.{ns}.functional(torch.ones(1)).item() == 3.0
"""


def _outcome(stdout: str) -> dict[str, int]:
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|error)", stdout)}


def test_the_command_runs_the_suite_and_leaves_its_results_alone(tmp_path: Path, ns: str) -> None:
    suite = tmp_path / "test_suite.py"
    suite.write_text(textwrap.dedent(_SUITE.format(ns=ns)))
    common = [str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT)]
    env_cwd = {"cwd": ROOT, "capture_output": True, "text": True, "timeout": 300}
    plain = subprocess.run([sys.executable, "-m", "pytest", *common], **env_cwd)  # type: ignore[call-overload]
    report = tmp_path / "audit.json"
    audit = subprocess.run(  # type: ignore[call-overload]
        [sys.executable, "-m", "tagged_ops.audit", ns, "--json", str(report), "--", *common], **env_cwd
    )
    assert _outcome(plain.stdout) == _outcome(audit.stdout) == {"passed": 1, "failed": 1}, audit.stdout
    assert plain.returncode == audit.returncode == 1
    data = json.loads(report.read_text())
    assert data["torch"] == torch.__version__ and data["pytest_exit_code"] == 1
    verdicts = {e["op"].split("::")[1].removesuffix(".default"): e["verdict"] for e in data["ops"]}
    assert verdicts == {
        **{name: expected[0] for name, expected in _audit_ops.EXPECTED.items()},
        **dict.fromkeys(_audit_ops.UNOBSERVABLE, "not observed"),
    }
    assert "| verdict | suggestion |" in audit.stdout and "declare_inplace" in audit.stdout


def test_workers_are_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tagged_ops.audit", "mylib", "--", "-n", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "leave -n out" in done.stderr


def test_calls_of_a_kind_seen_often_are_counted_not_observed(ns: str) -> None:
    """A suite that calls an op thousands of times alike pays for a few observations."""
    lib = _audit_ops.define(ns)
    ops = getattr(torch.ops, ns)
    with Audit([ns], observe_per_kind=5) as audit:
        for _ in range(30):
            ops.hidden_add(torch.ones(3), torch.zeros(3))
        ops.hidden_add(torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64))  # another kind
    entry = audit.report.ops[f"{ns}::hidden_add.default"]
    assert (entry.calls, entry.observed, entry.writes) == (31, 6, {"out": "updates"})
    del lib


def test_skipped_ops_are_counted_and_never_rerun(ns: str) -> None:
    """An op whose effects reach beyond its arguments (a collective) must not run twice: named in skip."""
    lib = _audit_ops.define(ns)
    with Audit([ns], skip=[f"{ns}::once_out"]) as audit:
        o = torch.empty(2)
        getattr(torch.ops, ns).once_out(torch.ones(2), out=o)  # fails on any second run
    entry = audit.report.ops[f"{ns}::once_out.default"]
    assert entry.calls == 1 and entry.observed == 0 and entry.verdict == "not observed"
    assert list(entry.problems) == ["skipped: the op is not rerun (named in skip)"]
    assert torch.equal(o, torch.ones(2))
    del lib


@pytest.mark.parametrize(
    ("args", "spread"),
    [(["-n", "2"], True), (["-n2"], True), (["--numprocesses=auto"], True), (["-n", "0"], False), (["-q"], False)],
)
def test_which_pytest_arguments_spread_the_tests_over_workers(args: list[str], spread: bool) -> None:
    from tagged_ops.audit.__main__ import _workers

    assert _workers(args) is spread
