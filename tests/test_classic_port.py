"""examples/classic_port: the callers of a classic library keep their call forms after the port.

Each run is its own process (both variants define ``classic_lib``), on the path
this test parametrizes; eager everywhere, compiled where Inductor lowers
mutable custom ops at all (2.3+).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ._subprocess import env_for_path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "classic_port"


@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
@pytest.mark.parametrize("variant", ["before", "after"])
def test_existing_call_forms_keep_working(path: str, variant: str) -> None:
    if variant == "before" and path == "native":
        pytest.skip("the classic library does not use tagged_ops: its run under the fallback parameter covers it")
    env = env_for_path(fallback=path == "fallback")
    run = subprocess.run(
        [sys.executable, str(EXAMPLE / "callers.py"), variant], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert f"classic_lib ({variant}): eager" in run.stdout
