"""Every page of the built documentation site loads in headless Chromium, and its main content fits the width.

    python tools/check_browser.py docs/_build/html [--width 1280] [--chromium PATH]

Copies the site to a scratch folder, adds to each page a script that measures it once it
has loaded, and has Chromium (``--headless --dump-dom``, no driver) print the page with
the measurement: the page must not scroll sideways, and no table, code block, image or
paragraph of the main content may reach past it or scroll within it. Exits 1 listing
every page that did not load and everything that overflows (the text it starts with and
by how many pixels). ``nox -s docs`` runs it after the build.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Runs at the page's load event; leaves its findings in <body data-overflow="[...]">.
_MEASURE = """
<script>
window.addEventListener("load", () => {
  const main = document.querySelector("article[role=main]") || document.querySelector("main") || document.body;
  const right = main.getBoundingClientRect().right + 1;
  const found = [];
  const page = document.documentElement.scrollWidth;
  if (page > window.innerWidth + 1) found.push(`the page scrolls sideways: ${page}px wide in ${window.innerWidth}px`);
  const what = (el) => `<${el.tagName.toLowerCase()}> "${(el.textContent || el.getAttribute("src") || "").trim().replace(/\\s+/g, " ").slice(0, 50)}"`;
  const reported = [];
  for (const el of main.querySelectorAll("table, pre, img, svg, p, li, dl, .table-wrapper")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || reported.some((outer) => outer.contains(el))) continue;  // once per overflowing block
    const before = found.length;
    const wrapped = el.matches(".table-wrapper, .table-wrapper > table");  // the theme's wrapper sits in the margin: does it scroll?
    if (box.right > right && !wrapped) {
      found.push(`${what(el)} reaches ${Math.round(box.right - right)}px past the main column`);
    } else if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") {
      found.push(`${what(el)} scrolls sideways: ${el.scrollWidth}px of content in ${el.clientWidth}px`);
    }
    if (found.length > before) reported.push(el);
  }
  document.body.setAttribute("data-overflow", JSON.stringify(found));
});
</script>
"""
_MARK = 'data-overflow="'


def find_chromium(given: str | None = None) -> str | None:
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


def measure(page: Path, chromium: str, width: int) -> list[str] | None:
    """What overflows on ``page`` (a copy with the script added), or None where it did not load."""
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # run as root in containers
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},900",
        "--virtual-time-budget=5000",  # until the load event has run
        "--dump-dom",
        page.as_uri(),
    ]
    try:
        dom = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except subprocess.TimeoutExpired:
        return None
    start = dom.find(_MARK)
    if start < 0:
        return None
    start += len(_MARK)
    raw = dom[start : dom.index('"', start)]
    for entity, char in (("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        raw = raw.replace(entity, char)
    return list(json.loads(raw))


def problems(site: Path, chromium: str, width: int) -> dict[str, list[str]]:
    """Page (relative to the site) -> what is wrong there; pages without problems left out."""
    found: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "site"
        shutil.copytree(site, copy)
        for page in sorted(copy.rglob("*.html")):
            name = str(page.relative_to(copy))
            if name.startswith(("_", "genindex", "search", "py-modindex")):  # Sphinx's own pages
                continue
            text = page.read_text(encoding="utf-8")
            page.write_text(text.replace("</body>", _MEASURE + "</body>", 1), encoding="utf-8")
            result = measure(page, chromium, width)
            if result is None:
                found[name] = ["did not load (no measurement came back)"]
            elif result:
                found[name] = result
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--chromium")
    args = parser.parse_args(argv)
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("check_browser: no Chromium found (install Debian's `chromium`, or pass --chromium)", file=sys.stderr)
        return 2
    found = problems(args.site, chromium, args.width)
    pages = len([p for p in args.site.rglob("*.html") if not str(p.relative_to(args.site)).startswith("_")])
    if found:
        print(f"{len(found)} page(s) of {args.site} at {args.width}px:")
        for name, lines in found.items():
            print(f"  {name}:")
            print("\n".join(f"    {line}" for line in lines))
        return 1
    print(f"{pages} pages load and fit {args.width}px")
    return 0


if __name__ == "__main__":
    sys.exit(main())
