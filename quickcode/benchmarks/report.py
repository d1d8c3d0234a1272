"""What every benchmark shares: percentiles, a markdown report (+ plots), and the closing JSON line.

Contract of a `quickcode bench NAME` run: progress on stderr while it works, the report written to
`benchmarks/reports/NAME.md` (plots beside it), and as the very last line of stdout one JSON object of
headline figures.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from quickcode.protocol.stats import percentile   # the benchmarks take it from here

REPORTS = Path(__file__).resolve().parents[2] / "benchmarks" / "reports"   # the checkout's report folder


def source_digest(files) -> str:
    """What a run's figures were measured with: sha256 of the files (name and bytes, in path order), 12 hex
    digits — `bench typing`'s client code key, `bench quality`'s piece keys."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:12]


def paired_bootstrap(n: int, measure, draws: int = 2000, seed: int = 0, level: float = 0.90) -> dict:
    """`level` intervals of the figures `measure(idx)` returns ({name: value}) for `n` units (sessions, places,
    prompts) resampled with replacement, the same draw for every arm measured inside it (paired): {name: [lo,
    hi]}; NaN draws are left out ([nan, nan] when all are)."""
    import random

    rng = random.Random(seed)
    samples: dict[str, list[float]] = {}
    for _ in range(draws):
        for k, v in measure([rng.randrange(n) for _ in range(n)]).items():
            samples.setdefault(k, []).append(v)
    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    out = {}
    for k, xs in samples.items():
        xs = [x for x in xs if not math.isnan(x)]
        out[k] = [percentile(xs, lo), percentile(xs, hi)] if xs else [math.nan, math.nan]
    return out


def pcts(values, qs=(50, 95, 99)) -> dict[str, float]:
    return {f"p{q}": round(percentile(values, q), 3) for q in qs}


def md_table(headers: list[str], rows: list[list]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def figure(*grid: int, **subplots):
    """`plt.subplots(*grid, **subplots)` on matplotlib's headless backend: (fig, axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*grid, **subplots)


def save_figure(fig, path: Path) -> Path:
    """Lay `fig` out, write it to `path` (PNG, 110 dpi) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@dataclass
class Report:
    name: str
    title: str
    sections: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    out: Path | None = None          # another folder for the report (default benchmarks/reports/)

    @property
    def dir(self) -> Path:
        d = Path(self.out) if self.out is not None else REPORTS
        d.mkdir(parents=True, exist_ok=True)
        return d

    def add(self, markdown: str) -> None:
        self.sections.append(markdown.strip() + "\n")

    def plot_path(self, suffix: str) -> Path:
        return self.dir / f"{self.name}_{suffix}.png"

    def add_figure(self, fig, suffix: str, caption: str) -> Path:
        """Save `fig` (see `figure`) beside the report as NAME_SUFFIX.png and show it here under `caption`."""
        path = save_figure(fig, self.plot_path(suffix))
        self.add(f"![{caption}]({path.name})")
        return path

    def finish(self, headline: dict) -> dict:
        """Write the markdown, print the path, and print the headline JSON as the last stdout line."""
        head = (f"# {self.title}\n\n_`quickcode bench {self.name}` — {time.strftime('%Y-%m-%d %H:%M:%S')}, "
                f"{platform.machine()} · {_cpus()} CPUs · Python {platform.python_version()}, "
                f"{time.time() - self.started:.0f} s_\n\n")
        body = "\n".join(self.sections)
        tail = "\n## Headline figures\n\n```json\n" + json.dumps(headline, indent=1) + "\n```\n"
        path = self.dir / f"{self.name}.md"
        path.write_text(head + body + tail)
        print(f"report: {path}", file=sys.stderr)
        sys.stderr.flush()
        print(json.dumps(headline), flush=True)
        return headline


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))
