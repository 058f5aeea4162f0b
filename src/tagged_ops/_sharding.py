"""A DTensor sharding rule, written once in the handle's call form, on every op a call can reach.

DTensor runs a custom op on sharded tensors by the rule registered for that very
``OpOverload`` (``torch.distributed.tensor.experimental.register_sharding``): a function
of the op's arguments returning ``[(output placements, input placements), ...]``. A
tagged_ops call reaches several ops: the op users call (tagged on the native path, the
untagged op returning nothing on the fallback), and, in compiled code, the untagged twin
and the functional twin. Each takes its arguments in its own order and returns its own
results, so a rule written for one would not fit the others. :class:`ShardingRule` takes
the user's rule in the handle's form (out buffers by keyword, input placements in the
order of the handle's parameters, ``None`` for non-Tensor ones, output placements one per
tensor the op writes) and registers, on each op, a translation into that op's form.

An op writes its arguments in place, so DTensor must never hand it a redistributed copy of
one: a strategy whose output placement for a written argument differs from its input
placement is refused, naming the op and the argument, before the kernel runs.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence

from . import _compat_dtensor, _fixes
from ._contract import sharding_rule_error, sharding_unavailable
from ._signature import CallOrder, OpSignature, Param

__all__ = ["Returns", "ShardingRule", "pointwise_sharding"]

#: What an op returns, for its rule's output placements: the written tensors (the tagged op),
#: nothing (the untagged op), or fresh tensors standing for the written ones (the functional twin).
Returns = Literal["written", "nothing", "fresh"]


def pointwise_sharding(*args: Any, **kwargs: Any) -> list[tuple[list[Any], list[Any]]]:
    """The rule of an elementwise op: every Tensor argument and result share one placement.

    Pass it to :meth:`TaggedOp.register_sharding`; each placement that fits the first
    Tensor argument is offered (``Replicate()``, then ``Shard(d)`` for each of its
    dimensions), and DTensor picks the one that needs the least communication.

    >>> _ = sin_out.register_sharding(tagged_ops.pointwise_sharding)
    """
    raise TypeError("pointwise_sharding is a rule for TaggedOp.register_sharding, not a function to call")


class ShardingRule:
    """One op definition's sharding rule, in the handle's form, and the ops it is registered on."""

    def __init__(self, sig: OpSignature, rule: Callable[..., Any]) -> None:
        register = _compat_dtensor.register_sharding()
        if register is None:
            raise sharding_unavailable(sig.qualname)
        self.sig = sig
        self.rule = rule
        self._register = register
        self._handle_order = CallOrder(sig.params)
        self._names = [p.name for p in sig.params]  # the handle's parameters, as declared
        self.ops: list[Any] = []

    def register_on(self, op: Any, schema_order: Sequence[Param], returns: Returns, defaults: dict[str, Any]) -> None:
        """Register the rule, translated into ``op``'s form (``schema_order``: its parameters)."""
        self._register(op)(self._translated(schema_order, returns, defaults))
        self.ops.append(op)
        keyword_tensors = tuple(p.name for p in schema_order if p.keyword_only and p.holds_tensors)
        _fixes.at_sharding_rule(_Registered(op, keyword_tensors))

    def forget(self) -> None:
        """Take the rule off every op it was registered on (the definition is going)."""
        for op in self.ops:
            _compat_dtensor.forget_sharding(op)
        self.ops.clear()

    def strategies(self, values: dict[str, Any]) -> list[tuple[list[Any], dict[str, Any]]]:
        """The user's strategies for a call (every argument by name): output placements, and input
        placements by parameter name; checked against the op's parameters and writes."""
        if self.rule is pointwise_sharding:
            raw = _pointwise(self._names, values, len(self.sig.mutated_names))
        else:
            raw = self._handle_order.call(self.rule, values)
        found = []
        for outputs, inputs in raw:
            outputs, inputs = list(outputs), list(inputs)
            if len(inputs) != len(self._names):
                raise sharding_rule_error(
                    self.sig.qualname,
                    f"gave {len(inputs)} input placements for its {len(self._names)} parameters "
                    f"({', '.join(self._names)}): give one per parameter, None for a non-Tensor one",
                )
            if len(outputs) != len(self.sig.mutated_names):
                raise sharding_rule_error(
                    self.sig.qualname,
                    f"gave {len(outputs)} output placements for the {len(self.sig.mutated_names)} tensor(s) it "
                    f"writes ({', '.join(self.sig.mutated_names)}): give one per written tensor",
                )
            by_name = dict(zip(self._names, inputs, strict=True))
            for name, placement in zip(self.sig.mutated_names, outputs, strict=True):
                if by_name[name] != placement:
                    raise sharding_rule_error(
                        self.sig.qualname,
                        f"places the written argument {name!r} as {by_name[name]} on input and {placement} on "
                        "output: the op writes it in place, so both must be the same placement",
                    )
            found.append((outputs, by_name))
        return self._keeping_written_placements(found, values)

    def _keeping_written_placements(
        self, found: list[tuple[list[Any], dict[str, Any]]], values: dict[str, Any]
    ) -> list[tuple[list[Any], dict[str, Any]]]:
        """The strategies that leave every written DTensor as it is placed: DTensor must not hand
        the op a redistributed copy of a tensor it writes (the write would be lost)."""
        spec = _compat_dtensor.spec_type()
        placed = {n: tuple(values[n].placements) for n in self.sig.mutated_names if isinstance(values.get(n), spec)}
        for name, placements in placed.items():
            if len(placements) != 1:
                # DTensor combines a rule's strategies across mesh dimensions itself, past this
                # check: one combination could redistribute a written tensor, and its write be lost.
                raise sharding_rule_error(
                    self.sig.qualname,
                    f"cannot be used for {name!r}, which is placed on a {len(placements)}-dimensional mesh: "
                    "tagged_ops checks that a written DTensor is never redistributed on 1-dimensional meshes "
                    "only; call the op on a 1-dimensional mesh's DTensors (or on local tensors)",
                )
        kept = [(o, i) for o, i in found if all(i[n] in placed[n] for n in placed)]
        if found and not kept:
            where = ", ".join(f"{n!r} as {list(p)}" for n, p in placed.items())
            raise sharding_rule_error(
                self.sig.qualname,
                f"offers no strategy that keeps the tensors the op writes as they are placed ({where}): "
                "DTensor would write into a redistributed copy; redistribute them before the call, or add such a strategy",
            )
        return kept

    def _translated(
        self, schema_order: Sequence[Param], returns: Returns, defaults: dict[str, Any]
    ) -> Callable[..., list[tuple[list[Any], list[Any]]]]:
        op_order = CallOrder(schema_order)
        schema_names = [p.name for p in schema_order]

        def rule(*args: Any, **kwargs: Any) -> list[tuple[list[Any], list[Any]]]:
            values = op_order.by_name(args, kwargs, defaults)
            translated = []
            for outputs, by_name in self.strategies(values):
                # "written" and "fresh" return one tensor per written argument, placed as it
                # (strategies() checked that), so the user's output placements serve both
                translated.append(([] if returns == "nothing" else outputs, [by_name[n] for n in schema_names]))
            return translated

        return rule


class _Registered:
    """An op a rule was just registered on, as the fixes see it (``_fixes.ShardedOp``)."""

    def __init__(self, op: Any, keyword_tensors: tuple[str, ...]) -> None:
        self.op, self.keyword_tensors = op, keyword_tensors


def _pointwise(names: Sequence[str], values: dict[str, Any], written: int) -> list[tuple[list[Any], list[Any]]]:
    from torch.distributed.tensor import Replicate, Shard

    spec = _compat_dtensor.spec_type()
    tensors = [values[n] for n in names if isinstance(values.get(n), spec)]
    ndim = tensors[0].ndim if tensors else 0
    strategies = []
    for placement in (Replicate(), *(Shard(d) for d in range(ndim))):
        inputs = [placement if isinstance(values.get(n), spec) else None for n in names]
        strategies.append(([placement] * written, inputs))
    return strategies
