"""Marks Inductor's on-disk cache keys with tagged_ops' fixes and an op's schema, unseen in graph text (2.13-2.15).

The same op name compiled once tagged and once untagged (the fallback forced on a
torch with native tags, in one cache directory) made the second program load the
first one's compiled code: ``TypeError: expected Tensor() for op`` (2.13.0). And code
compiled without the fixes in this package (an older tagged_ops, or raw custom ops
in another process sharing the cache) was served unchanged to a process with them.

The fix: a process that traces a tagged op adds a mark naming this set of fixes to
every cache key (``torch.compiler.config.cache_key_tag``, where torch has it), and a
mark of its own when the op is forced onto the fallback where native tags exist.
Canary: tests/test_cache_switch.py. Without the tag (2.2-2.12 measured: 2.2 and 2.4
lack it), clear ``TORCHINDUCTOR_CACHE_DIR`` once after upgrading tagged_ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from . import Op

#: Changes whenever a fix changes what Inductor generates.
FIXES_MARK = "tagged_ops-fixes-3"
FALLBACK_MARK = "tagged_ops-fallback"


def at_first_trace(op: Op) -> None:
    add_cache_key_tag(FIXES_MARK)
    if op.forced_fallback:
        add_cache_key_tag(FALLBACK_MARK)


def add_cache_key_tag(mark: str) -> bool:
    """Add ``mark`` to every key of Inductor's on-disk caches in this process; False where torch has no tag."""
    config = getattr(torch.compiler, "config", None)
    tag = getattr(config, "cache_key_tag", None)
    if tag is None:
        return False
    if mark not in tag:
        config.cache_key_tag = f"{tag}:{mark}" if tag else mark  # type: ignore[union-attr]
    return True
