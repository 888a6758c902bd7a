"""One read worker process: `python -m node.server.readers.worker SETTINGS_JSON`, started by the node's main
process (supervisor.py), never by hand.

It opens the node's store read-only, binds the node's public gRPC address beside the main process (both
with SO_REUSEPORT, so the kernel spreads connections over them), answers the pure reads itself
(local.py) and relays every other call to the main process's private listener (relay.py).

Protocol with the main process, over the worker's stdin and stdout pipes:
- stdout: `{"event": "worker-ready", "pid": ...}` once it serves, then `{"event": "rpc", "series": ...}`
  about once a second: the histogram series (counts per bucket and sums) of the calls it answered itself
  since the last line (the main process adds them to its own `rpc.server.duration`, so one Prometheus
  endpoint shows every process; relayed calls are recorded by the main process that serves them).
- stdin: nothing is written; end of file means the main process is gone (it exited, or was killed -9)
  and the worker stops at once. SIGTERM drains it (the main process's orderly stop).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import uvloop

from node.chain import Chain
from node.constants import READ_ANSWER_BYTES
from node.listen import grpc_add_port
from node.observability.logs import configure_logging
from node.server.readers.answers import AnswerMemo
from node.server.readers.local import local_handlers, local_paths
from node.server.readers.relay import Relay
from node.server.readers.served import served
from node.server.readers.shipping import RpcShipper
from node.server.rpc.interceptors import ErrorInterceptor
from node.server.rpc.read_batch import intercepted
from node.tls import ServerTLS

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
    GenericHandler = grpc.GenericRpcHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    GenericHandler = grpc.GenericRpcHandler

log = logging.getLogger("chain.node.reader")
SHARED_PORT = ("grpc.so_reuseport", 1)  # the group of the node's own processes on its public port


@dataclass(frozen=True)
class WorkerSettings:
    index: int
    data_dir: str
    grpc_addr: str  # the node's public address with the port the main process bound
    main_target: str  # the main process's private listener
    max_receive_bytes: int
    metrics: bool
    log_level: str = "info"
    log_format: str = "text"
    answer_bytes: int = READ_ANSWER_BYTES  # answers kept per snapshot of the store (answers.py; --read-answer-bytes)
    tls_cert: str = ""  # the public port's TLS (--tls-cert, --tls-key); "" for plaintext
    tls_key: str = ""

    def encode(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def decode(cls, text: str) -> WorkerSettings:
        return cls(**json.loads(text))


class _Routes(GenericHandler):
    def __init__(self, table: dict[str, Handler]) -> None:
        self._table = table

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        return self._table.get(handler_call_details.method)


class _ParentWatch(asyncio.Protocol):
    """stdin: the main process never writes; its end closes when it exits (or dies): then the worker stops."""

    def __init__(self, gone: asyncio.Event) -> None:
        self._gone = gone

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone.set()


def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def _ship(shipper: RpcShipper, answers: AnswerMemo | None, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        _ship_once(shipper, answers)


def _ship_once(shipper: RpcShipper, answers: AnswerMemo | None) -> None:
    """The calls' durations since the last line and, with them, the kept answers' totals for this worker's
    life (hits, misses, bytes; every lookup is a call, so a line follows any change)."""
    series = shipper.take()
    if series:
        doc: dict[str, Any] = {"event": "rpc", "series": series}
        if answers is not None:
            doc["answers"] = [answers.hits, answers.misses, answers.size]
        _emit(doc)


async def _unless(gone: asyncio.Event, step: Coroutine[Any, Any, None]) -> None:
    """`step`, unless the main process goes away first: then the worker exits at once."""
    task = asyncio.ensure_future(step)
    waiter = asyncio.ensure_future(gone.wait())
    await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if not task.done():
        task.cancel()
        os._exit(0)  # nothing is served yet: nothing to drain
    task.result()


async def _routes(relay: Relay, local: dict[str, Handler], shipper: RpcShipper | None) -> dict[str, Handler]:
    """Every method's handler, wrapped once here, not per call: the calls answered here by served.py (the
    error mapping and the RPC metrics in one wrapper), the relayed ones by the error interceptor (the main
    process records their metrics)."""
    table: dict[str, Handler] = {}
    relayed: dict[str, Handler] = {}
    for path in relay.paths():
        if path in local:
            table[path] = served(path, local[path], shipper)
            continue
        handler = relay.handler(path)
        if handler is not None:
            relayed[path] = handler
    table.update(await intercepted(relayed, [ErrorInterceptor()]))
    return table


async def serve(settings: WorkerSettings) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    await loop.connect_read_pipe(lambda: _ParentWatch(stop), sys.stdin)  # first: a start-up can be long
    chain = Chain.open_reader(Path(settings.data_dir))
    relay = Relay(settings.main_target, settings.max_receive_bytes)
    await _unless(stop, relay.wait_ready(60.0))
    shipper = RpcShipper(local_paths())
    answers = AnswerMemo(settings.answer_bytes) if settings.answer_bytes else None  # answers.py
    table = await _routes(relay, local_handlers(chain, relay.handler, answers), shipper if settings.metrics else None)
    options = [
        ("grpc.max_receive_message_length", settings.max_receive_bytes),
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        SHARED_PORT,
    ]
    server = grpc.aio.server(options=options)
    server.add_generic_rpc_handlers((_Routes(table),))
    credentials = (
        ServerTLS(Path(settings.tls_cert), Path(settings.tls_key)).grpc_credentials() if settings.tls_cert else None
    )
    grpc_add_port(server, "--grpc-addr", settings.grpc_addr, credentials)
    await server.start()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, lambda: None)  # Ctrl-C reaches the whole group: the main decides
    shipping = asyncio.create_task(_ship(shipper, answers, 1.0), name="ship-metrics") if settings.metrics else None
    _emit({"event": "worker-ready", "pid": os.getpid(), "index": settings.index})
    await stop.wait()
    await server.stop(grace=1.0)
    if shipping is not None:
        shipping.cancel()
        _ship_once(shipper, answers)
    await relay.close()
    chain.close()


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    settings = WorkerSettings.decode(args[0])
    configure_logging(settings.log_level, settings.log_format)
    try:
        uvloop.run(serve(settings))  # the echo baseline runs the default loop; uvloop is the worker's choice
    except BrokenPipeError:  # the main process is gone: nobody to tell
        os._exit(0)


if __name__ == "__main__":
    main()
