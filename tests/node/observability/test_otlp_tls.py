"""OTLP over TLS: with an `https://` OTEL_EXPORTER_OTLP_ENDPOINT the exporter dials the collector over TLS,
trusting OTEL_EXPORTER_OTLP_CERTIFICATE and presenting OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE/_CLIENT_KEY;
`http://` is plaintext. The collector here is a real gRPC server implementing the OTLP TraceService, over
mutual TLS (or plaintext for the http:// case)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from node.errors import ConfigError
from node.observability.tracing import OTLPTarget, Tracing
from node.tls import TLSFileError
from tests.fixtures.certs import Leaf, TestCA


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps the names of the spans exported to it."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.names.extend(span.name for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


class Collector:
    """A TraceService on a loopback port: mutual TLS when given a server certificate, plaintext without."""

    def __init__(self, leaf: Leaf | None = None, client_ca: Path | None = None) -> None:
        self.sink = Sink()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self.sink, self.server)
        if leaf is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            pair = [(leaf.key.read_bytes(), leaf.cert.read_bytes())]
            ca = client_ca.read_bytes() if client_ca is not None else None
            creds = grpc.ssl_server_credentials(pair, root_certificates=ca, require_client_auth=ca is not None)
            self.port = self.server.add_secure_port("127.0.0.1:0", creds)
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0)


@pytest.fixture
def pki(tmp_path: Path) -> tuple[TestCA, Leaf, Leaf]:
    ca = TestCA.make(tmp_path / "pki")
    return ca, ca.issue("collector"), ca.issue("node")


@pytest.fixture
def mtls_collector(pki: tuple[TestCA, Leaf, Leaf]) -> Iterator[Collector]:
    ca, server, _ = pki
    collector = Collector(server, client_ca=ca.cert)
    yield collector
    collector.stop()


def export_one(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One span through Tracing.from_env's exporter (batch processor), flushed by stop()."""
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():  # the exporter reads its other settings (timeout, headers) from here
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")  # a refused export gives up within the test
    tracing = Tracing.from_env("chain-test", env=dict(os.environ))
    tracing.start()
    try:
        assert tracing.provider is not None
        with tracing.provider.get_tracer("test").start_as_current_span("over-the-wire"):
            pass
    finally:
        tracing.stop()


def tls_env(collector: Collector, ca: Path, client: Leaf | None) -> dict[str, str]:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"https://localhost:{collector.port}",
        "OTEL_EXPORTER_OTLP_CERTIFICATE": str(ca),
    }
    if client is not None:
        env |= {
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(client.cert),
            "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(client.key),
        }
    return env


def test_spans_arrive_over_mutual_tls(
    pki: tuple[TestCA, Leaf, Leaf], mtls_collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, _, node = pki
    export_one(tls_env(mtls_collector, ca.cert, node), monkeypatch)
    assert mtls_collector.sink.names == ["over-the-wire"]


def test_traces_variables_come_first(
    pki: tuple[TestCA, Leaf, Leaf], mtls_collector: Collector, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca, _, node = pki
    other = TestCA.make(tmp_path / "other")
    env = tls_env(mtls_collector, other.cert, None) | {"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": str(ca.cert)}
    env |= {"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": str(node.cert)}
    env |= {"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": str(node.key)}
    export_one(env, monkeypatch)
    assert mtls_collector.sink.names == ["over-the-wire"]


def test_no_span_reaches_a_collector_without_the_client_certificate(
    pki: tuple[TestCA, Leaf, Leaf], mtls_collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control for the test above: the collector stand-in does require the client certificate."""
    ca, _, _ = pki
    export_one(tls_env(mtls_collector, ca.cert, None), monkeypatch)
    assert mtls_collector.sink.names == []


def test_no_span_reaches_a_collector_the_ca_did_not_sign(
    pki: tuple[TestCA, Leaf, Leaf], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca, _, node = pki
    stranger = TestCA.make(tmp_path / "other").issue("collector")
    collector = Collector(stranger, client_ca=ca.cert)
    try:
        export_one(tls_env(collector, ca.cert, node), monkeypatch)
        assert collector.sink.names == []
    finally:
        collector.stop()


def test_http_endpoint_is_plaintext(monkeypatch: pytest.MonkeyPatch) -> None:
    collector = Collector()
    try:  # no OTEL_EXPORTER_OTLP_INSECURE: the scheme decides
        export_one({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}"}, monkeypatch)
        assert collector.sink.names == ["over-the-wire"]
    finally:
        collector.stop()


def test_which_endpoints_are_tls(tmp_path: Path) -> None:
    ca = TestCA.make(tmp_path / "pki")
    tls = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(ca.cert)}
    assert OTLPTarget.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}).tls is None
    insecure = {"OTEL_EXPORTER_OTLP_INSECURE": "true"}
    assert OTLPTarget.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4317", **tls, **insecure}).tls is not None
    assert OTLPTarget.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", **insecure}).tls is None
    bare = OTLPTarget.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", **tls})
    assert bare.tls is not None and bare.tls.ca_file == ca.cert
    assert OTLPTarget.from_env({}).endpoint == "http://localhost:4317"


def test_bad_certificate_settings_are_one_line(tmp_path: Path) -> None:
    https = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4317"}
    missing = tmp_path / "missing.pem"
    with pytest.raises(TLSFileError, match=re.escape(f"OTEL_EXPORTER_OTLP_CERTIFICATE {missing}: cannot read it")):
        Tracing.from_env("x", env={**https, "OTEL_EXPORTER_OTLP_CERTIFICATE": str(missing)})
    half = {**https, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": str(missing)}
    with pytest.raises(
        ConfigError, match="OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together"
    ):
        Tracing.from_env("x", env=half)
    # off: the files are not looked at
    assert not Tracing.from_env("x", env={"OTEL_EXPORTER_OTLP_CERTIFICATE": str(missing)}).enabled
