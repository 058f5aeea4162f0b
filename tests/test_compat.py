"""The probe (tagged_ops._compat) detects features, never version strings; its backports match upstream."""

from __future__ import annotations

import inspect
import json
import textwrap
import types

import pytest
import torch

import tagged_ops
from tagged_ops import _compat as caps
from tagged_ops import _compat_compiler
from tagged_ops._switches import FALLBACK_ENV_VAR, fallback_forced

from ._subprocess import run_program


def test_native_tags_means_both_tags_and_tag_aware_registration() -> None:
    expected = (
        hasattr(torch.Tag, "inplace")
        and hasattr(torch.Tag, "out")
        and hasattr(torch.library, "infer_schema")
        and "tags" in __import__("inspect").signature(torch.library.infer_schema).parameters
    )
    assert tagged_ops.NATIVE_TAGS is expected


def test_out_variant_of_2_10_to_2_12_is_not_the_2_13_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "Tag", types.SimpleNamespace(out_variant=object(), pt2_compliant_tag=object()))
    assert caps._probe_native_tags() is False


def test_tags_without_tag_aware_schema_inference_are_not_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "Tag", types.SimpleNamespace(inplace=object(), out=object()))

    def infer_schema(prototype_function, /, *, mutates_args, op_name=None):  # noqa: ANN001, ANN202 - 2.5-2.12's signature
        raise AssertionError("not called")

    monkeypatch.setattr(torch.library, "infer_schema", infer_schema, raising=False)
    assert caps._probe_native_tags() is False


def test_version_string_is_never_consulted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "__version__", "2.99.0a0+gitdeadbeef")
    assert caps._probe_native_tags() is tagged_ops.NATIVE_TAGS


@pytest.mark.parametrize(
    ("value", "forced"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("", False),
        ("no", False),
        ("false", False),
        ("off", False),
        (None, False),
    ],
)
def test_fallback_switch(monkeypatch: pytest.MonkeyPatch, ns: str, value: str | None, forced: bool) -> None:
    if value is None:
        monkeypatch.delenv(FALLBACK_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(FALLBACK_ENV_VAR, value)
    assert fallback_forced() is forced

    @tagged_ops.define_inplace(f"{ns}::relu_")
    def relu_(x: torch.Tensor) -> torch.Tensor:
        return x.relu_()

    assert relu_.is_native is (tagged_ops.NATIVE_TAGS and not forced)


def test_one_parser_serves_every_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from tagged_ops._switches import REQUIRE_CUDA_ENV_VAR, env_flag
    from tagged_ops.testing import pytest_plugin

    assert pytest_plugin.env_flag is env_flag
    monkeypatch.setenv(REQUIRE_CUDA_ENV_VAR, "no")
    assert env_flag(REQUIRE_CUDA_ENV_VAR) is False
    monkeypatch.setenv(FALLBACK_ENV_VAR, "maybe")
    with pytest.raises(ValueError, match=r"TAGGED_OPS_FALLBACK='maybe' is neither on"):
        fallback_forced()


def test_switches_and_nox_helper_import_without_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import tagged_ops._switches, tagged_ops.testing.pytest_plugin, tagged_ops.testing.nox; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_increment_version_bumps_every_tensor() -> None:
    a, b = torch.zeros(1), torch.zeros(1)
    caps.increment_version()((a, b))
    assert a._version == 1 and b._version == 1


def test_increment_version_takes_the_tuple_exactly_where_torch_does() -> None:
    # The probe reads torch's declaration; here torch is tried, as the probe must not (it throws from C++).
    a = torch.zeros(1)
    try:
        torch._C._increment_version((a,))
        takes_tuple = True
    except (TypeError, RuntimeError):
        takes_tuple = False
    assert (caps.increment_version() is torch._C._increment_version) == takes_tuple


def _plus_one_if_exporting(x: torch.Tensor) -> torch.Tensor:
    return x + 1 if _compat_compiler.is_exporting() else x - 1


def test_is_exporting_is_false_under_torch_compile() -> None:
    # Dynamo on 2.7-2.9 folds torch.compiler.is_exporting() to True under torch.compile;
    # a compiled in-place call under autograd then kept the op in its graph and failed.
    torch._dynamo.reset()
    x = torch.zeros(2)
    assert torch.equal(torch.compile(_plus_one_if_exporting, backend="eager", fullgraph=True)(x), x - 1)


@pytest.mark.skipif(not hasattr(torch.compiler, "is_exporting"), reason="this torch cannot tell export apart")
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non-strict"])
def test_is_exporting_is_true_under_torch_export(strict: bool) -> None:
    if strict and not tagged_ops.NATIVE_TAGS:
        # 2.7's strict export does not set the flag (and its Dynamo folds is_exporting() to True
        # under torch.compile too): only the native path (2.13+) relies on the answer under export.
        pytest.skip("strict export sets the flag only on newer releases; the native path needs it")

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _plus_one_if_exporting(x)

    x = torch.zeros(2)
    assert torch.equal(torch.export.export(M(), (x,), strict=strict).module()(x), x + 1)


def test_an_unsupported_torch_gets_a_clear_import_error() -> None:
    """A torch that cannot register fake kernels (2.1 and older) is refused at import, saying what to do."""
    import subprocess
    import sys

    code = (
        "import torch.library as L\n"
        "for name in ('register_fake', 'impl_abstract'):\n"
        "    if hasattr(L, name): delattr(L, name)\n"
        "import tagged_ops._compat\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "ImportError: tagged_ops supports torch 2.2 and newer" in done.stderr
    assert "install torch 2.2 or newer" in done.stderr


def test_parse_namespace_backport_matches_torch() -> None:
    """The backport used where torch moves ``torch._library.utils.parse_namespace``."""
    import torch._library.utils as upstream

    source = inspect.getsource(caps)
    namespace: dict[str, object] = {}
    start = source.index("    def parse_namespace(")
    body = textwrap.dedent(source[start : source.index("\n\n\n", start)])
    exec(body, namespace)  # noqa: S102 - our own source, the else branch of the probe
    backport = namespace["parse_namespace"]
    for qualname in ("ns::op", "ns::op.out", "mylib::x_.Tensor"):
        assert backport(qualname) == upstream.parse_namespace(qualname)  # type: ignore[operator]
    for bad in ("op", "a::b::c"):
        with pytest.raises(ValueError):
            backport(bad)  # type: ignore[operator]
        with pytest.raises(ValueError):
            upstream.parse_namespace(bad)


_DEFAULTS_PROBE = r"""
import inspect, importlib, json, sys
import torch
from tagged_ops import _compat_compiler
name = "torch._higher_order_ops.auto_functionalize"
loaded_by_torch = name in sys.modules
answer = _compat_compiler.schema_defaults_survive_functionalization()
loaded_by_probe = name in sys.modules and not loaded_by_torch
hop = importlib.import_module(name).auto_functionalized
truth = "mutated_args_names" not in inspect.signature(type(hop).__call__).parameters
print(json.dumps([loaded_by_probe, answer, truth]))
"""


def test_the_defaults_probe_reads_auto_functionalized_without_importing_it() -> None:
    """Defining a fallback op with a defaulted parameter asks 2.2's functionalization question; the
    answer (read from the module's code where ``import torch`` has not loaded it: 2.2, 2.4, 2.5) is
    the imported module's, and the module stays unloaded: importing it is work only compiling needs."""
    loaded_by_probe, answer, truth = json.loads(run_program(_DEFAULTS_PROBE, fallback=True).splitlines()[-1])
    assert answer == truth
    assert not loaded_by_probe
