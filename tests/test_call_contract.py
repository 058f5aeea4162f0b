"""What a call does, returns and refuses, on both paths."""

from __future__ import annotations

import re
import traceback
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import pytest
import torch
from torch import Tensor

import tagged_ops

from ._views import assert_compiled_matches_eager


def test_inplace_returns_its_first_argument(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::add_")
    def add_(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
        x.add_(y, alpha=alpha)
        return x

    x, y = torch.zeros(3), torch.ones(3)
    assert add_(x, y) is x
    assert add_(x, y, 2.0) is x
    assert add_(x=x, y=y, alpha=0.5) is x
    assert torch.equal(x, torch.full((3,), 3.5))
    assert add_.is_native == (path == "native") == tagged_ops.is_native(add_)


def test_out_returns_its_buffers(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::scale_out")
    def scale_out(x: Tensor, factor: float = 2.0, *, out: Tensor) -> Tensor:
        torch.mul(x, factor, out=out)
        return out

    x, o = torch.arange(3.0), torch.empty(3)
    assert scale_out(x, out=o) is o
    assert torch.equal(o, x * 2)
    assert scale_out(x, 3.0, out=o) is o
    assert torch.equal(o, x * 3)


def test_out_with_several_buffers_returns_the_very_objects(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::minmax_out")
    def minmax_out(x: Tensor, *, lo: Tensor, hi: Tensor) -> Tuple[Tensor, Tensor]:
        lo.copy_(x.min())
        hi.copy_(x.max())
        return lo, hi

    lo, hi = torch.empty(()), torch.empty(())
    res = minmax_out(torch.tensor([3.0, -1.0, 2.0]), lo=lo, hi=hi)
    assert type(res) is tuple and len(res) == 2 and res[0] is lo and res[1] is hi
    assert lo.item() == -1.0 and hi.item() == 3.0


def test_inplace_kernel_must_return_its_argument(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::bad_")
    def bad_(x: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(RuntimeError, match=re.escape("bad_ (with implementation in <module")) as info:
        bad_(torch.randn(2))
    assert str(info.value).endswith("An operator tagged with torch.Tag.inplace must return its first argument.")


@pytest.mark.parametrize("returned", ["clone", "none", "reversed"])
def test_out_kernel_must_return_its_buffers(path: str, ns: str, returned: str) -> None:
    @tagged_ops.define_out(f"{ns}::bad_out")
    def bad_out(x: Tensor, *, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        a.copy_(x)
        b.copy_(x)
        if returned == "clone":
            return a.clone(), b
        if returned == "none":
            return None  # type: ignore[return-value]
        return b, a

    with pytest.raises(
        RuntimeError,
        match=re.escape("An operator tagged with torch.Tag.out must return its mutable keyword-only arguments."),
    ):
        bad_out(torch.randn(2), a=torch.empty(2), b=torch.empty(2))


OUT_REFUSED = (
    "{}(): functions with out=... arguments don't support automatic differentiation, "
    "but one of the arguments requires grad."
)


def test_out_refuses_autograd_and_leaves_buffers_untouched(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.sin(x, out=out)
        return out

    x = torch.randn(3, requires_grad=True)
    o = torch.zeros(3)
    with pytest.raises(
        RuntimeError,
        match=re.escape(OUT_REFUSED.format("sin_out")),
    ):
        sin_out(x, out=o)
    assert torch.equal(o, torch.zeros(3)) and o._version == 0
    with torch.no_grad():
        assert sin_out(x, out=o) is o
    assert torch.allclose(o, x.detach().sin())


def test_out_refuses_autograd_before_saying_there_is_no_kernel(path: str, ns: str) -> None:
    """Native refuses in its autograd kernel, which runs before the dispatcher looks for a
    device kernel: an out= call under autograd gets that error even where no kernel exists."""
    ops = [tagged_ops.declare_out(f"{ns}::scale.out", "(Tensor x, float k=2.0, *, Tensor(a!) out) -> Tensor(a!)")]
    if tagged_ops.NATIVE_TAGS:  # native, with a kernel for CUDA only: none for these CPU tensors

        @torch.library.custom_op(
            f"{ns}_native::scale.out",
            mutates_args=("out",),
            device_types="cuda",
            tags=torch.Tag.out,  # type: ignore[attr-defined]
        )
        def native(x: Tensor, k: float = 2.0, *, out: Tensor) -> Tensor:
            out.copy_(x * k)
            return out

        ops.append(native)
    for op in ops:
        o = torch.zeros(3)
        with pytest.raises(RuntimeError, match=re.escape(OUT_REFUSED.format("scale"))):
            op(torch.ones(3, requires_grad=True), out=o)
        with pytest.raises(NotImplementedError, match="::scale"):  # not under autograd: no kernel
            op(torch.ones(3), out=o)
        assert torch.equal(o, torch.zeros(3))
        # Nothing written; tagged_ops bumps no version either (native 2.13 bumps it before it finds no kernel).
        assert op is not ops[0] or o._version == 0


def test_out_refuses_an_optional_tensor_requiring_grad(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::shift.out")
    def shift(x: Tensor, bias: Optional[Tensor] = None, *, out: Tensor) -> Tensor:
        out.copy_(x if bias is None else x + bias)
        return out

    o = torch.zeros(2)
    for bias in (torch.ones(2, requires_grad=True), torch.nn.Parameter(torch.ones(2))):
        with pytest.raises(RuntimeError, match=re.escape(OUT_REFUSED.format("shift"))):
            shift(torch.ones(2), bias, out=o)
        with pytest.raises(RuntimeError, match=re.escape(OUT_REFUSED.format("shift"))):
            shift(torch.ones(2), out=o, bias=bias)
    assert torch.equal(o, torch.zeros(2)) and o._version == 0
    assert shift(torch.ones(2), out=o) is o and torch.equal(o, torch.ones(2))
    assert shift(torch.ones(2), None, out=o) is o and torch.equal(o, torch.ones(2))
    assert shift(torch.ones(2), torch.ones(2), out=o) is o and torch.equal(o, torch.full((2,), 2.0))


def test_version_counters_are_bumped_also_through_numpy(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::np_neg_")
    def np_neg_(x: Tensor) -> Tensor:
        a = x.numpy()
        np.negative(a, out=a)
        return x

    @tagged_ops.define_out(f"{ns}::np_neg_out")
    def np_neg_out(x: Tensor, *, out: Tensor) -> Tensor:
        np.negative(x.numpy(), out=out.numpy())
        return out

    x, o = torch.ones(3), torch.empty(3)
    v_x, v_o = x._version, o._version
    np_neg_(x)
    assert x._version > v_x and torch.equal(x, -torch.ones(3))
    np_neg_out(x, out=o)
    assert o._version > v_o and torch.equal(o, torch.ones(3))


def test_saved_tensor_mutation_is_detected(path: str, ns: str) -> None:
    """A bumped version counter is what makes autograd catch a stale saved tensor."""

    @tagged_ops.define_inplace(f"{ns}::np_zero_")
    def np_zero_(x: Tensor) -> Tensor:
        x.numpy()[...] = 0
        return x

    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3)
    y = (w * x).sum()  # saves x for backward
    with torch.no_grad():
        np_zero_(x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


class TestBadInput:
    """Errors name the op and leave every tensor untouched."""

    @pytest.fixture
    def ops(self, path: str, ns: str) -> tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp]:
        @tagged_ops.define_inplace(f"{ns}::checked_")
        def checked_(x: Tensor, other: Tensor) -> Tensor:
            if other.shape != x.shape:
                raise ValueError(f"checked_: shape mismatch {tuple(other.shape)} vs {tuple(x.shape)}")
            x.add_(other)
            return x

        @tagged_ops.define_out(f"{ns}::copy_out")
        def copy_out(x: Tensor, *, out: Tensor) -> Tensor:
            if out.shape != x.shape:
                raise ValueError("copy_out: out has the wrong shape")
            out.copy_(x)
            return out

        return checked_, copy_out

    def test_kernel_errors_propagate_unchanged(self, ops: tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp]) -> None:
        checked_, copy_out = ops
        x = torch.ones(3)
        with pytest.raises(ValueError, match=re.escape("checked_: shape mismatch (2,) vs (3,)")):
            checked_(x, torch.ones(2))
        assert torch.equal(x, torch.ones(3)) and x._version == 0
        o = torch.zeros(2)
        with pytest.raises(ValueError, match="copy_out: out has the wrong shape"):
            copy_out(x, out=o)
        assert torch.equal(o, torch.zeros(2)) and o._version == 0

    @pytest.mark.parametrize(
        "call",
        [
            lambda op, x, o: op(x),  # out buffer missing
            lambda op, x, o: op(x, o),  # out buffer given positionally
            lambda op, x, o: op(x, out=o, bogus=1),  # unknown keyword
            lambda op, x, o: op(out=o),  # input missing
        ],
        ids=["missing-out", "positional-out", "unknown-keyword", "missing-input"],
    )
    def test_bad_calls_name_the_op(self, ops: tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp], ns: str, call) -> None:  # noqa: ANN001
        _, copy_out = ops
        x, o = torch.ones(3), torch.zeros(3)
        with pytest.raises(RuntimeError, match=re.escape(f"{ns}::copy_out")):
            call(copy_out, x, o)
        assert torch.equal(o, torch.zeros(3)) and o._version == 0 and torch.equal(x, torch.ones(3))

    def test_inplace_extra_argument_names_the_op(
        self, ops: tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp], ns: str
    ) -> None:
        checked_, _ = ops
        x = torch.ones(3)
        with pytest.raises(RuntimeError, match=re.escape(f"{ns}::checked_")):
            checked_(x, x, x)
        assert x._version == 0


def test_meta_tensors_use_the_fake_kernel(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        raise AssertionError("the real kernel must not run on meta tensors")

    o = torch.empty(3, device="meta")
    assert sin_out(torch.empty(3, device="meta"), out=o) is o


def test_grad_check_sees_optional_and_list_tensor_arguments(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::sum_out")
    def sum_out(xs: List[Tensor], *, out: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        torch.sum(torch.stack(xs), 0, out=out)
        if bias is not None:
            out.add_(bias)
        return out

    o = torch.zeros(2)
    xs = [torch.ones(2), torch.ones(2)]
    assert sum_out(xs, out=o) is o and torch.equal(o, torch.full((2,), 2.0))
    for bad in ({"bias": torch.ones(2, requires_grad=True)}, {}):
        inputs = xs if bad else [torch.ones(2), torch.ones(2, requires_grad=True)]
        with pytest.raises(
            RuntimeError, match="functions with out=... arguments don't support automatic differentiation"
        ):
            sum_out(inputs, out=o, **bad)
    assert torch.equal(o, torch.full((2,), 2.0))


@pytest.mark.parametrize("helper", ["installed", "backport"])
def test_the_grad_check_sees_every_tensor_argument(
    path: str, ns: str, monkeypatch: pytest.MonkeyPatch, helper: str
) -> None:
    """The generated grad check: plain Tensors tested inline, optional and listed ones by a helper.

    The helper is torch's C++ ``_any_requires_grad`` (2.5+) or its Python
    backport; both are tried here on any release, and the check must see a
    plain, an optional and a listed Tensor, in the handle and in a direct
    torch.ops call.
    """
    from tagged_ops import _compat as caps

    if helper == "backport":
        monkeypatch.setattr(caps, "any_requires_grad", caps.any_requires_grad_py)

    @tagged_ops.define_out(f"{ns}::sum_out")
    def sum_out(xs: List[Tensor], y: Tensor, *, out: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        torch.sum(torch.stack([*xs, y]), 0, out=out)
        if bias is not None:
            out.add_(bias)
        return out

    o = torch.zeros(2)
    assert sum_out([torch.ones(2)], torch.ones(2), out=o, bias=torch.ones(2)) is o
    assert torch.equal(o, torch.full((2,), 3.0))

    def grad() -> Tensor:
        return torch.ones(2, requires_grad=True)

    refused = r"^sum_out\(\): functions with out=\.\.\. arguments don't support automatic differentiation"
    for where in ("xs", "y", "bias"):
        kwargs = {"xs": [torch.ones(2), torch.ones(2)], "y": torch.ones(2), "bias": torch.ones(2)}
        kwargs[where] = [torch.ones(2), grad()] if where == "xs" else grad()
        with pytest.raises(RuntimeError, match=refused):
            sum_out(**kwargs, out=o)
        args, op_kwargs = sum_out.to_op_arguments(**kwargs, out=o)
        with pytest.raises(RuntimeError, match=refused):  # by tagged_ops' check, not by torch.sum's
            sum_out.opoverload(*args, **op_kwargs)
    assert torch.equal(o, torch.full((2,), 3.0))
    with torch.no_grad():
        assert sum_out([grad()], grad(), out=o) is o
    assert torch.equal(o, torch.full((2,), 2.0))


def test_inference_mode_calls(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::np_neg_")
    def np_neg_(x: Tensor) -> Tensor:
        np.negative(x.numpy(), out=x.numpy())
        return x

    with torch.inference_mode():
        x = torch.ones(2)
        assert np_neg_(x) is x
    assert torch.equal(x, -torch.ones(2))


def test_out_none_is_refused_naming_the_op(path: str, ns: str) -> None:
    """The dispatcher lets None through for an out buffer; native 2.13 then returns None and writes nothing."""
    written = []

    @tagged_ops.define_out(f"{ns}::pair_out")
    def pair_out(x: Tensor, *, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        written.append(True)
        torch.sin(x, out=a)
        torch.cos(x, out=b)
        return a, b

    x, a = torch.randn(3), torch.zeros(3)
    before = x.clone()
    message = re.escape(f"{ns}::pair_out: an out buffer ('a', 'b') is None; pass the Tensor(s) to write.")
    with pytest.raises(RuntimeError, match=message):
        pair_out(x, a=a, b=None)
    args, kwargs = pair_out.to_op_arguments(x, a=a, b=torch.empty(3))
    if "b" in kwargs:
        kwargs["b"] = None
    else:
        args = (*args[:-1], None)
    with pytest.raises(RuntimeError, match=message):
        pair_out.opoverload(*args, **kwargs)  # a direct torch.ops call too
    assert not written and torch.equal(x, before) and torch.equal(a, torch.zeros(3))


def _argument_error_ops(ns: str, define_out: Callable[..., Any], define_inplace: Callable[..., Any]) -> tuple[Any, Any]:
    def scale_out(x: Tensor, factor: float = 2.0, *, out: Tensor, bias: float = 0.0) -> Tensor:
        torch.mul(x, factor, out=out).add_(bias)
        return out

    def shift_(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
        x.add_(y, alpha=alpha)
        return x

    return define_out(f"{ns}::scale.out", scale_out), define_inplace(f"{ns}::shift_", shift_)


_BAD_CALLS: dict[str, Callable[[Any, Any, Tensor, Tensor], Any]] = {
    "out-missing": lambda out_op, inplace_op, x, o: out_op(x),
    "out-positional": lambda out_op, inplace_op, x, o: out_op(x, 2.0, o),
    "out-unknown-keyword-over-count": lambda out_op, inplace_op, x, o: out_op(x, 2.0, out=o, bias=0.0, bogus=1),
    "out-unknown-keyword": lambda out_op, inplace_op, x, o: out_op(x, out=o, bogus=1),
    "out-too-many": lambda out_op, inplace_op, x, o: out_op(x, 1.0, o, o, out=o),
    "out-input-missing": lambda out_op, inplace_op, x, o: out_op(out=o, bias=1.0),
    "inplace-missing": lambda out_op, inplace_op, x, o: inplace_op(x),
    "inplace-unknown-keyword": lambda out_op, inplace_op, x, o: inplace_op(x, o, bogus=1),
    "inplace-too-many": lambda out_op, inplace_op, x, o: inplace_op(x, o, 1.0, 2.0),
    "inplace-nothing": lambda out_op, inplace_op, x, o: inplace_op(),
}


@pytest.mark.parametrize("call", list(_BAD_CALLS))
def test_argument_errors_are_the_dispatchers(path: str, ns: str, call: str) -> None:
    """A call that does not fit the 2.13 schema raises the dispatcher's RuntimeError, sentence
    and all, quoting the 2.13 schema on the fallback too; no tensor is touched."""
    out_op, inplace_op = _argument_error_ops(ns, tagged_ops.define_out, tagged_ops.define_inplace)
    x, o = torch.ones(3), torch.zeros(3)
    with pytest.raises(RuntimeError) as ours:
        _BAD_CALLS[call](out_op, inplace_op, x, o)
    assert torch.equal(x, torch.ones(3)) and x._version == 0 and torch.equal(o, torch.zeros(3)) and o._version == 0
    # The dispatcher parses the call against the schema the handle presents.
    op = out_op if call.startswith("out") else inplace_op
    assert f"{ns}::" in str(ours.value) and (op.is_native is False or op.schema in str(ours.value))
    if op.is_native:
        with pytest.raises(RuntimeError) as dispatcher:
            _BAD_CALLS[call](out_op.opoverload, inplace_op.opoverload, x, o)
        assert str(ours.value) == str(dispatcher.value)


@pytest.mark.skipif(not tagged_ops.NATIVE_TAGS, reason="this torch has no native custom_op(tags=) to compare with")
@pytest.mark.parametrize("call", list(_BAD_CALLS))
def test_argument_errors_match_native_custom_op(path: str, ns: str, call: str) -> None:
    """Both paths raise exactly what ``custom_op(..., tags=...)`` raises for the same call."""

    def native(kind: str) -> Callable[..., Any]:
        tag = torch.Tag.out if kind == "out" else torch.Tag.inplace  # type: ignore[attr-defined]

        def define(name: str, fn: Callable[..., Any]) -> Any:
            mutated = ("out",) if kind == "out" else ("x",)
            return torch.library.custom_op(name, mutates_args=mutated, tags=tag)(fn)  # type: ignore[call-arg]

        return define

    ours_ops = _argument_error_ops(ns, tagged_ops.define_out, tagged_ops.define_inplace)
    native_ops = _argument_error_ops(f"{ns}_native", native("out"), native("inplace"))
    x, o = torch.ones(3), torch.zeros(3)
    with pytest.raises(RuntimeError) as ours:
        _BAD_CALLS[call](*ours_ops, x, o)
    with pytest.raises(RuntimeError) as theirs:
        _BAD_CALLS[call](*native_ops, x, o)
    assert str(ours.value) == str(theirs.value).replace(f"{ns}_native::", f"{ns}::")


def test_scripted_code_calls_the_handle(path: str, ns: str) -> None:
    """``torch.jit.script`` of a function that calls a handle: the handle runs as a Python
    value, as native's op does, with the eager results. Like native, TorchScript passes
    it positional arguments only, so an out= call is refused at scripting time."""

    @tagged_ops.define_inplace(f"{ns}::sin_")
    def sin_(x: Tensor) -> Tensor:
        x.sin_()
        return x

    @tagged_ops.define_out(f"{ns}::cos_out")
    def cos_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.cos(x, out=out)
        return out

    def f(x: Tensor) -> Tensor:
        return sin_(x[1:]) + 1

    def g(x: Tensor, o: Tensor) -> Tensor:
        return cos_out(x, out=o)

    scripted = torch.jit.script(f)
    x_eager, x_script = torch.arange(4.0), torch.arange(4.0)
    assert torch.equal(scripted(x_script), f(x_eager)) and torch.equal(x_script, x_eager)
    with pytest.raises(RuntimeError, match="Keyword argument out unknown"):
        torch.jit.script(g)


def test_parameters_named_like_builtins(path: str, ns: str) -> None:
    """The handle's generated call must not shadow the builtins it uses (``type``) with
    the user's parameter names: eager, compiled on a view, and a bad call."""

    @tagged_ops.define_out(f"{ns}::times.out")
    def times(x: Tensor, type: int = 1, *, out: Tensor) -> Tensor:
        torch.mul(x, type, out=out)
        return out

    base = torch.zeros(4)
    assert torch.equal(times(torch.ones(2), 3, out=base[:2]), torch.full((2,), 3.0))
    compiled = torch.compile(lambda a, b: times(a, type=2, out=b[1:3]), fullgraph=True)
    eager_buf, compiled_buf = torch.zeros(4), torch.zeros(4)
    times(torch.ones(2), type=2, out=eager_buf[1:3])
    compiled(torch.ones(2), compiled_buf)
    assert torch.equal(compiled_buf, eager_buf)
    with pytest.raises(RuntimeError, match="is missing value for argument 'out'"):
        times(torch.ones(2), type=2)


def test_a_traceback_through_a_kernel_shows_each_generated_line(path: str, ns: str) -> None:
    """A bug in a kernel is reported with the source of every tagged_ops frame it passed through."""

    @tagged_ops.define_out(f"{ns}::broken.out")
    def broken_out(x: Tensor, *, out: Tensor) -> Tensor:
        raise ValueError("a bug in the kernel")

    with pytest.raises(ValueError, match="a bug in the kernel") as info:
        broken_out(torch.ones(2), out=torch.empty(2))
    frames = traceback.extract_tb(info.value.__traceback__)
    generated = [f for f in frames if f.filename.startswith("<tagged_ops ")]
    assert len(generated) >= 2, frames  # the handle's call, and the kernel adapter
    for frame in generated:
        assert frame.line, f"no source line for {frame.filename}:{frame.lineno}"
    assert any("_fn(" in (f.line or "") for f in generated)  # the adapter's call of the user's kernel
    assert frames[-1].name == "broken_out"


def test_parameters_named_like_builtins_or_generated_names_work(path: str, ns: str) -> None:
    """The generated call's own names carry a reserved prefix, so no parameter name can shadow them."""

    @tagged_ops.define_out(f"{ns}::names.out")
    def names_out(
        _raw: Tensor, type: float = 3.0, _fn: float = 2.0, *, len: Tensor, tuple: Tensor
    ) -> tuple[Tensor, Tensor]:  # noqa: A002
        torch.mul(_raw, type, out=len)
        torch.mul(_raw, _fn, out=tuple)
        return len, tuple

    @tagged_ops.define_inplace(f"{ns}::scale_")
    def scale_(x: Tensor, _Tensor: float = 2.0, isinstance: float = 1.0, _grad_enabled: float = 0.0) -> Tensor:  # noqa: A002
        x.mul_(_Tensor * isinstance).add_(_grad_enabled)
        return x

    x = torch.randn(4)
    a, b = torch.empty(4), torch.empty(4)
    assert names_out(x, len=a, tuple=b) == (a, b)
    torch.testing.assert_close(a, 3 * x)
    torch.testing.assert_close(b, 2 * x)
    y = x.clone()
    assert scale_(y, 3.0, isinstance=2.0, _grad_enabled=1.0) is y
    torch.testing.assert_close(y, 6 * x + 1)

    def step(x: Tensor, buf: Tensor) -> Tensor:
        h = x * 2
        names_out(h[1:3], 0.5, len=buf[0, :2], tuple=buf[1, 1:3])  # views of an intermediate and of an input
        return scale_(h[::2], _Tensor=4.0) + buf.sum()

    assert_compiled_matches_eager(step, lambda: (torch.randn(6), torch.zeros(2, 4)))


def test_parameter_names_with_the_reserved_prefix_are_refused(ns: str) -> None:
    with pytest.raises(
        ValueError, match=r"parameter names starting with '_tagged_ops_' are tagged_ops' own .* rename _tagged_ops_x"
    ):

        @tagged_ops.define_inplace(f"{ns}::bad_")
        def bad_(_tagged_ops_x: Tensor) -> Tensor:
            return _tagged_ops_x


def test_each_handle_is_an_instance_of_a_class_of_its_own(path: str, ns: str) -> None:
    """As TaggedOp's docstring says: a subclass per handle, whose __call__ is the generated call."""

    @tagged_ops.define_inplace(f"{ns}::neg_")
    def neg_(x: Tensor) -> Tensor:
        x.neg_()
        return x

    @tagged_ops.define_inplace(f"{ns}::abs_")
    def abs_(x: Tensor) -> Tensor:
        x.abs_()
        return x

    assert isinstance(neg_, tagged_ops.TaggedOp) and type(neg_) is not tagged_ops.TaggedOp
    assert type(neg_).__mro__[1] is tagged_ops.TaggedOp and type(neg_).__name__ == "TaggedOp"
    assert type(neg_) is not type(abs_) and type(neg_).__call__ is not type(abs_).__call__
    x = torch.ones(2)
    assert neg_(x) is x and abs_(x) is x
    torch.testing.assert_close(x, torch.ones(2))
