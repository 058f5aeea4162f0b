"""The performance page's plots, drawn from results/bench/ as SVG (no plotting library needed).

``python tools/perf_plots.py OUT_DIR`` writes one SVG per plot; docs/conf.py runs it at every
docs build, so docs/performance.md always shows what results/ holds.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "results" / "bench"
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")
#: the eager benchmark's two kinds of op: (legend, the key in its ratios)
KINDS = (("in-place", "inplace"), ("out=", "out"))


def _load(kind: str) -> dict[str, dict[str, Any]]:
    """release -> the benchmark's result, oldest release first."""
    found = {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in BENCH.glob(f"{kind}-*.json")}
    return dict(sorted(found.items(), key=lambda item: Version(item[0])))


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * scale >= value)


def bars(title: str, unit: str, releases: list[str], series: dict[str, list[float | None]], one: bool) -> str:
    """Grouped bars, one group per release, one bar per series; ``one`` draws the line y = 1 (a ratio's par)."""
    width, height, left, top, bottom = 900, 300, 60, 40, 50
    values = [v for vs in series.values() for v in vs if v is not None]
    top_value = _nice_ceiling(max([*values, 1.0 if one else 0.0]) * 1.05)
    plot_w, plot_h = width - left - 20, height - top - bottom
    group = plot_w / max(len(releases), 1)
    bar = group * 0.8 / max(len(series), 1)

    def y(v: float) -> float:
        return top + plot_h - v / top_value * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" font-family="sans-serif"'
        f' font-size="12"><title>{escape(title)}</title>',
        f'<text x="{left}" y="20" font-size="14">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 20}" y2="{top + plot_h}" stroke="#888"/>',
        f'<text x="10" y="{top + plot_h / 2}" transform="rotate(-90 10 {top + plot_h / 2})">{escape(unit)}</text>',
    ]
    for tick in (0.25, 0.5, 0.75, 1.0):
        value = top_value * tick
        parts.append(f'<text x="{left - 6}" y="{y(value) + 4}" text-anchor="end" fill="#555">{value:.3g}</text>')
    if one:
        parts.append(
            f'<line x1="{left}" y1="{y(1.0)}" x2="{width - 20}" y2="{y(1.0)}" stroke="#000" stroke-dasharray="4 3"/>'
        )
    for i, release in enumerate(releases):
        x0 = left + i * group + group * 0.1
        parts.append(f'<text x="{x0 + group * 0.4}" y="{top + plot_h + 16}" text-anchor="middle">{release}</text>')
        for j, (name, vs) in enumerate(series.items()):
            v = vs[i]
            if v is None:
                continue
            x = x0 + j * bar
            parts.append(
                f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bar * 0.9:.1f}" height="{top + plot_h - y(v):.1f}"'
                f' fill="{COLORS[j % len(COLORS)]}"><title>{escape(name)} {release}: {v:.3g}</title></rect>'
            )
    for j, name in enumerate(series):
        lx = left + j * 220
        parts.append(f'<rect x="{lx}" y="{height - 18}" width="10" height="10" fill="{COLORS[j % len(COLORS)]}"/>')
        parts.append(f'<text x="{lx + 14}" y="{height - 9}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def plots() -> dict[str, str]:
    """File name -> SVG, for every plot the performance page shows."""
    eager, definition, compiled = _load("eager"), _load("definition"), _load("compiled")
    out: dict[str, str] = {}
    releases = list(eager)
    for name, baseline, suffix in (
        ("eager.svg", "a Library.define op of the same schema", "_floor"),
        ("eager_custom_op.svg", "custom_op", ""),
    ):
        out[name] = bars(
            f"Eager call: tagged_ops / {baseline}",
            "ratio",
            releases,
            {kind: [eager[r].get(f"ratio_{key}{suffix}") for r in releases] for kind, key in KINDS},
            one=True,
        )
    releases = list(definition)

    def thirty(r: str, method: str) -> float | None:
        return definition[r].get("definitions", {}).get("30", {}).get(method, {}).get("ms")

    out["definition.svg"] = bars(
        "Defining 30 ops in a fresh process (tagged_ops' import included)",
        "ms",
        releases,
        {m: [thirty(r, m) for r in releases] for m in ("tagged_ops", "custom_op", "Library.define")},
        one=False,
    )
    out["first_compile.svg"] = bars(
        "First compile of a small program: tagged_ops / custom_op",
        "ratio",
        releases,
        {"first torch.compile call": [(definition[r].get("compile") or {}).get("ratio") for r in releases]},
        one=True,
    )
    releases = list(compiled)
    out["compiled.svg"] = bars(
        "Compiled call writing a 64 MB buffer: tagged_ops / the best raw custom op",
        "ratio",
        releases,
        {f"program {k}": [compiled[r].get("ratio_to_best_raw", {}).get(k) for r in releases] for k in ("a", "b")},
        one=True,
    )
    return out


def main(argv: list[str]) -> int:
    target = Path(argv[0])
    target.mkdir(parents=True, exist_ok=True)
    for name, svg in plots().items():
        (target / name).write_text(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
