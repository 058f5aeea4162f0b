"""What the audit concludes about each op from every call it watched: a table for a person, JSON for a program.

The suggestion follows the adopting guide's rule (docs/adopting.md, "C++ libraries
whose schemas hide mutation"): an op that writes nothing is functional; one whose
every write overwrites is an out= op (``define_out`` / ``declare_out``; a fresh
result it also returns becomes one more out buffer); one that updates a single
argument and returns nothing fresh is an in-place op on it (``define_inplace`` /
``declare_inplace``, that argument first); anything else stays a classic mutable
op declared with what it writes, handed to ``tagged_ops.adopt_classic``.
"""

from __future__ import annotations

import collections
import re
from typing import Any, Literal

import torch

from .. import _compat
from .._inference import split_top_level
from ._observe import Call

__all__ = ["ADOPTING_GUIDE", "OpAudit", "Report", "Suggestion"]

ADOPTING_GUIDE = "docs/adopting.md#c-libraries-whose-schemas-hide-mutation"
Suggestion = Literal["inplace", "out", "mutates_args", "functional"]


def _base(argument: str) -> str:
    return argument.partition("[")[0]  # "xs[1]" -> "xs": an element of a Tensor[] argument


class OpAudit:
    """Every call of one op, summed up: what the audit concludes about it.

    ``writes`` maps each argument a call wrote (as the schema names it) to ``"updates"``
    (its new contents depended on the old: add-into, a partial write) or ``"overwrites"``;
    :attr:`verdict` is ``"honest"``, ``"hides writes"``, ``"declares writes it never made"``,
    ``"hides an alias"`` or ``"not observed"`` (``problems`` says why); :attr:`suggestion`
    is what to declare it as, and :meth:`declaration` the code.

    >>> entry = audit.report.ops["docs_audit::add_into.default"]  # the example of Audit
    >>> entry.calls, entry.undeclared_writes, entry.aliases
    (2, ['out'], {'out': None})
    >>> print(entry.declaration())
    tagged_ops.declare_inplace("docs_audit::add_into_", "(Tensor(a!) out, Tensor src) -> Tensor(a!)")
    """

    def __init__(self, op: str, schema: Any) -> None:
        self.op = op
        self.schema = schema
        self.calls = 0
        self.observed = 0
        self.writes: dict[str, str] = {}  # argument -> "updates" once any call updated it, else "overwrites"
        self.seen: set[str] = set()  # arguments that held a tensor in an observed call
        self.aliases: dict[str, None] = {}
        self.fresh_outputs = 0  # the most returned tensors of one writing call that alias no argument
        self.problems: collections.Counter[str] = collections.Counter()

    def add(self, call: Call) -> None:
        self.calls += 1
        if call.counted_only:
            return
        if call.problem is not None:
            self.problems[call.problem] += 1
            return
        self.observed += 1
        self.seen.update(call.tensors)
        for name, how in call.writes.items():
            if self.writes.get(name) != "updates":
                self.writes[name] = how
        self.aliases.update(dict.fromkeys(call.aliases))
        if call.writes:  # what the writing form returns besides what it wrote
            self.fresh_outputs = max(self.fresh_outputs, call.fresh_outputs)

    @property
    def declared(self) -> list[str]:
        return _compat.written_argument_names(self.schema)

    @property
    def undeclared_writes(self) -> list[str]:
        return [n for n in self.writes if _base(n) not in self.declared]

    @property
    def declared_unwritten(self) -> list[str]:
        written = {_base(n) for n in self.writes}
        seen = {_base(n) for n in self.seen}
        return [n for n in self.declared if n in seen and n not in written]

    @property
    def hidden_aliases(self) -> list[str]:
        """Arguments a returned tensor shares memory with, where the schema's returns claim no alias."""
        if any(r.alias_info is not None for r in self.schema.returns):
            return []
        return list(self.aliases)

    @property
    def suggestion(self) -> Suggestion | None:
        if not self.observed:
            return None
        if not self.writes:
            return "functional"
        if all(how == "overwrites" for how in self.writes.values()):
            return "out"
        if len(self.writes) == 1 and not self.fresh_outputs:
            return "inplace"
        return "mutates_args"

    @property
    def verdict(self) -> str:
        if not self.observed:
            return "not observed"
        if self.undeclared_writes:
            return "hides writes"
        if self.declared_unwritten:
            return "declares writes it never made"
        if self.hidden_aliases:
            return "hides an alias"
        return "honest"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "schema": str(self.schema),
            "calls": self.calls,
            "observed": self.observed,
            "writes": dict(self.writes),
            "undeclared_writes": self.undeclared_writes,
            "declared_unwritten": self.declared_unwritten,
            "returns_alias_of": list(self.aliases),
            "suggestion": self.suggestion,
            "verdict": self.verdict,
            "not_observed_because": dict(self.problems),
        }

    def declaration(self) -> str | None:
        """The tagged_ops declaration of what the op does, as code (None where nothing needs porting)."""
        suggestion = self.suggestion
        if suggestion in (None, "functional") or self.verdict == "honest":
            return None
        namespace, name = _compat.parse_namespace(str(self.schema.name))
        texts = _argument_texts(self.schema)
        written = [n for n in texts if n in {_base(w) for w in self.writes}]
        reads = [texts[n] for n in texts if n not in written]
        if suggestion == "inplace":
            schema = f"({', '.join([_written_text(texts[written[0]], 'a'), *reads])}) -> Tensor(a!)"
            inplace_name = name if name.endswith("_") else f"{name}_"  # PyTorch's mark of an in-place op, once
            return f'tagged_ops.declare_inplace("{namespace}::{inplace_name}", "{schema}")'
        if suggestion == "out":
            outs = [_written_text(texts[n], chr(ord("a") + i)) for i, n in enumerate(written)]
            outs += [f"Tensor({chr(ord('a') + len(outs) + i)}!) out{i + 1}" for i in range(self.fresh_outputs)]
            returns = [f"Tensor({t.split('(')[1].split(')')[0]})" for t in outs]
            ret = returns[0] if len(returns) == 1 else f"({', '.join(returns)})"
            return f'tagged_ops.declare_out("{namespace}::{name}.out", "({", ".join([*reads, "*", *outs])}) -> {ret}")'
        marked = [
            _written_text(texts[n], chr(ord("a") + written.index(n))) if n in written else texts[n] for n in texts
        ]
        returned = str(self.schema).rpartition(" -> ")[2]
        return (
            f'lib.define("{name}({", ".join(marked)}) -> {returned}")  # what it writes, declared\n'
            f'tagged_ops.adopt_classic("{namespace}::{name}")'
        )


def _argument_texts(schema: Any) -> dict[str, str]:
    """Each argument's text as torch prints it, by name."""
    printed = str(schema)
    inner = printed[printed.index("(") + 1 : printed.rindex(")", 0, printed.rindex("->"))]
    texts = [t.strip() for t in split_top_level(inner) if t.strip() not in ("*", "")]
    return {a.name: t for a, t in zip(schema.arguments, texts, strict=True)}


def _written_text(text: str, letter: str) -> str:
    """``Tensor? out=None`` -> ``Tensor(a!) out``: a written tensor is required and marked."""
    type_text, _, rest = text.partition(" ")
    name = rest.partition("=")[0]
    return f"{re.sub(r'[?(].*', '', type_text)}({letter}!) {name}"


class Report:
    """The audit's findings, op by op (:class:`OpAudit`), in the order the ops were first called.

    >>> list(audit.report.ops)  # the example of Audit
    ['docs_audit::add_into.default']
    >>> audit.report.to_json()["ops"][0]["suggestion"]
    'inplace'
    >>> print(audit.report.table().splitlines()[2])
    | `docs_audit::add_into.default` | 2 (2) | none | out: updates | out | hides writes | inplace |
    """

    def __init__(self) -> None:
        self.ops: dict[str, OpAudit] = {}

    def add(self, call: Call) -> None:
        entry = self.ops.get(call.op)
        if entry is None:
            entry = self.ops[call.op] = OpAudit(call.op, call.schema)
        entry.add(call)

    def to_json(self) -> dict[str, Any]:
        return {"torch": torch.__version__, "ops": [entry.to_json() for entry in self.ops.values()]}

    def table(self) -> str:
        """A Markdown table of every op, then the declaration each op that needs porting should get."""
        lines = [
            "| op | calls (observed) | declared writes | observed writes | returns alias of | verdict | suggestion |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for e in self.ops.values():
            writes = ", ".join(f"{n}: {how}" for n, how in e.writes.items()) or "none"
            lines.append(
                f"| `{e.op}` | {e.calls} ({e.observed}) | {', '.join(e.declared) or 'none'} | {writes} | "
                f"{', '.join(e.aliases) or 'none'} | {e.verdict} | {e.suggestion or '-'} |"
            )
        for e in self.ops.values():
            for problem, count in e.problems.items():
                lines.append(f"\n`{e.op}`: {count} call(s) not observed: {problem}")
            code = e.declaration()
            if code is not None:
                lines.append(f"\n`{e.op}` ({e.verdict}): declare what it does, then see {ADOPTING_GUIDE}:\n")
                lines.append(f"```python\n{code}\n```")
        return "\n".join(lines)
