"""tests/xdist_groups.py: which tests share a pytest-xdist worker in `make test`."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests import xdist_groups

REPO = Path("/repo")


def item(file: str, name: str, *fixtures: str):
    path = REPO / "tests" / file
    return SimpleNamespace(path=path, nodeid=f"tests/{file}::{name}", fixturenames=list(fixtures))


def test_a_file_stays_whole_and_every_user_of_the_session_backend_shares_one_unit():
    items = [item("test_a.py", "t1"), item("test_a.py", "t2", "tmp_path"),
             item("test_b.py", "t1"), item("test_b.py", "t2", "regions", "backend"),   # through another fixture
             item("e2e/test_c.py", "t1", "backend"), item("test_pipeline.py", "t1")]
    units = xdist_groups.units(items, REPO)
    assert units["tests/test_a.py::t1"] == units["tests/test_a.py::t2"] == "tests/test_a.py"
    assert {units[i.nodeid] for i in items[2:5]} == {"session-backend"}      # test_b.py's t1 goes with its file
    assert units["tests/test_pipeline.py::t1"] == "own-engines"


def test_the_own_engines_unit_comes_first_the_container_second_and_the_rest_keeps_its_order():
    items = [item("test_a.py", "t1"), item("test_containers.py", "t1"), item("test_faults_backend.py", "t1"),
             item("test_b.py", "t1"), item("test_byo_model.py", "t1"), item("test_a.py", "t2")]
    units = xdist_groups.units(items, REPO)
    xdist_groups.order_first(items, units)
    assert [i.nodeid for i in items] == ["tests/test_faults_backend.py::t1", "tests/test_byo_model.py::t1",
                                         "tests/test_containers.py::t1", "tests/test_a.py::t1",
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
