"""The generated reads are what node.sdk.codegen writes from the service descriptors today, and each read
RPC's method takes exactly its request's fields (and `timeout`) as keyword arguments."""

from __future__ import annotations

import inspect

from chain.v1 import keychain_service_pb2, rpc_pb2, service_pb2
from node.sdk import codegen
from node.sdk.aio import AsyncChainClient
from node.sdk.rpc import ChainClient


def test_generated_files_are_current() -> None:
    stale = [path.name for path, text in codegen.outputs().items() if path.read_text() != text]
    assert stale == [], f"run `python -m node.sdk.codegen`: {stale} differ"


def test_every_read_rpc_has_a_method_with_its_request_fields() -> None:
    names = {m.name for s in ("ChainService",) for m in service_pb2.DESCRIPTOR.services_by_name[s].methods}
    names |= {m.name for m in keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"].methods}
    reads = {r.rpc for r in codegen.reads()}
    assert reads == names - codegen.WRITES - {"SubscribeMessages", "SubscribeBlocks"}
    for read in codegen.reads():
        fields = [f.name for f in read.request.fields]
        for cls in (ChainClient, AsyncChainClient):
            method = getattr(cls, read.name)
            params = inspect.signature(method).parameters
            assert [p for p in params if p != "self"] == [*fields, "timeout", "read"], (cls.__name__, read.name)
            assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in fields)
            assert params["read"].kind is inspect.Parameter.VAR_KEYWORD  # consistency=, min_height= (ReadOptions)
        if read.paginated():
            assert hasattr(ChainClient, codegen.iter_name(read.rpc))
            assert hasattr(AsyncChainClient, codegen.iter_name(read.rpc))


def test_writes_and_streams_are_written_by_hand() -> None:
    by_hand = ("submit", "batch", "commit", "dry_run", "wait_committed", "subscribe_blocks", "subscribe_messages")
    for cls in (ChainClient, AsyncChainClient):
        for name in by_hand:
            assert callable(getattr(cls, name))
    assert rpc_pb2.SubscribeMessagesRequest.DESCRIPTOR.fields_by_name["after_event_id"]
