"""docs/adopting.md: every code block runs, in order, as a reader would run it.

Blocks share one Python namespace; ``mylib`` becomes a fresh op namespace per
run, and a block that starts with ``# after the port`` gets another fresh one
(the ported module, as a new process would see it).
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import torch

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "adopting.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _blocks() -> list[str]:
    return _BLOCK.findall(GUIDE.read_text())


def test_the_guide_has_its_code_blocks() -> None:
    blocks = _blocks()
    assert len(blocks) >= 6
    assert any(b.startswith("# after the port") for b in blocks)


# The guide's modules stay alive for the whole run: a Library that is garbage collected takes
# its ops with it and (torch 2.12) leaves a stale torch.ops packet that later exports trip on.
_KEEP: list[types.ModuleType] = []


def test_every_code_block_of_the_guide_runs(path: str, ns: str) -> None:
    # a real module: Dynamo (2.2/2.4) imports the module a compiled function comes from
    module = types.ModuleType(f"adopting_guide_{ns}")
    sys.modules[module.__name__] = module
    _KEEP.append(module)
    current = f"{ns}_before"
    for i, block in enumerate(_blocks()):
        if block.startswith("# after the port"):
            current = f"{ns}_after"
        code = compile(block.replace("mylib", current), f"docs/adopting.md block {i + 1}", "exec")
        exec(code, module.__dict__)  # noqa: S102 - the guide's own code
    assert isinstance(module.expected, torch.Tensor)
