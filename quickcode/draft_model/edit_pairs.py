"""Edit sequences from real edits: consecutive released versions of the same PyPI packages (sdists pinned in a
lock, e.g. quickcode/draft_model/sources/pypi-edits.tsv) → each Python file's changed line blocks between two
versions (difflib) → nearby blocks of one file grouped into sequences → train / held-out JSONL, with provenance
and a manifest. Nothing is synthesized: every edit is a block the package's authors changed between releases.

A sequence is the file's blocks in file order, each starting within `window_lines` lines (of the older version)
of the previous one's end — an edit, then the next edit in the same file near it — of at least two blocks and
at most MAX_EDITS. The order in which the authors made them is not known; file order is the one kept. A block
larger than MAX_HUNK_LINES lines or MAX_HUNK_CHARS characters on either side is a rewrite, not one edit: it is
left out and ends the sequence. A record carries an excerpt of the older version (CONTEXT_LINES lines around
the sequence, cut at line ends) as the document before its first edit, and its edits as they are made one after
another (`start_line` counted in the excerpt as it is after the earlier edits; `old` → `new`, whole lines).

As the corpus (quickcode/draft_model/corpus.py): a package whose sdist's licence is not permissive is refused
(counted); files in test/vendored folders, generated, not UTF-8 Python 3 that parses or too large are skipped;
training records sharing a 13-token run with HumanEval (before or after their edits) are dropped — stricter than
the corpus, which excuses runs the training stdlib also has; whole packages are held out (a stable hash of the
package name), never one version of a package in training and another held out. Exact duplicate records are
dropped.
"""
from __future__ import annotations

import difflib
import hashlib
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import Version

from quickcode.draft_model import dedup
from quickcode.draft_model.corpus import MAX_FILE_BYTES, excluded_path, is_heldout, rejection
from quickcode.draft_model.pypi import PERMISSIVE, Pin, fetch_all, licence_of, read_lock, read_sdist

WINDOW_LINES = 8          # the next edit starts at most this many lines after the previous one ends
MAX_HUNK_LINES = 12       # a block changing more lines on a side is a rewrite, not one edit
MAX_HUNK_CHARS = 1200
MAX_EDITS = 6             # edits in one sequence (a longer run of nearby blocks is cut into several)
MAX_SEQUENCES_PER_FILE = 4   # the first ones of a file: one heavily changed file does not fill the data
CONTEXT_LINES = 80        # lines of the older version kept before and after a sequence
HELDOUT_FRACTION = 0.2


@dataclass(frozen=True)
class Hunk:
    """Lines `start_line`.. of the older text (`old`, whole lines with their line ends) became `new`."""
    start_line: int
    old: str
    new: str

    @property
    def old_lines(self) -> int:
        return self.old.count("\n") + (0 if self.old.endswith("\n") or not self.old else 1)

    @property
    def new_lines(self) -> int:
        return self.new.count("\n") + (0 if self.new.endswith("\n") or not self.new else 1)


@dataclass
class EditStats:
    packages: int = 0
    version_pairs: int = 0
    files_compared: int = 0
    files_changed: int = 0
    files_skipped: int = 0              # excluded folders, not parsing, generated, too large (either version)
    hunks: int = 0
    hunks_too_large: int = 0
    sequences: int = 0
    sequences_beyond_file_cap: int = 0
    duplicates: int = 0
    decontaminated: int = 0             # training records sharing a 13-token run with HumanEval
    refused_licence: dict[str, str] = field(default_factory=dict)
    download_failed: dict[str, str] = field(default_factory=dict)
    licences: dict[str, int] = field(default_factory=dict)
    train_packages: list[str] = field(default_factory=list)
    heldout_packages: list[str] = field(default_factory=list)
    train_records: int = 0
    heldout_records: int = 0
    settings: dict = field(default_factory=dict)


# ── edits of one file ─────────────────────────────────────────────────────────────────────────────────────────
def hunks(old: str, new: str) -> list[Hunk]:
    """The changed line blocks from `old` to `new` (difflib's opcodes; adjacent ones are one block)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out: list[list[int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if out and out[-1][1] == i1 and out[-1][3] == j1:
            out[-1][1], out[-1][3] = i2, j2
        else:
            out.append([i1, i2, j1, j2])
    return [Hunk(i1, "".join(a[i1:i2]), "".join(b[j1:j2])) for i1, i2, j1, j2 in out]


def too_large(h: Hunk) -> bool:
    return max(h.old_lines, h.new_lines) > MAX_HUNK_LINES or max(len(h.old), len(h.new)) > MAX_HUNK_CHARS


def sequences(blocks: list[Hunk], window_lines: int = WINDOW_LINES) -> list[list[Hunk]]:
    """Runs of nearby blocks (file order) of 2..MAX_EDITS blocks; a too-large block ends a run."""
    runs: list[list[Hunk]] = []
    run: list[Hunk] = []
    for h in blocks:
        if too_large(h):
            runs.append(run)
            run = []
            continue
        if run and (h.start_line - (run[-1].start_line + run[-1].old_lines) > window_lines or len(run) == MAX_EDITS):
            runs.append(run)
            run = []
        run.append(h)
    runs.append(run)
    return [r for r in runs if len(r) >= 2]


def record_of(old_text: str, run: list[Hunk], context_lines: int = CONTEXT_LINES) -> dict:
    """The excerpt of `old_text` around `run` (the document before its first edit) and the edits as they are
    made one after another, each placed in the excerpt as the earlier edits left it."""
    lines = old_text.splitlines(keepends=True)
    first = max(0, run[0].start_line - context_lines)
    last = min(len(lines), run[-1].start_line + run[-1].old_lines + context_lines)
    edits, shift = [], -first
    for h in run:
        edits.append({"start_line": h.start_line + shift, "old": h.old, "new": h.new})
        shift += h.new_lines - h.old_lines
    return {"excerpt_start_line": first, "text": "".join(lines[first:last]), "edits": edits}


def apply_edit(text: str, edit: dict) -> str:
    """`edit` ({start_line, old, new}) made on `text` (ValueError if the text does not hold its old lines)."""
    lines = text.splitlines(keepends=True)
    start = sum(len(x) for x in lines[:edit["start_line"]])
    if edit["start_line"] > len(lines) or not text.startswith(edit["old"], start):
        raise ValueError("the text does not hold this edit's old lines")
    return text[:start] + edit["new"] + text[start + len(edit["old"]):]


def after_edits(record: dict, k: int | None = None) -> str:
    """The record's document after its first `k` edits (all of them by default)."""
    text = record["text"]
    for e in record["edits"][:k]:
        text = apply_edit(text, e)
    return text


# ── packages ──────────────────────────────────────────────────────────────────────────────────────────────────
def _python_files(archive: Path) -> tuple[str, dict[str, bytes]]:
    sd = read_sdist(archive, MAX_FILE_BYTES)
    files = {}
    for rel, raw in sd.files:
        p = PurePosixPath(rel)
        p = PurePosixPath(*p.parts[1:]) if len(p.parts) > 1 and p.parts[0] in ("src", "lib") else p
        files[str(p)] = raw
    return licence_of(sd.pkg_info, sd.licence_texts), files


def pair_records(older: Pin, newer: Pin, archives: dict[str, Path], stats: EditStats,
                 window_lines: int = WINDOW_LINES) -> list[dict]:
    """The edit sequences of every Python file both versions have (none if either licence is refused)."""
    lic_a, files_a = _python_files(archives[older.filename])
    lic_b, files_b = _python_files(archives[newer.filename])
    refused = [x for x in (lic_a, lic_b) if x not in PERMISSIVE]
    if refused:
        stats.refused_licence[f"{older.name} {older.version}..{newer.version}"] = refused[0]
        return []
    stats.licences[lic_b] = stats.licences.get(lic_b, 0) + 1
    stats.version_pairs += 1
    out = []
    for path in sorted(files_a.keys() & files_b.keys()):
        if files_a[path] == files_b[path]:
            continue
        stats.files_compared += 1
        why_a, text_a = ("excluded", "") if excluded_path(PurePosixPath(path)) else rejection(files_a[path])
        why_b, text_b = rejection(files_b[path]) if why_a is None else (why_a, "")
        if why_a or why_b:
            stats.files_skipped += 1
            continue
        blocks = hunks(text_a, text_b)
        if not blocks:
            continue
        stats.files_changed += 1
        stats.hunks += len(blocks)
        stats.hunks_too_large += sum(map(too_large, blocks))
        runs = sequences(blocks, window_lines)
        stats.sequences_beyond_file_cap += max(0, len(runs) - MAX_SEQUENCES_PER_FILE)
        for k, run in enumerate(runs[:MAX_SEQUENCES_PER_FILE]):
            rec = record_of(text_a, run)
            out.append({"id": f"{older.name}@{older.version}..{newer.version}:{path}#{k}", "package": older.name,
                        "from_version": older.version, "to_version": newer.version, "path": path,
                        "licence": lic_b, "from_sdist": older.filename, "from_sha256": older.sha256,
                        "to_sdist": newer.filename, "to_sha256": newer.sha256,
                        "file_start_line": run[0].start_line, **rec})
    stats.sequences += len(out)
    return out


def version_pairs(pins: list[Pin]) -> list[tuple[Pin, Pin]]:
    """Consecutive locked versions of each package, in version order."""
    by_name: dict[str, list[Pin]] = defaultdict(list)
    for p in pins:
        by_name[p.name].append(p)
    out = []
    for name in sorted(by_name):
        vs = sorted(by_name[name], key=lambda p: Version(p.version))
        out += list(zip(vs, vs[1:]))
    return out


def build(pins: list[Pin], cache_dir: Path, *, heldout_fraction: float = HELDOUT_FRACTION,
          window_lines: int = WINDOW_LINES, humaneval: bool = True, progress=None,
          ) -> tuple[list[dict], list[dict], EditStats]:
    """(train records, held-out records, stats) of the locked sdists (downloaded into `cache_dir`, each checked
    against the lock's sha256)."""
    stats = EditStats(settings={"window_lines": window_lines, "max_hunk_lines": MAX_HUNK_LINES,
                                "max_hunk_chars": MAX_HUNK_CHARS, "max_edits": MAX_EDITS,
                                "max_sequences_per_file": MAX_SEQUENCES_PER_FILE, "context_lines": CONTEXT_LINES,
                                "heldout_fraction": heldout_fraction, "humaneval": humaneval})
    got = fetch_all(pins, Path(cache_dir))
    archives = {}
    for p in pins:
        if isinstance(got[p.filename], Path):
            archives[p.filename] = got[p.filename]
        else:
            stats.download_failed[f"{p.name} {p.version}"] = got[p.filename]
    bench = dedup.NgramIndex.of_texts(dedup.humaneval_texts()) if humaneval else None
    stats.packages = len({p.name for p in pins})
    train, heldout, seen = [], [], set()
    pairs = [(a, b) for a, b in version_pairs(pins) if a.filename in archives and b.filename in archives]
    for i, (a, b) in enumerate(pairs):
        if progress:
            progress(i, len(pairs), f"{a.name} {a.version}..{b.version}")
        held = is_heldout(f"edits:{a.name}", heldout_fraction)
        for rec in pair_records(a, b, archives, stats, window_lines):
            digest = hashlib.sha1(json.dumps([rec["text"], rec["edits"]]).encode()).hexdigest()
            if digest in seen:
                stats.duplicates += 1
                continue
            seen.add(digest)
            if not held and bench is not None and _contaminated(rec, bench):
                stats.decontaminated += 1
                continue
            (heldout if held else train).append(rec)
    stats.train_packages = sorted({r["package"] for r in train})
    stats.heldout_packages = sorted({r["package"] for r in heldout})
    stats.train_records, stats.heldout_records = len(train), len(heldout)
    return train, heldout, stats


def _contaminated(rec: dict, bench: dedup.NgramIndex) -> bool:
    return any(bench.hits(dedup.ngram_hashes(dedup.token_hashes(t), dedup.NGRAM_TOKENS))
               for t in (rec["text"], after_edits(rec)))


def write(data_dir: Path, train: list[dict], heldout: list[dict], stats: EditStats, lock: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, recs in (("train", train), ("heldout", heldout)):
        with open(data_dir / f"{name}.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    manifest = {"lock": str(lock), "lock_sha256": hashlib.sha256(Path(lock).read_bytes()).hexdigest(),
                **asdict(stats)}
    (data_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def read(data_dir: Path, split: str) -> list[dict]:
    with open(Path(data_dir) / f"{split}.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def build_from_lock(lock: Path, data_dir: Path, cache_dir: Path, **kw) -> dict:
    """`quickcode model edits`: build and write; the summary printed as its JSON line."""
    train, heldout, stats = build(read_lock(lock), cache_dir, **kw)
    write(data_dir, train, heldout, stats, lock)
    return {"train": len(train), "heldout": len(heldout), "packages": stats.packages,
            "train_packages": len(stats.train_packages), "heldout_packages": len(stats.heldout_packages),
            "version_pairs": stats.version_pairs, "decontaminated": stats.decontaminated,
            "refused_licence": len(stats.refused_licence), "download_failed": len(stats.download_failed)}
