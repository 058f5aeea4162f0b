"""The scenarios of tests/test_dtensor.py, run on each of two gloo ranks (CPU), in one spawn.

Each scenario returns ``(ok, detail)``; each rank writes ``{scenario: [ok, detail]}`` to a JSON
file of its own, and the test module asserts per scenario. Values are compared with the
single-process result of the same program on plain tensors.
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Any, Callable

import torch

Result = tuple[bool, str]


def run(rank: int, world: int, port: int, folder: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    results: dict[str, Any] = {}
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world,))
        _canaries(mesh, results)  # first: before any tagged_ops rule installs a fix
        import tagged_ops

        paths = ["native", "fallback"] if tagged_ops.NATIVE_TAGS else ["fallback"]
        for path in paths:
            _scenarios(mesh, path, results)
        _training(mesh, results)
    except Exception:
        results["worker"] = [False, traceback.format_exc()]
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    torch.distributed.destroy_process_group()


def _chain(e: BaseException) -> list[BaseException]:
    """``e`` and what caused it: DTensor 2.9 re-raises a sharding error as
    ``RuntimeError("Sharding propagation failed for ...")`` from the original."""
    found = [e]
    while found[-1].__cause__ is not None and len(found) < 10:
        found.append(found[-1].__cause__)
    return found


def _message(e: BaseException) -> str:
    return " <- ".join(str(x) for x in _chain(e))


def _record(results: dict[str, Any], name: str, fn: Callable[[], Any]) -> None:
    try:
        ok, detail = fn()
    except Exception as e:
        ok, detail = False, f"{type(e).__name__}: {e}"[:2000]
    results[name] = [None if ok is None else bool(ok), detail]  # None: torch cannot, a skip


def _canaries(mesh: Any, results: dict[str, Any]) -> None:
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor.experimental import register_sharding

    from tagged_ops import _compat_dtensor

    lib = torch.library.Library("dtensor_raw", "DEF")
    lib.define("scale_(Tensor(a!) x, float k) -> ()")

    def raw_scale_(x: torch.Tensor, k: float) -> None:
        x.mul_(k)

    lib.impl("scale_", raw_scale_, "CompositeExplicitAutograd")
    lib.define("sin_out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    lib.impl("sin_out", lambda x, *, out: torch.sin(x, out=out), "CompositeExplicitAutograd")
    register_sharding(torch.ops.dtensor_raw.scale_.default)(lambda x, k: [([], [Shard(0), None])])
    register_sharding(torch.ops.dtensor_raw.sin_out.default)(
        lambda x, out: [([p], [p, p]) for p in (Shard(0), Shard(1))]
    )

    def returning_nothing() -> Result:
        refuses = _compat_dtensor.refuses_ops_returning_nothing()
        x = distribute_tensor(torch.ones(4, 2), mesh, [Shard(0)])
        try:
            torch.ops.dtensor_raw.scale_(x, 2.0)
            failed = False
        except Exception as e:
            if not isinstance(_chain(e)[-1], IndexError):
                raise
            failed = True
        return failed == refuses, f"raw op returning nothing fails: {failed}; probe says refuses: {refuses}"

    def keyword_tensors() -> Result:
        x = distribute_tensor(torch.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
        first = distribute_tensor(torch.zeros(4, 2), mesh, [Shard(0)])
        try:
            torch.ops.dtensor_raw.sin_out(x, out=first)
        except Exception as e:
            if not isinstance(_chain(e)[-1], AssertionError):
                raise
            return True, "2.5.1, 2.9.1: DTensor cannot run a raw op with a keyword-only out buffer at all"
        second = distribute_tensor(torch.zeros(4, 2), mesh, [Shard(1)])
        try:
            torch.ops.dtensor_raw.sin_out(x, out=second)
            wrong = tuple(second.placements) != (Shard(1),) or not torch.allclose(
                second.full_tensor(), torch.sin(torch.arange(8.0).reshape(4, 2))
            )
        except (RuntimeError, AssertionError) as e:  # 2.13.0: a redistribution fails; 2.5.1: an assertion
            wrong = True
            detail = f"{type(e).__name__}: {str(e)[:200]}"
        else:
            detail = f"out placed {second.placements}"
        return wrong, f"a second call with out placed otherwise is wrong: {wrong} ({detail})"

    _record(results, "canary: returning nothing", returning_nothing)
    _record(results, "canary: keyword tensors", keyword_tensors)


def _define(ns: str, path: str) -> tuple[Any, Any, Any]:
    from torch.distributed.tensor import Replicate, Shard

    import tagged_ops

    os.environ.pop("TAGGED_OPS_FALLBACK", None)
    if path == "fallback":
        os.environ["TAGGED_OPS_FALLBACK"] = "1"

    @tagged_ops.define_inplace(f"{ns}::scale_")
    def scale_(x: torch.Tensor, k: float = 2.0) -> torch.Tensor:
        return x.mul_(k)

    @scale_.register_sharding
    def _(x: Any, k: float = 2.0) -> list[Any]:
        return [([p], [p, None]) for p in (Shard(0), Shard(1), Replicate())]

    @tagged_ops.define_out(f"{ns}::mix_out")
    def mix_out(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.add(a * 2, b, out=out)

    mix_out.register_sharding(tagged_ops.pointwise_sharding)

    @tagged_ops.define_out(f"{ns}::replicated_out")
    def replicated_out(a: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.mul(a, 3, out=out)

    @replicated_out.register_sharding
    def _(a: Any, *, out: Any) -> list[Any]:
        return [([Replicate()], [Replicate(), Replicate()])]

    return scale_, mix_out, replicated_out


def _scenarios(mesh: Any, path: str, results: dict[str, Any]) -> None:
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    import tagged_ops

    scale_, mix_out, replicated_out = _define(f"dtensor_{path}", path)
    base = torch.arange(8.0).reshape(4, 2)
    placements = {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Replicate()": Replicate()}

    def dt(t: torch.Tensor, p: Any) -> Any:
        return distribute_tensor(t.clone(), mesh, [p])

    for label, p in placements.items():

        def inplace(p: Any = p) -> Result:
            x = dt(base, p)
            y = scale_(x, 3.0)
            same = y is x and tuple(x.placements) == (p,)
            return same and torch.equal(x.full_tensor(), base * 3), f"identity {y is x}, placements {x.placements}"

        def out(p: Any = p) -> Result:
            a, b, o = dt(base, p), dt(base + 1, p), dt(torch.zeros(4, 2), p)
            r = mix_out(a, b, out=o)
            same = r is o and tuple(o.placements) == (p,)
            return same and torch.equal(o.full_tensor(), base * 2 + base + 1), f"identity {r is o}, {o.placements}"

        def direct(p: Any = p) -> Result:
            x, o = dt(base, p), dt(torch.zeros(4, 2), p)
            if scale_.is_native:
                returned = torch.ops.dtensor_native.scale_(x, 3.0)
                got = torch.ops.dtensor_native.mix_out(x, x, out=o)
                shape_ok = returned is x or torch.equal(returned.full_tensor(), x.full_tensor())
            else:  # the fallback's torch.ops op: out buffers positional, nothing returned (caveat 3)
                returned = torch.ops.dtensor_fallback.scale_(x, 3.0)
                got = torch.ops.dtensor_fallback.mix_out(x, x, o)
                shape_ok = returned is None and got is None
            return shape_ok and torch.equal(o.full_tensor(), base * 9), f"returned {type(returned).__name__}"

        _record(results, f"{path}: eager in-place on {label}", inplace)
        _record(results, f"{path}: eager out= on {label}", out)
        _record(results, f"{path}: torch.ops calls on {label}", direct)

        for program_name, program in _programs(scale_, mix_out).items():

            def compiled(p: Any = p, program: Callable[..., Any] = program) -> Result:
                torch._dynamo.reset()
                eager_args = (dt(base, p), dt(torch.zeros(4, 2), p))
                compiled_args = (dt(base, p), dt(torch.zeros(4, 2), p))
                expected = program(*eager_args)
                got = torch.compile(program, fullgraph=True)(*compiled_args)
                same = torch.equal(got.full_tensor(), expected.full_tensor()) and all(
                    torch.equal(e.full_tensor(), c.full_tensor()) and tuple(e.placements) == tuple(c.placements)
                    for e, c in zip(eager_args, compiled_args, strict=True)
                )
                return same, "compiled against eager"

            _record(results, f"{path}: compiled {program_name} on {label}", compiled)

    def redistributes_what_it_reads() -> Result:
        a, b, o = dt(base, Shard(0)), dt(base + 1, Replicate()), dt(torch.zeros(4, 2), Shard(1))
        r = mix_out(a, b, out=o)
        ok = r is o and tuple(o.placements) == (Shard(1),) and torch.equal(o.full_tensor(), base * 3 + 1)
        return ok, f"out placements {o.placements}"

    def refuses_to_redistribute_what_it_writes() -> Result:
        a, o = dt(base, Replicate()), dt(torch.full((4, 2), 7.0), Shard(0))
        try:
            replicated_out(a, out=o)
        except Exception as e:
            untouched = torch.equal(o.full_tensor(), torch.full((4, 2), 7.0))
            said = _message(e)
            return "keeps the tensors the op writes" in said and "'out'" in said and untouched, said[:300]
        return False, "no error"

    def refuses_a_rule_that_does_not_fit() -> Result:
        @tagged_ops.define_inplace(f"dtensor_{path}::bad_")
        def bad_(x: torch.Tensor, k: float) -> torch.Tensor:
            return x.mul_(k)

        bad_.register_sharding(lambda x, k: [([Shard(0)], [Shard(0)])])
        x = dt(base, Shard(0))
        try:
            bad_(x, 5.0)
        except Exception as e:
            said = _message(e)
            named = f"dtensor_{path}::bad_" in said and "(x, k)" in said
            return named and torch.equal(x.full_tensor(), base), said[:300]
        return False, "no error"

    def refuses_a_two_dimensional_mesh() -> Result:
        from torch.distributed.device_mesh import init_device_mesh

        mesh2 = init_device_mesh("cpu", (1, 2))
        x = distribute_tensor(base.clone(), mesh2, [Replicate(), Shard(0)])
        try:
            scale_(x, 3.0)
        except Exception as e:
            untouched = torch.equal(x.full_tensor(), base)
            said = _message(e)
            return "2-dimensional mesh" in said and untouched, said[:300]
        return False, "no error"

    def local_map_around_the_ops() -> Result:
        """The ops on each rank's local shards inside ``local_map``: written in place there."""
        from torch.distributed.tensor.experimental import local_map

        def body(x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
            assert scale_(x, 3.0) is x and mix_out(x, x, out=o) is o  # plain tensors inside
            return o

        mapped = local_map(body, out_placements=[Shard(0)], in_placements=([Shard(0)], [Shard(0)]))
        x, o = dt(base, Shard(0)), dt(torch.zeros(4, 2), Shard(0))
        r = mapped(x, o)
        values = [t.full_tensor() for t in (x, o, r)]
        ok = all(torch.equal(v, want) for v, want in zip(values, (base * 3, base * 9, base * 9), strict=True))
        return ok and tuple(r.placements) == (Shard(0),), f"values {[v.tolist() for v in values]}"

    def the_test_kit_checks_the_ops() -> Result:
        """check_sharded passes the ops with right rules, and finds a rule that is wrong."""
        from tagged_ops.testing import check_sharded

        passed = [
            check_sharded(scale_, [((base.clone(), 3.0),)], mesh),
            check_sharded(mix_out, [((base.clone(), base + 1), {"out": torch.zeros(4, 2)})], mesh),
        ]

        @tagged_ops.define_inplace(f"dtensor_{path}::cumsum_")
        def cumsum_(x: torch.Tensor) -> torch.Tensor:  # along dim 1: not pointwise
            return x.copy_(x.cumsum(1))

        cumsum_.register_sharding(tagged_ops.pointwise_sharding)  # wrong for Shard(1)
        try:
            check_sharded(cumsum_, [((base.clone(),),)], mesh)
        except AssertionError as e:
            found = str(e)
        else:
            return False, f"a wrong rule passed; {passed}"
        lines = found.splitlines()[1:]
        only_shard1 = bool(lines) and all("on Shard(dim=1)]" in line for line in lines)
        return only_shard1 and any("values: 'x' differs" in line for line in lines), found[:600]

    def exported_programs_equal_eager() -> Result | tuple[None, str]:
        """torch.export of modules that write their DTensor inputs and intermediates, strict and not,
        where torch exports a DTensor program with a raw functional custom op at all."""

        @torch.library.custom_op(f"dtensor_raw_{path}::mix", mutates_args=())
        def raw_mix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a * 2 + b

        raw_mix.register_fake(lambda a, b: torch.empty_like(a))
        from torch.distributed.tensor.experimental import register_sharding

        register_sharding(raw_mix._opoverload)(lambda a, b: [([p], [p, p]) for p in (Shard(0), Replicate())])

        class Raw(torch.nn.Module):
            def forward(self, x: Any) -> Any:
                return raw_mix(x * 3, x)

        try:
            torch.export.export(Raw(), (dt(base, Shard(0)),))
        except Exception as e:
            return (
                None,
                f"torch {torch.__version__} cannot export a DTensor program with a raw op: {type(e).__name__}: {str(e)[:200]}",
            )

        class Intermediates(torch.nn.Module):
            def forward(self, x: Any) -> Any:
                y = x * 1
                scale_(y, 3.0)
                o = torch.empty_like(y)
                mix_out(y, x, out=o)
                return o

        class WritesInputs(torch.nn.Module):
            def forward(self, x: Any, o: Any) -> Any:
                scale_(x, 3.0)
                mix_out(x, x, out=o)
                return o + 1

        checked = []
        for strict in (False, True):
            for module, n_inputs in ((Intermediates(), 1), (WritesInputs(), 2)):
                for p in (Shard(0), Shard(1), Replicate()):
                    make = lambda p=p, n=n_inputs: (dt(base, p), dt(torch.zeros(4, 2), p))[:n]  # noqa: E731
                    program = torch.export.export(module, make(), strict=strict).module()
                    got_inputs, want_inputs = make(), make()
                    got, want = program(*got_inputs), module(*want_inputs)
                    pairs = [(got, want), *zip(got_inputs, want_inputs, strict=True)]
                    if not all(
                        torch.equal(g.full_tensor(), w.full_tensor()) and tuple(g.placements) == tuple(w.placements)
                        for g, w in pairs
                    ):
                        return False, f"{type(module).__name__} on {p!r}, strict={strict}: differs from eager"
                    checked.append(f"{type(module).__name__}/{p}/{'strict' if strict else 'non-strict'}")
        return True, f"{len(checked)} exported programs equal eager"

    _record(results, f"{path}: local_map around the ops", local_map_around_the_ops)
    _record(results, f"{path}: exported programs equal eager", exported_programs_equal_eager)
    _record(results, f"{path}: the test kit checks the ops on DTensors", the_test_kit_checks_the_ops)
    _record(results, f"{path}: reads are redistributed, writes are not", redistributes_what_it_reads)
    _record(results, f"{path}: a written DTensor on a 2-D mesh is refused", refuses_a_two_dimensional_mesh)
    _record(
        results, f"{path}: a write that would need a redistribution is refused", refuses_to_redistribute_what_it_writes
    )
    _record(results, f"{path}: a rule that does not fit is refused", refuses_a_rule_that_does_not_fit)


def _programs(scale_: Any, mix_out: Any) -> dict[str, Callable[..., Any]]:
    def inplace_on_an_input(x: Any, o: Any) -> Any:
        scale_(x, 2.0)
        return x * 1

    def out_into_an_input(x: Any, o: Any) -> Any:
        mix_out(x, x, out=o)
        return o + 1

    def writes_to_intermediates(x: Any, o: Any) -> Any:
        y = x * 2
        scale_(y, 0.5)
        z = torch.empty_like(y)
        mix_out(y, x, out=z)
        return z

    return {f.__name__: f for f in (inplace_on_an_input, out_into_an_input, writes_to_intermediates)}


def _training(mesh: Any, results: dict[str, Any]) -> None:
    import tagged_ops

    os.environ.pop("TAGGED_OPS_FALLBACK", None)

    @tagged_ops.define_inplace("dtensor_train::axpy_")
    def axpy_(p: torch.Tensor, g: torch.Tensor, lr: float) -> torch.Tensor:
        return p.add_(g, alpha=-lr)

    axpy_.register_sharding(tagged_ops.pointwise_sharding)

    @tagged_ops.define_inplace("dtensor_train::relu_")
    def relu_(x: torch.Tensor) -> torch.Tensor:
        return x.clamp_(min=0)

    relu_.register_sharding(tagged_ops.pointwise_sharding)

    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 4))

    def step(m: torch.nn.Module, x: torch.Tensor, aten: bool = False) -> torch.Tensor:
        h = m[0](x)
        with torch.no_grad():
            h.clamp_(min=0) if aten else relu_(h)  # an in-place op on the (sharded) activation, outside autograd
        loss = m[1](h).sum()
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():  # the optimizer: sharded parameters updated in place
                p.add_(p.grad, alpha=-0.1) if aten else axpy_(p, p.grad, 0.1)
        return loss.detach()

    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    reference = model()
    ref_loss = step(reference, x)
    ref_params = [p.detach().clone() for p in reference.parameters()]

    def tensor_parallel() -> Result:
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        m = parallelize_module(
            model(), mesh, {"0": ColwiseParallel(use_local_output=False), "1": RowwiseParallel(use_local_output=True)}
        )
        with torch.no_grad():
            h = m[0](x)
            relu_(h)
            out = m[1](h)
        expected = reference_forward(x)
        return torch.allclose(out.full_tensor() if hasattr(out, "full_tensor") else out, expected), "TP forward"

    def reference_forward(x: torch.Tensor) -> torch.Tensor:
        m = model()
        with torch.no_grad():
            return m[1](m[0](x).clamp(min=0))

    def fsdp2_step() -> Result:
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import fully_shard  # 2.5

        def sharded() -> torch.nn.Module:
            m = model()
            for layer in m:
                fully_shard(layer, mesh=mesh)
            fully_shard(m, mesh=mesh)
            return m

        # torch's own step first, ATen's ops under the same sharding: the tagged step must equal it
        try:
            aten = sharded()
            aten_loss = step(aten, x, aten=True)
        except Exception as e:  # 2.5.1: "requires CUDA"; 2.6.0: CUDA streams
            return (
                None,
                f"torch {torch.__version__} runs no FSDP2 step on CPU, ATen's ops alone: {type(e).__name__}: {e}",
            )
        aten_params = [p.full_tensor() for p in aten.parameters()]
        m = sharded()
        loss = step(m, x)
        params = [p.full_tensor() for p in m.parameters()]

        def close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
            return all(torch.allclose(u, v, atol=1e-6) for u, v in zip(a, b, strict=True))

        if not (torch.allclose(loss, aten_loss) and close(params, aten_params)):
            return (
                False,
                f"the tagged step differs from ATen's under FSDP2: loss {loss.item()} against {aten_loss.item()}",
            )
        if not (torch.allclose(aten_loss, ref_loss) and close(aten_params, ref_params)):
            worst = max((u - v).abs().max().item() for u, v in zip(aten_params, ref_params, strict=True))
            return None, (
                f"torch {torch.__version__}'s FSDP2 step on CPU leaves other parameters than one process does, "
                f"ATen's ops alone (largest difference {worst:.3g}); the tagged step equals ATen's"
            )
        return True, f"loss {loss.item()} against {ref_loss.item()}, parameters as on one process"

    _record(results, "tensor parallel: colwise, the op on the DTensor activation, rowwise", tensor_parallel)
    _record(results, "FSDP2: an optimizer step updating sharded parameters in place", fsdp2_step)
