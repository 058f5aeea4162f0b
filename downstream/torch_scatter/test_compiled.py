"""torch_scatter ported to tagged_ops, compiled: every public function against eager, and opcheck of its ops.

Run by downstream/torch_scatter/run.py against the ported build. Each public function
is compiled with ``fullgraph=True`` and compared with eager on its values, the
buffers it writes and, for the functional forms, the gradient of ``src``; with
``out=`` the buffer is a graph input, a fresh buffer made inside the function, and
a view of an intermediate, compared with what the call returns and the intermediate. Sizes the data alone would give (``index.max() + 1``,
``indptr[-1]``) are passed or made static where the API allows, and otherwise traced
as data-dependent sizes.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch_scatter as ts

torch._dynamo.config.capture_dynamic_output_shape_ops = True
torch._dynamo.config.capture_scalar_outputs = True

N, F, SEGMENTS = 10, 3, 4
INDEX = torch.tensor([0, 0, 1, 1, 1, 2, 2, 3, 3, 3])  # sorted: valid for segment_coo too
INDPTR = torch.tensor([0, 2, 5, 7, 10])


def _src(requires_grad: bool = False, rows: int = N) -> torch.Tensor:
    """The same values for the eager and the compiled run."""
    return torch.randn(rows, F, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_(
        requires_grad
    )


def _assert_as_eager(fn: Callable[..., Any], make: Callable[[], tuple[Any, ...]], *, backward: bool = False) -> None:
    runs = []
    for how in ("eager", "compiled"):
        torch.compiler.reset()
        args = make()
        result = (fn if how == "eager" else torch.compile(fn, fullgraph=True))(*args)
        results = result if isinstance(result, tuple) else (result,)
        grad = None
        if backward:
            results[0].sum().backward()
            grad = args[0].grad
        tensors = [a.detach() for a in args if isinstance(a, torch.Tensor)]
        runs.append(([r.detach() for r in results], tensors, grad))
    (eager, eager_args, eager_grad), (got, got_args, got_grad) = runs
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close(got_args, eager_args)  # the buffers written
    torch.testing.assert_close(got_grad, eager_grad)


REDUCES = ["sum", "mul", "mean", "min", "max"]


# -- functional forms: forward and backward -----------------------------------------------------


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter(reduce: str) -> None:
    _assert_as_eager(
        lambda src, index: ts.scatter(src, index, 0, dim_size=SEGMENTS, reduce=reduce),
        lambda: (_src(True), INDEX),
        backward=True,
    )


@pytest.mark.parametrize("reduce", [r for r in REDUCES if r != "mul"])
def test_segment_csr(reduce: str) -> None:
    _assert_as_eager(
        lambda src, indptr: ts.segment_csr(src, indptr, reduce=reduce), lambda: (_src(True), INDPTR), backward=True
    )


@pytest.mark.parametrize("reduce", [r for r in REDUCES if r != "mul"])
def test_segment_coo(reduce: str) -> None:
    _assert_as_eager(
        lambda src, index: ts.segment_coo(src, index, dim_size=SEGMENTS, reduce=reduce),
        lambda: (_src(True), INDEX),
        backward=True,
    )


def test_gather_csr() -> None:
    _assert_as_eager(
        lambda src, indptr: ts.gather_csr(src, indptr),
        lambda: (_src(True, rows=SEGMENTS), INDPTR),
        backward=True,
    )


def test_gather_coo() -> None:
    _assert_as_eager(
        lambda src, index: ts.gather_coo(src, index),
        lambda: (_src(True, rows=SEGMENTS), INDEX),
        backward=True,
    )


@pytest.mark.parametrize("name", ["scatter_softmax", "scatter_log_softmax", "scatter_logsumexp", "scatter_std"])
def test_composites(name: str) -> None:
    fn = getattr(ts, name)
    _assert_as_eager(
        lambda src, index: fn(src, index, 0, dim_size=SEGMENTS), lambda: (_src(True), INDEX), backward=True
    )


# -- out=: a graph input, a view of one, a fresh buffer, a view of an intermediate ------------------


def _out_call(fn: Callable[..., Any], index: torch.Tensor, reduce: str, *dim: int) -> Callable[..., Any]:
    return lambda src, out: fn(src, index, *dim, out=out, reduce=reduce)


_OUT_CALLS: dict[str, Callable[..., Any]] = {
    **{f"scatter-{r}": _out_call(ts.scatter, INDEX, r, 0) for r in REDUCES},
    **{f"segment_csr-{r}": _out_call(ts.segment_csr, INDPTR, r) for r in REDUCES if r != "mul"},
    **{f"segment_coo-{r}": _out_call(ts.segment_coo, INDEX, r) for r in REDUCES if r != "mul"},
}


def _initial() -> torch.Tensor:
    return torch.full((SEGMENTS, F), 0.5, dtype=torch.float64)


@pytest.mark.parametrize("where", ["graph input", "view of an input", "fresh buffer", "view of an intermediate"])
@pytest.mark.parametrize("name", sorted(_OUT_CALLS))
def test_out(name: str, where: str) -> None:
    call = _OUT_CALLS[name]

    def with_out(src: torch.Tensor, out: torch.Tensor) -> Any:
        if where == "graph input":
            return call(src, out)
        if where == "view of an input":  # out holds two buffers; the call writes the second
            return call(src, out[SEGMENTS:])
        if where == "fresh buffer":
            buffer = out * 1
            return call(src, buffer), buffer
        t = torch.cat([out * 2, out])  # an intermediate; the call writes its second half
        return call(src, t[SEGMENTS:]), t  # what it returns, and the intermediate it wrote

    initial = (lambda: torch.cat([_initial() * 3, _initial()])) if where == "view of an input" else _initial
    _assert_as_eager(with_out, lambda: (_src(), initial()))


@pytest.mark.parametrize("where", ["graph input", "view of an input", "view of an intermediate"])
@pytest.mark.parametrize("name", ["gather_csr", "gather_coo"])
def test_gather_out(name: str, where: str) -> None:
    gather = ts.gather_csr if name == "gather_csr" else ts.gather_coo
    index = INDPTR if name == "gather_csr" else INDEX

    def with_out(src: torch.Tensor, out: torch.Tensor) -> Any:
        if where == "graph input":
            return gather(src, index, out=out)
        if where == "view of an input":  # out holds two buffers; the call writes the first
            return gather(src, index, out=out[:N])
        t = torch.cat([out, out * 3])
        return gather(src, index, out=t[:N]), t

    rows = 2 * N if where == "view of an input" else N
    _assert_as_eager(with_out, lambda: (_src(rows=SEGMENTS), torch.zeros(rows, F, dtype=torch.float64)))


# -- opcheck of every declared op -----------------------------------------------------------------

ops = torch.ops.torch_scatter


def _samples() -> dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    src, out = _src(), _initial()
    long_out = torch.zeros(SEGMENTS, F, dtype=torch.long)
    samples: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}
    for r in REDUCES:
        samples[f"scatter_{r}"] = (getattr(ops, f"scatter_{r}").default, (src, INDEX, 0, None, SEGMENTS), {})
        samples[f"scatter_{r} init"] = (getattr(ops, f"scatter_{r}").default, (src, INDEX, 0, out, None), {})
        samples[f"scatter_{r}_"] = (getattr(ops, f"scatter_{r}_").default, (out.clone(), src, INDEX, 0), {})
    for r in ("sum", "mean", "min", "max"):
        samples[f"segment_{r}_csr"] = (getattr(ops, f"segment_{r}_csr").default, (src, INDPTR), {})
        buffers = {"out": out.clone()} if r in ("sum", "mean") else {"out": out.clone(), "arg_out": long_out.clone()}
        samples[f"segment_{r}_csr.out"] = (getattr(ops, f"segment_{r}_csr").out, (src, INDPTR), buffers)
        samples[f"segment_{r}_coo"] = (getattr(ops, f"segment_{r}_coo").default, (src, INDEX, None, SEGMENTS), {})
        samples[f"segment_{r}_coo_"] = (getattr(ops, f"segment_{r}_coo_").default, (out.clone(), src, INDEX), {})
    samples["gather_csr"] = (ops.gather_csr.default, (out, INDPTR), {})
    samples["gather_csr.out"] = (ops.gather_csr.out, (out, INDPTR), {"out": torch.empty(N, F, dtype=torch.float64)})
    samples["gather_coo"] = (ops.gather_coo.default, (out, INDEX), {})
    samples["gather_coo.out"] = (ops.gather_coo.out, (out, INDEX), {"out": torch.empty(N, F, dtype=torch.float64)})
    return samples


@pytest.mark.parametrize("name", sorted(_samples()))
def test_opcheck(name: str) -> None:
    op, args, kwargs = _samples()[name]
    # data-dependent output sizes (no dim_size, indptr[-1]) cannot be checked under static-shape tracing
    utils = ["test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"]
    if name == "gather_csr":
        utils = ["test_schema", "test_autograd_registration", "test_faketensor"]
    torch.library.opcheck(op, args, kwargs, test_utils=utils)
