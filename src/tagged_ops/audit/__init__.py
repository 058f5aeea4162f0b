"""Which of a library's ops hide what their kernels do, learned from the library's own test suite.

    python -m tagged_ops.audit NAMESPACE [NAMESPACE ...] [--json FILE] -- PYTEST_ARGS...

runs the suite in this process with every Python call of an op in those namespaces
watched (ops registered in C++ or Python, any overload, through ``torch.ops`` or a
tagged_ops handle): which tensor arguments its kernel wrote, whether their new
contents depended on the old (add-into or overwrite), which arguments a returned
tensor shares memory with, and which declared writes never happened. It prints a
table with a verdict and the suggested tagged_ops declaration per op, and with
``--json`` writes the same for a program. The suite's own results are unchanged:
the watched call runs as it would, and the audit learns the rest from reruns on
copies. Calls made from C++ are not watched, nor is tracing (Dynamo, fake tensors);
compiled code that calls an op from Python at run time is watched like any call.

In Python, :class:`Audit` is the same watch as a context manager::

    with tagged_ops.audit.Audit(["mylib"]) as audit:
        run_my_tests()
    print(audit.report.table())
"""

from __future__ import annotations

from types import TracebackType
from typing import Sequence

from ._observe import Watch
from ._report import OpAudit, Report

__all__ = ["Audit", "OpAudit", "Report"]

#: Calls observed per op and kind of call (the rest are counted): see :class:`Audit`.
OBSERVE_PER_KIND = 20


class Audit:
    """Watches the ops of ``namespaces`` while active; :attr:`report` holds what every call showed.

    Enter it as often as needed (per test, say): the report keeps adding up. Of each op, the
    first ``observe_per_kind`` calls of each kind (which arguments are tensors, their dtypes,
    ranks and contiguity, the other arguments' values) are observed and the rest only counted,
    so a suite that calls one op thousands of times alike pays for a few (None: observe all).

    The audit reruns each observed op on copies of its arguments: name in ``skip``
    (``"ns::name"`` or ``"ns::name.overload"``) every op whose effects reach beyond its
    arguments (a collective that other ranks must join, a write to a file or a global cache);
    their calls are counted, never rerun.

    >>> from tagged_ops.audit import Audit
    >>> lib = torch.library.Library("docs_audit", "DEF")
    >>> _ = lib.define("add_into(Tensor src, Tensor? out=None) -> Tensor")  # says nothing of a write
    >>> def add_into(src, out=None):
    ...     return src.clone() if out is None else out.add_(src)
    >>> lib.impl("add_into", add_into, "CompositeExplicitAutograd")
    >>> with Audit(["docs_audit"]) as audit:
    ...     _ = torch.ops.docs_audit.add_into(torch.ones(2))
    ...     _ = torch.ops.docs_audit.add_into(torch.ones(2), torch.zeros(2))
    >>> entry = audit.report.ops["docs_audit::add_into.default"]
    >>> entry.verdict, entry.writes, entry.suggestion
    ('hides writes', {'out': 'updates'}, 'inplace')
    """

    def __init__(
        self,
        namespaces: Sequence[str],
        *,
        observe_per_kind: int | None = OBSERVE_PER_KIND,
        skip: Sequence[str] = (),
    ) -> None:
        if isinstance(namespaces, str):
            namespaces = [namespaces]
        self.report = Report()
        self._namespaces = tuple(namespaces)
        self._watch = Watch(self._namespaces, self.report.add, observe_per_kind, skip)

    def __enter__(self) -> Audit:
        self._watch.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._watch.__exit__(kind, error, traceback)
