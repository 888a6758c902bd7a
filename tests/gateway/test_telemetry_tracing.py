"""Traces across gateway -> node -> block: the node app and the gateway app in this process, over real
loopback sockets, with an in-memory span exporter; and the same path with tracing off."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import grpc
import pytest
import redis.asyncio
from aiohttp import web
from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from chain.v1 import message_pb2 as pb
from gateway.app import build_app
from gateway.config import GatewayConfig
from node.observability.tracing import Tracing
from node.server.app import NodeApp
from node.server.config import NodeConfig
from tests.fixtures.actors import RemoteActor

SUBMIT = "/chain.v1.ChainService/SubmitMessage"


@dataclass
class Stack:
    node: NodeApp
    url: str
    http: aiohttp.ClientSession


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@asynccontextmanager
async def start_stack(data_dir: Path, tracing: Tracing | None) -> AsyncIterator[Stack]:
    provider = tracing.provider if tracing is not None else None
    config = NodeConfig(
        grpc_addr="127.0.0.1:0",
        web_addr="",
        admin_addr="",
        data_dir=data_dir,
        block_interval=0.05,
        empty_block_interval=3600,
        verify_workers=0,
        read_workers=0,
        drain_seconds=0,
        metrics_addr="",
    )
    node = NodeApp(config, tracer_provider=provider)
    await node.start()
    assert node.state is not None
    while len(node.state.mempool):  # the devnet bootstrap message commits first, in a block of its own
        await asyncio.sleep(0.02)
    gw = GatewayConfig(http_addr="127.0.0.1:0", node_addrs=(f"127.0.0.1:{node.ports.grpc}",), metrics_addr="")
    runner = web.AppRunner(build_app(gw))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = int(runner.addresses[0][1])
    try:
        async with aiohttp.ClientSession() as http:
            yield Stack(node, f"http://127.0.0.1:{port}", http)
    finally:
        await runner.cleanup()
        await node.stop()


async def submit_and_wait(stack: Stack, msg: pb.Message) -> dict[str, object]:
    """POST /v1/messages (protobuf JSON), then poll GET /v1/messages/{hash} until it is committed."""
    body = json_format.MessageToDict(msg)
    async with stack.http.post(stack.url + "/v1/messages", json=body) as resp:
        assert resp.status == 202, await resp.text()
    for _ in range(200):
        async with stack.http.get(f"{stack.url}/v1/messages/0x{msg.hash.hex()}") as resp:
            if resp.status == 200:
                committed: dict[str, object] = await resp.json()
                return committed
        await asyncio.sleep(0.05)
    raise AssertionError("the message was not committed")


def one(spans: list[ReadableSpan], name: str, **where: object) -> ReadableSpan:
    found = [s for s in spans if s.name == name and all(attrs(s).get(k) == v for k, v in where.items())]
    assert len(found) == 1, (name, where, [(s.name, dict(s.attributes or {})) for s in spans])
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def start(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def end(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return span.end_time


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None, span.name
    return span.parent.span_id


async def test_rest_submit_is_one_trace_and_its_block_links_to_it(tmp_path: Path, exporter: InMemorySpanExporter):
    tracing = Tracing("chain-test", exporter=exporter, batch=False)
    tracing.start()
    try:
        async with start_stack(tmp_path / "node", tracing) as stack:
            actor = RemoteActor()
            msg = actor.b.signer_add(actor.wallet, 0)
            committed = await submit_and_wait(stack, msg)
            forged = RemoteActor().b.follow(bytes(20))
            forged.signature = bytes(64)
            async with stack.http.post(stack.url + "/v1/messages", json=json_format.MessageToDict(forged)) as resp:
                refused = (resp.status, (await resp.json())["error"]["code"])
    finally:
        tracing.stop()
    spans = list(exporter.get_finished_spans())

    # the reason code still travels in the trailers with the instrumentation's context wrapper in between
    assert refused == (400, "INVALID_SIGNATURE")
    bad = one(spans, "chain.submit", **{"chain.reason_code": "INVALID_SIGNATURE"})
    bad_server = next(s for s in spans if s.context.span_id == parent_of(bad))
    assert attrs(bad_server)["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    spans = [s for s in spans if s.context.trace_id != bad.context.trace_id]

    rest = one(spans, "POST /v1/messages")
    assert rest.kind is SpanKind.SERVER
    assert attrs(rest)["http.route"] == "/v1/messages"
    assert attrs(rest).get("http.status_code", attrs(rest).get("http.response.status_code")) == 202
    trace_id = rest.context.trace_id
    in_trace = [s for s in spans if s.context.trace_id == trace_id]

    calls = [s for s in in_trace if s.name == SUBMIT]
    assert {s.kind for s in calls} == {SpanKind.CLIENT, SpanKind.SERVER}, calls
    client = next(s for s in calls if s.kind is SpanKind.CLIENT)
    server = next(s for s in calls if s.kind is SpanKind.SERVER)
    assert parent_of(client) == rest.context.span_id
    assert parent_of(server) == client.context.span_id
    assert attrs(server)["rpc.service"] == "chain.v1.ChainService"
    assert attrs(server)["rpc.grpc.status_code"] == grpc.StatusCode.OK.value[0]

    submit = one(in_trace, "chain.submit")
    assert parent_of(submit) == server.context.span_id
    assert attrs(submit)["chain.messages"] == 1
    assert attrs(submit)["chain.accepted"] == 1
    assert attrs(submit)["chain.rejected"] == 0
    assert attrs(submit)["chain.message.hash"] == msg.hash.hex()
    stages = [one(in_trace, name) for name in ("chain.verify", "chain.validate", "chain.mempool")]
    assert all(parent_of(s) == submit.context.span_id for s in stages)
    assert [start(s) for s in stages] == sorted(start(s) for s in stages)
    assert end(stages[0]) <= start(stages[1]) and end(stages[1]) <= start(stages[2])

    block_number = int(str(committed["block_number"]))
    block = one(spans, "chain.block", **{"chain.block.number": block_number})
    assert block.parent is None and block.context.trace_id != trace_id  # a trace of its own
    assert attrs(block)["chain.block.messages"] == 1
    assert attrs(block)["chain.block.source"] == "local"
    assert [(link.context.trace_id, link.context.span_id) for link in block.links] == [
        (trace_id, submit.context.span_id)
    ]
    assert block.links[0].attributes == {"chain.messages": 1}
    assert start(block) >= end(submit)  # submit -> commit: from the linked span to the block's end
    children = {s.name: s for s in spans if s.parent is not None and s.parent.span_id == block.context.span_id}
    assert set(children) == {"chain.block.build", "chain.block.commit"}
    assert end(children["chain.block.build"]) <= start(children["chain.block.commit"]) <= end(block)


def otel_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "Otel" in t.name or "otel" in t.name.lower()]


async def test_tracing_off_installs_nothing_and_makes_no_spans(tmp_path: Path):
    tracing = Tracing.from_env("chain-test", env={})
    assert not tracing.enabled
    tracing.start()
    assert tracing.provider is None
    originals = (grpc.aio.server, grpc.aio.insecure_channel, web.Application, redis.asyncio.Redis.execute_command)
    async with start_stack(tmp_path / "node", None) as stack:
        assert stack.node.telemetry.tracer is None
        with stack.node.telemetry.stage("chain.submit") as span:
            assert span is None
        assert not stack.node.telemetry.on  # metrics off too: no admission record, no span context read
        assert stack.node.telemetry.admission() is None
        actor = RemoteActor()
        await submit_and_wait(stack, actor.b.signer_add(actor.wallet, 0))
        assert not otel_threads()
    assert (grpc.aio.server, grpc.aio.insecure_channel, web.Application) == originals[:3]
    assert redis.asyncio.Redis.execute_command is originals[3]
    assert not hasattr(grpc.aio.server, "__wrapped__")
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # nothing set globally either
    tracing.stop()


def test_from_env_turns_on_with_an_endpoint():
    assert Tracing.from_env("x", env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}).enabled
    assert Tracing.from_env("x", env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"}).enabled
    off = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SDK_DISABLED": "true"}
    assert not Tracing.from_env("x", env=off).enabled
    assert not Tracing.from_env("x", env={"OTEL_EXPORTER_OTLP_ENDPOINT": " "}).enabled
    assert Tracing.from_env("x", env={"OTEL_TRACES_SAMPLER_ARG": "0.25"}).ratio == 0.25
    for bad in ("lots", "1.5", "-0.1"):
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            Tracing.from_env("x", env={"OTEL_TRACES_SAMPLER_ARG": bad})


async def test_sampling_ratio_keeps_a_share_of_request_traces(exporter: InMemorySpanExporter):
    tracing = Tracing("chain-test", exporter=exporter, batch=False, ratio=0.5)
    tracing.start()
    try:
        assert tracing.provider is not None
        tracer = tracing.provider.get_tracer("test")
        for _ in range(400):
            with tracer.start_as_current_span("request", kind=SpanKind.SERVER), tracer.start_as_current_span("child"):
                pass
            with tracer.start_as_current_span("background call", kind=SpanKind.CLIENT):
                pass
    finally:
        tracing.stop()
    names = [s.name for s in exporter.get_finished_spans()]
    assert "background call" not in names  # client roots: never
    assert 100 < names.count("request") < 300 and names.count("child") == names.count("request")


async def test_traced_reads_are_not_batched(tmp_path: Path, exporter: InMemorySpanExporter):
    """With tracing on, every GET's trace has its own node call (a ReadBatch call would carry one trace)."""
    tracing = Tracing("chain-test", exporter=exporter, batch=False)
    tracing.start()
    try:
        async with start_stack(tmp_path / "node", tracing) as stack:

            async def get(n: int) -> int:
                async with stack.http.get(f"{stack.url}/v1/accounts/0x{bytes([n] * 20).hex()}") as resp:
                    return resp.status

            statuses = await asyncio.gather(*(get(n) for n in range(8)))
    finally:
        tracing.stop()
    assert statuses == [200] * 8
    spans = list(exporter.get_finished_spans())
    gets = [s for s in spans if s.name.startswith("GET ")]
    assert len(gets) == 8
    for rest in gets:
        calls = [s for s in spans if s.context.trace_id == rest.context.trace_id and s.kind is SpanKind.CLIENT]
        assert [c.name for c in calls] == ["/chain.v1.ChainService/GetAccount"], calls
    assert not [s for s in spans if "ReadBatch" in s.name]
