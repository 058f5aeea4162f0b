"""What Inductor generates for the five buffer patterns, per lowering (issue: compiled code never copies).

Patterns: (a) in-place on a graph input; (b) out= into a graph-input buffer;
(c) out= into a slice of a graph input; (d) in-place on a slice of a graph
input; (e) ``y = x + 1``, in-place on ``y``, return ``y * 2``.

Lowerings: tagged_ops (whatever path it takes), and raw ``torch.library``
ops written by hand in the same process: the natively tagged ``custom_op``
(where torch has tags) and the untagged ``custom_op`` (``Library.define`` before 2.4) plus a returning wrapper.
Used by tests/test_lowering.py (counts) and benchmarks/compiled_buffers.py (timings).
No ``from __future__ import annotations`` here: the raw ops go through torch 2.4's
own schema inference, which rejects string annotations.
"""

import re
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

import tagged_ops

Op = Callable[..., Tensor]

PATTERNS = ("a", "b", "c", "d", "e")


@dataclass(frozen=True)
class Counts:
    kernels: int
    allocations: int  # empty_strided calls in the generated code
    copies: int  # kernels Inductor names after a copy or clone
    twin_calls: int = 0  # calls of tagged_ops' functional twin, each allocating one buffer inside it

    @property
    def buffers(self) -> int:
        """Every buffer the compiled step allocates, including those inside the twin."""
        return self.allocations + self.twin_calls

    def __str__(self) -> str:
        twin = f" / {self.twin_calls} functional-twin calls" if self.twin_calls else ""
        return f"{self.kernels} kernels / {self.allocations} allocations / {self.copies} copies{twin}"


_KEEP: list[torch.library.Library] = []


def raw_untagged(
    qualname: str, schema: str, mutates: tuple[str, ...], kernel: Callable[..., None]
) -> Callable[..., None]:
    """An untagged mutable op as a user writes it by hand: custom_op (2.4+), else Library.define (2.2/2.3)."""
    custom_op = getattr(torch.library, "custom_op", None)
    if custom_op is not None:
        return custom_op(qualname, mutates_args=mutates)(kernel)  # type: ignore[no-any-return]
    ns, name = qualname.split("::")
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(name + schema)
    lib.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.impl_abstract(qualname, lambda *args: None, lib=lib)
    _KEEP.append(lib)
    return getattr(getattr(torch.ops, ns), name).default  # type: ignore[no-any-return]


def lowerings(ns: str) -> dict[str, tuple[Op, Op]]:
    """name -> (in-place op taking x, out= op taking x and out=)."""
    result: dict[str, tuple[Op, Op]] = {}

    @tagged_ops.define_inplace(f"{ns}::mul_")
    def mul_(x: Tensor) -> Tensor:
        x.mul_(3.0)
        return x

    @tagged_ops.define_out(f"{ns}::mul_out")
    def mul_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.mul(x, 3.0, out=out)
        return out

    result["tagged_ops"] = (mul_, mul_out)

    def raw_mul_(x: Tensor) -> None:
        x.mul_(3.0)

    def raw_mul_out(x: Tensor, out: Tensor) -> None:
        torch.mul(x, 3.0, out=out)

    raw_mul_ = raw_untagged(f"{ns}::raw_mul_", "(Tensor(a!) x) -> ()", ("x",), raw_mul_)
    raw_mul_out = raw_untagged(f"{ns}::raw_mul_out", "(Tensor x, Tensor(a!) out) -> ()", ("out",), raw_mul_out)

    def untagged_inplace(x: Tensor) -> Tensor:
        raw_mul_(x)
        return x

    def untagged_out(x: Tensor, *, out: Tensor) -> Tensor:
        raw_mul_out(x, out)
        return out

    result["raw untagged"] = (untagged_inplace, untagged_out)

    if tagged_ops.NATIVE_TAGS:

        @torch.library.custom_op(f"{ns}::tagged_mul_", mutates_args=("x",), tags=torch.Tag.inplace)  # type: ignore[attr-defined]
        def tagged_mul_(x: Tensor) -> Tensor:
            x.mul_(3.0)
            return x

        @torch.library.custom_op(f"{ns}::tagged_mul_out", mutates_args=("out",), tags=torch.Tag.out)  # type: ignore[attr-defined]
        def tagged_mul_out(x: Tensor, *, out: Tensor) -> Tensor:
            torch.mul(x, 3.0, out=out)
            return out

        result["raw tagged"] = (tagged_mul_, lambda x, *, out: tagged_mul_out(x, out=out))
    return result


def pattern(
    name: str, inplace: Op, out: Op, n: int, device: str = "cpu"
) -> tuple[Callable[..., Any], Callable[[], tuple[Tensor, ...]]]:
    """The function to compile and a maker of fresh inputs with ``n`` elements on ``device``."""
    fn, make = _pattern(name, inplace, out, n)
    return fn, lambda: tuple(t.to(device) for t in make())


def _pattern(name: str, inplace: Op, out: Op, n: int) -> tuple[Callable[..., Any], Callable[[], tuple[Tensor, ...]]]:
    if name == "a":
        return (lambda x: inplace(x)), lambda: (torch.randn(n),)
    if name == "b":
        return (lambda x, o: out(x, out=o)), lambda: (torch.randn(n), torch.empty(n))
    if name == "c":

        def c(x: Tensor, o: Tensor) -> Tensor:
            out(x, out=o[1 : n + 1])
            return o

        return c, lambda: (torch.randn(n), torch.zeros(n + 2))
    if name == "d":

        def d(x: Tensor) -> Tensor:
            inplace(x[1 : n - 1])
            return x

        return d, lambda: (torch.randn(n),)
    if name == "e":

        def e(x: Tensor) -> Tensor:
            y = x + 1
            inplace(y)
            return y * 2

        return e, lambda: (torch.randn(n),)
    raise ValueError(name)


_KERNEL = re.compile(r"^(\w+) = async_compile\.\w+\(", re.M)
_ALLOC = re.compile(r"^\s+\w+ = empty_strided(?:_\w+)?\(", re.M)


def count(code: str) -> Counts:
    kernels = _KERNEL.findall(code)
    return Counts(
        len(kernels),
        len(_ALLOC.findall(code)),
        sum("copy" in k or "clone" in k for k in kernels),
        code.count("__functional.default("),
    )


def generated_code(fn: Callable[..., Any], args: tuple[Tensor, ...]) -> str:
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    _, codes = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
    return "\n".join(codes)
