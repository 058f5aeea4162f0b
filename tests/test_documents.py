"""The documents are for users: their code runs, and none of them tells how the project was developed.

Which commit ran where is data (results/*.json, and compat_matrix.md's runs table, which
is generated from it); prose says what the library does and what was measured.
"""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Phrases that narrate the project's development rather than describe it.
HISTORY = re.compile(
    r"\b(this|earlier|previous|later|last) session\b"
    r"|\b(first|second|third|\w+teenth|twelfth|eleventh|tenth) session\b"
    r"|\bround \d+\b"
    r"|\b(before|after) (the|its|this) fix\b"
    r"|\bfound by a new\b"
    r"|\bbatch(es)? \d+(-\d+)? (passed|failed)\b"
    r"|\b(at|since|from) (commit )?[0-9a-f]{7}\b",
    re.IGNORECASE,
)


def _tracked_text_files(skip: tuple[str, ...] = ("results/",)) -> list[Path]:
    """Tracked files but images and archives; ``skip``: path prefixes left out (results/: data)."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    paths = []
    for name in listed.stdout.splitlines():
        path = ROOT / name
        if name.startswith(skip) or not path.is_file() or path.suffix in (".png", ".whl", ".gz"):
            continue
        paths.append(path)
    return paths


def test_no_document_narrates_how_the_project_was_developed() -> None:
    found = []
    for path in _tracked_text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if path.name == "test_documents.py":
                continue
            if match := HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]}")
    assert found == []


#: Absolute paths of a machine (a checkout, a home folder, a scratch area) in what is committed.
MACHINE_PATH = re.compile(r"(?<![\w.])/(work|root|home|opt|Users)/[\w.-]+")


def test_no_tracked_file_names_a_machine_path() -> None:
    found = []
    for path in _tracked_text_files(skip=()):  # results/ included: its data says which commit ran, not where
        if path.name == "test_documents.py":
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)][:3]
    assert found == []


_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
#: Pages whose Python code blocks run top to bottom, as a reader would run them (docs/adopting.md
#: has its own test, with its before/after modules).
PAGES = ("README.md", "docs/index.md", "docs/quickstart.md", "docs/testing.md")
_KEEP: list[types.ModuleType] = []


@pytest.mark.parametrize("page", PAGES)
def test_every_code_block_of_a_page_runs(path: str, ns: str, page: str) -> None:
    blocks = _BLOCK.findall((ROOT / page).read_text())
    assert blocks, f"{page} has no Python code block"
    module = types.ModuleType(f"page_{ns}")  # a real module: Dynamo imports the module a function comes from
    sys.modules[module.__name__] = module
    _KEEP.append(module)
    for i, block in enumerate(blocks):
        code = compile(block.replace("mylib", ns), f"{page} block {i + 1}", "exec")
        exec(code, module.__dict__)  # noqa: S102 - the page's own code


#: The public modules: every name they export has an entry in docs/api.md with an example.
PUBLIC_MODULES = (
    "tagged_ops",
    "tagged_ops.testing",
    "tagged_ops.testing.nox",
    "tagged_ops.cpp_extension",
    "tagged_ops.audit",
)
_ENTRY = re.compile(r"^\.\. (auto\w+|py:\w+):: ([\w.]+)", re.M)


def _entries(api: str) -> dict[str, str]:
    """Qualified name -> the text that documents it: its ``py:`` directive's body, or ``auto`` for a docstring."""
    found = {}
    matches = list(_ENTRY.finditer(api))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(api)
        found[match.group(2)] = "auto" if match.group(1).startswith("auto") else api[match.end() : end]
    return found


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_an_entry_with_an_example(module_name: str) -> None:
    import importlib
    import inspect

    module = importlib.import_module(module_name)
    entries = _entries((ROOT / "docs" / "api.md").read_text())
    lacking = []
    for name in module.__all__:
        qualified = f"{module_name}.{name}"
        if qualified not in entries:
            lacking.append(f"{qualified}: no entry in docs/api.md")
            continue
        text = inspect.getdoc(getattr(module, name)) or "" if entries[qualified] == "auto" else entries[qualified]
        if ">>>" not in text:
            lacking.append(f"{qualified}: its entry has no example (>>>)")
    assert lacking == []


def test_the_performance_page_plots_every_benchmarked_release() -> None:
    """docs/performance.md shows tools/perf_plots.py's SVGs, one bar per release and series measured."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import perf_plots
    finally:
        sys.path.pop(0)
    plots = perf_plots.plots()
    page = (ROOT / "docs" / "performance.md").read_text()
    assert sorted(re.findall(r"\(_generated/(\w+\.svg)\)", page)) == sorted(plots)
    eager = perf_plots._load("eager")
    for release, result in eager.items():
        assert f">{release}</text>" in plots["eager.svg"]
        assert f"in-place {release}: {result['ratio_inplace_floor']:.3g}</title>" in plots["eager.svg"]


def test_the_site_check_finds_broken_links(tmp_path: Path) -> None:
    """tools/check_site.py (run by `nox -s docs` on the built site) fails on a missing page or anchor."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import check_site
    finally:
        sys.path.pop(0)
    (tmp_path / "index.html").write_text('<a href="api.html#define">ok</a><a href="gone.html">x</a><img src="p.svg">')
    (tmp_path / "api.html").write_text('<h2 id="define">Defining</h2><a href="index.html#nowhere">x</a>')
    (tmp_path / "p.svg").write_text("<svg/>")
    assert sorted(check_site.broken_links(tmp_path)) == [
        "api.html: index.html#nowhere: no such anchor",
        "index.html: gone.html: no such file",
    ]


def test_the_browser_check_finds_what_overflows(tmp_path: Path) -> None:
    """tools/check_browser.py (run by `nox -s docs`, which installs Chromium where missing) fails on a
    code block that scrolls sideways, a table past the main column, and a page that does not load."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import check_browser
    finally:
        sys.path.pop(0)
    chromium = check_browser.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine (`nox -s docs` installs it and runs the check there)")
    main = '<article role="main" style="width: 600px">{}</article>'
    page = "<html><body>{}</body></html>"
    (tmp_path / "fits.html").write_text(page.format(main.format("<p>short</p><pre>x = 1</pre>")))
    (tmp_path / "code.html").write_text(
        page.format(main.format('<pre style="overflow-x: auto">' + "y = 1 + " * 200 + "</pre>"))
    )
    (tmp_path / "table.html").write_text(
        page.format(main.format('<table><tr><td style="white-space: nowrap">' + "wide " * 300 + "</td></tr></table>"))
    )
    (tmp_path / "broken.html").write_text("<html><body><script>throw new Error()")  # never closes: no </body>
    found = check_browser.problems(tmp_path, chromium, 1280)
    assert sorted(found) == ["broken.html", "code.html", "table.html"], found
    assert "scrolls sideways" in found["code.html"][0]
    assert "past the main column" in " ".join(found["table.html"])
    assert found["broken.html"] == ["did not load (no measurement came back)"]
