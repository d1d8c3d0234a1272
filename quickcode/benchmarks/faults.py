"""`quickcode bench faults`: faults while many developers type. Simulated editors
(quickcode/benchmarks/editor_sim.py, each a real `quickcode lsp` with its own API token) type held-out code
through a network namespace's veth (quickcode/benchmarks/regions.py) into nginx (deploy/nginx, users hashed to
replicas) in front of light-profile backend replicas; one fault after another, each after a baseline period
and followed by a recovery period:

  engine_kill    kill -9 of one replica's EngineCore: /healthz turns red and this bench, the orchestrator (a
                 liveness probe, as Kubernetes runs one), restarts that replica: its sessions close, the
                 language servers reconnect through nginx, which sends them to the other replica meanwhile
  link_down      the veth between the language servers and nginx down for --link-down-s, then up again
  drain          SIGTERM to one replica: it drains (shutdown_drain_s), closes its sessions 1001 and exits; its
                 users reconnect through nginx to the other; the orchestrator starts it again
  log_disk_full  the disk the replicas log to (a tmpfs) filled to ENOSPC for --fill-s while they serve

Per fault: how long until each affected editor is shown a new suggestion (from the fault's start; from the
link's return for link_down), keystrokes whose request the editor saw answered with an error, error messages
shown, requests never answered (or after --hang-s), language servers that stop answering a status probe, and
cross-user answers (each suggestion's backend request id against the (user, request id) pairs of the
backends' access logs). Exits 1 when any fault shows an error, a hang, a cross-user answer, or an affected
editor shown nothing new within the recovery window (--recover-s after the fault's end).

One run at a time (a lock in the temp folder); a run first removes what a killed one left
(quickcode/benchmarks/fault_leftovers.py), and SIGTERM or SIGHUP leave through the same cleanup as Ctrl-C.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from quickcode.benchmarks import fault_figures as ff
from quickcode.benchmarks import fault_leftovers as fl
from quickcode.benchmarks.report import Report, figure, md_table

FAULTS = ("engine_kill", "link_down", "drain", "log_disk_full")
REF = {"engine_kill": "start", "link_down": "end", "drain": "start", "log_disk_full": "start"}
REPO = Path(__file__).resolve().parents[2]
SUBNET = 79                  # 10.79.0.x: apart from the multi-region tests' 10.78
NGINX_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--editors", type=int, default=6, help="simulated editors typing at once (one user each)")
    p.add_argument("--replicas", type=int, choices=(1, 2), default=2,
                   help="backend replicas behind nginx (engine_kill and drain need 2)")
    p.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, in order: {', '.join(FAULTS)}")
    p.add_argument("--baseline-s", type=float, default=10.0, help="typing before each fault")
    p.add_argument("--recover-s", type=float, default=60.0,
                   help="typing after each fault's end: an editor shown nothing new by then is not recovered")
    p.add_argument("--link-down-s", type=float, default=8.0, help="how long the link stays down")
    p.add_argument("--fill-s", type=float, default=15.0, help="how long the log disk stays full")
    p.add_argument("--drain-s", type=float, default=3.0, help="the replicas' shutdown_drain_s")
    p.add_argument("--hang-s", type=float, default=10.0, help="a request unanswered this long is hung")
    p.add_argument("--liveness-period-s", type=float, default=1.0, help="the orchestrator's /healthz period")
    p.add_argument("--restart-timeout-s", type=float, default=600.0,
                   help="how long a fault waits for the orchestrator (a replica stopped, started again)")
    p.add_argument("--log-disk-mib", type=int, default=64, help="the size of the replicas' log tmpfs")
    p.add_argument("--speed", type=float, default=1.5, help="typing speed multiple")
    p.add_argument("--segments-per-editor", type=int, default=64,
                   help="distinct stretches of code each editor types (more than a run uses: text typed again is "
                        "answered from the language server's cache, which would hide an outage)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


def _say(msg: str) -> None:
    print(f"[faults] {msg}", file=sys.stderr, flush=True)


def _nginx_render():
    spec = importlib.util.spec_from_file_location("qc_nginx_render", REPO / "deploy" / "nginx" / "render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wait_listening(host: str, port: int, what: str, timeout_s: float = 30.0) -> None:
    from quickcode.benchmarks.regions import listening

    deadline = time.monotonic() + timeout_s
    while not listening(host, port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on {host}:{port}")
        time.sleep(0.05)


def _http_status(url: str, timeout_s: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return None


class Cluster:
    """The backend replicas (restarted on the same port: a new incarnation, replica id `NAME-K`), their logs
    on the log disk."""

    def __init__(self, names: list[str], log_dir: Path, tokens_file: Path, drain_s: float):
        from quickcode.backend.launch import free_port

        self.names, self.log_dir, self.tokens_file, self.drain_s = names, log_dir, tokens_file, drain_s
        self.ports = {n: free_port() for n in names}
        self.running: dict = {}
        self.incarnations = {n: 0 for n in names}
        self.restarting: set[str] = set()
        self.events: list[dict] = []
        self.starting: dict[str, int] = {}       # replica → pid of its process while it starts

    def start(self, name: str):
        from quickcode.backend.launch import start_backend

        self.incarnations[name] += 1
        k = self.incarnations[name]
        try:
            b = start_backend(self.log_dir / f"replica-{name}-{k}.log", "profile=light", f"replica_id={name}-{k}",
                              "access_log=true", f"auth_tokens_file={self.tokens_file}",
                              f"shutdown_drain_s={self.drain_s}", port=self.ports[name],
                              env=self.engine_env(name), on_wait=lambda s: self._note_starting(name))
        finally:
            self.starting.pop(name, None)
        self.running[name] = b
        return b

    def engine_env(self, name: str) -> dict[str, str]:
        """Each replica's engine on a core of its own, as on hosts of their own: vLLM's automatic binding
        (VLLM_CPU_OMP_THREADS_BIND=auto) pins every replica's worker to the same core, where a restarting
        worker starves behind the serving one's threads. Too few cores: vLLM's own choice."""
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < len(self.names):
            return {}
        return {"VLLM_CPU_OMP_THREADS_BIND": str(cores[self.names.index(name)])}

    def _note_starting(self, name: str) -> None:
        """Which process is starting replica `name` (so that the run's end can stop a start under way)."""
        import psutil

        if name not in self.starting:
            for c in psutil.Process().children():
                with contextlib.suppress(psutil.Error):
                    if f"--port {self.ports[name]}" in " ".join(c.cmdline()):
                        self.starting[name] = c.pid

    def abort_starts(self) -> None:
        """Kill the replicas still starting (their start_backend then fails at once)."""
        for pid in list(self.starting.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def stop(self, name: str, timeout_s: float = 30.0) -> None:
        from quickcode.backend.launch import stop_backend

        b = self.running.get(name)
        if b is not None:
            stop_backend(b, timeout_s)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(b.proc.pid, signal.SIGKILL)     # the engine's processes too, whatever was left

    def stop_all(self) -> None:
        for n in list(self.running):
            self.stop(n)

    def log_lines(self) -> list[str]:
        lines = []
        for f in sorted(self.log_dir.glob("replica-*.log")):
            lines += f.read_text(errors="replace").splitlines()
        return lines


class Editor:
    """One simulated developer: a language server of its own, a user of its own, typing until told to stop."""

    def __init__(self, i: int, url: str, token: str, work: Path, segments: list, speed: float, t0: float):
        from quickcode.benchmarks.editor_sim import SimEditor, lsp_command

        self.i, self.user, self.segments, self.speed, self.t0 = i, f"dev{i}", segments, speed, t0
        init = {"endpoints": [url], "token": token, "state_dir": str(work / f"state-{i}")}
        self.log_path = work / f"lsp-{i}.log"      # its own trace: the sessions it held
        self.sim = SimEditor(lsp_command(), init_options=init, seed=1000 + i,
                             env={"QUICKCODE_LSP_LOG": str(self.log_path)})
        self.results: list = []
        self.segments_typed = 0
        self.messages: list[dict] = []
        self.probes: list[dict] = []

        @self.sim.client.feature("window/showMessage")
        def _message(params):
            self.messages.append({"t_s": self.now(), "type": int(getattr(params, "type", 0) or 0),
                                  "text": str(getattr(params, "message", ""))[:200]})

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def _at(self, t_ms: float | None) -> float | None:
        return None if t_ms is None else self.sim.t0 - self.t0 + t_ms / 1000

    async def type_until(self, stop: asyncio.Event) -> None:
        from quickcode.benchmarks.editor_sim import SessionResult, TypingModel

        k = 0
        while not stop.is_set():
            self.segments_typed = k + 1
            path, before, target = self.segments[k % len(self.segments)]
            self.sim.open(f"file:///faults/{self.user}/{k}/{path.name}", before)
            res = SessionResult()
            self.results.append(res)
            await self.sim.type_text(target, TypingModel(speed=self.speed), res=res)
            k += 1

    async def probe_until(self, stop: asyncio.Event, hang_s: float) -> None:
        """The language server answers a status request every second (else it hangs), and says its replica."""
        while not stop.is_set():
            t = self.now()
            try:
                st = await asyncio.wait_for(self.sim.command("quickcode.status"), hang_s)
                self.probes.append({"t_s": t, "ok": True, "replica": st.get("replica") or "",
                                    "connected": bool(st.get("connected"))})
            except Exception as e:   # a timeout, or the process gone: either way it stopped answering
                self.probes.append({"t_s": t, "ok": False, "replica": "", "connected": False, "error": repr(e)})
            await asyncio.sleep(1.0)

    def replica(self) -> str:
        """The replica (name, no incarnation) the language server was last connected to."""
        for p in reversed(self.probes):
            if p["connected"]:
                return p["replica"].split("-", 1)[0]
        return ""

    def record(self) -> dict:
        asks, shows = [], []
        for res in self.results:
            asks += [{"t_s": self._at(a["t_ms"]), "end_s": self._at(a.get("end_ms")), "outcome": a["outcome"]}
                     for a in res.asks]
            shows += [{"t_s": self._at(s["t_ms"]), "id": s["id"]} for s in res.shows if s.get("id")]
        lines = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        return {"user": self.user, "sessions": sorted(ff.sessions_of(lines)), "asks": asks, "shows": shows,
                "messages": self.messages, "probes": self.probes,
                "keystrokes": sum(r.keystrokes for r in self.results),
                "segments_typed": self.segments_typed, "segments": len(self.segments),
                "accepted_chars": sum(r.accepted_chars for r in self.results)}


class LogDisk:
    """A small tmpfs the replicas log to; `fill()` writes zeros until ENOSPC, `free()` removes them."""

    def __init__(self, path: Path, size_mib: int):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)], check=True)
        self.mounted = True
        self.filler = path / "fill"

    def fill(self) -> int:
        written = 0
        with open(self.filler, "wb", buffering=0) as f:
            for chunk in (1 << 20, 4096, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        written += f.write(block)
                    except OSError:
                        break
        return written

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False)
            self.mounted = False


async def _orchestrate(cluster: Cluster, stop: asyncio.Event, period_s: float, t0: float) -> None:
    """The orchestrator: a replica whose /healthz is red, or whose process exited, is (re)started."""
    while not stop.is_set():
        for name in cluster.names:
            b = cluster.running.get(name)
            if b is None or name in cluster.restarting:
                continue
            exited = b.proc.poll() is not None
            red = not exited and await asyncio.to_thread(_http_status, f"{b.http_url}/healthz") == 503
            if not (exited or red):
                continue
            cluster.restarting.add(name)
            t = time.perf_counter() - t0
            _say(f"orchestrator: replica {name} {'exited' if exited else '/healthz red'} at {t:.1f} s: restarting")
            cluster.events.append({"t_s": t, "replica": name, "what": "exited" if exited else "healthz_red"})
            if not exited:
                await asyncio.to_thread(cluster.stop, name)
                cluster.events.append({"t_s": time.perf_counter() - t0, "replica": name, "what": "stopped"})
            try:
                await asyncio.to_thread(cluster.start, name)
                t = time.perf_counter() - t0
                cluster.events.append({"t_s": t, "replica": name, "what": "ready"})
                _say(f"orchestrator: replica {name} ready again at {t:.1f} s")
            except RuntimeError as e:   # it did not come back: tried again at the next probe (a crash loop)
                cluster.events.append({"t_s": time.perf_counter() - t0, "replica": name, "what": "failed"})
                _say(f"orchestrator: replica {name} did not start again: {str(e)[:300]}")
            finally:
                cluster.restarting.discard(name)
        await asyncio.sleep(period_s)


def _engine_core(b):
    import psutil

    for p in psutil.Process(b.proc.pid).children(recursive=True):
        if p.name() == "VLLM::EngineCore":
            return p
    raise RuntimeError(f"no EngineCore under the backend process {b.proc.pid}")


async def _wait_event(cluster: Cluster, name: str, what: tuple[str, ...], after_s: float, timeout_s: float) -> None:
    """Until the orchestrator has logged one of `what` for replica `name` after `after_s`."""
    deadline = time.monotonic() + timeout_s
    while not any(e["replica"] == name and e["what"] in what and e["t_s"] > after_s for e in cluster.events):
        if time.monotonic() > deadline:
            raise RuntimeError(f"replica {name}: no {' or '.join(what)} in {timeout_s:g} s")
        await asyncio.sleep(0.2)


async def _not_serving(cluster: Cluster) -> list[str]:
    """The replicas not serving now: being restarted, exited, or /readyz not 200."""
    out = []
    for n in cluster.names:
        b = cluster.running.get(n)
        if n in cluster.restarting or b is None or b.proc.poll() is not None or \
                await asyncio.to_thread(_http_status, f"{b.http_url}/readyz") != 200:
            out.append(n)
    return out


async def _wait_all_ready(cluster: Cluster, timeout_s: float) -> None:
    """Until every replica serves (a fault on one replica needs the other serving; a restart that failed is no
    longer `restarting` but does not serve either)."""
    deadline = time.monotonic() + timeout_s
    while down := await _not_serving(cluster):
        if time.monotonic() > deadline:
            raise RuntimeError(f"replicas {', '.join(down)} not ready again in {timeout_s:g} s")
        await asyncio.sleep(0.5)


async def _schedule(args, names: list[str], cluster: Cluster, region, disk: LogDisk, editors: list[Editor],
                    t0: float) -> list[dict]:
    now = lambda: time.perf_counter() - t0
    out = []
    for name in names:
        if name in ("engine_kill", "drain") and (down := await _not_serving(cluster)):
            _say(f"{now():.1f} s: {name} waits for replicas {', '.join(down)} to be ready")
            try:
                await _wait_all_ready(cluster, args.restart_timeout_s)
            except RuntimeError as e:
                _say(f"{now():.1f} s: {name} skipped: {e}")
                out.append({"name": name, "skipped": str(e)})
                continue
        await asyncio.sleep(args.baseline_s)
        shown = sum(len(r.shows) for e in editors for r in e.results)
        by_replica: dict[str, list[str]] = {}
        for e in editors:
            by_replica.setdefault(e.replica(), []).append(e.user)
        target = max(cluster.names, key=lambda n: len(by_replica.get(n, [])))
        affected = [e.user for e in editors] if name in ("link_down", "log_disk_full") else by_replica.get(target, [])
        t_start = now()
        detail = ""
        if name == "engine_kill":
            core = _engine_core(cluster.running[target])
            core.kill()
            detail = f"replica {target}'s EngineCore (pid {core.pid}) killed"
            _say(f"{t_start:.1f} s: {detail}; {len(affected)} editors on it ({shown} suggestions shown so far)")
            # the fault lasts until the orchestrator has stopped the replica (its users go to the other); the
            # restart goes on meanwhile
            await _wait_event(cluster, target, ("stopped", "exited"), t_start, args.restart_timeout_s)
        elif name == "drain":
            os.kill(cluster.running[target].proc.pid, signal.SIGTERM)
            detail = f"SIGTERM to replica {target} (drain {args.drain_s:g} s)"
            _say(f"{t_start:.1f} s: {detail}; {len(affected)} editors on it ({shown} suggestions shown so far)")
            await _wait_event(cluster, target, ("exited",), t_start, args.restart_timeout_s)   # the drain is over
        elif name == "link_down":
            region.link(False)
            detail = f"the veth to nginx down for {args.link_down_s:g} s"
            _say(f"{t_start:.1f} s: {detail} ({shown} suggestions shown so far)")
            await asyncio.sleep(args.link_down_s)
            region.link(True)
        elif name == "log_disk_full":
            written = await asyncio.to_thread(disk.fill)
            detail = f"the log disk filled ({written / (1 << 20):.1f} MiB written to ENOSPC) for {args.fill_s:g} s"
            _say(f"{t_start:.1f} s: {detail} ({shown} suggestions shown so far)")
            await asyncio.sleep(args.fill_s)
            alive = {n: "restarting" if n in cluster.restarting else
                     "yes" if cluster.running[n].proc.poll() is None else "NO" for n in cluster.names}
            disk.free()
            detail += "; replicas alive at its end: " + ", ".join(f"{n} {a}" for n, a in alive.items())
        t_end = now()
        _say(f"{t_end:.1f} s: {name} over ({t_end - t_start:.1f} s); recovery period {args.recover_s:g} s")
        await asyncio.sleep(args.recover_s)
        out.append({"name": name, "t_start_s": t_start, "t_end_s": t_end, "t_stop_s": now(), "ref": REF[name],
                    "affected": affected, "target": target if name in ("engine_kill", "drain") else "",
                    "detail": detail})
    return out


async def _run_editors(args, names, cluster, region, disk, url, tokens, work, segments) -> tuple:
    """Start the editors; once every one is connected (the run's time 0) type through the faults: (time 0 as
    perf_counter, the faults, the editors' records)."""
    t0 = time.perf_counter()
    editors = [Editor(i, url, tokens[i], work, segments[i::args.editors] or segments, args.speed, t0)
               for i in range(args.editors)]
    stop_typing, stop_probes = asyncio.Event(), asyncio.Event()
    started, tasks = [], []
    try:
        for e in editors:
            await e.sim.start()
            started.append(e)
        for e in editors:
            for _ in range(600):
                if (await e.sim.command("quickcode.status")).get("connected"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"{e.user}'s language server did not connect")
        t0 = time.perf_counter()
        for e in editors:
            e.t0 = t0
        probes = [asyncio.create_task(e.probe_until(stop_probes, args.hang_s)) for e in editors]
        orch = asyncio.create_task(_orchestrate(cluster, stop_probes, args.liveness_period_s, t0))
        tasks += [asyncio.create_task(e.type_until(stop_typing)) for e in editors] + probes + [orch]
        faults = await _schedule(args, names, cluster, region, disk, editors, t0)
        stop_typing.set()
        typing = tasks[: len(editors)]
        for t in typing:
            t.cancel()
        await asyncio.gather(*typing, return_exceptions=True)
        # requests still open get their answer (or are hung): wait up to hang_s for every one
        deadline = time.monotonic() + args.hang_s
        while time.monotonic() < deadline and any(a["outcome"] is None for e in editors for r in e.results
                                                  for a in r.asks):
            await asyncio.sleep(0.1)
        stop_probes.set()
        cluster.abort_starts()                # a restart under way at the end is not waited for
        await asyncio.gather(*probes, orch, return_exceptions=True)
        return t0, faults, [e.record() for e in editors]
    finally:
        stop_typing.set()
        stop_probes.set()
        cluster.abort_starts()
        for t in tasks:
            if not t.done() and t is not tasks[-1]:     # the orchestrator ends by itself (a restart under way)
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for e in started:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(e.sim.stop(), 10)


def run(args: argparse.Namespace) -> dict:
    from quickcode.backend import auth
    from quickcode.benchmarks import regions
    from quickcode.benchmarks.typing import _segments, held_out_files

    names = [n.strip() for n in args.faults.split(",") if n.strip()]
    if not names or not set(names) <= set(FAULTS):
        raise SystemExit(f"--faults: some of {', '.join(FAULTS)} (got {args.faults!r})")
    if args.replicas < 2 and {"engine_kill", "drain"} & set(names):
        raise SystemExit("engine_kill and drain need --replicas 2 (their users move to the other replica)")
    if os.geteuid() != 0:
        raise SystemExit("quickcode bench faults needs root: network namespaces and a tmpfs mount")
    nginx = shutil.which("nginx", path=NGINX_PATH)
    if nginx is None:
        raise SystemExit("nginx is not installed: `scripts/setup.sh nginx` installs Debian's package")
    started_s = time.time()
    tmp = Path(tempfile.gettempdir())
    lock = fl.hold_lock(tmp)
    if lock is None:
        raise SystemExit(f"another `quickcode bench faults` is running (it holds {tmp / fl.LOCK_NAME})")
    if removed := fl.sweep(tmp, lock):
        _say("removed what a killed run left: "
             + "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in removed.items()))
    work = Path(tempfile.mkdtemp(prefix=fl.WORK_PREFIX))
    tokens_file = work / "tokens"
    tokens = [auth.issue(tokens_file, f"dev{i}") for i in range(args.editors)]
    disk = cluster = region_list = nginx_proc = None
    handlers = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        disk = LogDisk(work / "logdisk", args.log_disk_mib)
        cluster = Cluster(["a", "b"][: args.replicas], disk.path, tokens_file, args.drain_s)
        _say(f"starting {args.replicas} light-profile replica(s) (logs on a {args.log_disk_mib} MiB tmpfs)")
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(cluster.start, cluster.names))
        prefix = work / "nginx"
        render = _nginx_render()
        nginx_port = _free_port()
        conf = render.render_standalone([f"127.0.0.1:{cluster.ports[n]}" for n in cluster.names],
                                        f"127.0.0.1:{nginx_port}", str(prefix))
        (prefix / "nginx.conf").write_text(conf)
        nginx_proc = subprocess.Popen([nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e",
                                       str(prefix / "error.log")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_listening("127.0.0.1", nginx_port, "nginx")
        tag = f"f{os.getpid() % 1000}"
        fl.note_owned(work, netns=[f"qc{tag}r0"], links=[f"qc{tag}h0"])   # before they exist: a kill meanwhile
        region_list = regions.create([0.0], nginx_port, tag=tag, subnet=SUBNET)
        region = region_list[0]
        fl.note_owned(work, pids=[p.pid for p in region.procs])
        _wait_listening(region.host_ip, region.relay_port, "the root namespace's relay")
        _wait_listening(region.ns_ip, region.port, "the namespace's forwarding host")
        segments = list(dict.fromkeys(_segments(held_out_files(args), args.segments_per_editor * args.editors,
                                                400, args.seed)))
        _say(f"{args.editors} editors typing through {region.url} → nginx :{nginx_port} → replicas "
             f"{', '.join(f'{n} :{p}' for n, p in cluster.ports.items())}; faults {', '.join(names)}")
        t0, faults, editors = asyncio.run(_run_editors(args, names, cluster, region, disk, region.url, tokens,
                                                       work, segments))
        run_s = time.perf_counter() - t0
        log_lines = cluster.log_lines()
        restarts = list(cluster.events)
    finally:
        if cluster is not None:
            cluster.stop_all()
        if region_list:
            regions.destroy(region_list)
        if nginx_proc is not None:
            nginx_proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                nginx_proc.wait(10)
        if disk is not None:
            if disk.mounted and cluster is not None:
                keep = work / "logs"
                keep.mkdir(exist_ok=True)
                for f in disk.path.glob("replica-*.log"):
                    shutil.copy(f, keep / f.name)
            disk.unmount()
        for sig, h in handlers.items():
            signal.signal(sig, h)
        (work / fl.OWNED).unlink(missing_ok=True)     # all of it removed: nothing for the next run's sweep
        lock.close()
    return _report(args, faults, editors, ff.served_by(log_lines), restarts, run_s, started_s, work)


def _exit_on_signal(signum, _frame) -> None:
    """SIGTERM or SIGHUP: leave through the run's cleanup (replicas, namespace, tmpfs), as Ctrl-C does."""
    raise SystemExit(128 + signum)


def _free_port() -> int:
    from quickcode.backend.launch import free_port

    return free_port()


def _fmt_s(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def _report(args, faults: list[dict], editors: list[dict], served: dict, restarts: list[dict], run_s: float,
            started_s: float, work: Path) -> dict:
    skipped = {f["name"]: f["skipped"] for f in faults if "skipped" in f}
    faults = [f for f in faults if "skipped" not in f]
    figs = [ff.fault_figures(f, editors, served, args.hang_s) for f in faults]
    whole = ff.fault_figures({"name": "whole run", "t_start_s": 0.0, "t_end_s": run_s, "t_stop_s": run_s + 1e9,
                              "ref": "start", "affected": []}, editors, served, args.hang_s)
    failed = {f["name"]: ff.failures(f) for f in [*figs, whole] if ff.failures(f)}
    failed.update({name: [f"not run: {why}"] for name, why in skipped.items()})
    rep = Report("faults", "Faults while typing: recovery, errors shown, hangs, cross-user answers", out=args.out)
    rep.started = started_s
    rep.add(f"{args.editors} simulated editors (editor_sim, VS Code's way of asking; each its own `quickcode lsp` "
            f"and API token) typed held-out code at speed ×{args.speed:g} for {run_s:.0f} s through a network "
            f"namespace's veth into nginx (users hashed to replicas) in front of {args.replicas} light-profile "
            f"replica(s) (shutdown_drain_s {args.drain_s:g} s, logs on a {args.log_disk_mib} MiB tmpfs; each "
            "replica's engine on a core of its own when there are enough: VLLM_CPU_OMP_THREADS_BIND). Each fault "
            f"came after {args.baseline_s:g} s of typing and was followed by {args.recover_s:g} s of it: an "
            "affected editor shown nothing new by the end of that is *not recovered* within the window "
            "(from the recovery's reference to that end), and fails the run. Each editor typed distinct "
            f"stretches of code ({_typed(editors)}): text typed again would be answered from the language "
            "server's cache and hide an outage. The "
            f"orchestrator (this bench, probing /healthz every {args.liveness_period_s:g} s as a liveness probe "
            "would) restarts a replica whose /healthz is red or whose process exited. Recovery: from the fault's "
            "start (from the link's return for link_down) to the first new suggestion (a backend request not "
            "shown before; not the language server's own completions of the document's words) each affected "
            "editor was shown. A request is hung when unanswered after "
            f"{args.hang_s:g} s; a language server is hung when a status request goes unanswered that long. A "
            "cross-user answer: a suggestion whose backend request (session and request id, the sessions "
            "from the language server's own log) the access logs name for another user; unattributed: no "
            "access line names it (lines lost while the log disk was full).")
    rows = []
    for f, fault in zip(figs, faults):
        rows.append([f["name"], f["affected"], _fmt_s(f["recovery_p50_s"]), _fmt_s(f["recovery_max_s"]),
                     f["not_recovered"], f["errors_shown"], f["error_messages"], f["hung_requests"],
                     f["hung_probes"], f["cross"], f["unattributed"], f["shown"]])
    heads = ["fault", "affected editors", "recovery p50 s", "recovery max s", "not recovered",
             "keystrokes with an error shown", "error messages", "hung requests", "unanswered status probes",
             "cross-user answers", "unattributed", "suggestions shown"]
    rep.add("## Summary\n\n" + md_table(heads, rows) + "\n\nOver the whole run: "
            + ", ".join(f"{k.replace('_', ' ')} {whole[k]}" for k in
                        ("requests", "shown", "errors_shown", "error_messages", "hung_requests", "hung_probes",
                         "ours", "cross", "unattributed", "local")) + ".")
    for f, fault in zip(figs, faults):
        by_user = ", ".join(f"{u} {_fmt_s(r)}" if r is not None else f"{u} not within {f['window_s']:.0f}"
                            for u, r in sorted(f["recovery_by_user_s"].items()))
        why = ff.why_not_recovered(fault, f, editors)
        table = md_table(["figure", "value"], [
            ["what", fault["detail"]],
            ["fault lasted (s)", f"{f['duration_s']:.1f}"],
            ["recovery timed from", "the link's return" if f["ref"] == "end" else "the fault's start"],
            ["affected editors", f"{f['affected']} ({', '.join(fault['affected']) or 'none'})"],
            ["recovery p50 / max (s)", f"{_fmt_s(f['recovery_p50_s'])} / {_fmt_s(f['recovery_max_s'])}"],
            ["recovery window (s)", f"{f['window_s']:.0f}"],
            ["recovery by editor (s)", by_user or "–"],
            ["what the editors not recovered saw", "; ".join(f"{u}: {w}" for u, w in why.items()) or "–"],
            ["the replica each one's first new suggestion came from",
             ", ".join(f"{r} ×{n}" for r, n in sorted(ff.recovered_on(fault, f, editors).items())) or "–"],
            ["keystrokes with an error shown", f["errors_shown"]],
            ["error messages shown", f["error_messages"]],
            ["hung requests / unanswered status probes", f"{f['hung_requests']} / {f['hung_probes']}"],
            ["suggestions: this user's / cross-user / unattributed / the language server's own (no request)",
             f"{f['ours']} / {f['cross']} / {f['unattributed']} / {f['local']}"],
            ["requests asked / suggestions shown (all editors)", f"{f['requests']} / {f['shown']}"],
            ["passed", "yes" if not ff.failures(f) else "no: " + "; ".join(ff.failures(f))]])
        rep.add(f"## {f['name']}\n\n{table}")
    for name, why in skipped.items():
        rep.add(f"## {name}\n\nNot run: {why}.")
    if restarts:
        rep.add("**Orchestrator**: " + "; ".join(f"{e['t_s']:.1f} s replica {e['replica']} {e['what']}"
                                                 for e in restarts) + ".")
    _plot(rep, editors, faults, run_s)
    headline = {"editors": args.editors, "replicas": args.replicas, "run_s": round(run_s, 1),
                "passed": not failed, "failed": failed,
                "faults": {f["name"]: {"affected": f["affected"], "recovery_p50_s": _r(f["recovery_p50_s"]),
                                       "recovered_on": ff.recovered_on(fault, f, editors),
                                       "recovery_max_s": _r(f["recovery_max_s"]), "not_recovered": f["not_recovered"],
                                       "window_s": _r(f["window_s"]),
                                       "errors_shown": f["errors_shown"], "error_messages": f["error_messages"],
                                       "hung": f["hung_requests"] + f["hung_probes"], "cross_user": f["cross"],
                                       "unattributed": f["unattributed"]} for f, fault in zip(figs, faults)},
                "shown": whole["shown"], "requests": whole["requests"],
                "accepted_chars": sum(e["accepted_chars"] for e in editors)}
    (work / "editors.json").write_text(json.dumps({"faults": faults, "editors": editors}))
    out = rep.finish(headline)
    if failed:
        raise SystemExit(1)
    return out


def _typed(editors: list[dict]) -> str:
    """How much of its distinct text each editor typed (and whether any typed some again)."""
    most = max((e["segments_typed"] for e in editors), default=0)
    again = [e["user"] for e in editors if e["segments_typed"] > e["segments"]]
    return (f"at most {most} of {min(e['segments'] for e in editors)} each"
            + (f"; {', '.join(again)} ran out and typed text again" if again else ", none twice"))


def _r(x):
    return None if x is None else round(x, 2)


def _plot(rep: Report, editors: list[dict], faults: list[dict], run_s: float) -> None:
    fig, ax = figure(figsize=(9, 3.5))
    counts = ff.per_second([s["t_s"] for e in editors for s in e["shows"]], run_s)
    ax.plot(range(len(counts)), counts, lw=1, color="tab:blue", label="suggestions shown per second")
    colors = {"engine_kill": "tab:red", "link_down": "tab:orange", "drain": "tab:purple", "log_disk_full": "tab:green"}
    for f in faults:
        ax.axvspan(f["t_start_s"], max(f["t_end_s"], f["t_start_s"] + 0.5), color=colors.get(f["name"], "grey"),
                   alpha=0.25, label=f["name"])
    ax.set_xlabel("time since typing began (s)")
    ax.set_ylabel("suggestions shown / s")
    ax.set_title("Suggestions shown to all editors, fault windows shaded")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    rep.add_figure(fig, "timeline", "suggestions shown per second, faults shaded")
