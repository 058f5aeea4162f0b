"""C++ kernels: examples/cpp_kernel, a classic C++ op ported to tagged_ops.

The ops are declared from Python (``declare_out`` / ``declare_inplace``); their kernels
are C++, written once in the tagged form and registered with ``TAGGED_OPS_IMPL``
from ``<tagged_ops/kernel.h>``, which fits them to the schema each path gives the op.
No Python kernel runs in them. The tests take the path this run's ops take (native
on 2.13+, the fallback elsewhere and in the forced-fallback session): a name whose
kernels come from C++ cannot be defined again with another schema in one process.
Built once per test session with
``torch.utils.cpp_extension`` (needs a C++ compiler and ninja; a run without them
reports these tests as skipped, not passed); the CUDA kernels are built and run only
where a GPU and nvcc are present.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest
import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

import tagged_ops

from ._subprocess import env_for_path
from ._views import (
    assert_compiled_matches_eager,
    inplace_patterns,
    out_patterns,
    require_exported_input_mutations,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cpp_kernel"
MISBEHAVING = Path(__file__).resolve().parent / "cpp" / "misbehaving_kernels.cpp"
OUT_AUTOGRAD = (
    "functions with out=... arguments don't support automatic differentiation, but one of the arguments requires grad."
)


def _can_build() -> str | None:
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return "no C++ compiler on PATH: the C++ kernel tests did not run"
    try:
        from torch.utils.cpp_extension import verify_ninja_availability

        verify_ninja_availability()
    except (ImportError, RuntimeError):
        return "ninja is not available: the C++ kernel tests did not run"
    return None


@pytest.fixture(scope="session")
def build_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _can_build()
    if reason:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("cpp_kernel_build")
    sys.path.insert(0, str(EXAMPLE))
    try:
        module = importlib.import_module("cpp_sin")  # declared first, then loaded
        start = time.perf_counter()
        module.load_kernels(str(directory), extra_sources=[str(MISBEHAVING)])
        print(f"\ncpp_kernel: extension built and loaded in {time.perf_counter() - start:.1f} s")
        yield str(directory)
    finally:
        sys.path.remove(str(EXAMPLE))


@pytest.fixture
def cpp_sin(build_directory: str) -> ModuleType:
    """The example's ops, declared before the kernels were loaded."""
    return sys.modules["cpp_sin"]


def test_no_python_kernel_runs_in_the_ops(cpp_sin: ModuleType) -> None:
    for op in (cpp_sin.sin_out, cpp_sin.sin_, cpp_sin.sincos_out):
        dump = torch._C._dispatch_dump(op.qualname)
        cpu = [line for line in dump.splitlines() if line.startswith("CPU:")]
        assert cpu and "cpp_sin.cpp" in cpu[0], dump


def test_eager_calls_return_the_buffers(cpp_sin: ModuleType) -> None:
    x = torch.randn(5)
    o = torch.empty(5)
    version = o._version
    assert cpp_sin.sin_out(x, out=o) is o
    torch.testing.assert_close(o, x.sin())
    assert o._version > version  # the kernel writes through a raw pointer; the adapter bumps it
    assert cpp_sin.sin_out(x, 2.0, out=o) is o
    torch.testing.assert_close(o, 2 * x.sin())
    y = x.clone()
    assert cpp_sin.sin_(y) is y
    torch.testing.assert_close(y, x.sin())
    s, c = torch.empty(5), torch.empty(5)
    result = cpp_sin.sincos_out(x, sin=s, cos=c)
    assert result[0] is s and result[1] is c
    torch.testing.assert_close(c, x.cos())


def test_direct_torch_ops_calls_have_the_paths_schema(cpp_sin: ModuleType) -> None:
    """Native path: the tagged schema (buffers returned); fallback: buffers positional, nothing returned."""
    x, o = torch.randn(5), torch.empty(5)
    args, kwargs = cpp_sin.sin_out.to_op_arguments(x, 3.0, out=o)
    result = cpp_sin.sin_out.opoverload(*args, **kwargs)
    assert (result is o) if tagged_ops.is_native(cpp_sin.sin_out) else (result is None)
    torch.testing.assert_close(o, 3 * x.sin())
    assert str(cpp_sin.sin_out.opoverload._schema).endswith(
        "-> Tensor(a!)" if tagged_ops.is_native(cpp_sin.sin_out) else "-> ()"
    )


def test_opcheck(cpp_sin: ModuleType) -> None:
    x = torch.randn(4, 3)
    tagged_ops.opcheck(cpp_sin.sin_out, (x, 0.5), {"out": torch.empty(4, 3)})
    tagged_ops.opcheck(cpp_sin.sin_, (x.clone(),))
    tagged_ops.opcheck(cpp_sin.sincos_out, (x,), {"sin": torch.empty(4, 3), "cos": torch.empty(4, 3)})


def _compiled_patterns(cpp_sin: ModuleType) -> dict[str, Any]:
    patterns = {
        **inplace_patterns(lambda t: cpp_sin.sin_(t)),
        **out_patterns(lambda x, o: cpp_sin.sin_out(x, 2.0, out=o)),
    }
    for name, (fn, make) in out_patterns(lambda x, o: cpp_sin.sincos_out(x, sin=o, cos=torch.empty_like(o))[0]).items():
        patterns[f"sincos-{name}"] = (fn, make)
    return patterns


@pytest.mark.parametrize("pattern", sorted(_compiled_patterns(ModuleType("placeholder"))))
def test_compiled_matches_eager_on_views(cpp_sin: ModuleType, pattern: str) -> None:
    fn, make = _compiled_patterns(cpp_sin)[pattern]
    assert_compiled_matches_eager(fn, make)


def test_export_matches_eager(cpp_sin: ModuleType) -> None:
    class Step(torch.nn.Module):
        def forward(self, x: Tensor, buf: Tensor) -> Tensor:
            h = x * 2
            cpp_sin.sin_out(x[1:3], 0.5, out=buf[0])
            cpp_sin.sin_(h[:2])
            return cpp_sin.sin_out(h, out=torch.empty_like(h)) + buf[0].sum()

    require_exported_input_mutations()
    x = torch.randn(4)
    exported = torch.export.export(Step(), (x, torch.zeros(3, 2)))
    b1, b2 = torch.zeros(3, 2), torch.zeros(3, 2)
    torch.testing.assert_close(exported.module()(x, b1), Step()(x, b2))
    torch.testing.assert_close(b1, b2)


def test_out_calls_under_autograd_raise_before_writing(cpp_sin: ModuleType) -> None:
    x = torch.randn(5, requires_grad=True)
    o = torch.zeros(5)
    with pytest.raises(RuntimeError, match=re.escape(f"sin(): {OUT_AUTOGRAD}")):
        cpp_sin.sin_out(x, out=o)  # the handle's refusal
    args, kwargs = cpp_sin.sin_out.to_op_arguments(x, out=o)
    with pytest.raises(RuntimeError) as info:
        cpp_sin.sin_out.opoverload(*args, **kwargs)  # the C++ adapter's own refusal
    assert str(info.value).splitlines()[0] == f"sin(): {OUT_AUTOGRAD}"
    assert torch.equal(o, torch.zeros(5))
    with torch.no_grad():
        assert cpp_sin.sin_out(x, out=o) is o
    torch.testing.assert_close(o, x.detach().sin())


def test_direct_calls_under_function_transforms(cpp_sin: ModuleType) -> None:
    """torch.func.grad through a direct torch.ops call: refused where tracked; written where not."""
    args_of = cpp_sin.sin_out.to_op_arguments

    def direct(x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        args, kwargs = args_of(x, out=o)
        cpp_sin.sin_out.opoverload(*args, **kwargs)
        return o

    o = torch.zeros(5)
    with pytest.raises(RuntimeError, match=re.escape(f"sin(): {OUT_AUTOGRAD}")):
        torch.func.grad(lambda x: direct(x, torch.zeros(5)).sum())(torch.ones(5))
    x = torch.rand(5)
    grad = torch.func.grad(lambda w, o: (w * direct(x, o)).sum())(torch.ones(5), o)
    torch.testing.assert_close((grad, o), (x.sin(), x.sin()))


@pytest.fixture(scope="session")
def misbehaving(build_directory: str) -> dict[str, tagged_ops.TaggedOp]:
    """Ops whose kernels (tests/cpp/misbehaving_kernels.cpp) were loaded before these declarations."""
    return {
        "copy.out": tagged_ops.declare_out("cpp_sin_test::copy.out", "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"),
        "clone_": tagged_ops.declare_inplace("cpp_sin_test::clone_", "(Tensor(a!) x) -> Tensor(a!)"),
        "scale.out": tagged_ops.declare_out(
            "cpp_sin_test::scale.out", "(Tensor x, *, float scale, Tensor(a!) out) -> Tensor(a!)"
        ),
        "classic.out": tagged_ops.declare_out(
            "cpp_sin_test::classic.out", "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"
        ),
        "short.out": tagged_ops.declare_out("cpp_sin_test::short.out", "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"),
    }


def test_a_kernel_that_returns_another_tensor_is_refused(misbehaving: dict[str, tagged_ops.TaggedOp]) -> None:
    with pytest.raises(
        RuntimeError,
        match=r"copy\.out \(with implementation in C\+\+\): An operator tagged with torch\.Tag\.out must return its mutable keyword-only arguments\.",
    ):
        misbehaving["copy.out"](torch.ones(3), out=torch.empty(3))
    with pytest.raises(
        RuntimeError,
        match=r"clone_ \(with implementation in C\+\+\): An operator tagged with torch\.Tag\.inplace must return its first argument\.",
    ):
        misbehaving["clone_"](torch.ones(3))


def test_keyword_only_arguments_beside_the_buffers_are_refused_on_both_paths(
    misbehaving: dict[str, tagged_ops.TaggedOp],
) -> None:
    o = torch.zeros(3)
    with pytest.raises(
        RuntimeError,
        match=r"cpp_sin_test::scale\.out: a C\+\+ kernel registered with TAGGED_OPS_IMPL .* declare scale before the `\*`",
    ):
        misbehaving["scale.out"](torch.ones(3), scale=2.0, out=o)
    assert torch.equal(o, torch.zeros(3))


def test_a_classic_kernel_still_returns_its_buffer(misbehaving: dict[str, tagged_ops.TaggedOp]) -> None:
    o = torch.zeros(3)
    assert misbehaving["classic.out"](torch.ones(3), out=o) is o
    torch.testing.assert_close(o, torch.ones(3))


def test_a_kernel_of_the_wrong_arity_is_refused(misbehaving: dict[str, tagged_ops.TaggedOp]) -> None:
    with pytest.raises(
        RuntimeError,
        match=r"cpp_sin_test::short\.out: the C\+\+ kernel takes 1 argument\(s\) but the op's schema has 2",
    ):
        misbehaving["short.out"](torch.ones(3), out=torch.zeros(3))


@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
@pytest.mark.parametrize("fallback", [False, True])
def test_declared_before_the_extension_loads(build_directory: str, fallback: bool) -> None:
    """The other order, in a fresh process: declare (import cpp_sin), then load the built extension."""
    if not fallback and not tagged_ops.NATIVE_TAGS:
        pytest.skip(f"torch {torch.__version__} has no native tagged custom ops")
    env = env_for_path(fallback=fallback)
    script = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(EXAMPLE)!r})\n"
        "import cpp_sin, tagged_ops\n"
        f"cpp_sin.load_kernels({build_directory!r}, extra_sources=[{str(MISBEHAVING)!r}])\n"
        "x, o = torch.randn(5), torch.empty(5)\n"
        "assert cpp_sin.sin_out(x, out=o) is o and torch.allclose(o, x.sin())\n"
        "print('native' if tagged_ops.is_native(cpp_sin.sin_out) else 'fallback')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert run.stdout.strip().splitlines()[-1] == ("fallback" if fallback else "native")


class _Forwarding(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def test_a_redefinition_with_another_schema_is_refused(misbehaving: dict[str, tagged_ops.TaggedOp]) -> None:
    """The C++ kernels keep the dispatcher entry, where torch caches the old definition's Python op."""
    schema = "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"
    first = tagged_ops.declare_out("cpp_sin_test::classic.out", schema)  # the same schema: fine
    with _Forwarding():  # torch now caches this definition's Python op in the entry
        first(torch.ones(3), out=torch.zeros(3))
    with pytest.raises(RuntimeError, match=r"cpp_sin_test::classic\.out: cannot be defined again with another schema"):
        tagged_ops.declare_out("cpp_sin_test::classic.out", "(Tensor x, float scale, *, Tensor(a!) out) -> Tensor(a!)")
    again = tagged_ops.declare_out("cpp_sin_test::classic.out", schema)  # the name is still free for its schema
    del first
    gc.collect()
    o = torch.zeros(3)
    assert again(torch.ones(3), out=o) is o
    torch.testing.assert_close(o, torch.ones(3))
    x = torch.randn(3)
    o2 = torch.zeros(3)
    assert torch.compile(lambda x, o: again(x, out=o), fullgraph=True)(x, o2) is o2  # reads the cached op
    torch.testing.assert_close(o2, x)


def test_cuda_kernels(build_directory: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the CUDA kernels were not built or run")
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None or shutil.which(os.path.join(CUDA_HOME, "bin", "nvcc")) is None:
        pytest.skip("no nvcc: the CUDA kernels were not built or run")
    module = importlib.reload(sys.modules["cpp_sin"])
    os.makedirs(build_directory + "_cuda", exist_ok=True)
    module.load_kernels(build_directory + "_cuda", cuda=True)
    x = torch.randn(4, 3, device="cuda")
    o = torch.empty(4, 3, device="cuda")
    assert module.sin_out(x, 2.0, out=o) is o
    torch.testing.assert_close(o, 2 * x.sin())
    y = x.clone()
    assert module.sin_(y) is y
    torch.testing.assert_close(y, x.sin())
    for fn, make in out_patterns(lambda a, b: module.sin_out(a, 2.0, out=b)).values():
        assert_compiled_matches_eager(fn, lambda make=make: tuple(t.cuda() for t in make()))
