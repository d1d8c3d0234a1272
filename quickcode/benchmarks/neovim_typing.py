"""`quickcode bench neovim`: a developer typing in a real Neovim 0.12 — what they accept, and when ghost text
shows — with the plugin asking as Neovim does by itself (`ask = 'pause'`: 200 ms after the last key) and on
every change (`ask = 'keystroke'`, the plugin's default), one run, the same segments and the same developer.

The developer is the typing benchmark's (quickcode/benchmarks/editor_sim.py TypingModel: the same gaps, typos
and acceptance coin at the same position of the same segment, seed by seed), Tab-only: while waiting before
the next key they read the ghost text Neovim shows (the extmark of `vim.lsp.inline_completion`) and press Tab
when all of it is what they are about to type. Each Tab is checked on the buffer: the text must then be
exactly what was typed plus the ghost text (a Tab that wrote anything else is counted, and the buffer put
right). Every session ends with the buffer compared with the segment (typed as is).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from quickcode.benchmarks.editor_sim import TypingModel
from quickcode.benchmarks.editor_typing import serving, type_segment, write_rows
from quickcode.benchmarks.report import Report, md_table, paired_bootstrap, percentile
from quickcode.benchmarks.typing import _segments, add_segment_arguments, held_out_files

ARMS = ("pause", "keystroke")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_segment_arguments(p)
    p.add_argument("--arms", default=",".join(ARMS), help="the plugin's `ask` per arm: pause, keystroke")
    p.add_argument("--plugin", type=Path, default=None,
                   help="the Neovim plugin folder to drive (default editors/neovim; e.g. an earlier version's)")
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


class NeovimEditor:
    """quickcode/benchmarks/editor_typing.py's Editor on a real Neovim: the ghost text is the extmark of
    `vim.lsp.inline_completion`; each Tab is checked on the buffer (it must then be exactly what was typed plus
    the ghost text; a Tab that wrote anything else is counted, and the buffer put right)."""

    def __init__(self, nvim):
        self.nvim = nvim

    def start(self, before: str) -> None:
        from quickcode.benchmarks.neovim_driver import wait_until

        self.nvim.current.buffer[:] = before.split("\n")
        self.nvim.command("normal! G$")
        self.nvim.input("A")
        wait_until(lambda: self.nvim.api.get_mode()["mode"] == "i", 2)

    def key(self, text: str) -> None:
        self.nvim.input("<CR>" + text[1:] if text.startswith("\n") else "<lt>" if text == "<" else text)

    def backspace(self) -> None:
        self.nvim.input("<BS>")

    def ghost(self) -> str | None:
        from quickcode.benchmarks.neovim_driver import ghost_text

        return ghost_text(self.nvim)

    def text(self) -> str:
        from quickcode.benchmarks.neovim_driver import buffer_text

        return buffer_text(self.nvim)

    def tab(self, expected_before: str, ghost: str, res: dict) -> str:
        from quickcode.benchmarks.neovim_driver import wait_until

        nvim = self.nvim
        nvim.input("<Tab>")
        changed = wait_until(lambda: self.text() != expected_before, 1.0, step=0.005)
        now = self.text()
        if now == expected_before + ghost:
            return ghost
        if not changed:
            res["tab_nothing"] += 1
            return ""
        res["tab_wrong"] += 1
        res.setdefault("wrong", []).append({"expected": (expected_before + ghost)[-60:], "got": now[-60:]})
        nvim.input("<Esc>")
        nvim.current.buffer[:] = expected_before.split("\n")
        nvim.command("normal! G$")
        nvim.input("A")
        return ""


def _session(ws_url: str, arm: str, seg, seed: int, speed: float, state_dir: str, work: Path, plugin,
             lsp_log: Path) -> dict:
    from quickcode.benchmarks.neovim_driver import (PLUGIN, buffer_text, open_and_connect, start_nvim,
                                                    wait_until)

    path, before, target = seg
    doc = work / f"{arm}-{path.name}"
    doc.write_text(before)
    nvim = start_nvim(ws_url, lsp_log, "inline", plugin or PLUGIN, ask=arm,
                      settings={"state_dir": state_dir})
    try:
        open_and_connect(nvim, doc)
        nvim.command("filetype indent off | setlocal noautoindent nosmartindent nocindent indentexpr=")
        res = type_segment(NeovimEditor(nvim), before, target, seed, TypingModel(speed=speed))
        time.sleep(0.3)
        res["typed_as_is"] = wait_until(lambda: buffer_text(nvim) == before + target, 2.0, step=0.05) is not None
        stats = nvim.exec_lua("return (require('quickcode').exec('quickcode.stats'))") or {}
        res["backend_requests"] = stats.get("backend_requests", 0)
    finally:
        nvim.exec_lua("for _, c in ipairs(vim.lsp.get_clients()) do c:stop(true) end")
        nvim.close()
    return {**res, "arm": arm, "file": path.name, "chars": len(target)}


def run(args: argparse.Namespace) -> dict:
    from rich.progress import Progress

    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise SystemExit(f"--arms: {bad} not among {ARMS}")
    segs = _segments(held_out_files(args), args.sessions, args.chars, args.seed)
    report = Report("neovim", "A developer typing in a real Neovim 0.12: asked at pauses (Neovim's own timer) vs "
                              "on every change (the plugin)", out=args.out)
    rows: list[dict] = []
    with serving(args.url, report.dir / "neovim-backend.log") as url, tempfile.TemporaryDirectory() as tmp, \
            Progress() as bar:
        work = Path(tmp)
        states = {arm: str(work / f"state-{arm}") for arm in arms}   # learnt pauses: one per arm
        task = bar.add_task("sessions", total=len(segs) * len(arms))
        for i, seg in enumerate(segs):
            for arm in arms:
                bar.update(task, description=f"{seg[0].name} · ask={arm}")
                r = _session(url, arm, seg, args.seed + i, args.speed, states[arm], work, args.plugin,
                             report.dir / f"neovim-lsp-{i + 1}-{arm}.log")   # the waterfall lines
                rows.append({**r, "session": i})
                bar.advance(task)
    write_rows(report.dir / "neovim-rows.jsonl.gz", rows)
    return _write(report, rows, arms, segs, args)


def _write(report: Report, rows: list[dict], arms: list[str], segs, args) -> dict:
    by = {(r["session"], r["arm"]): r for r in rows}
    n = len(segs)
    table = []
    for i, (path, _, target) in enumerate(segs):
        table.append([i + 1, path.name, *[f"{by[i, a]['accepted_chars']} ({'ok' if by[i, a]['typed_as_is'] else 'NOT as typed'})"
                                          for a in arms]])
    report.add("Each arm types the same segments (a real Neovim, the plugin of editors/neovim, the real language "
               f"server, one backend); {n} segments × {args.chars} characters of held-out files, seed {args.seed}, "
               f"speed {args.speed}; plugin `{args.plugin or 'editors/neovim'}`. Accepted characters per segment (and whether the buffer ended as the segment):\n\n"
               + md_table(["segment", "file", *[f"ask={a}" for a in arms]], table))

    def total(a, k):
        return sum(by[i, a][k] for i in range(n))

    def ghosts(a, idx=None):
        return [x for i in (idx if idx is not None else range(n)) for x in by[i, a]["pause_to_ghost_ms"]]

    summary = []
    for a in arms:
        g = ghosts(a)
        summary.append([a, total(a, "accepted_chars"), round(100 * total(a, "accepted_chars") / (n * args.chars), 1),
                        total(a, "keystrokes"), total(a, "backend_requests"),
                        f"{total(a, 'ghost_at_pause')} / {total(a, 'pauses')}",
                        percentile(g, 50) if g else float("nan"), percentile(g, 95) if g else float("nan"),
                        total(a, "tab_wrong"), total(a, "tab_nothing"),
                        sum(by[i, a]["typed_as_is"] for i in range(n))])
    report.add("## Totals\n\n" + md_table(
        ["ask", "accepted chars", "per 100 typed", "keys", "backend requests", "pauses with ghost text",
         "pause → ghost p50 ms", "p95 ms", "Tab wrote other text", "Tab wrote nothing", "segments as typed"],
        summary))
    head = {"segments": n, "chars_per_segment": args.chars,
            "arms": {a: {"accepted_chars": total(a, "accepted_chars"), "backend_requests": total(a, "backend_requests"),
                         "tab_wrong": total(a, "tab_wrong"), "typed_as_is": sum(by[i, a]["typed_as_is"] for i in range(n)),
                         "pause_to_ghost_p50_ms": percentile(ghosts(a), 50) if ghosts(a) else None,
                         "pause_to_ghost_p95_ms": percentile(ghosts(a), 95) if ghosts(a) else None}
                     for a in arms}}
    if set(ARMS) <= set(arms):
        def measure(idx):
            p = sum(by[i, "pause"]["accepted_chars"] for i in idx)
            k = sum(by[i, "keystroke"]["accepted_chars"] for i in idx)
            gp, gk = ghosts("pause", idx), ghosts("keystroke", idx)
            return {"ratio": k / p if p else float("nan"),
                    "p95_diff": (percentile(gk, 95) - percentile(gp, 95)) if gp and gk else float("nan")}
        ci = paired_bootstrap(n, measure)
        point = measure(range(n))
        head["keystroke_vs_pause"] = {"accepted_ratio": round(point["ratio"], 3),
                                      "accepted_ratio_90": [round(x, 3) for x in ci["ratio"]],
                                      "pause_to_ghost_p95_diff_ms": round(point["p95_diff"], 1),
                                      "pause_to_ghost_p95_diff_90": [round(x, 1) for x in ci["p95_diff"]]}
        report.add("## Asking on every change vs at pauses\n\n"
                   f"Accepted characters, keystroke / pause: **{point['ratio']:.2f}×** (90 % interval "
                   f"[{ci['ratio'][0]:.2f}, {ci['ratio'][1]:.2f}], resampling segments, paired); pause → ghost "
                   f"text p95 difference {point['p95_diff']:+.0f} ms [{ci['p95_diff'][0]:+.0f}, "
                   f"{ci['p95_diff'][1]:+.0f}].")
    return report.finish(head)
