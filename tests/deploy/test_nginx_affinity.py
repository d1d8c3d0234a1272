"""Scale-out: Debian's nginx in front of two backend replicas (real servers — uvicorn, HTTP, WebSockets — each
with its own replica_id, over the fake engine: what is tested is nginx and our routing, not vLLM), configured
by deploy/nginx/render.py. Each user always lands on the same replica (the
welcome frame names it), users spread over both, WebSocket streaming and SSE pass through the proxy, and
when a replica goes away only its users move (consistent hashing). A replica whose engine is still starting
(restarted after a crash, say) takes no sessions: its users are served by the other one meanwhile, and it
takes every user as soon as it is ready and the other one goes.
"""
from __future__ import annotations

import collections
import importlib.util
import shutil
import socket
import subprocess
import threading
import time

import httpx
import pytest

from quickcode.backend.launch import free_port
from tests.conftest import ARTIFACTS, REPO, fake_server, fake_settings
from tests.support.waits import until
from tests.support.ws_helpers import complete, open_session

pytestmark = [pytest.mark.nginx]

N_USERS, CONNS_PER_USER = 40, 3

_spec = importlib.util.spec_from_file_location("qc_nginx_render", REPO / "deploy" / "nginx" / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)


def test_committed_config_is_the_generators_output():
    assert (REPO / "deploy" / "nginx" / "quickcode.conf").read_text() == render.render(render.EXAMPLE_BACKENDS)


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"nginx exited with {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nginx did not listen on {port}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nginx = shutil.which("nginx", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if nginx is None:
        pytest.fail("nginx is not installed: `scripts/setup.sh nginx` installs Debian's package")
    with fake_server(replica_id="replica-a") as replica_a, fake_server(replica_id="replica-b") as replica_b:
        yield from _behind_nginx(nginx, replica_a, replica_b, tmp_path_factory)


def _behind_nginx(nginx: str, replica_a, replica_b, tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("nginx"))
    port = free_port()
    conf = render.render_standalone([f"127.0.0.1:{replica_a.port}", f"127.0.0.1:{replica_b.port}"],
                                    f"127.0.0.1:{port}", prefix)
    conf_path = f"{prefix}/nginx.conf"
    with open(conf_path, "w") as f:
        f.write(conf)
    check = subprocess.run([nginx, "-t", "-p", prefix, "-c", conf_path, "-e", f"{prefix}/error.log"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([nginx, "-p", prefix, "-c", conf_path, "-e", f"{prefix}/error.log"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, proc)
        direct, w = open_session(replica_a.ws_url)
        direct.close()
        yield {"port": port, "ws": f"ws://127.0.0.1:{port}/v1/ws", "http": f"http://127.0.0.1:{port}",
               "replicas": {w["replica"]: replica_a, "replica-b": replica_b}, "prefix": prefix}
    finally:
        proc.terminate()
        proc.wait(10)
        (ARTIFACTS / "logs").mkdir(parents=True, exist_ok=True)
        shutil.copy(f"{prefix}/error.log", ARTIFACTS / "logs" / "nginx-error.log")


def _key(i: int) -> dict:
    """Half the users are named by an API token (open server: not checked), half by X-Quickcode-User."""
    return {"token": f"qc_user-{i}-token"} if i % 2 else {"headers": {"X-Quickcode-User": f"user-{i}"}}


def _replica_of(cluster, i: int) -> str:
    ws, welcome = open_session(cluster["ws"], **_key(i))
    ws.close()
    return welcome["replica"]


def test_each_user_sticks_to_one_replica_and_users_spread(cluster):
    homes: dict[int, set[str]] = collections.defaultdict(set)
    for _round in range(CONNS_PER_USER):
        for i in range(N_USERS):
            homes[i].add(_replica_of(cluster, i))
    moved = {i: h for i, h in homes.items() if len(h) != 1}
    assert not moved, f"users seen on more than one replica: {moved}"
    spread = collections.Counter(next(iter(h)) for h in homes.values())
    print(f"\nnginx consistent hashing: {N_USERS} users x {CONNS_PER_USER} connections → {dict(spread)}")
    assert set(spread) == set(cluster["replicas"]), spread
    assert min(spread.values()) >= N_USERS // 8, spread


def test_streaming_passes_through_the_proxy(cluster):
    ws, welcome = open_session(cluster["ws"], headers={"X-Quickcode-User": "streamer"})
    with ws:
        r = complete(ws, "via-nginx", max_tokens=8)
        assert r.kind == "done" and r.chunks >= 1
    with httpx.Client(timeout=60) as http:
        with http.stream("POST", f"{cluster['http']}/v1/completions", headers={"X-Quickcode-User": "streamer"},
                         json={"prompt": "def f(x):\n", "max_tokens": 8, "stream": True}) as resp:
            assert resp.status_code == 200
            events = [line for line in resp.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]" and len(events) >= 3
        assert http.get(f"{cluster['http']}/readyz", headers={"X-Quickcode-User": "streamer"}).json()["replica"] \
            == welcome["replica"]


def test_losing_a_replica_moves_only_its_users(cluster):
    before = {i: _replica_of(cluster, i) for i in range(N_USERS)}
    cluster["replicas"]["replica-b"].stop()
    t0 = time.perf_counter()
    after = {i: _replica_of(cluster, i) for i in range(N_USERS)}
    elapsed = time.perf_counter() - t0
    survivor = next(r for r in cluster["replicas"] if r != "replica-b")
    assert set(after.values()) == {survivor}
    stayed = [i for i in before if before[i] == survivor]
    assert all(after[i] == survivor for i in stayed)
    print(f"\nreplica-b gone: {sum(1 for i in before if before[i] == 'replica-b')} users moved, {len(stayed)} stayed; "
          f"{N_USERS} reconnects through nginx took {elapsed * 1000:.0f} ms")


def test_a_starting_replica_sends_its_users_to_the_other(tmp_path_factory):
    from quickcode.backend.fake_engine import FakeEngine
    from quickcode.backend.launch import InProcessBackend

    nginx = shutil.which("nginx", path="/usr/sbin:/usr/bin:/sbin:/bin")
    gate = threading.Event()
    settings = fake_settings(replica_id="replica-b")
    with fake_server(replica_id="replica-a") as replica_a, \
            InProcessBackend(settings, FakeEngine(settings, hold_start=gate), wait_ready=False) as replica_b:
        gen = _behind_nginx(nginx, replica_a, replica_b, tmp_path_factory)
        c = next(gen)
        try:
            served = collections.Counter()
            for i in range(N_USERS):       # half of them hash to replica-b, whose engine is starting
                ws, welcome = open_session(c["ws"], **_key(i))
                with ws:
                    r = complete(ws, f"u{i}", max_tokens=2)
                served[(welcome["replica"], r.kind)] += 1
            assert served == {("replica-a", "done"): N_USERS}, served
            gate.set()                     # once it serves, it takes sessions again
            until(lambda: replica_b.app.state.backend.engine.ready, "replica-b's engine to start")
            ws, welcome = open_session(replica_b.ws_url)
            with ws:
                assert welcome["replica"] == "replica-b" and complete(ws, "b", max_tokens=2).kind == "done"
            # then the other replica goes (drained, say): every user's next session is replica-b's at once,
            # though replica-b refused sessions through this nginx moments ago (no 502 "no live upstreams")
            replica_a.stop()
            after = collections.Counter(_replica_of(c, i) for i in range(N_USERS))
            assert after == {"replica-b": N_USERS}, after
        finally:
            gen.close()
