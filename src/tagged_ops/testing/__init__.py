"""tagged_ops.testing: the test kit for your own mutable ops.

* :func:`variants`: from one example call, samples with the same values in
  other layouts (non-contiguous, storage offset, non-contiguous out buffers),
  dtypes and devices.
* :func:`check`: ``tagged_ops.opcheck`` on every sample, plus what opcheck
  misses: the effect against a reference, out buffers written and never read
  (sentinel-filled), never resized or reallocated, an in-place op that really
  mutates, and the same effect under ``torch.compile(fullgraph=True)`` (and
  ``torch.export`` on request).
* A pytest plugin (loaded automatically when tagged-ops is installed): the
  ``tagged_ops_device`` fixture (CPU, and CUDA or a skip with the reason),
  ``--tagged-ops-require-cuda`` and ``--tagged-ops-fallback``.
"""

from ._check import check
from ._variants import Sample, default_devices, noncontiguous, variants, with_storage_offset

__all__ = ["Sample", "check", "default_devices", "noncontiguous", "variants", "with_storage_offset"]
