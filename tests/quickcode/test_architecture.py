"""Imports between the top-level packages point one way (issue 18), function-level imports included:

    quickcode (the CLI) → benchmarks → draft_model → backend → protocol
                                     ↘ lsp_client ──────────→ protocol

no package imports another's private names, and the layers form no cycle."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what each package may import of the project
ALLOWED = {
    "protocol": set(),
    "backend": {"protocol"},
    "lsp_client": {"protocol"},
    "draft_model": {"backend", "protocol"},
    "benchmarks": {"draft_model", "backend", "lsp_client", "protocol"},
    "quickcode": {"benchmarks", "draft_model", "backend", "lsp_client", "protocol"},
}


def imports(package: str) -> list[tuple[str, int, str, list[str]]]:
    """(file, line, imported module, imported names) of every import in `package`, at any depth of the code."""
    out = []
    for path in sorted((REPO / package).rglob("*.py")):
        rel = path.relative_to(REPO)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(str(rel), node.lineno, a.name, []) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = package if node.level else (node.module or "")   # a relative import stays inside
                out.append((str(rel), node.lineno, module, [a.name for a in node.names]))
    return out


def edges() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for package in ALLOWED:
        for file, line, module, _ in imports(package):
            top = module.split(".")[0]
            if top in ALLOWED and top != package:
                found.setdefault((package, top), []).append(f"{file}:{line} {module}")
    return found


def test_every_import_between_packages_points_down_the_layers():
    wrong = {f"{a} → {b}": where for (a, b), where in edges().items() if b not in ALLOWED[a]}
    assert wrong == {}


def test_there_is_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {p: set() for p in ALLOWED}
    for a, b in edges():
        graph[a].add(b)
    state: dict[str, int] = {}     # 1: on the path, 2: done

    def cycle_from(p: str, path: list[str]) -> list[str] | None:
        state[p] = 1
        for q in sorted(graph[p]):
            if state.get(q) == 1:
                return path + [p, q]
            if q not in state and (c := cycle_from(q, path + [p])):
                return c
        state[p] = 2
        return None

    cycles = [c for p in sorted(graph) if p not in state and (c := cycle_from(p, []))]
    assert cycles == []


def test_no_package_imports_another_packages_private_names():
    private = []
    for package in ALLOWED:
        for file, line, module, names in imports(package):
            top = module.split(".")[0]
            if top in ALLOWED and top != package:
                private += [f"{file}:{line} {module}.{n}" for n in names if n.startswith("_") and not n.endswith("__")]
                private += [f"{file}:{line} {module}" for part in module.split(".")[1:] if part.startswith("_")]
    assert private == []


def test_the_layering_has_no_cycle_itself():
    """The allowed edges are a strict order (so obeying them can never make a loop)."""
    order = ["protocol", "backend", "lsp_client", "draft_model", "benchmarks", "quickcode"]
    assert all(order.index(b) < order.index(a) for a, deps in ALLOWED.items() for b in deps)


@pytest.mark.parametrize("package", ["backend"])
def test_no_module_is_over_350_lines(package):
    """A module is read in one sitting (issue 18): none of the service's packages holds one over 350 lines."""
    long = {p.name: n for p in sorted((REPO / package).glob("*.py")) if (n := len(p.read_text().splitlines())) > 350}
    assert long == {}


def test_the_wheel_and_both_sides_of_the_wire_report_one_version():
    import tomllib

    from quickcode import protocol
    import quickcode

    wheel = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert wheel == protocol.__version__ == quickcode.__version__
