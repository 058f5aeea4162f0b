"""Every internal link of the built documentation site resolves: the page exists, and so does its anchor.

    python tools/check_site.py docs/_build/html

Reads the HTML Sphinx wrote (no browser): each ``href`` and ``src`` without a scheme must
name a file of the site, and a ``#fragment`` an ``id`` in that file. Exits 1 listing every
broken one. ``nox -s docs`` runs it after the build.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value and not (tag == "link" and name == "href" and value.endswith(".css")):
                self.links.append(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def broken_links(site: Path) -> list[str]:
    site = site.resolve()
    pages = {p: _parse(p) for p in site.rglob("*.html")}
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {link}: no such file")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.relative_to(site)}: {link}: no such anchor")
    return broken


def main(argv: list[str]) -> int:
    site = Path(argv[0])
    if not (site / "index.html").exists():
        print(f"{site}: no built site (index.html)", file=sys.stderr)
        return 1
    broken = broken_links(site)
    for line in broken:
        print(line, file=sys.stderr)
    print(f"{len(list(site.rglob('*.html')))} pages, {len(broken)} broken internal links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
