"""Network "regions" for the multi-region tests and `quickcode bench faults`: one network namespace per region,
joined to the root namespace by a veth link, each running a forwarding host that adds the region's one-way delay.

Traffic to a region crosses a real network namespace boundary (not loopback). The WAN delay is added by the
region host's forwarder, in each direction: this machine's kernel has no netem (CONFIG_NET_SCH_NETEM is not
set, `tc qdisc add ... netem` answers "Specified qdisc kind is unknown"), and no other qdisc here delays
packets. Taking a region's link down (`ip link set ... down`) drops its traffic silently, like a network
failure; bringing it up restores it. It is the namespace's end of the veth that goes down: the root
namespace's end loses its carrier and keeps its route, so packets to the region are dropped (taking the root's
end down would remove the route, and the packets would take the default route instead — here to a proxy that
answers HTTP 404).

    client (root ns) ──▶ 10.S.N.2:8765 [region N: forward after delay] ──veth──▶ 10.S.N.1:P [root: relay] ──▶ backend
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
from dataclasses import dataclass


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    full = ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)
    return subprocess.run(full, check=check, capture_output=True, text=True)



def listening(host: str, port: int) -> bool:
    """Something accepts TCP connections at host:port (a relay or forwarding host is up)."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False

@dataclass
class Region:
    index: int
    delay_ms: float
    ns: str
    host_if: str
    ns_ip: str
    host_ip: str
    ns_if: str = ""
    port: int = 8765
    relay_port: int = 0        # the root namespace's relay to the backend, which the region's host forwards to
    procs: tuple = ()

    @property
    def url(self) -> str:
        return f"ws://{self.ns_ip}:{self.port}/v1/ws"

    def link(self, up: bool) -> None:
        sh("ip", "link", "set", self.ns_if, "up" if up else "down", ns=self.ns)


def create(delays_ms: list[float], backend_port: int, tag: str, subnet: int = 78) -> list[Region]:
    """One region per delay, in front of 127.0.0.1:`backend_port`; `subnet` S (addresses 10.S.N.x, relay ports
    20,000 + 100 S + N) keeps two users of this module on one machine apart."""
    regions = []
    for i, delay in enumerate(delays_ms):
        ns, host_if, ns_if = f"qc{tag}r{i}", f"qc{tag}h{i}", f"qc{tag}n{i}"
        host_ip, ns_ip = f"10.{subnet}.{i}.1", f"10.{subnet}.{i}.2"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        sh("ip", "link", "set", ns_if, "netns", ns)
        sh("ip", "addr", "add", f"{host_ip}/24", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        sh("ip", "addr", "add", f"{ns_ip}/24", "dev", ns_if, ns=ns)
        sh("ip", "link", "set", ns_if, "up", ns=ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        relay_port = 20_000 + 100 * subnet + i
        me = [sys.executable, "-m", "quickcode.benchmarks.regions"]
        relay = subprocess.Popen([*me, "--listen", f"{host_ip}:{relay_port}", "--target", f"127.0.0.1:{backend_port}"],
                                 cwd=_repo())
        host = subprocess.Popen(["ip", "netns", "exec", ns, *me, "--listen", f"{ns_ip}:8765",
                                 "--target", f"{host_ip}:{relay_port}", "--delay-ms", str(delay)], cwd=_repo())
        regions.append(Region(i, delay, ns, host_if, ns_ip, host_ip, ns_if, relay_port=relay_port,
                              procs=(relay, host)))
    return regions


def destroy(regions: list[Region]) -> None:
    for r in regions:
        for p in r.procs:
            p.terminate()
        for p in r.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        sh("ip", "link", "del", r.host_if, check=False)
        sh("ip", "netns", "del", r.ns, check=False)


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ── the forwarding host (run inside a namespace): TCP relay that delays each direction by delay_ms
async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    queue: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay_s, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((0.0, None))
    try:
        await sender
    except (ConnectionError, OSError):
        pass


async def _serve(listen: str, target: str, delay_ms: float) -> None:
    lhost, lport = listen.rsplit(":", 1)
    thost, tport = target.rsplit(":", 1)

    async def handle(creader, cwriter):
        try:
            ureader, uwriter = await asyncio.open_connection(thost, int(tport))
        except OSError:
            cwriter.close()
            return
        await asyncio.gather(_pipe(creader, uwriter, delay_ms / 1000), _pipe(ureader, cwriter, delay_ms / 1000))

    server = await asyncio.start_server(handle, lhost, int(lport))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--listen", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--delay-ms", type=float, default=0.0)
    a = p.parse_args()
    asyncio.run(_serve(a.listen, a.target, a.delay_ms))
