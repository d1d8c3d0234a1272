"""Code no model of ours trained on: PyPI packages first published on or after a date → a folder of their
Python files for `quickcode bench quality --idiom-files`.

`python -m quickcode.draft_model.unseen check NAMES` asks PyPI's JSON API when each named package first
uploaded a file (of any release) and fails when one is older than `--since` or is named in a corpus lock of
ours (quickcode/draft_model/sources/pypi.tsv, pypi-top200.tsv, pypi-edits.tsv).

`python -m quickcode.draft_model.unseen files LOCK --out DIR` takes the locked sdists (downloaded once into
`--cache-dir`/pypi, refused unless their sha256 is the lock's: quickcode/draft_model/pypi.py) through the
corpus's rules (quickcode/draft_model/corpus.py collect: permissive licence; no test, vendored or generated
file; size-capped; parses as Python 3; exact and near duplicates dropped; no 13-token run shared with
HumanEval or a `--decontaminate` set; the standard library, a training source of ours, goes first, so that
a copy or near-copy of one of its files is dropped too) and writes what stays flat into DIR, with
DIR/manifest.json saying where each file came from (`written`).

A file is named `<position>-<package>-<its path, dots for slashes>`: `bench quality` takes the first idiom
lines per kind in path order, and the positions take one file of each package in turn, so those lines come
from many packages rather than from the alphabetically first one.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path

from quickcode.draft_model import corpus, dedup, pypi

SOURCES = Path(__file__).parent / "sources"
CORPUS_LOCKS = (SOURCES / "pypi.tsv", SOURCES / "pypi-top200.tsv", SOURCES / "pypi-edits.tsv")
JSON_API = "https://pypi.org/pypi"
DEFAULT_SINCE = "2025-01-01"
# why: a few big packages would otherwise give most files (and so most idiom lines) of the set
MAX_FILES_PER_PACKAGE = 40


# ── which packages: first published on or after a date, in no corpus of ours ─────────────────────────────
def earliest_upload(meta: dict) -> str | None:
    """The earliest upload time (ISO 8601, UTC) of any file of any release in a PyPI JSON API answer."""
    times = [f.get("upload_time_iso_8601") or f.get("upload_time")
             for files in meta.get("releases", {}).values() for f in files]
    return min((t for t in times if t), default=None)


def first_upload(name: str, pause_s: float = 0.2) -> str | None:
    """`earliest_upload` of `name` as PyPI's JSON API answers now (one request, then a pause: be polite)."""
    try:
        with urllib.request.urlopen(f"{JSON_API}/{name}/json", timeout=60) as r:
            return earliest_upload(json.load(r))
    finally:
        time.sleep(pause_s)


def corpus_names(locks=CORPUS_LOCKS) -> set[str]:
    """The (normalised) package names every corpus lock of ours pins."""
    return {pin.name for lock in locks if Path(lock).exists() for pin in pypi.read_lock(Path(lock))}


def read_names(path: Path) -> list[str]:
    """One name a line ('name' or 'name==version'); '#' starts a comment."""
    names = []
    for line in Path(path).read_text().splitlines():
        if name := line.split("#")[0].split("==")[0].strip():
            names.append(name)
    return names


def check(names: list[str], since: str, known: set[str], first=first_upload) -> list[dict]:
    """Each name with its first upload and why it does not qualify (empty `why`: it does)."""
    from packaging.utils import canonicalize_name

    rows = []
    for name in names:
        why = []
        if canonicalize_name(name) in known:
            why.append("in a corpus lock")
        try:
            when = first(name)
        except (urllib.error.URLError, OSError) as e:
            when = None
            why.append(f"no answer: {e}")
        else:
            if when is None:
                why.append("no file uploaded")
            elif when[:10] < since:
                why.append(f"first uploaded before {since}")
        rows.append({"name": name, "first_upload": when, "why": why})
    return rows


# ── which files ─────────────────────────────────────────────────────────────────────────────────────────
def _package_of(dropped: str) -> str:
    """The package of a corpus drop record ("<why> <package>:<module> <path>")."""
    return dropped.split()[1].split(":", 1)[0]


def _stable(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def out_name(position: int, package: str, path: str) -> str:
    """The flat file name of `path` of `package`: its position in the set, the package, the path with dots."""
    flat = re.sub(r"[^\w.-]", "_", path.replace("/", "."))
    return f"{position:04d}-{package}-{flat}"


def select(docs: list[corpus.Document], packages: set[str],
           max_per_package: int | None = MAX_FILES_PER_PACKAGE) -> dict[str, corpus.Document]:
    """{file name: document} of the documents of `packages` (their module is `<package>:…`), at most
    `max_per_package` of each, chosen by a stable hash of their path (the same lock gives the same set), named
    in an order that takes one file of each package in turn (packages too in a stable hash order)."""
    by_pkg: dict[str, list[corpus.Document]] = {}
    for d in docs:
        pkg = d.module.split(":", 1)[0]
        if pkg in packages:
            by_pkg.setdefault(pkg, []).append(d)
    for pkg, ds in by_pkg.items():
        ds.sort(key=lambda d: _stable(f"{pkg}/{d.path}"))
        if max_per_package is not None:
            del ds[max_per_package:]
    order = sorted(by_pkg, key=_stable)
    longest = max(map(len, by_pkg.values()), default=0)
    turns = [(pkg, by_pkg[pkg][i]) for i in range(longest) for pkg in order if i < len(by_pkg[pkg])]
    return {out_name(n, pkg, d.path): d for n, (pkg, d) in enumerate(turns)}


def materialise(lock: Path, out: Path, *, cache_dir: Path, benchmarks: dict[str, list[str]],
                with_stdlib: bool = True, max_per_package: int | None = MAX_FILES_PER_PACKAGE,
                workers: int = 1) -> dict:
    """The locked sdists' files that pass the corpus's rules, written flat into `out` (the .py files a former
    run wrote there are removed first); returns the summary that `out`/manifest.json also holds."""
    pins = pypi.read_lock(Path(lock))
    sources = (["stdlib"] if with_stdlib else []) + [f"pypi:{lock}"]
    train, heldout, stats = corpus.collect(sources, 0.0, cache_dir=cache_dir, benchmarks=benchmarks,
                                           workers=workers)
    names = {p.name for p in pins}
    chosen = select(train + heldout, names, max_per_package)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.json"
    if manifest.exists():
        for name in json.loads(manifest.read_text()).get("written", {}):
            (out / name).unlink(missing_ok=True)
    packages: dict[str, dict] = {}
    for name, d in sorted(chosen.items()):
        (out / name).write_text(d.text)
        pkg = packages.setdefault(d.module.split(":", 1)[0], {"files": 0, "lines": 0, "bytes": 0})
        pkg["files"] += 1
        pkg["lines"] += d.text.count("\n")
        pkg["bytes"] += len(d.text.encode())
    versions = {p.name: p.version for p in pins}
    kept = {n: sum(d.module.startswith(f"{n}:") for d in train + heldout) for n in names}
    summary = {
        "lock": str(lock), "lock_sha256": hashlib.sha256(Path(lock).read_bytes()).hexdigest(),
        "packages": len(packages), "files": len(chosen), "lines": sum(p["lines"] for p in packages.values()),
        "bytes": sum(p["bytes"] for p in packages.values()),
        "compared_with_stdlib": with_stdlib, "decontaminated_against": sorted(benchmarks),
        "max_files_per_package": max_per_package,
        "per_package": {n: {"version": versions[n], "kept_by_corpus_rules": kept[n],
                            **packages.get(n, {"files": 0, "lines": 0, "bytes": 0})} for n in sorted(names)},
        "refused_licence": stats.refused_licence, "download_failed": stats.download_failed,
        "decontaminated_files": [f for f in stats.decontaminated_files if _package_of(f) in names],
        "stdlib_copy_files": [f for f in stats.heldout_copy_files if _package_of(f) in names],
        "corpus_stats": {k: v for k, v in asdict(stats).items() if not k.endswith(("_modules", "_files"))},
        "written": {name: f"{d.module.split(':', 1)[0]} {d.path}" for name, d in sorted(chosen.items())},
    }
    manifest.write_text(json.dumps(summary, indent=1) + "\n")
    return summary


# ── `python -m quickcode.draft_model.unseen` ─────────────────────────────────────────────────────────────
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m quickcode.draft_model.unseen",
                                 description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ck = sub.add_parser("check", help="names → when each was first uploaded; exit 1 if one does not qualify")
    ck.add_argument("names", type=Path)
    ck.add_argument("--since", default=DEFAULT_SINCE, help="the earliest first upload allowed (YYYY-MM-DD)")
    fl = sub.add_parser("files", help="a lock → its sdists' Python files by the corpus's rules, in --out")
    fl.add_argument("lock", type=Path)
    fl.add_argument("--out", type=Path, required=True)
    fl.add_argument("--cache-dir", type=Path, default=Path("runs/cache"),
                    help="downloads (<cache-dir>/pypi/<sdist>, verified by the lock's sha256) and scans")
    fl.add_argument("--decontaminate", type=Path, action="append", default=[],
                    help="a JSONL of evaluation problems (e.g. MBPP's) no kept file may share a 13-token run "
                         "with (repeatable; HumanEval is always checked)")
    fl.add_argument("--no-stdlib", action="store_true",
                    help="do not compare with the standard library (faster; copies of its files may stay)")
    fl.add_argument("--max-files-per-package", type=int, default=MAX_FILES_PER_PACKAGE, help="0: no cap")
    fl.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    if args.cmd == "check":
        rows = check(read_names(args.names), args.since, corpus_names())
        for row in rows:
            print(f"{row['name']}\t{row['first_upload']}\t{'; '.join(row['why']) or 'ok'}")
        return 1 if any(r["why"] for r in rows) else 0
    benchmarks = {"humaneval": dedup.humaneval_texts()}
    for path in args.decontaminate:
        benchmarks[path.name.split(".")[0]] = dedup.jsonl_texts(path)
    summary = materialise(args.lock, args.out, cache_dir=args.cache_dir, benchmarks=benchmarks,
                          with_stdlib=not args.no_stdlib, workers=args.workers,
                          max_per_package=args.max_files_per_package or None)
    print(json.dumps({k: summary[k] for k in ("packages", "files", "lines", "bytes", "refused_licence",
                                              "download_failed")}))
    print(f"quickcode bench quality --idiom-files {args.out}/*.py ...", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
