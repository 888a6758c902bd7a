"""What the Envoy edge tests share: the configurations under test (the shipped files and the Helm chart's
rendering of them), an upstream that records what reaches it, and calls over TLS from a chosen source address.

The recorder stands where the nodes stand: it serves gRPC health (SERVING) and answers every other method
with an empty message, recording the method and metadata of each call it receives, so a test can say what
Envoy let through and what it changed, whatever a node would have done with it.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from node.grpcweb.wire import DATA_FLAG, TRAILERS_FLAG, Mode, encode_frame, iter_frames
from tests.charts.helm import template
from tests.fixtures.certs import Leaf, TestCA
from tests.fixtures.envoyproc import TEMPLATE, TLS_TEMPLATE, EdgeTLS, EnvoyProcess, load, localize, shipped_sds

SOURCES = ("shipped", "chart")
ORIGIN = "http://app.test"
GRPC_WEB = "application/grpc-web+proto"
UNIMPLEMENTED = str(grpc.StatusCode.UNIMPLEMENTED.value[0])
UNAVAILABLE = str(grpc.StatusCode.UNAVAILABLE.value[0])
Config = dict[str, Any]


def edge_config(source: str, tls: bool = True, chart_args: Sequence[str] = ()) -> tuple[Config, dict[str, Config]]:
    """The Envoy config and its SDS files, by file name: envoy/envoy-tls.yaml (or envoy.yaml) as shipped, or
    what `helm template` renders into the Envoy ConfigMap (tls.enabled as asked)."""
    if source == "shipped":
        return load(TLS_TEMPLATE if tls else TEMPLATE), (shipped_sds() if tls else {})
    docs = template("--set", f"tls.enabled={str(tls).lower()}", *chart_args)
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-envoy")]
    data: dict[str, str] = cm["data"]
    sds = {name: yaml.safe_load(text) for name, text in data.items() if name.startswith("sds-")}
    return yaml.safe_load(data["envoy.yaml"]), sds


@dataclass
class Pki:
    ca: TestCA
    listener: Leaf
    upstream: Leaf

    @classmethod
    def make(cls, directory: Path) -> Pki:
        ca = TestCA.make(directory / "ca")
        listener_dir, upstream_dir = directory / "listener", directory / "upstream"
        listener_dir.mkdir(parents=True)
        upstream_dir.mkdir(parents=True)
        listener = ca.issue("edge", cert_path=listener_dir / "tls.crt", key_path=listener_dir / "tls.key")
        upstream = ca.issue("node", cert_path=upstream_dir / "tls.crt", key_path=upstream_dir / "tls.key")
        return cls(ca, listener, upstream)

    def edge_tls(self) -> EdgeTLS:
        return EdgeTLS(self.listener.cert, self.listener.key, self.ca.cert)

    def client_context(self, alpn: Sequence[str] = ("http/1.1",)) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca.cert))
        ctx.set_alpn_protocols(list(alpn))
        return ctx

    def channel(self, target: str) -> grpc.Channel:
        creds = grpc.ssl_channel_credentials(root_certificates=self.ca.cert.read_bytes())
        return grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", "localhost")])


@dataclass
class Call:
    method: str
    metadata: dict[str, str]


@dataclass
class Recorder:
    """A gRPC server on 127.0.0.1 (TLS with `leaf`) recording every call but health checks."""

    leaf: Leaf | None = None
    calls: list[Call] = field(default_factory=list)
    port: int = 0
    _server: grpc.Server | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Recorder:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        checks = health.HealthServicer()
        checks.set("chain.v1.ChainService", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(checks, server)
        server.add_generic_rpc_handlers((_Everything(self._record),))
        if self.leaf is None:
            self.port = server.add_insecure_port("127.0.0.1:0")
        else:
            pair = (self.leaf.key.read_bytes(), self.leaf.cert.read_bytes())
            self.port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([pair]))
        server.start()
        self._server = server
        return self

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def methods(self) -> list[str]:
        with self._lock:
            return [c.method for c in self.calls]

    def last(self, method: str) -> Call:
        with self._lock:
            found = [c for c in self.calls if c.method == method]
        assert found, f"{method} never reached the upstream"
        return found[-1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0)


class _Everything(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(self, record: Callable[[Call], None]) -> None:
        self.record = record

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        method = str(handler_call_details.method)
        metadata = {k: str(v) for k, v in handler_call_details.invocation_metadata}
        self.record(Call(method, metadata))
        return grpc.unary_unary_rpc_method_handler(lambda request, context: b"")


def start_edge(
    source: str,
    pki: Pki,
    upstream_port: int,
    workdir: Path,
    *,
    healthy: int = 1,
    mutate: Callable[[Config], None] | None = None,
) -> EnvoyProcess:
    """Envoy on the TLS configuration of `source`, in front of one upstream on 127.0.0.1:`upstream_port`."""
    config, sds = edge_config(source)
    config = localize(config, [("127.0.0.1", upstream_port)], cors_origins=[ORIGIN], health_interval="0.5s")
    config = pki.edge_tls().install(config, sds, workdir / "sds")
    if mutate is not None:
        mutate(config)
    return EnvoyProcess(config, workdir / "envoy").start(healthy_hosts=healthy)


def native(
    channel: grpc.Channel, method: str, metadata: Sequence[tuple[str, str]] = ()
) -> tuple[grpc.StatusCode, dict[str, str]]:
    """A unary call of `method` with an empty request: its status and trailing metadata."""
    call = channel.unary_unary(method, None, None)
    try:
        _, answer = call.with_call(b"", metadata=tuple(metadata), timeout=10)
    except grpc.RpcError as err:
        assert isinstance(err, grpc.Call)
        return err.code(), {k: str(v) for k, v in err.trailing_metadata() or ()}
    return answer.code(), {k: str(v) for k, v in answer.trailing_metadata() or ()}


async def grpc_web(
    url: str,
    method: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    source: str = "127.0.0.1",
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """A gRPC-web unary call with an empty request from `source` (an address on loopback): the response's
    headers and trailers in one map (grpc-status, reason-code... wherever the response carried them: a trailers
    frame, or the headers of a trailers-only answer), and its HTTP status as `:status`."""
    connector = aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else False, local_addr=(source, 0))
    sent = {"content-type": GRPC_WEB, "x-grpc-web": "1", "origin": ORIGIN, **(headers or {})}
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(url + method, data=encode_frame(DATA_FLAG, b"", Mode.BINARY), headers=sent) as resp,
    ):
        raw = await resp.read()
        out = {k.lower(): v for k, v in resp.headers.items()}
        out[":status"] = str(resp.status)
    for flag, payload in iter_frames(raw):
        if flag & TRAILERS_FLAG:
            for line in payload.decode().split("\r\n"):
                name, _, value = line.partition(":")
                if name:
                    out[name.strip().lower()] = value.strip()
    return out
