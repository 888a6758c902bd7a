"""`chain-gateway --workers N`: one exclusive listening socket, N serving processes.

    parent:  bind --http-addr (exclusive) -> accept -> hand the connection to the next worker (SCM_RIGHTS)
    worker:  a whole gateway (app, node channels, one feed per kind) serving the connections it is handed

Why: the SSE fan-out writes every event to every client of the process, one after another, on one core.
With N workers each holds about 1/N of the clients and writes to them on its own core.

Why this shape (docs/events.md, "Workers"):
- The parent binds the address as a single process does (no SO_REUSEPORT), so the exclusive-address rule
  holds: a second process on the port is refused as with one process. SO_REUSEPORT would let any process of
  the same user join the port's group and take a share of its connections.
- The parent accepts and deals the connections round robin, instead of letting every worker accept on a
  shared socket: with a shared socket the least busy worker wins most accepts, and the clients (and the
  fan-out work) pile up on one process. Dealing costs one `sendmsg` per connection, not per event.
- Every worker follows the same source (the node's streams, or the Redis Streams) and keys events the
  same way (`<block>-<index>`), so a client resuming with Last-Event-ID is served the same, gap-free
  stream by whichever worker its new connection lands on.

The parent prints the `ready` line once every worker is serving; when a worker exits on its own the
parent stops the others and exits 1 (the supervisor, e.g. Kubernetes, restarts the pod). SIGTERM goes
to every worker, each drains as a single gateway does. `/v1/health` is answered by a worker (each asks the
nodes itself). `--metrics-addr` is served by the parent: it scrapes each worker's own endpoint (on an
ephemeral loopback port) and serves their series with a `worker` label (sum over it for the gateway).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gateway.config import GatewayConfig
from node.listen import ListenError

log = logging.getLogger(__name__)

CHANNEL_ENV = "CHAIN_GATEWAY_WORKER_CHANNEL_FD"  # set by the parent on a worker only (not a flag)
READY_TIMEOUT = 60.0  # seconds for every worker to start serving
HAND_BATCH = 64  # connections accepted per wake-up of the parent's listener


def channel_fd() -> int:
    """In a worker, the fd of its channel to the parent; -1 in a gateway started by hand."""
    text = os.environ.get(CHANNEL_ENV, "")
    return int(text) if text.isdigit() else -1


def worker_argv(argv: Sequence[str]) -> list[str]:
    """The worker's command line: the parent's flags with --workers 1."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--workers":
            skip = True
            continue
        if arg.startswith("--workers="):
            continue
        out.append(arg)
    return [sys.executable, "-m", "gateway.main", *out, "--workers", "1"]


class WorkerMetrics(Collector):
    """The workers' Prometheus series, scraped when the parent is scraped, each with a `worker` label."""

    def __init__(self) -> None:
        self.ports: list[int] = []

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        for index, port in enumerate(self.ports):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                    text = reply.read().decode()
            except OSError as err:
                log.warning("worker %d metrics: %s", index, err)
                continue
            for family in text_string_to_metric_families(text):
                into = merged.get(family.name)
                if into is None:
                    into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
                for s in family.samples:
                    into.add_sample(s.name, {**s.labels, "worker": str(index)}, s.value, s.timestamp, s.exemplar)
        return merged.values()


class Supervisor:
    """The parent: the listening socket, the workers, the hand-off of connections."""

    def __init__(self, config: GatewayConfig, argv: Sequence[str]) -> None:
        self.config = config
        self.argv = list(argv)
        self.listener: socket.socket | None = None
        self.channels: list[socket.socket] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.metrics = WorkerMetrics()
        self.next = 0

    def bind(self) -> int:
        host, port = self.config.host_port
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.create_server((host, port), family=family, backlog=4096, reuse_port=False)
        except OSError as err:
            raise ListenError("--http-addr", self.config.http_addr, err.strerror or str(err)) from None
        sock.setblocking(False)
        self.listener = sock
        return int(sock.getsockname()[1])

    def spawn(self) -> None:
        for _ in range(self.config.workers):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            env = dict(os.environ, **{CHANNEL_ENV: str(theirs.fileno())})
            proc = subprocess.Popen(worker_argv(self.argv), pass_fds=[theirs.fileno()], env=env)
            theirs.close()
            self.channels.append(ours)
            self.procs.append(proc)

    async def wait_ready(self) -> None:
        """Each worker sends `ready <metrics port>` once it serves."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(READY_TIMEOUT):
            for i, chan in enumerate(self.channels):
                chan.setblocking(False)
                line = await loop.sock_recv(chan, 256)
                word, _, port = line.decode().partition(" ")
                if word != "ready":
                    raise RuntimeError(f"worker {i} exited before serving (status {self.procs[i].poll()})")
                self.metrics.ports.append(int(port or 0))
                chan.setblocking(True)  # a hand-off waits if a worker's channel is full, never drops

    def accept(self) -> None:
        """Deal waiting connections round robin (the listener is readable)."""
        assert self.listener is not None
        for _ in range(HAND_BATCH):
            try:
                conn, _addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # e.g. EMFILE: leave it in the backlog for now
                log.warning("accept: %s", err)
                return
            with conn:
                for _attempt in range(len(self.channels)):
                    chan = self.channels[self.next]
                    self.next = (self.next + 1) % len(self.channels)
                    try:
                        socket.send_fds(chan, [b"c"], [conn.fileno()])
                        break
                    except OSError as err:
                        log.warning("handing a connection to a worker: %s", err)

    def exited(self) -> int | None:
        for proc in self.procs:
            code = proc.poll()
            if code is not None:
                return code
        return None

    def stop(self, timeout: float = 30.0) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for chan in self.channels:
            chan.close()


async def supervise(sup: Supervisor, http_port: int, metrics_port: int) -> int:
    """Serve until SIGTERM/SIGINT (0) or until a worker exits on its own (1)."""
    loop = asyncio.get_running_loop()
    sup.spawn()
    try:
        await sup.wait_ready()
        ready = {
            "event": "ready",
            "http_port": http_port,
            "metrics_port": metrics_port,
            "tls": sup.config.tls_cert is not None,
            "workers": len(sup.procs),
        }
        print(json.dumps(ready), flush=True)
        assert sup.listener is not None
        loop.add_reader(sup.listener.fileno(), sup.accept)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
            code = sup.exited()
            if code is not None and not stop.is_set():
                log.error("a gateway worker exited (status %s); stopping", code)
                return 1
        return 0
    finally:
        if sup.listener is not None:
            loop.remove_reader(sup.listener.fileno())
        await asyncio.to_thread(sup.stop)


def handed_connections(fd: int, serve: Callable[[socket.socket], None], gone: Callable[[], None]) -> socket.socket:
    """The worker's end of its channel: each connection the parent hands over goes to `serve`; `gone` when
    the parent closed the channel (it exited). Returns the channel (to tell the parent it is ready)."""
    chan = socket.socket(fileno=fd)
    chan.setblocking(False)
    loop = asyncio.get_running_loop()

    def readable() -> None:
        while True:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(chan, 16, 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                msg, fds = b"", []
            for conn_fd in fds:
                serve(socket.socket(fileno=conn_fd))
            if not msg and not fds:
                loop.remove_reader(chan.fileno())
                gone()
                return

    loop.add_reader(chan.fileno(), readable)
    return chan


def tell_ready(chan: socket.socket, metrics_port: int) -> None:
    chan.setblocking(True)
    chan.send(f"ready {metrics_port}".encode())
    chan.setblocking(False)
