"""The production setup end to end: real chain-node and chain-gateway processes with only
OTEL_EXPORTER_OTLP_ENDPOINT set, exporting over OTLP/gRPC (batch processor) to a TraceService sink in this
test; a REST submission is one trace across both processes, and the block's span links to it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

from tests.fixtures.actors import RemoteActor
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every exported span with its service name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, trace_pb2.Span]] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        with self.lock:
            for rs in request.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
                self.spans.extend((service, span) for ss in rs.scope_spans for span in ss.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def sink() -> Iterator[tuple[Sink, str]]:
    servicer = Sink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"http://127.0.0.1:{port}"
    server.stop(0)


def test_processes_export_one_trace_over_otlp(tmp_path: Path, sink: tuple[Sink, str]):
    servicer, endpoint = sink
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    node = NodeProcess(tmp_path / "node", "--web-addr", "", env=env).start()
    gateway = GatewayProcess(node.grpc_target, env=env)
    try:
        gateway.start()
        actor = RemoteActor()
        msg = actor.b.signer_add(actor.wallet, 0)
        resp = requests.post(gateway.url + "/v1/messages", json=json_format.MessageToDict(msg), timeout=30)
        assert resp.status_code == 202, resp.text
        with node.client() as c:
            c.wait_committed(msg.hash)
    finally:
        gateway.stop()  # a clean stop flushes the batch processor
        node.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(s.name == "chain.block" for _, s in servicer.spans):
        time.sleep(0.1)

    spans = list(servicer.spans)
    (rest,) = [s for svc, s in spans if svc == "chain-gateway" and s.name == "POST /v1/messages"]
    in_trace = [(svc, s) for svc, s in spans if s.trace_id == rest.trace_id]
    names = {(svc, s.name, s.kind) for svc, s in in_trace}
    submit_rpc = "/chain.v1.ChainService/SubmitMessage"
    assert {
        ("chain-gateway", submit_rpc, trace_pb2.Span.SPAN_KIND_CLIENT),
        ("chain-node", submit_rpc, trace_pb2.Span.SPAN_KIND_SERVER),
        ("chain-node", "chain.submit", trace_pb2.Span.SPAN_KIND_INTERNAL),
        ("chain-node", "chain.verify", trace_pb2.Span.SPAN_KIND_INTERNAL),
        ("chain-node", "chain.validate", trace_pb2.Span.SPAN_KIND_INTERNAL),
        ("chain-node", "chain.mempool", trace_pb2.Span.SPAN_KIND_INTERNAL),
    } <= names, names
    (submit,) = [s for _, s in in_trace if s.name == "chain.submit"]
    blocks = [s for svc, s in spans if svc == "chain-node" and s.name == "chain.block"]
    linked = [b for b in blocks if any(link.span_id == submit.span_id for link in b.links)]
    assert len(linked) == 1 and linked[0].trace_id != rest.trace_id
    assert linked[0].start_time_unix_nano >= submit.end_time_unix_nano
