"""``tagged_ops.__version__``, read from the installed metadata when first asked (it imports importlib.metadata)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    # One place to bump: pyproject.toml's ``version``, read back from the installed metadata.
    __version__ = version("tagged-ops")
except PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"
