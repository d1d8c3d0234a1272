"""The language server's tree keeps the shape a newcomer can read (issue 18): small modules, short functions on
the keystroke path, all time through the injected clock, and imports that point one way (lsp_client → protocol)."""
from __future__ import annotations

import ast
from pathlib import Path

LSP = Path(__file__).resolve().parents[2] / "quickcode" / "lsp_client"
# `quickcode doctor` (issue 17) lives beside the language server but is not part of it: a command-line check that
# times real connections with the wall clock. It is held to the size and import rules, not to the clock rule.
NOT_THE_SERVER = {"doctor.py", "doctor_checks.py"}
ALL_MODULES = sorted(LSP.glob("*.py"))
MODULES = [p for p in ALL_MODULES if p.name not in NOT_THE_SERVER]
KEYSTROKE_PATH = ("server.py", "session.py", "pump.py", "inflight.py", "cache.py", "context.py", "debounce.py",
                  "places.py", "predictor.py", "postprocess.py", "answer.py", "warmup.py", "accounting.py")
TIME_READS = {("time", "monotonic"), ("time", "perf_counter"), ("time", "time"), ("asyncio", "wait_for"),
              ("asyncio", "sleep"), ("loop", "call_later")}


def _tree(p: Path) -> ast.Module:
    return ast.parse(p.read_text(), str(p))


def test_no_module_over_300_lines():
    assert {p.name: n for p in ALL_MODULES if (n := len(p.read_text().splitlines())) > 300} == {}


def test_no_function_on_the_keystroke_path_over_60_lines():
    long = {}
    for p in MODULES:
        if p.name in KEYSTROKE_PATH:
            for n in ast.walk(_tree(p)):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 60:
                    long[f"{p.name}:{n.name}"] = n.end_lineno - n.lineno + 1
    assert long == {}


def test_time_is_read_only_through_the_clock():
    direct = []
    for p in MODULES:
        if p.name == "clock.py":
            continue
        tree = _tree(p)
        yields = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call) and c.args     # sleep(0): a turn
                  and isinstance(c.args[0], ast.Constant) and c.args[0].value == 0}         # of the loop, no time
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (n.value.id, n.attr) in TIME_READS \
                    and id(n) not in yields:
                direct.append(f"{p.name}:{n.lineno} {n.value.id}.{n.attr}")
            if isinstance(n, ast.Attribute) and n.attr == "call_later":
                direct.append(f"{p.name}:{n.lineno} call_later")
            if isinstance(n, (ast.Import, ast.ImportFrom)) and any(a.name == "time" for a in n.names):
                direct.append(f"{p.name}:{n.lineno} import time")
    assert direct == []


def test_lsp_client_imports_protocol_and_nothing_else_of_the_project():
    def outside(module: str) -> bool:     # the project's, and neither quickcode.protocol nor lsp_client's own
        parts = module.split(".")
        return parts[0] in ("tests", "editors") or \
            (parts[0] == "quickcode" and parts[1:2] not in (["protocol"], ["lsp_client"]))
    wrong = []
    for p in ALL_MODULES:
        for n in ast.walk(_tree(p)):            # function-level imports included
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module == "quickcode":
                names = [f"quickcode.{a.name}" for a in n.names]      # from quickcode import backend
            elif isinstance(n, ast.ImportFrom) and n.level == 0:
                names = [n.module or ""]
            else:
                names = []
            wrong += [f"{p.name}: {m}" for m in names if outside(m)]
    assert wrong == []
