"""tagged_ops.testing: the test kit for your own mutable ops.

* :func:`variants`: from one example call, samples with the same values in
  other layouts (non-contiguous, storage offset, non-contiguous out buffers),
  dtypes and devices.
* :func:`check`: ``tagged_ops.opcheck`` on every sample, plus what opcheck
  misses: the effect against a reference (functional, or mutating in the call
  form), out buffers written and never read (sentinel-filled), never resized or
  reallocated, an in-place op that really mutates, and the same effect under
  ``torch.compile(fullgraph=True)`` (and ``torch.export`` on request).
* A pytest plugin (loaded automatically when tagged-ops is installed): the
  ``tagged_ops_device`` fixture (CPU, and CUDA or a skip with the reason),
  ``--tagged-ops-require-cuda`` and ``--tagged-ops-fallback``.
* :mod:`tagged_ops.testing.nox`: your suite on many torch releases, in a few
  lines of your noxfile.

Attributes load on first use, so the plugin and the nox helper import without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._check import check
    from ._variants import Sample, default_devices, noncontiguous, variants, with_storage_offset

__all__ = ["Sample", "check", "default_devices", "noncontiguous", "variants", "with_storage_offset"]

_HOME = {
    "check": "._check",
    **{n: "._variants" for n in ("Sample", "default_devices", "noncontiguous", "variants", "with_storage_offset")},
}


__getattr__, __dir__ = lazy_attributes(__name__, _HOME)
