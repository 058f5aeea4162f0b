"""tagged_ops.testing: the test kit for your own mutable ops.

* :func:`variants`: from one example call, samples with the same values in
  other layouts (non-contiguous, storage offset, non-contiguous out buffers),
  dtypes and devices.
* :func:`check`: ``tagged_ops.opcheck`` on every sample, plus what opcheck
  misses: the effect against a reference (functional, or mutating in the call
  form), out buffers written and never read (sentinel-filled), never resized or
  reallocated, an in-place op that really mutates, and the same effect under
  ``torch.compile(fullgraph=True)`` (and ``torch.export`` on request).
* :func:`check_sharded`: the op on DTensors (run on every rank of a mesh) with the
  sharding rule you registered: eager and compiled, on each placement, against the
  same call on plain tensors; identities and placements kept.
* A pytest plugin (loaded automatically when tagged-ops is installed): the
  ``tagged_ops_device`` fixture (CPU, and CUDA or a skip with the reason),
  ``--tagged-ops-require-cuda`` and ``--tagged-ops-fallback``.
* :mod:`tagged_ops.testing.nox`: your suite on many torch releases, in a few
  lines of your noxfile.
* :func:`define_sin_ops`: the reference sin ops (in-place and out=, torch and
  NumPy kernels), as the self-check runs them.

Attributes load on first use, so the plugin and the nox helper import without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._check import check
    from ._sharded import check_sharded
    from ._sin_ops import SinOps, define_sin_ops
    from ._variants import Sample, default_devices, noncontiguous, variants, with_storage_offset

__all__ = [
    "Sample",
    "SinOps",
    "check",
    "check_sharded",
    "default_devices",
    "define_sin_ops",
    "noncontiguous",
    "variants",
    "with_storage_offset",
]

_HOME = {
    "check": "._check",
    "check_sharded": "._sharded",
    "SinOps": "._sin_ops",
    "define_sin_ops": "._sin_ops",
    **{n: "._variants" for n in ("Sample", "default_devices", "noncontiguous", "variants", "with_storage_offset")},
}


__getattr__, __dir__ = lazy_attributes(__name__, _HOME)
