"""Lets a saved export that holds a mutable op load in a fresh process (2.3-2.6).

``torch.export.load`` turns each node's target name back into an operator; the
deserializer of 2.3-2.6 knows ``auto_functionalized`` only once the module
that defines it has been imported, which nothing on the load path does. A program whose
mutable custom op was functionalized then fails to load with ``SerializeError``
("Unsupported target type ... auto_functionalized"), raw classic ops too; in the process
that exported it, it loads. Measured on 2.3.1, 2.4.1, 2.5.1 and 2.6.0; 2.7.1-2.15.0 load it.

The fix: when the deserializer's module is imported, the module that defines
``auto_functionalized`` is imported too. Installed at an op's definition, waiting for that
import (eager code never imports it). Canary:
tests/test_compiled_code_from_caches.py::test_canary_a_raw_saved_export_does_not_load_in_a_fresh_process
(fails on a release whose raw ops answer otherwise than tests/fixes/_confined.py lists; the fix
retires with the last listed release).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from ._after_import import when_imported

if TYPE_CHECKING:
    from . import Op


def at_definition(op: Op) -> None:
    when_imported("torch._export.serde.serialize", _install)


def _install(module: ModuleType) -> None:
    importlib.import_module("torch._higher_order_ops.auto_functionalize")
