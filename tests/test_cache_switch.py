"""One op name compiled natively and as the fallback, one Inductor cache, never stale code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tagged_ops

SCRIPT = textwrap.dedent(
    """
    import torch, tagged_ops
    from tagged_ops.testing import define_sin_ops

    ops = define_sin_ops("tagged_ops_cache_switch")
    x = torch.randn(16)
    o = torch.empty(16)
    expected = x.sin().sin()

    def step(x, o):
        ops.sin_(x)
        return ops.sin_out(x, out=o)

    torch.compile(step, fullgraph=True)(x, o)
    torch.testing.assert_close(o, expected)
    print("native" if ops.sin_.is_native else "fallback", "ok")
    """
)


@pytest.mark.skipif(
    not tagged_ops.NATIVE_TAGS, reason="only a torch with native tags has two lowerings to switch between"
)
@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
def test_switching_lowering_with_one_cache_dir(tmp_path) -> None:  # noqa: ANN001
    # native, fallback, native in one cache: the second run meets the native entries,
    # the third the fallback's (written last under the same keys, were they shared)
    # beside its own warm ones.
    cache = tmp_path / "inductor-cache"
    for path in ("native", "fallback", "native"):
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
        env.pop(tagged_ops.FALLBACK_ENV_VAR, None)
        if path == "fallback":
            env[tagged_ops.FALLBACK_ENV_VAR] = "1"
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip().endswith(f"{path} ok")
