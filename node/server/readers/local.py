"""The calls a read worker answers itself: the ChainService and KeychainService methods that only read the
committed store (node.query.reader), named here one by one. Every other method of the public server is
relayed to the node's main process (relay.py), so it behaves exactly as it does there.

    handlers = local_handlers(chain, relay)    # {"/chain.v1.ChainService/GetAccount": handler, ...}

Each call opens one LMDB read transaction, which sees the newest block the main process committed. The
answer to a call seen before on the same snapshot of the store (the transaction's id: any write moves it)
is given from memory (answers.py), so nothing kept outlives a write. (The head block, read in a
transaction, is checked and decoded once per distinct head record: node/query/heads.py.)
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from chain.v1 import keychain_service_pb2, rpc_pb2, service_pb2
from node.chain import Chain
from node.errors import CHAIN_HEIGHT, NotFound
from node.query.reader import Reader
from node.server.readers.answers import AnswerMemo
from node.server.rpc.consistency import SnapshotHeight, Wish, wish_of
from node.server.rpc.interceptors import check_decoded, tolerant

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler

CHAIN = service_pb2.DESCRIPTOR.services_by_name["ChainService"]
KEYCHAIN = keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"]
# pure reads of the committed store; GetNodeStatus, GetHealth, GetMempoolInfo, GetSnapshotInfo, the writes,
# the streams and GetWebAuthnPolicy need the main process's objects and are relayed
CHAIN_READS = (
    "GetProject",
    "GetProjectByName",
    "SearchProjects",
    "ListProjects",
    "GetProjectActivity",
    "GetMergeRequest",
    "ListMergeRequests",
    "ListMergeRequestsByRequester",
    "GetRef",
    "ListRefs",
    "GetRefLog",
    "GetCommit",
    "ListCommits",
    "GetCommitAncestors",
    "ListCollaborators",
    "GetAccount",
    "GetAccountActivity",
    "GetKey",
    "ListKeys",
    "ListVerifications",
    "ListLinks",
    "ListLinksByTarget",
    "ListReactions",
    "ListReactionsByTarget",
    "GetBlock",
    "ListBlocks",
    "GetMessage",
    "ListMessages",
    "GetOperationProof",
    "GetExclusionProof",
    "VerifyOperationProof",
    "GetStorageQuotaProof",
    "GetChainStats",
)
KEYCHAIN_READS = ("ListCustodyKeys", "GetCustodyKey")
# the Reader method answering a call, where its name is not the RPC's in snake case
SPECIAL: Mapping[str, Callable[[Reader, Any], Message]] = MappingProxyType(
    {"GetChainStats": lambda r, _req: rpc_pb2.GetChainStatsResponse(stats=r.chain_stats())}
)
Relay = Callable[[str], Handler | None]
"""The relay's handler for a method path (None: not a method the main process serves)."""
Unary = Callable[[Any, Any], Awaitable[Any]]


def _query(method: MethodDescriptor) -> Callable[[Reader, Any], Message]:
    """The Reader method answering `method`: SPECIAL's, or the one named as the RPC in snake case."""
    return SPECIAL.get(method.name) or getattr(Reader, re.sub(r"(?<!^)(?=[A-Z])", "_", method.name).lower())


def local_paths() -> frozenset[str]:
    """The method paths a worker answers itself."""
    names = [(CHAIN, n) for n in CHAIN_READS] + [(KEYCHAIN, n) for n in KEYCHAIN_READS]
    return frozenset(f"/{service.full_name}/{name}" for service, name in names)


def local_handlers(chain: Chain, relay: Relay, answers: AnswerMemo | None = None) -> dict[str, Handler]:
    """A handler per local method path; GetMessage falls back to the main process for a hash the store
    does not hold (the main process remembers messages it dropped, and says so). With `answers`, every
    other read answers a call seen before on the same snapshot of the store from memory (answers.py).
    Every answer names its snapshot's height (`chain-height`); a call asking for a height this worker's
    store has not reached, or for a linearizable read, is relayed to the main process, which waits for the
    block's commit or asks the log (node/server/rpc/consistency.py)."""
    out: dict[str, Handler] = {}
    height_of = SnapshotHeight(chain.heads)
    for service, names in ((CHAIN, CHAIN_READS), (KEYCHAIN, KEYCHAIN_READS)):
        for name in names:
            path = f"/{service.full_name}/{name}"
            method = service.methods_by_name[name]
            main = _unary(relay(path))
            if name == "GetMessage" or answers is None:
                out[path] = _handler(chain, method, height_of, main, main if name == "GetMessage" else None)
            else:
                out[path] = _remembered(chain, method, path, answers, height_of, main)
    return out


def _unary(handler: Handler | None) -> Unary | None:
    return None if handler is None else handler.unary_unary


def _here(wish: Wish | None, height: int) -> bool:
    """Can this worker answer a call wishing `wish` from a snapshot at `height`?"""
    return wish is None or (not wish.linearizable and height >= wish.min_height)


def _remembered(
    chain: Chain,
    method: MethodDescriptor,
    path: str,
    answers: AnswerMemo,
    height_of: SnapshotHeight,
    main: Unary | None,
) -> Handler:
    """A read taking and giving bytes: the answer kept for these request bytes on this snapshot of the
    store, or read, serialised and kept. A request that does not decode is refused as by the main process (`served`)."""
    query = _query(method)
    decode = tolerant(message_factory.GetMessageClass(method.input_type).FromString)
    assert decode is not None

    async def call(request: bytes, context: Any) -> bytes:
        wish = wish_of(context.invocation_metadata())
        with chain.read() as (view, nodes):
            height = height_of.of(view)
            if _here(wish, height) or main is None:
                snapshot = view.snapshot_id()
                context.set_trailing_metadata(((CHAIN_HEIGHT, str(height)),))
                kept = answers.answer(path, request, snapshot)
                if kept is not None:
                    return kept
                message = decode(request)
                check_decoded(message)  # MALFORMED_MESSAGE, as the decoding wrapper would have said
                answer: bytes = query(Reader(view, chain.read_tree(nodes), chain.heads), message).SerializeToString()
                answers.keep(path, request, snapshot, answer)
                return answer
        relayed: bytes = await main(request, context)  # the main process waits for the height (or refuses)
        return relayed

    return grpc.unary_unary_rpc_method_handler(call)


def _handler(
    chain: Chain, method: MethodDescriptor, height_of: SnapshotHeight, main: Unary | None, fallback: Unary | None
) -> Handler:
    query = _query(method)
    request_class = message_factory.GetMessageClass(method.input_type)

    def read(request: Any, context: Any, wish: Wish | None) -> Message | None:
        with chain.read() as (view, nodes):
            height = height_of.of(view)
            if not _here(wish, height) and main is not None:
                return None
            context.set_trailing_metadata(((CHAIN_HEIGHT, str(height)),))
            return query(Reader(view, chain.read_tree(nodes), chain.heads), request)

    async def call(request: Any, context: Any) -> Message:
        try:
            answer = read(request, context, wish_of(context.invocation_metadata()))
        except NotFound:
            if fallback is None:
                raise
            answer = None
        if answer is not None:
            return answer
        relay = fallback or main
        assert relay is not None
        return _response(method, await relay(request.SerializeToString(), context))

    return grpc.unary_unary_rpc_method_handler(
        call,
        request_deserializer=request_class.FromString,
        response_serializer=message_factory.GetMessageClass(method.output_type).SerializeToString,
    )


def _response(method: MethodDescriptor, raw: bytes) -> Message:
    return message_factory.GetMessageClass(method.output_type).FromString(raw)
