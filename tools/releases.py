"""The torch releases tagged_ops tests, in one table: read by the noxfile, the compat-matrix
generator and the suite (tests/test_releases.py checks that every other list agrees).

Adding a torch release is one row here, then the steps in docs/RELEASES.md.
Imports without torch (the noxfile and CI read it before any torch is installed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from packaging.version import InvalidVersion, Version

Path_ = Literal["native", "fallback"]


@dataclass(frozen=True)
class Release:
    version: str
    #: The path every op takes there when nothing forces one: ``native`` where torch has
    #: ``Tag.inplace`` / ``Tag.out`` with tag-aware schema inference and registration.
    #: The suite asserts it (tests/test_releases.py), so a torch whose probe answer
    #: changes fails loudly instead of quietly testing the other path.
    path: Path_
    #: The Python the matrix runs it on: 3.11 where nothing else is asked; the edges
    #: carry the oldest Python we claim and the newest each end of the range has.
    python: str = "3.11"
    #: In ``nox -t ci`` (what .ci/run runs, inside its time budget on 2 cores): the oldest
    #: release (the fallback) and the first native one (both paths). A whole-suite session
    #: takes 13-25 minutes on 2 cores, so the newer releases run in the matrix.
    ci: bool = False


RELEASE_TABLE: tuple[Release, ...] = (
    Release("2.2.2", "fallback", ci=True),
    Release("2.3.1", "fallback"),
    Release("2.4.1", "fallback", python="3.12"),  # 2.2-2.4's newest Python
    Release("2.5.1", "fallback"),
    Release("2.6.0", "fallback"),
    Release("2.7.1", "fallback"),
    Release("2.8.0", "fallback"),
    Release("2.9.1", "fallback"),
    Release("2.10.0", "fallback"),  # has a Tag.out_variant that is not 2.13's Tag.out
    Release("2.11.0", "fallback"),
    Release("2.12.1", "fallback"),
    Release("2.13.0", "native", ci=True),
    Release("2.14.1", "native", python="3.10"),  # the oldest Python we claim
    Release("2.15.0", "native", python="3.13"),  # the newest Python this machine has
)

RELEASES: list[str] = [r.version for r in RELEASE_TABLE]
CI_RELEASES: list[str] = [r.version for r in RELEASE_TABLE if r.ci]
PYTHON: dict[str, str] = {r.version: r.python for r in RELEASE_TABLE}
EXPECTED_PATH: dict[str, Path_] = {r.version: r.path for r in RELEASE_TABLE}
#: Run a second time with TAGGED_OPS_FALLBACK=1 for the whole run, as a library author tests
#: their old-torch path on a new torch: the oldest native release (a CPU build served locally here).
FALLBACK_FORCED_RELEASE = min((r.version for r in RELEASE_TABLE if r.path == "native"), key=Version)

#: The release whose CPU build the build and lint sessions install (served from local files here).
TOOLING_RELEASE = "2.13.0"


def expected_path(torch_version: str) -> Path_ | None:
    """The path a torch build must take: its release's row (local tags such as ``+cpu``
    ignored); ``native`` for anything newer than the newest row (pre-releases of the next
    torch included); None for a build between rows, which the table does not cover."""
    try:
        v = Version(torch_version)
    except InvalidVersion:
        return None
    release = v.base_version
    if release in EXPECTED_PATH and not v.is_prerelease:
        return EXPECTED_PATH[release]
    newest = max(RELEASES, key=Version)
    if Version(release) > Version(newest):
        return "native"
    return None


def path_problem(torch_version: str, native_tags: bool) -> str | None:
    """What is wrong when torch ``torch_version`` answers ``native_tags`` to the probe; None if nothing."""
    expected = expected_path(torch_version)
    got: Path_ = "native" if native_tags else "fallback"
    if expected is None or expected == got:
        return None
    return (
        f"torch {torch_version} must take the {expected} path (tools/releases.py) but the capability "
        f"probe answers NATIVE_TAGS={native_tags}: torch changed something the probe reads "
        "(tagged_ops/_capabilities.py, _probe_native_tags), or the table is wrong"
    )
