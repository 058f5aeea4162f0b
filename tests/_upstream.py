"""Shared pieces of the upstream-derived tests (tests/test_upstream_*.py).

The reasons here are the deliberate differences from raw ``torch.library.custom_op``
that docs/differences.md lists; every xfail in the
upstream-derived tests names one of them.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

UNTAGGED_TWIN_GRAPHS = (
    "under torch.compile tagged_ops records an untagged op (the native path's __untagged twin, or the fallback op "
    "itself), so functionalized graphs differ from upstream's; values match, and Inductor output has no copies"
)
LEAF_REFUSED = "an in-place call on a leaf that requires grad is refused up front, as ATen in-place ops do"
FAKE_RETURN_IGNORED = "a registered fake's return value is ignored: the op returns its mutated tensors"


def rendered(schema: str) -> str:
    """How torch prints ``schema`` in its messages (``Got: ...``)."""
    return str(torch._C.parse_schema(schema))


def functionalized_forward(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """Compile ``fn`` with aot_eager and return (the functionalized forward graph's code, the result)."""
    graphs: list[str] = []

    def record(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm.code)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    result = torch.compile(fn, backend=aot_autograd(fw_compiler=record), fullgraph=True)(*args)
    return "\n".join(graphs), result


def graphs_differ(request: pytest.FixtureRequest, is_native: bool) -> None:
    """Upstream's expected functionalized graph: never on the native path (twin), sometimes on the fallback."""
    request.applymarker(pytest.mark.xfail(reason=UNTAGGED_TWIN_GRAPHS, strict=is_native))


def xfail_where_an_argument_named_self_cannot_compile(request: pytest.FixtureRequest) -> None:
    """Upstream's ops name their first argument ``self``; torch 2.3-2.5's ``auto_functionalized(op, **kwargs)``
    takes ``self`` as its own (``got multiple values for argument 'self'``), for any mutable custom op."""
    import inspect

    module = pytest.importorskip("torch._higher_order_ops.auto_functionalize")
    hop = getattr(module, "auto_functionalized", None)
    if hop is None:
        return
    params = list(inspect.signature(type(hop).__call__).parameters.values())
    takes_op_arguments_as_keywords = any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params
    )  # 2.3+; 2.2 took a dict
    if (
        takes_op_arguments_as_keywords and params[0].kind is not inspect.Parameter.POSITIONAL_ONLY
    ):  # 2.6+: positional-only
        request.applymarker(
            pytest.mark.xfail(
                reason=f"torch {torch.__version__}: auto_functionalized takes an op argument named 'self' as its own "
                "(a hand-written op too); name it otherwise on this release",
                strict=True,
            )
        )
