"""tests/support/xdist_groups.py: which tests share a pytest-xdist worker in `make test`.

Here with the project's own checks: tests/support is test infrastructure, not a package."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.support import xdist_groups

REPO = Path("/repo")
TREE = Path(__file__).resolve().parents[2]
SOURCES = {
    "test_a.py": "def test_t1():\n    pass\n\ndef test_t2(tmp_path):\n    pass\n",
    "test_b.py": "@pytest.fixture\ndef regions(backend):\n    return 1\n\ndef test_t2(regions):\n    pass\n",
    "editors/test_c.py": "@pytest_lsp.fixture(config=C)\n"
                         "async def client(lsp_client: LanguageClient, backend):\n    pass\n",
    "test_own.py": "@pytest.fixture(scope='module')\ndef backend():\n    yield 1\n\ndef test_t1(backend):\n    pass\n",
}


def item(file: str, name: str):
    return SimpleNamespace(path=REPO / "tests" / file, nodeid=f"tests/{file}::{name}")


def test_a_file_stays_whole_and_every_user_of_the_session_backend_shares_one_unit(monkeypatch):
    monkeypatch.setattr(Path, "read_text", lambda self: SOURCES.get(str(self.relative_to(REPO / "tests")), ""))
    items = [item("test_a.py", "t1"), item("test_a.py", "t2"), item("test_b.py", "t1"), item("test_b.py", "t2"),
             item("editors/test_c.py", "t1"), item("test_own.py", "t1"),
             item("draft_model/test_pipeline.py", "t1")]
    units = xdist_groups.units(items, REPO)
    assert units["tests/test_a.py::t1"] == units["tests/test_a.py::t2"] == "tests/test_a.py"
    # through another fixture, and through a pytest-lsp fixture (which asks at run time)
    assert {units[i.nodeid] for i in items[2:5]} == {"session-backend"}
    assert units["tests/test_own.py::t1"] == "tests/test_own.py"       # a module's own `backend`
    assert units["tests/draft_model/test_pipeline.py::t1"] == "own-engines"


def test_the_own_engines_unit_comes_first_the_container_second_and_the_rest_keeps_its_order(monkeypatch):
    monkeypatch.setattr(Path, "read_text", lambda self: "")
    items = [item("test_a.py", "t1"), item("deploy/test_containers.py", "t1"),
             item("backend/test_faults_backend.py", "t1"), item("test_b.py", "t1"),
             item("backend/test_byo_model.py", "t1"), item("test_a.py", "t2")]
    units = xdist_groups.units(items, REPO)
    xdist_groups.order_first(items, units)
    assert [i.nodeid for i in items] == ["tests/backend/test_faults_backend.py::t1",
                                         "tests/backend/test_byo_model.py::t1",
                                         "tests/deploy/test_containers.py::t1", "tests/test_a.py::t1",
                                         "tests/test_b.py::t1", "tests/test_a.py::t2"]


def test_the_scheduler_reads_the_workers_units(tmp_path, monkeypatch):
    path = tmp_path / "units.json"
    monkeypatch.setenv(xdist_groups.ENV, str(path))
    worker = SimpleNamespace(workerinput={"workerid": "gw0"})
    xdist_groups.write_units(worker, {"tests/test_b.py::t2": "session-backend"})
    config = SimpleNamespace(getvalue=lambda name: {"dist": "loadgroup", "tx": ["2*popen"]}[name],
                             option=SimpleNamespace(loadscopereorder=False), getoption=lambda *a, **k: None)
    sched = xdist_groups.make_scheduler(config, None)
    assert sched._split_scope("tests/test_b.py::t2") == "session-backend"
    assert sched._split_scope("tests/test_b.py::t1") == "tests/test_b.py"      # not written: its file
    config_load = SimpleNamespace(getvalue=lambda name: "load")
    assert xdist_groups.make_scheduler(config_load, None) is None              # other modes: xdist's own


def test_the_named_files_are_in_the_tree():
    """The units name test files by name and by path: a moved or renamed file would silently leave its unit."""
    names = {p.name for p in (TREE / "tests").rglob("test_*.py")}
    assert xdist_groups.OWN_ENGINES <= names, sorted(xdist_groups.OWN_ENGINES - names)
    assert (TREE / xdist_groups.SECOND).is_file(), xdist_groups.SECOND
