"""Sphinx configuration of tagged_ops' documentation (``nox -s docs`` builds it)."""

from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import perf_plots  # noqa: E402 - the performance page's plots, drawn from results/ at every build

perf_plots.main([os.path.join(os.path.dirname(__file__), "_generated")])

project = "tagged_ops"
author = "tagged_ops contributors"
copyright = "tagged_ops contributors"  # noqa: A001 - Sphinx's name

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.napoleon",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = "tagged_ops"
html_static_path = ["_static"]
html_css_files = ["tagged_ops.css"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}
nitpicky = False

# The examples in docstrings and pages run against the torch installed for the build.
doctest_global_setup = """
import torch
import tagged_ops


@tagged_ops.define_out("docs::sin_out")
def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return torch.sin(x, out=out)


@tagged_ops.define_inplace("docs::scale_")
def scale_(x: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    return x.mul_(alpha)
"""
doctest_default_flags = 0x8 | 0x4  # ELLIPSIS | NORMALIZE_WHITESPACE
