"""tagged_ops.testing: the kit catches what torch.library.opcheck alone passes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops.testing import check, noncontiguous, variants, with_storage_offset

ROOT = Path(__file__).resolve().parent.parent


def _sin_reference(x: Tensor, *, out: Tensor) -> None:
    torch.sin(x, out=out)


def test_variants_keep_values_and_change_layout(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.sin(x, out=out)
        return out

    x = torch.randn(3, 4)
    samples = {
        s.label: s
        for s in variants(sin_out, (x,), {"out": torch.empty(3, 4)}, dtypes=(torch.float64,), devices=["cpu"])
    }
    assert set(samples) == {"cpu", "cpu/noncontiguous", "cpu/storage-offset", "cpu/noncontiguous-out", "cpu/float64"}
    for s in samples.values():
        torch.testing.assert_close(s.args[0].to(x.dtype), x)
    assert not samples["cpu/noncontiguous"].args[0].is_contiguous()
    assert samples["cpu/storage-offset"].args[0].storage_offset() == 3
    assert (
        samples["cpu/noncontiguous-out"].args[0].is_contiguous()
        and not samples["cpu/noncontiguous-out"].kwargs["out"].is_contiguous()
    )
    assert samples["cpu/float64"].args[0].dtype == torch.float64
    clone = samples["cpu/noncontiguous"].clone()
    assert clone.args[0].stride() == samples["cpu/noncontiguous"].args[0].stride()
    assert (
        not noncontiguous(torch.randn(2, 2)).is_contiguous()
        and with_storage_offset(torch.randn(2)).storage_offset() == 3
    )


def test_sample_mapped_changes_tensors_and_says_so_in_its_label() -> None:
    """``Sample.mapped``: your own variant of a call, as ``variants`` makes its own."""
    from tagged_ops.testing import Sample

    x, idx, out = torch.randn(2, 3), [torch.ones(2), torch.zeros(2)], torch.empty(2, 3)
    sample = Sample("cpu", (x, idx, 2), {"out": out, "alpha": 0.5})
    doubled = sample.mapped("doubled", lambda t: t * 2)
    assert doubled.label == "cpu/doubled" and doubled.args[2] == 2 and doubled.kwargs["alpha"] == 0.5
    torch.testing.assert_close(doubled.args[0], x * 2)
    assert isinstance(doubled.args[1], list) and torch.equal(doubled.args[1][0], 2 * torch.ones(2))
    outs_only = sample.mapped("noncontiguous-out", noncontiguous, only={"out"})
    assert outs_only.args[0] is x and not outs_only.kwargs["out"].is_contiguous()
    assert sample.mapped("", lambda t: t).label == "cpu" and sample.args[0] is x  # the original is untouched


def test_check_passes_a_good_op_and_summarizes(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.sin(x, out=out)
        return out

    summary = check(
        sin_out, [((torch.randn(4),), {"out": torch.empty(4)})], reference=_sin_reference, devices=["cpu"], export=True
    )
    assert summary.startswith(f"{ns}::sin_out: tagged_ops.testing.check passed ") and "on 4 samples" in summary
    assert summary.endswith(f"({path} path)")


def _opcheck_passes(op: tagged_ops.TaggedOp, args: tuple, kwargs: dict) -> None:  # type: ignore[type-arg]
    result = tagged_ops.opcheck(op, args, kwargs, raise_exception=False)
    assert set(result.values()) == {"SUCCESS"}, result


def test_catches_an_out_kernel_that_reads_its_buffer(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::reads_out")
    def reads_out(x: Tensor, *, out: Tensor) -> Tensor:
        out.add_(x.sin())  # right only when out holds zeros
        return out

    x = torch.randn(4)
    if path == "fallback":
        _opcheck_passes(reads_out, (x,), {"out": torch.zeros(4)})
    # (On the native path opcheck's AOT test happens to catch this one too: the
    # functionalized out= op writes into a fresh, uninitialized buffer.)
    with pytest.raises(AssertionError) as info:
        check(reads_out, [((x,), {"out": torch.zeros(4)})], reference=_sin_reference, devices=["cpu"], compile=False)
    assert re.search(r"\[example:cpu\] out-buffers: out buffer 'out' still holds the NaN sentinel", str(info.value))


def test_catches_an_inplace_kernel_that_does_not_mutate(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::lazy_")
    def lazy_(x: Tensor) -> Tensor:
        return x  # forgot to compute

    x = torch.randn(4)
    _opcheck_passes(lazy_, (x,), {})
    with pytest.raises(
        AssertionError, match=r"\[example:cpu\] reference: the op did not change its input 'x', but the reference does"
    ):
        check(lazy_, [((x,),)], reference=lambda x: x.sin_(), devices=["cpu"], compile=False)


@pytest.mark.parametrize("how", ["resize", "reallocate"])
def test_catches_a_kernel_that_resizes_or_reallocates_its_out_buffer(path: str, ns: str, how: str) -> None:
    @tagged_ops.define_out(f"{ns}::grows_out")
    def grows_out(x: Tensor, *, out: Tensor) -> Tensor:
        if how == "resize":
            out.resize_(x.numel() * 2)
            out[: x.numel()].copy_(x.sin().flatten())
            out.resize_(x.shape)
        else:
            out.set_(torch.sin(x).contiguous())
        return out

    x = torch.randn(4)
    _opcheck_passes(grows_out, (x,), {"out": torch.empty(4)})
    with pytest.raises(AssertionError, match=r"out-buffers: out buffer 'out' was resized or reallocated"):
        check(grows_out, [((x,), {"out": torch.empty(4)})], reference=_sin_reference, devices=["cpu"], compile=False)


def test_catches_a_kernel_wrong_only_for_noncontiguous_inputs(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::flat_sin_", device_types="cpu")
    def flat_sin_(x: Tensor) -> Tensor:
        a = x.numpy().reshape(-1)  # a copy when x is not contiguous: the result is lost
        np.sin(a, out=a)
        return x

    x = torch.randn(3, 4)
    _opcheck_passes(flat_sin_, (x.clone(),), {})
    with pytest.raises(AssertionError) as info:
        check(flat_sin_, [((x,),)], reference=lambda x: x.sin_(), devices=["cpu"], compile=False)
    lines = str(info.value).splitlines()[1:]
    assert lines and all("[example:cpu/noncontiguous] reference" in line for line in lines), lines


def test_one_line_per_failed_sample_and_stage(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::wrong_out")
    def wrong_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.cos(x, out=out)
        return out

    with pytest.raises(AssertionError) as info:
        check(
            wrong_out,
            [((torch.randn(4),), {"out": torch.empty(4)})],
            reference=_sin_reference,
            devices=["cpu"],
            compile=False,
        )
    lines = str(info.value).splitlines()
    assert lines[0] == f"{ns}::wrong_out: tagged_ops.testing.check found 4 failure(s)"
    assert len(lines) == 5 and all("reference: 'out' differs from the reference" in line for line in lines[1:])


def test_plugin_device_fixture(tagged_ops_device: str) -> None:
    assert tagged_ops_device in ("cpu", "cuda")
    assert torch.empty(1, device=tagged_ops_device).device.type == tagged_ops_device


EXAMPLE = ROOT / "examples" / "kernel_lib"


@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
@pytest.mark.parametrize("flags", [[], ["--tagged-ops-fallback"]], ids=["default", "fallback"])
def test_example_project_runs_green(flags: list[str]) -> None:
    if not flags and not tagged_ops.NATIVE_TAGS:
        pytest.skip("without native tags both runs take the fallback path: the --tagged-ops-fallback run covers it")
    env = dict(os.environ)
    env.pop(tagged_ops.FALLBACK_ENV_VAR, None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *flags],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    expected_path = "fallback" if flags or not tagged_ops.NATIVE_TAGS else "native"
    assert f"kernel_lib ops take the {expected_path} path" in proc.stdout
    assert re.search(r"\d+ passed", proc.stdout)


# -- functional references, as OpInfo refs and NumPy references are written ------------


def test_functional_references_pass_correct_ops(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::relu_")
    def relu_(x: Tensor) -> Tensor:
        x.clamp_(min=0)
        return x

    @tagged_ops.define_out(f"{ns}::double_out")
    def double_out(x: Tensor, alpha: float = 1.0, *, out: Tensor) -> Tensor:
        torch.mul(x, 2 * alpha, out=out)
        return out

    @tagged_ops.define_out(f"{ns}::minmax_out")
    def minmax_out(x: Tensor, *, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        torch.amin(x, 0, keepdim=True, out=lo)
        torch.amax(x, 0, keepdim=True, out=hi)
        return lo, hi

    x = torch.randn(3, 4)
    check(relu_, [((x,),)], reference=lambda x: x.clamp(min=0), devices=["cpu"])
    check(relu_, [((x,),)], reference=lambda x: np.maximum(x.numpy(), 0), devices=["cpu"], compile=False)
    # inputs in the example's form, out buffers left out; a keyword the example passes is passed on
    check(
        double_out,
        [((x,), {"out": torch.empty(3, 4)}), ((x, 0.5), {"out": torch.empty(3, 4)})],
        reference=lambda x, alpha=1.0: x * 2 * alpha,
        devices=["cpu"],
    )
    check(
        double_out,
        [((x,), {"alpha": 3.0, "out": torch.empty(3, 4)})],
        reference=lambda x, alpha: x * 2 * alpha,
        devices=["cpu"],
        compile=False,
    )
    check(
        minmax_out,
        [((x,), {"lo": torch.empty(1, 4), "hi": torch.empty(1, 4)})],
        reference=lambda x: (x.amin(0, keepdim=True), x.amax(0, keepdim=True)),
        devices=["cpu"],
    )


def test_functional_reference_catches_an_inplace_kernel_that_does_not_mutate(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::lazy_relu_")
    def lazy_relu_(x: Tensor) -> Tensor:
        return x  # forgot to compute

    x = torch.tensor([-1.0, 2.0, -3.0, 4.0])  # negatives: the reference's result differs from the input
    with pytest.raises(
        AssertionError, match=r"\[example:cpu\] reference: the op did not change its input 'x', but the reference does"
    ):
        check(lazy_relu_, [((x,),)], reference=lambda x: x.clamp(min=0), devices=["cpu"], compile=False)


def test_functional_reference_catches_an_out_kernel_that_reads_its_buffer(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::reads_out")
    def reads_out(x: Tensor, *, out: Tensor) -> Tensor:
        out.add_(x * 2)
        return out

    with pytest.raises(AssertionError, match=r"out buffer 'out' still holds the NaN sentinel"):
        check(
            reads_out,
            [((torch.randn(4),), {"out": torch.zeros(4)})],
            reference=lambda x: x * 2,
            devices=["cpu"],
            compile=False,
        )


def test_functional_reference_catches_a_kernel_that_reallocates_its_out_buffer(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::grows_out")
    def grows_out(x: Tensor, *, out: Tensor) -> Tensor:
        out.set_((x * 2).contiguous())
        return out

    with pytest.raises(AssertionError, match=r"out buffer 'out' was resized or reallocated"):
        check(
            grows_out,
            [((torch.randn(4),), {"out": torch.empty(4)})],
            reference=lambda x: x * 2,
            devices=["cpu"],
            compile=False,
        )


def test_functional_reference_catches_a_kernel_wrong_only_for_noncontiguous_inputs(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::flat_relu_", device_types="cpu")
    def flat_relu_(x: Tensor) -> Tensor:
        a = x.numpy().reshape(-1)  # a copy when x is not contiguous: the result is lost
        np.maximum(a, 0, out=a)
        return x

    with pytest.raises(AssertionError) as info:
        check(
            flat_relu_,
            [((torch.arange(-6.0, 6.0).reshape(3, 4),),)],
            reference=lambda x: x.clamp(min=0),
            devices=["cpu"],
            compile=False,
        )
    lines = str(info.value).splitlines()[1:]
    assert lines and all("[example:cpu/noncontiguous] reference" in line for line in lines), lines


def test_functional_reference_with_the_wrong_number_of_results_is_reported(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::double_out")
    def double_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.mul(x, 2, out=out)
        return out

    with pytest.raises(
        AssertionError,
        match=r"reference: the reference raised ValueError: it returned 2 result\(s\) for 1 mutated tensor\(s\) \('out',\)",
    ):
        check(
            double_out,
            [((torch.randn(4),), {"out": torch.empty(4)})],
            reference=lambda x: (x * 2, x),
            devices=["cpu"],
            compile=False,
        )


def test_compile_clone_stage_passes_an_op_that_reads_after_writing(path: str, ns: str) -> None:
    """``y = out.clone(); op(y, out=out)`` compiles right by default (pytorch/pytorch#198031 is worked around)."""
    from .test_clone_hazard import _reverse_into

    def define(**options: bool) -> tagged_ops.TaggedOp:
        @tagged_ops.define_out(f"{ns}::rev_out", **options)
        def rev_out(src: Tensor, *, out: Tensor) -> Tensor:
            _reverse_into(out, src)
            return out

        return rev_out

    example = [((torch.arange(12.0).reshape(4, 3).clone(),), {"out": torch.empty(4, 3)})]
    kit = {"devices": ["cpu"], "dtypes": [torch.float32]}
    assert "passed" in check(define(), example, **kit)  # type: ignore[arg-type]
    assert "passed" in check(define(compile_functional=True), example, **kit)  # type: ignore[arg-type]


def test_a_bug_inside_a_functional_reference_is_reported_as_that_bug(path: str, ns: str) -> None:
    """The reference's form comes from its signature, so its own TypeError is not taken for a form."""

    @tagged_ops.define_out(f"{ns}::twice_out")
    def twice_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.mul(x, 2, out=out)
        return out

    def buggy(x: Tensor) -> Tensor:
        return x * "2"  # type: ignore[operator]  # a TypeError inside the reference

    with pytest.raises(AssertionError) as info:
        check(
            twice_out, [((torch.randn(4),), {"out": torch.empty(4)})], reference=buggy, devices=["cpu"], compile=False
        )
    lines = [line for line in str(info.value).splitlines() if " reference: " in line]
    assert lines and all("the reference raised TypeError" in line for line in lines), lines
    assert not any("unexpected keyword argument 'out'" in line for line in lines), lines


def test_the_reference_form_can_be_given(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.sin(x, out=out)
        return out

    example = [((torch.randn(4),), {"out": torch.empty(4)})]
    check(sin_out, example, reference=torch.sin, devices=["cpu"], compile=False)  # a builtin: functional

    def mutating(*args: Any, **kwargs: Any) -> None:  # the call form, with no `out` in its signature
        torch.sin(*args, **kwargs)

    check(sin_out, example, reference=mutating, reference_form="call", devices=["cpu"], compile=False)
    with pytest.raises(
        AssertionError, match="a functional reference returns the out buffers' values; it returned None"
    ):
        check(sin_out, example, reference=mutating, devices=["cpu"], compile=False)
