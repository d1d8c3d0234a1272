"""Imports between the project's packages point one way (issue 18), function-level imports included:

    quickcode (cli, demo) → benchmarks → draft_model → backend → protocol
                                       ↘ lsp_client ──────────→ protocol

(every package is quickcode.NAME, issue 48; `quickcode` itself is its own modules: the command line), no
package imports another's private names, and the layers form no cycle."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what each package may import of the project
ALLOWED = {
    "quickcode.protocol": set(),
    "quickcode.backend": {"quickcode.protocol"},
    "quickcode.lsp_client": {"quickcode.protocol"},
    "quickcode.draft_model": {"quickcode.backend", "quickcode.protocol"},
    "quickcode.benchmarks": {"quickcode.draft_model", "quickcode.backend", "quickcode.lsp_client",
                             "quickcode.protocol"},
    "quickcode": {"quickcode.benchmarks", "quickcode.draft_model", "quickcode.backend", "quickcode.lsp_client",
                  "quickcode.protocol"},
}


def files_of(package: str) -> list[Path]:
    """A subpackage's modules at any depth; for `quickcode`, only its own modules (cli, demo, ...)."""
    root = REPO.joinpath(*package.split("."))
    return sorted(root.glob("*.py") if package == "quickcode" else root.rglob("*.py"))


def layer(module: str) -> str | None:
    """The package (a key of ALLOWED) an absolute module name belongs to; None: not the project's."""
    parts = module.split(".")
    if parts[0] != "quickcode":
        return None
    return "quickcode." + parts[1] if len(parts) > 1 and "quickcode." + parts[1] in ALLOWED else "quickcode"


def imports(package: str) -> list[tuple[str, int, str, list[str]]]:
    """(file, line, imported module, imported names) of every import in `package`, at any depth of the code;
    `from quickcode import backend` counts as an import of quickcode.backend."""
    out = []
    for path in files_of(package):
        rel = path.relative_to(REPO)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(str(rel), node.lineno, a.name, []) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level:   # a relative import stays inside
                out.append((str(rel), node.lineno, package, [a.name for a in node.names]))
            elif isinstance(node, ast.ImportFrom) and node.module == "quickcode":
                out += [(str(rel), node.lineno, f"quickcode.{a.name}", []) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                out.append((str(rel), node.lineno, node.module or "", [a.name for a in node.names]))
    return out


def edges() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for package in ALLOWED:
        for file, line, module, _ in imports(package):
            top = layer(module)
            if top is not None and top != package:
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
            top = layer(module)
            if top is not None and top != package:
                private += [f"{file}:{line} {module}.{n}" for n in names if n.startswith("_") and not n.endswith("__")]
                private += [f"{file}:{line} {module}" for part in module.split(".")[1:] if part.startswith("_")]
    assert private == []


def test_the_layering_has_no_cycle_itself():
    """The allowed edges are a strict order (so obeying them can never make a loop)."""
    order = ["quickcode.protocol", "quickcode.backend", "quickcode.lsp_client", "quickcode.draft_model",
             "quickcode.benchmarks", "quickcode"]
    assert all(order.index(b) < order.index(a) for a, deps in ALLOWED.items() for b in deps)


@pytest.mark.parametrize("package", ["quickcode/backend"])
def test_no_module_is_over_350_lines(package):
    """A module is read in one sitting (issue 18): none of the service's packages holds one over 350 lines."""
    long = {p.name: n for p in sorted((REPO / package).glob("*.py")) if (n := len(p.read_text().splitlines())) > 350}
    assert long == {}


def test_the_project_has_one_top_level_package():
    """Nothing generic beside `quickcode` (issue 48): a checkout's importable folders are quickcode/ and tests/."""
    tops = {p.parent.name for p in REPO.glob("*/__init__.py")} | {p.stem for p in REPO.glob("*.py")}
    assert tops == {"quickcode", "tests"}


def test_every_package_is_a_layer():
    """A new subpackage of quickcode/ gets a place in ALLOWED (else its imports would go unchecked)."""
    subpackages = {f"quickcode.{p.parent.name}" for p in (REPO / "quickcode").glob("*/__init__.py")}
    assert subpackages == set(ALLOWED) - {"quickcode"}


def test_importing_quickcode_imports_none_of_its_packages():
    """The language-server wheel has no backend: `import quickcode` must not reach any subpackage."""
    import subprocess
    import sys

    code = "import sys, quickcode; print(sorted(m for m in sys.modules if m.startswith('quickcode.')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_wheel_and_both_sides_of_the_wire_report_one_version():
    import tomllib

    import quickcode
    from quickcode import protocol

    wheel = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert wheel == protocol.__version__ == quickcode.__version__
