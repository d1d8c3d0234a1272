"""Which tests share a pytest-xdist worker when `make test` runs the suite on two (`-n 2 --dist loadgroup`).

This machine has 2 cores, and a serial run leaves one idle while a test waits on an engine, an editor or a
subprocess. The units of work handed to the workers:
  * a file's tests always share a worker (module fixtures start once);
  * every file that uses the session's real backend (asks for the `backend` fixture, in a test's or a fixture's
    parameters, without defining its own) is one unit: one engine for the session, not one per worker;
  * the files that start vLLM engines of their own are one unit, handed out first (it is the longest): no more
    than its engines and the session's run at a time, whatever the other worker does;
  * the container test (an image build on a fresh machine: minutes of pip) is handed out second, so that it
    runs beside the own-engines unit rather than after it.

pytest-xdist 3.8's own `loadgroup` marks its groups by assigning `item._nodeid`, which pytest 9 no longer reads
(a node keeps its id in `_id`), so its groups are silently ignored. The same is done here through xdist's
public scheduler hook: each worker writes {test id: unit} once it has collected (`write_units`), and the
controller's scheduler (`UnitScheduling`, xdist's load-scope scheduler with another unit) reads it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

ENV = "QC_XDIST_UNITS"     # the file the workers write and the controller reads (not QUICKCODE_*: settings)
# files whose tests start vLLM engines of their own
OWN_ENGINES = frozenset({"test_byo_model.py", "test_cache_isolation.py", "test_default_profile.py",
                         "test_faults_backend.py", "test_faults_bench.py", "test_logits_engine.py",
                         "test_pipeline.py", "test_remote_engine.py"})
FIRST, SECOND = "own-engines", "tests/deploy/test_containers.py"


def uses_session_backend(path: Path) -> bool:
    """The file asks for the `backend` fixture (in a module-level test's or fixture's parameters — pytest-lsp's
    fixtures ask for theirs at run time, so pytest's static closure does not show it) and defines none of its
    own."""
    text = path.read_text()
    return bool(_ASKS_BACKEND.search(text)) and not _DEFINES_BACKEND.search(text)


_ASKS_BACKEND = re.compile(r"^(async\s+)?def \w+\([^)]*\bbackend\b[^)]*\)", re.M)
_DEFINES_BACKEND = re.compile(r"^(async\s+)?def backend\(", re.M)


def units(items, repo: Path) -> dict[str, str]:
    """{test id: unit} for the collected items (see the module docstring)."""
    paths = {item.path for item in items}
    with_backend = {p for p in paths if uses_session_backend(p)}

    def unit(item) -> str:
        if item.path in with_backend:
            return "session-backend"
        if item.path.name in OWN_ENGINES:
            return FIRST
        return str(item.path.relative_to(repo))
    return {item.nodeid: unit(item) for item in items}


def order_first(items, by_id: dict[str, str]) -> None:
    """The own-engines unit first, the container test second (the scheduler hands out units in collection
    order); otherwise stable."""
    rank = {FIRST: 0, SECOND: 1}
    items.sort(key=lambda item: rank.get(by_id[item.nodeid], 2))


def announce(config) -> None:
    """Controller, before the workers start: where they write their units (inherited through the environment)."""
    if getattr(config, "workerinput", None) is None and config.getvalue("dist") == "loadgroup":
        os.environ[ENV] = str(Path(tempfile.mkdtemp(prefix="quickcode-xdist-")) / "units.json")


def forget(config) -> None:
    """Controller, at the end: the units file and its directory go."""
    path = os.environ.get(ENV)
    if getattr(config, "workerinput", None) is None and path:
        shutil.rmtree(Path(path).parent, ignore_errors=True)


def write_units(config, by_id: dict[str, str]) -> None:
    """Worker, after collection: the units, written whole (both workers write the same collection)."""
    path = os.environ.get(ENV)
    if getattr(config, "workerinput", None) is None or not path:
        return
    tmp = Path(f"{path}.{config.workerinput['workerid']}")
    tmp.write_text(json.dumps(by_id))
    os.replace(tmp, path)


def make_scheduler(config, log):
    """The controller's scheduler for `--dist loadgroup` (None otherwise: xdist's own)."""
    if config.getvalue("dist") != "loadgroup" or ENV not in os.environ:
        return None
    from xdist.scheduler import LoadScopeScheduling   # here: xdist imported at conftest time warns (no rewrite)

    class UnitScheduling(LoadScopeScheduling):
        """xdist's load-scope scheduling with `units`' unit as the scope (a test the workers did not write: its
        file)."""

        def __init__(self, config, log=None) -> None:
            super().__init__(config, log)
            self._units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._units is None:
                self._units = json.loads(Path(os.environ[ENV]).read_text())
            return self._units.get(nodeid) or nodeid.split("::", 1)[0]

    return UnitScheduling(config, log)
