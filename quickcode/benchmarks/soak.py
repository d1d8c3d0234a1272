"""`quickcode bench soak`: simulated editors and abusive clients over one backend for an hour; nothing may grow.

One backend (the light profile unless --url or --set say otherwise). Well-behaved editors: the simulated
developers of quickcode/benchmarks/editor_sim.py, each driving a real `quickcode lsp` process that types
held-out files segment after segment; every `--reconnect-s` (jittered) the editor quits its language server
and starts a new one (a new process, a new WebSocket). Abusive clients (quickcode/benchmarks/soak_abuse.py)
hammer the same backend over raw WebSockets meanwhile, and rough editors give their language servers huge
documents and bursts of requests. Every `--sample-s` the bench samples the backend process and its engine
child processes (RSS, open files), the server's event-loop tasks, the number of /metrics series, queue depth
and live requests, and the language servers' RSS. quickcode/benchmarks/soak_verdict.py judges the series after
the warm-up, with the counts of hung editor sessions and of errors shown to editors; the run exits non-zero if
any rule fails.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from quickcode.benchmarks.loadgen import (backend_from_url, bench_backend, finite, progress, raise_nofile,
                                          scrape)
from quickcode.benchmarks.report import Report, figure, md_table
from quickcode.benchmarks.soak_abuse import KINDS, Abuser
from quickcode.benchmarks.soak_verdict import Bounds, verdict

SERIES = ("rss_backend", "rss_engine", "fds_backend", "fds_engine", "tasks", "series", "queued", "live",
          "sessions", "rss_lsp_mean", "lsp_processes")


@dataclass
class SoakConfig:
    ws_url: str
    http_url: str
    pid: int
    duration_s: float = 3600.0
    warmup_s: float = 300.0
    sample_s: float = 5.0
    editors: int = 4
    abusers: int = 2
    reconnect_s: float = 180.0
    hang_timeout_s: float = 30.0
    speed: float = 2.0
    chars: int = 300
    seed: int = 0
    abuse_pause_s: float = 2.0
    rough_editors: int = 1          # editors that open huge documents and burst requests (not judged)
    huge_doc_chars: int = 1_000_000
    abuse_kinds: tuple[str, ...] = KINDS
    files: list[Path] | None = None


@dataclass
class EditorTally:
    """What the well-behaved editors saw, summed."""
    segments: int = 0
    lsp_starts: int = 0
    keystrokes: int = 0
    requests: int = 0
    shown: int = 0
    accepted: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    hung: int = 0
    errors: int = 0
    problems: list[str] = field(default_factory=list)    # what each hang or error was, the first few

    def note(self, kind: str, what: str) -> None:
        if kind == "hung":
            self.hung += 1
        else:
            self.errors += 1
        if len(self.problems) < 20:
            self.problems.append(f"{kind}: {what}")


@dataclass
class SoakResult:
    samples: dict[str, list[tuple[float, float]]]
    editors: EditorTally
    abuse: dict[str, int]
    elapsed_s: float
    rules: list = field(default_factory=list)
    failed_samples: list[str] = field(default_factory=list)   # when and why a sample could not be taken
    warmup_s: float = 0.0      # the warm-up judged: the configured one, or until every abuse kind had run

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rules)


# ── sampling ─────────────────────────────────────────────────────────────────────────────────────────────────

def _proc_figures(pid: int) -> dict[str, float]:
    """RSS and open files of the backend process and (summed) of its child processes (the engine's)."""
    import psutil

    p = psutil.Process(pid)
    rss_engine = fds_engine = 0
    for c in p.children(recursive=True):
        try:
            rss_engine += c.memory_info().rss
            fds_engine += c.num_fds()
        except psutil.Error:             # a child that ended between the listing and the reading
            pass
    return {"rss_backend": p.memory_info().rss, "fds_backend": p.num_fds(), "rss_engine": rss_engine,
            "fds_engine": fds_engine}


def _lsp_figures(pids: set[int]) -> dict[str, float]:
    import psutil

    rss = []
    for pid in list(pids):
        try:
            rss.append(psutil.Process(pid).memory_info().rss)
        except psutil.Error:
            pids.discard(pid)
    return {"rss_lsp_mean": statistics.fmean(rss) if rss else float("nan"), "lsp_processes": len(rss)}


def take_sample(pid: int, http_url: str, lsp_pids: set[int]) -> dict[str, float]:
    m = scrape(http_url)
    nan = float("nan")
    return {**_proc_figures(pid), **_lsp_figures(lsp_pids), "tasks": m.get("quickcode_event_loop_tasks", nan),
            "series": len(m), "queued": m.get("quickcode_queued_requests", nan),
            "live": m.get("quickcode_live_requests", nan), "sessions": m.get("quickcode_sessions", nan)}


# ── the well-behaved editors ─────────────────────────────────────────────────────────────────────────────────

async def _editor(i: int, cfg: SoakConfig, segments, stop: asyncio.Event, tally: EditorTally,
                  lsp_pids: set[int], state_dir: str) -> None:
    from lsprotocol import types as T

    from quickcode.benchmarks.editor_sim import STYLES, SimEditor, TypingModel, lsp_command

    rng = random.Random(f"{cfg.seed}:editor:{i}")
    style = STYLES[i % len(STYLES)]
    n = 0
    while not stop.is_set():
        ed = SimEditor(lsp_command(), style=style, seed=cfg.seed * 1000 + i,
                       init_options={"endpoints": [cfg.ws_url], "state_dir": state_dir, "user": f"soak-editor-{i}"})

        @ed.client.feature(T.WINDOW_SHOW_MESSAGE)
        def _shown(params, i=i):
            if params.type == T.MessageType.Error:
                tally.note("error", f"editor {i} window/showMessage: {params.message}")

        try:
            await asyncio.wait_for(ed.start(), cfg.hang_timeout_s)
        except Exception as e:           # a language server that does not start: the editor shows no service
            tally.note("hung", f"editor {i} language server not started: {e!r}"[:300])
            await _stop(ed)
            await asyncio.sleep(1)
            continue
        tally.lsp_starts += 1
        pid = ed.client._server.pid if getattr(ed.client, "_server", None) is not None else None
        if pid:
            lsp_pids.add(pid)
        restart_at = time.monotonic() + cfg.reconnect_s * rng.uniform(0.6, 1.4)
        try:
            while not stop.is_set() and time.monotonic() < restart_at:
                path, before, target = segments[(i + n * cfg.editors) % len(segments)]
                n += 1
                await _segment(ed, i, n, path, before, target, TypingModel(speed=cfg.speed), cfg, tally)
        except Exception as e:           # the language server died under the editor, or broke its protocol
            tally.note("error", f"editor {i}: {e!r}"[:300])
        finally:
            await _stop(ed)
            if pid:
                lsp_pids.discard(pid)


async def _stop(ed) -> None:
    try:
        await asyncio.wait_for(ed.stop(), 30)
    except Exception:  # a language server already gone: the next one is started anyway
        pass


async def _rough_editor(k: int, cfg: SoakConfig, segments, stop: asyncio.Event, counts: dict[str, int],
                        lsp_pids: set[int], state_dir: str) -> None:
    """An editor of the abusive kind: a huge document, typing at its end (asking at pauses), then a burst of
    inline requests without waiting for any; a new language server each round. Counted with the abuse, never
    judged."""
    from quickcode.benchmarks.editor_sim import SimEditor, TypingModel, lsp_command

    def count(key: str) -> None:
        counts[f"rough_editor.{key}"] = counts.get(f"rough_editor.{key}", 0) + 1

    n = 0
    while not stop.is_set():
        path, before, target = segments[(k * 7 + n) % len(segments)]
        n += 1
        ed = SimEditor(lsp_command(), style="neovim-pause", seed=cfg.seed * 1000 + 500 + k,
                       init_options={"endpoints": [cfg.ws_url], "state_dir": state_dir, "user": f"soak-rough-{k}"})
        pid = None
        try:
            await asyncio.wait_for(ed.start(), cfg.hang_timeout_s)
            pid = ed.client._server.pid
            lsp_pids.add(pid)
            huge = (before * (cfg.huge_doc_chars // max(1, len(before)) + 1))[: cfg.huge_doc_chars]
            ed.open((Path(tempfile.gettempdir()) / f"soak-rough-{k}" / f"{n}-{path.name}").as_uri(), huge)
            await asyncio.wait_for(ed.type_text(target[:30], TypingModel(speed=4 * cfg.speed)), 120)
            burst = [ed.ask()[1] for _ in range(20)]
            done, _ = await asyncio.wait(burst, timeout=cfg.hang_timeout_s)
            for f in done:
                count("refused" if f.cancelled() or f.exception() is not None else "answered")
            count("rounds")
        except Exception as e:           # whatever the language server did with it is its business here
            count(type(e).__name__)
        finally:
            await _stop(ed)
            lsp_pids.discard(pid)
        try:
            await asyncio.wait_for(stop.wait(), cfg.abuse_pause_s)
        except asyncio.TimeoutError:
            pass


async def _segment(ed, i: int, n: int, path: Path, before: str, target: str, model, cfg: SoakConfig,
                   tally: EditorTally) -> None:
    """One document opened, a segment typed into it, every request answered (or counted hung), closed."""
    from lsprotocol import types as T

    uri = (Path(tempfile.gettempdir()) / f"soak-{i}" / f"{n}-{path.name}").as_uri()
    ed.open(uri, before)
    if not await _connected(ed, i, cfg, tally):
        return
    res = await ed.type_text(target, model)
    deadline = time.monotonic() + cfg.hang_timeout_s
    while any(a["outcome"] is None for a in res.asks) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    for a in res.asks:
        tally.outcomes[a["outcome"] or "unanswered"] = tally.outcomes.get(a["outcome"] or "unanswered", 0) + 1
        if a["outcome"] is None:
            tally.note("hung", f"editor {i} inlineCompletion at {a['at']} unanswered after {cfg.hang_timeout_s:g} s")
        elif a["outcome"] == "error":
            tally.note("error", f"editor {i} inlineCompletion at {a['at']} answered with a JSON-RPC error")
    tally.segments += 1
    tally.keystrokes += res.keystrokes
    tally.requests += res.requests
    tally.shown += res.shown
    tally.accepted += res.accepted
    await _command(ed, i, "quickcode.stats", cfg, tally)
    ed.client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri=uri)))


async def _command(ed, i: int, name: str, cfg: SoakConfig, tally: EditorTally):
    try:
        return await asyncio.wait_for(ed.command(name), cfg.hang_timeout_s)
    except asyncio.TimeoutError:
        tally.note("hung", f"editor {i} {name} unanswered after {cfg.hang_timeout_s:g} s")
    except Exception as e:               # a JSON-RPC error response
        tally.note("error", f"editor {i} {name}: {e!r}"[:300])
    return None


async def _connected(ed, i: int, cfg: SoakConfig, tally: EditorTally) -> bool:
    """The language server reports its backend connected within the hang timeout (else a hung session)."""
    deadline = time.monotonic() + cfg.hang_timeout_s
    while time.monotonic() < deadline:
        st = await _command(ed, i, "quickcode.status", cfg, tally)
        if st is None:
            return False
        if st.get("connected"):
            return True
        await asyncio.sleep(0.1)
    tally.note("hung", f"editor {i} not connected after {cfg.hang_timeout_s:g} s")
    return False


# ── the run ──────────────────────────────────────────────────────────────────────────────────────────────────

async def soak(cfg: SoakConfig, bounds: Bounds | None = None, say=progress) -> SoakResult:
    """Run editors, abusers and the sampler for `cfg.duration_s`; judge the samples (`SoakResult.rules`)."""
    from quickcode.benchmarks.typing import _segments, held_out_files

    files = cfg.files or held_out_files(argparse.Namespace(files=None))
    segments = _segments(files, 64, cfg.chars, cfg.seed)
    stop = asyncio.Event()
    tally = EditorTally()
    lsp_pids: set[int] = set()
    failed_samples: list[str] = []
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in SERIES}
    welcome = await _limits(cfg.ws_url)
    abusers = [Abuser(cfg.ws_url, cfg.seed * 100 + k, pause_s=cfg.abuse_pause_s, **welcome)
               for k in range(cfg.abusers)]
    t0 = time.monotonic()

    async def sampler():
        next_at = t0
        while not stop.is_set():
            try:
                s = await asyncio.to_thread(take_sample, cfg.pid, cfg.http_url, lsp_pids)
            except Exception as e:       # the backend gone, or /metrics not answering: a failed rule
                failed_samples.append(f"{time.monotonic() - t0:.0f} s: {e!r}"[:300])
                say(f"sample failed: {failed_samples[-1]}")
                s = None
            t = time.monotonic() - t0
            if s is not None:
                for k in SERIES:
                    samples[k].append((t, s[k]))
            if s is not None and len(samples["tasks"]) % max(1, round(60 / cfg.sample_s)) == 1:
                say(f"[{t:6.0f} s] backend {s['rss_backend'] / 2**20:.0f} MB, engine {s['rss_engine'] / 2**20:.0f} MB, "
                    f"fds {s['fds_backend']:.0f}+{s['fds_engine']:.0f}, tasks {s['tasks']:.0f}, series {s['series']}, "
                    f"queued {s['queued']:.0f}, sessions {s['sessions']:.0f}; editors: {tally.segments} segments, "
                    f"{tally.requests} requests, {tally.hung} hung, {tally.errors} errors")
            next_at += cfg.sample_s
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    with tempfile.TemporaryDirectory(prefix="soak-lsp-") as state:
        editors = [asyncio.create_task(_editor(i, cfg, segments, stop, tally, lsp_pids, f"{state}/{i}"))
                   for i in range(cfg.editors)]
        rough_counts: dict[str, int] = {}
        tasks = editors + [asyncio.create_task(a.run(stop, cfg.abuse_kinds)) for a in abusers]
        tasks += [asyncio.create_task(_rough_editor(k, cfg, segments, stop, rough_counts, lsp_pids, f"{state}/r{k}"))
                  for k in range(cfg.rough_editors)]
        sampling = asyncio.create_task(sampler())
        say(f"soak: {cfg.editors} editors, {cfg.abusers} abusive clients, {cfg.duration_s:g} s "
            f"(warm-up {cfg.warmup_s:g} s), sampling every {cfg.sample_s:g} s")
        try:
            done, _ = await asyncio.wait(tasks, timeout=cfg.duration_s, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:               # an editor that fails to start a language server ends the run
                t.result()
        finally:
            stop.set()
            finished, late = await asyncio.wait(tasks, timeout=cfg.hang_timeout_s + 120)
            for t in late:
                t.cancel()
                if t in editors:
                    tally.note("hung", "an editor did not stop within the hang timeout")
            await sampling
    abuse: dict[str, int] = dict(rough_counts)
    for a in abusers:
        for k, v in a.counts.items():
            abuse[k] = abuse.get(k, 0) + v
    # the warm-up lasts until every kind of abuse has run once too (its labels seen, its buffers sized)
    cycled = [a.cycled_at - t0 for a in abusers if a.cycled_at is not None]
    warmup_s = max([cfg.warmup_s, min(cycled)] if cycled else [cfg.warmup_s])
    res = SoakResult(samples, tally, abuse, time.monotonic() - t0, failed_samples=failed_samples, warmup_s=warmup_s)
    res.rules = verdict(samples, warmup_s, tally.hung, tally.errors, bounds, len(failed_samples))
    return res


async def _limits(ws_url: str) -> dict:
    """The backend's limits as its welcome states them (what the abusers go past)."""
    import websockets

    from quickcode.protocol import PROTOCOL_VERSION, Hello, Welcome, decode, encode

    async with websockets.connect(ws_url, open_timeout=30, max_size=1 << 24) as ws:
        await ws.send(encode(Hello(protocol_version=PROTOCOL_VERSION, client="quickcode-soak", user="soak")).decode())
        welcome = decode(await asyncio.wait_for(ws.recv(), 30), 1 << 24)
    if not isinstance(welcome, Welcome):
        raise RuntimeError(f"no welcome: {welcome}")
    return {"max_prompt_chars": welcome.max_prompt_chars or 64_000, "max_frame_bytes": welcome.max_frame_bytes}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend (ws://.../v1/ws); then give --pid")
    p.add_argument("--pid", type=int, default=None, help="pid of the backend process at --url")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="settings of the backend started (default: profile=light)")
    p.add_argument("--duration-s", type=float, default=3600.0)
    p.add_argument("--warmup-s", type=float, default=None, help="default: a sixth of the duration, at most 300 s")
    p.add_argument("--sample-s", type=float, default=5.0)
    p.add_argument("--editors", type=int, default=4, help="simulated developers, each with a `quickcode lsp`")
    p.add_argument("--abusers", type=int, default=2, help="abusive raw-WebSocket clients")
    p.add_argument("--rough-editors", type=int, default=1, help="editors opening huge documents and bursting "
                                                                "requests (counted, not judged)")
    p.add_argument("--reconnect-s", type=float, default=180.0, help="an editor restarts its language server "
                                                                    "about this often")
    p.add_argument("--hang-timeout-s", type=float, default=30.0, help="an LSP request unanswered this long is hung")
    p.add_argument("--speed", type=float, default=2.0, help="typing speed over a human's")
    p.add_argument("--chars", type=int, default=300, help="characters typed per segment")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="folder of the report (default benchmarks/reports/)")


def run(args: argparse.Namespace) -> dict:
    t_start = time.time()
    raise_nofile()
    sets = list(args.set) if any(kv.startswith(("profile=", "model=")) for kv in args.set) \
        else ["profile=light", *args.set]
    backend = backend_from_url(args.url) if args.url else bench_backend("soak", sets)
    pid = args.pid or backend.pid
    if pid is None:
        raise SystemExit("--url needs --pid (the backend's process, for its memory and open files)")
    warmup_s = args.warmup_s if args.warmup_s is not None else min(300.0, args.duration_s / 6)
    cfg = SoakConfig(ws_url=backend.ws_url, http_url=backend.http_url, pid=pid, duration_s=args.duration_s,
                     warmup_s=warmup_s, sample_s=args.sample_s, editors=args.editors, abusers=args.abusers,
                     reconnect_s=args.reconnect_s, hang_timeout_s=args.hang_timeout_s, speed=args.speed,
                     rough_editors=args.rough_editors,
                     chars=args.chars, seed=args.seed)
    bounds = Bounds(window_s=min(300.0, max(cfg.sample_s * 4, (cfg.duration_s - warmup_s) / 6)))
    try:
        res = asyncio.run(soak(cfg, bounds))
    finally:
        backend.stop()
    headline = _report(args, cfg, res, t_start)
    if not res.passed:
        raise SystemExit(1)
    return headline


def _report(args, cfg: SoakConfig, res: SoakResult, t_start: float) -> dict:
    t = res.editors
    report = Report("soak", f"Soak: {cfg.editors} simulated editors and {cfg.abusers} abusive clients on one backend "
                            f"for {res.elapsed_s / 60:.0f} min", started=t_start, out=args.out)
    served = f"at {args.url}" if args.url else "started by the bench: " + ", ".join(args.set or ["profile=light"])
    report.add(f"""
One `quickcode serve` ({served}).
**Well-behaved editors**: {cfg.editors} simulated developers (quickcode/benchmarks/editor_sim.py; editor styles VS Code,
Neovim-at-pauses, VS Code 1.100, Neovim-every-key in turn), each driving a real `quickcode lsp` process that
types {cfg.chars}-character segments of held-out standard-library modules at {cfg.speed:g}× human speed, one
document per segment; about every {cfg.reconnect_s:g} s (±40 %) an editor quits its language server and starts
a new one (a new process and WebSocket): {t.lsp_starts} language-server starts. **Abusive clients**:
{cfg.abusers} raw-WebSocket clients cycling through {', '.join(cfg.abuse_kinds)} (quickcode/benchmarks/soak_abuse.py),
every session under a user name never seen before; and {cfg.rough_editors} rough editor(s): a real `quickcode lsp`
given a {cfg.huge_doc_chars:,}-character document, typed into at its end, then 20 inline requests at once
without waiting, a new language server each round (counted with the abuse, not judged). Sampled every
{cfg.sample_s:g} s; the rules judge the samples after a warm-up of {res.warmup_s:.0f} s ({cfg.warmup_s:g} s asked, or until every kind of abuse had run once if
that was later; quickcode/benchmarks/soak_verdict.py). A request of an editor is **hung** when its
language server has not answered it {cfg.hang_timeout_s:g} s after the segment ended (likewise a command, or a
backend not connected {cfg.hang_timeout_s:g} s after the language server started); an **error shown** is a
JSON-RPC error response or a `window/showMessage` of type Error.
""")
    report.add("## Verdict: " + ("PASS" if res.passed else "FAIL") + "\n\n" +
               md_table(["rule", "result", "first", "last", "limit", "how"], [_row(r) for r in res.rules]))
    report.add(md_table(["editor segments", "keystrokes", "inline requests", "shown", "accepted", "hung", "errors"],
                        [[t.segments, t.keystrokes, t.requests, t.shown, t.accepted, t.hung, t.errors]]))
    report.add("Outcomes of the editors' inline-completion requests: " +
               ", ".join(f"{k} {v}" for k, v in sorted(t.outcomes.items())) + ".")
    if res.failed_samples:
        report.add("Samples not taken:\n\n" + "\n".join(f"* {p}" for p in res.failed_samples[:20]))
    if t.problems:
        report.add("Problems the editors met (the first 20):\n\n" + "\n".join(f"* {p}" for p in t.problems))
    report.add("What the abusive clients did and got back (count by episode kind and answer):\n\n" +
               md_table(["what", "count"], [[k, v] for k, v in sorted(res.abuse.items())]))
    _plots(report, cfg, res)
    s = res.samples
    first = {r.name: r for r in res.rules}
    headline = {"bench": "soak", "duration_s": round(res.elapsed_s), "warmup_s": round(res.warmup_s),
                "editors": cfg.editors, "abusers": cfg.abusers, "samples": len(s["tasks"]),
                "rss_backend_growth_pct": _growth(first["backend RSS"]),
                "rss_engine_growth_pct": _growth(first["engine processes RSS"]),
                "fds_backend_first_last": [first["backend open files"].first, first["backend open files"].last],
                "tasks_first_last": [first["event-loop tasks"].first, first["event-loop tasks"].last],
                "series_first_last": [first["metric series"].first, first["metric series"].last],
                "editor_segments": t.segments, "editor_requests": t.requests, "lsp_starts": t.lsp_starts,
                "hung_sessions": t.hung, "editor_errors": t.errors,
                "abuse_episodes": sum(v for k, v in res.abuse.items() if k.endswith(".episodes")),
                "failed_rules": [r.name for r in res.rules if not r.passed], "passed": res.passed}
    return report.finish(finite(headline))


def _row(rule) -> list:
    """A rule's table row, memory in MB."""
    row = rule.row()
    if "RSS" in rule.name:
        row[2:5] = [round(v / 2**20, 1) for v in row[2:5]]
        row[0] += " (MB)"
    return row


def _growth(rule) -> float:
    return round(100 * (rule.last / rule.first - 1), 2) if rule.first else float("nan")


def _plots(report: Report, cfg: SoakConfig, res: SoakResult) -> None:
    s = res.samples
    panels = [("engine memory (MB)", [("engine processes", "rss_engine", 2**20)]),
              ("memory (MB)", [("backend", "rss_backend", 2**20), ("a language server (mean)", "rss_lsp_mean", 2**20)]),
              ("open files", [("backend", "fds_backend", 1), ("engine processes", "fds_engine", 1)]),
              ("event-loop tasks", [("server", "tasks", 1)]),
              ("/metrics series", [("series", "series", 1)]),
              ("queue depth", [("queued", "queued", 1), ("live", "live", 1)]),
              ("sessions", [("server sessions", "sessions", 1), ("language servers", "lsp_processes", 1)])]
    fig, axes = figure(len(panels), 1, figsize=(8, 2.3 * len(panels)), sharex=True)
    for ax, (title, lines) in zip(axes, panels):
        for label, key, scale in lines:
            ax.plot([t / 60 for t, _ in s[key]], [v / scale for _, v in s[key]], label=label, lw=1)
        ax.axvline(res.warmup_s / 60, color="tab:gray", ls="--", lw=0.8)
        ax.set_ylabel(title)
        ax.legend(loc="upper left", fontsize=7)
    axes[-1].set_xlabel("minutes (dashed: end of the warm-up)")
    report.add_figure(fig, "series", "backend memory, open files, tasks, metric series and queue depth over the run")

