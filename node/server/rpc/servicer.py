"""ChainService and KeychainService: thin adapters over the reader, the pipeline and the event hub.

Errors are raised as typed ChainErrors and mapped to status by the interceptor
(native gRPC) or the gRPC-web dispatcher, both through node.server.rpc.status.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from grpc.aio import ServicerContext

from chain.v1 import (
    block_pb2,
    keychain_service_pb2,
    keychain_service_pb2_grpc,
    node_info_pb2,
    rpc_pb2,
    service_pb2_grpc,
)
from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.crypto.webauthn import COSE_ES256
from node.errors import CHAIN_HEIGHT, MessageDropped, MessageRejected, NotFound, Reason
from node.query.reader import Reader
from node.server.events import Draining, EventHub, Overflowed, Subscriber
from node.server.ordering.orderer import Orderer
from node.server.rpc.consistency import Reads, wish_of
from node.server.rpc.status import reason_trailers
from node.server.snapshots import SnapshotManager
from node.server.storage_health import StorageHealth
from node.server.write.membership import MemberProof
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.state.kinds import project_of
from node.storage import chainlog, schema

VERSION = importlib.metadata.version("chain-node")  # the one version: pyproject.toml's, as installed
HISTORY_CHUNK = 500
T = TypeVar("T")


@dataclass
class NodeState:
    chain: Chain
    mempool: Mempool
    pipeline: Pipeline
    hub: EventHub
    orderer: Orderer
    snapshots: SnapshotManager
    max_batch: int
    started_at: float = field(default_factory=time.monotonic)
    ready: bool = False
    storage: StorageHealth = field(default_factory=StorageHealth)
    members: MemberProof = field(default_factory=MemberProof)

    @property
    def serving(self) -> bool:
        """Readiness: started and not draining, caught up (the orderer says so), the store takes commits and
        has not failed an integrity check."""
        return self.ready and self.orderer.serving and self.storage.ok and self.chain.store.fault.problem is None


class ChainServicer(service_pb2_grpc.ChainServiceServicer):
    """`internal`: this instance serves the internal listener, where a forwarded batch's member proof is
    honoured from a peer that presented a certificate of the cluster's CA; on the public listener (gRPC,
    gRPC-web) the proof is ignored and every batch is verified in full."""

    def __init__(self, node: NodeState, *, internal: bool = False) -> None:
        self.node = node
        self.internal = internal
        self.reads = Reads(node.chain, node.orderer, node.hub.heights)

    async def _read(self, context: ServicerContext[Any, Any], fn: Callable[[Reader], T]) -> T:
        return await self.reads.answer(context, fn)  # the consistency asked for; `chain-height` (consistency.py)

    def _read_now(self, fn: Callable[[Reader], T]) -> T:
        with self.node.chain.read() as (view, nodes):
            return fn(Reader(view, self.node.chain.read_tree(nodes), self.node.chain.heads))

    # ---- writes ----
    async def SubmitMessage(
        self,
        request: rpc_pb2.SubmitMessageRequest,
        context: ServicerContext[rpc_pb2.SubmitMessageRequest, rpc_pb2.SubmitMessageResponse],
    ) -> rpc_pb2.SubmitMessageResponse:
        outcome = (await self.node.orderer.submit([request.message]))[0]
        if not outcome.accepted:
            raise MessageRejected(
                Reason(outcome.reason), outcome.detail, **{**outcome.values, "hash": outcome.hash.hex()}
            )
        return rpc_pb2.SubmitMessageResponse(hash=outcome.hash, accepted=True)

    async def BatchSubmitMessages(
        self,
        request: rpc_pb2.BatchSubmitMessagesRequest,
        context: ServicerContext[rpc_pb2.BatchSubmitMessagesRequest, rpc_pb2.BatchSubmitMessagesResponse],
    ) -> rpc_pb2.BatchSubmitMessagesResponse:
        if len(request.messages) > self.node.max_batch:
            raise MessageRejected(
                Reason.BATCH_TOO_LARGE,
                f"at most {self.node.max_batch} messages per batch, got {len(request.messages)}",
                limit=self.node.max_batch,
                got=len(request.messages),
            )
        vouched = self.node.members.vouched_call(context, request.messages, internal=self.internal)  # membership.py
        outcomes = await self.node.orderer.submit(list(request.messages), vouched=vouched)
        response = rpc_pb2.BatchSubmitMessagesResponse()
        add = response.results.add  # each result made in place (a list of SubmitResults would be copied in)
        for o in outcomes:
            add(index=o.index, hash=o.hash, accepted=o.accepted, reason_code=o.reason, detail=o.detail)
        return response

    async def DryRunMessage(
        self,
        request: rpc_pb2.DryRunMessageRequest,
        context: ServicerContext[rpc_pb2.DryRunMessageRequest, rpc_pb2.DryRunMessageResponse],
    ) -> rpc_pb2.DryRunMessageResponse:
        o = await self.node.pipeline.dry_run(request.message)
        return rpc_pb2.DryRunMessageResponse(hash=o.hash, valid=o.accepted, reason_code=o.reason, detail=o.detail)

    # ---- projects ----
    async def GetProject(
        self,
        request: rpc_pb2.GetProjectRequest,
        context: ServicerContext[rpc_pb2.GetProjectRequest, rpc_pb2.GetProjectResponse],
    ) -> rpc_pb2.GetProjectResponse:
        return await self._read(context, lambda r: r.get_project(request))

    async def GetProjectByName(
        self,
        request: rpc_pb2.GetProjectByNameRequest,
        context: ServicerContext[rpc_pb2.GetProjectByNameRequest, rpc_pb2.GetProjectByNameResponse],
    ) -> rpc_pb2.GetProjectByNameResponse:
        return await self._read(context, lambda r: r.get_project_by_name(request))

    async def SearchProjects(
        self,
        request: rpc_pb2.SearchProjectsRequest,
        context: ServicerContext[rpc_pb2.SearchProjectsRequest, rpc_pb2.SearchProjectsResponse],
    ) -> rpc_pb2.SearchProjectsResponse:
        return await self._read(context, lambda r: r.search_projects(request))

    async def ListProjects(
        self,
        request: rpc_pb2.ListProjectsRequest,
        context: ServicerContext[rpc_pb2.ListProjectsRequest, rpc_pb2.ListProjectsResponse],
    ) -> rpc_pb2.ListProjectsResponse:
        return await self._read(context, lambda r: r.list_projects(request))

    async def GetProjectActivity(
        self,
        request: rpc_pb2.GetProjectActivityRequest,
        context: ServicerContext[rpc_pb2.GetProjectActivityRequest, rpc_pb2.GetProjectActivityResponse],
    ) -> rpc_pb2.GetProjectActivityResponse:
        return await self._read(context, lambda r: r.get_project_activity(request))

    async def GetMergeRequest(
        self,
        request: rpc_pb2.GetMergeRequestRequest,
        context: ServicerContext[rpc_pb2.GetMergeRequestRequest, rpc_pb2.GetMergeRequestResponse],
    ) -> rpc_pb2.GetMergeRequestResponse:
        return await self._read(context, lambda r: r.get_merge_request(request))

    async def ListMergeRequests(
        self,
        request: rpc_pb2.ListMergeRequestsRequest,
        context: ServicerContext[rpc_pb2.ListMergeRequestsRequest, rpc_pb2.ListMergeRequestsResponse],
    ) -> rpc_pb2.ListMergeRequestsResponse:
        return await self._read(context, lambda r: r.list_merge_requests(request))

    async def ListMergeRequestsByRequester(
        self,
        request: rpc_pb2.ListMergeRequestsByRequesterRequest,
        context: ServicerContext[
            rpc_pb2.ListMergeRequestsByRequesterRequest, rpc_pb2.ListMergeRequestsByRequesterResponse
        ],
    ) -> rpc_pb2.ListMergeRequestsByRequesterResponse:
        return await self._read(context, lambda r: r.list_merge_requests_by_requester(request))

    # ---- git objects ----
    async def GetRef(
        self, request: rpc_pb2.GetRefRequest, context: ServicerContext[rpc_pb2.GetRefRequest, rpc_pb2.GetRefResponse]
    ) -> rpc_pb2.GetRefResponse:
        return await self._read(context, lambda r: r.get_ref(request))

    async def ListRefs(
        self,
        request: rpc_pb2.ListRefsRequest,
        context: ServicerContext[rpc_pb2.ListRefsRequest, rpc_pb2.ListRefsResponse],
    ) -> rpc_pb2.ListRefsResponse:
        return await self._read(context, lambda r: r.list_refs(request))

    async def GetRefLog(
        self,
        request: rpc_pb2.GetRefLogRequest,
        context: ServicerContext[rpc_pb2.GetRefLogRequest, rpc_pb2.GetRefLogResponse],
    ) -> rpc_pb2.GetRefLogResponse:
        return await self._read(context, lambda r: r.get_ref_log(request))

    async def GetCommit(
        self,
        request: rpc_pb2.GetCommitRequest,
        context: ServicerContext[rpc_pb2.GetCommitRequest, rpc_pb2.GetCommitResponse],
    ) -> rpc_pb2.GetCommitResponse:
        return await self._read(context, lambda r: r.get_commit(request))

    async def ListCommits(
        self,
        request: rpc_pb2.ListCommitsRequest,
        context: ServicerContext[rpc_pb2.ListCommitsRequest, rpc_pb2.ListCommitsResponse],
    ) -> rpc_pb2.ListCommitsResponse:
        return await self._read(context, lambda r: r.list_commits(request))

    async def GetCommitAncestors(
        self,
        request: rpc_pb2.GetCommitAncestorsRequest,
        context: ServicerContext[rpc_pb2.GetCommitAncestorsRequest, rpc_pb2.GetCommitAncestorsResponse],
    ) -> rpc_pb2.GetCommitAncestorsResponse:
        return await self._read(context, lambda r: r.get_commit_ancestors(request))

    async def ListCollaborators(
        self,
        request: rpc_pb2.ListCollaboratorsRequest,
        context: ServicerContext[rpc_pb2.ListCollaboratorsRequest, rpc_pb2.ListCollaboratorsResponse],
    ) -> rpc_pb2.ListCollaboratorsResponse:
        return await self._read(context, lambda r: r.list_collaborators(request))

    # ---- accounts ----
    async def GetAccount(
        self,
        request: rpc_pb2.GetAccountRequest,
        context: ServicerContext[rpc_pb2.GetAccountRequest, rpc_pb2.GetAccountResponse],
    ) -> rpc_pb2.GetAccountResponse:
        return await self._read(context, lambda r: r.get_account(request))

    async def GetAccountActivity(
        self,
        request: rpc_pb2.GetAccountActivityRequest,
        context: ServicerContext[rpc_pb2.GetAccountActivityRequest, rpc_pb2.GetAccountActivityResponse],
    ) -> rpc_pb2.GetAccountActivityResponse:
        return await self._read(context, lambda r: r.get_account_activity(request))

    async def GetKey(
        self, request: rpc_pb2.GetKeyRequest, context: ServicerContext[rpc_pb2.GetKeyRequest, rpc_pb2.GetKeyResponse]
    ) -> rpc_pb2.GetKeyResponse:
        return await self._read(context, lambda r: r.get_key(request))

    async def ListKeys(
        self,
        request: rpc_pb2.ListKeysRequest,
        context: ServicerContext[rpc_pb2.ListKeysRequest, rpc_pb2.ListKeysResponse],
    ) -> rpc_pb2.ListKeysResponse:
        return await self._read(context, lambda r: r.list_keys(request))

    async def ListVerifications(
        self,
        request: rpc_pb2.ListVerificationsRequest,
        context: ServicerContext[rpc_pb2.ListVerificationsRequest, rpc_pb2.ListVerificationsResponse],
    ) -> rpc_pb2.ListVerificationsResponse:
        return await self._read(context, lambda r: r.list_verifications(request))

    async def ListLinks(
        self,
        request: rpc_pb2.ListLinksRequest,
        context: ServicerContext[rpc_pb2.ListLinksRequest, rpc_pb2.ListLinksResponse],
    ) -> rpc_pb2.ListLinksResponse:
        return await self._read(context, lambda r: r.list_links(request))

    async def ListLinksByTarget(
        self,
        request: rpc_pb2.ListLinksByTargetRequest,
        context: ServicerContext[rpc_pb2.ListLinksByTargetRequest, rpc_pb2.ListLinksByTargetResponse],
    ) -> rpc_pb2.ListLinksByTargetResponse:
        return await self._read(context, lambda r: r.list_links_by_target(request))

    async def ListReactions(
        self,
        request: rpc_pb2.ListReactionsRequest,
        context: ServicerContext[rpc_pb2.ListReactionsRequest, rpc_pb2.ListReactionsResponse],
    ) -> rpc_pb2.ListReactionsResponse:
        return await self._read(context, lambda r: r.list_reactions(request))

    async def ListReactionsByTarget(
        self,
        request: rpc_pb2.ListReactionsByTargetRequest,
        context: ServicerContext[rpc_pb2.ListReactionsByTargetRequest, rpc_pb2.ListReactionsByTargetResponse],
    ) -> rpc_pb2.ListReactionsByTargetResponse:
        return await self._read(context, lambda r: r.list_reactions_by_target(request))

    # ---- blocks and messages ----
    async def GetBlock(
        self,
        request: rpc_pb2.GetBlockRequest,
        context: ServicerContext[rpc_pb2.GetBlockRequest, rpc_pb2.GetBlockResponse],
    ) -> rpc_pb2.GetBlockResponse:
        return await self._read(context, lambda r: r.get_block(request))

    async def ListBlocks(
        self,
        request: rpc_pb2.ListBlocksRequest,
        context: ServicerContext[rpc_pb2.ListBlocksRequest, rpc_pb2.ListBlocksResponse],
    ) -> rpc_pb2.ListBlocksResponse:
        return await self._read(context, lambda r: r.list_blocks(request))

    async def GetMessage(
        self,
        request: rpc_pb2.GetMessageRequest,
        context: ServicerContext[rpc_pb2.GetMessageRequest, rpc_pb2.GetMessageResponse],
    ) -> rpc_pb2.GetMessageResponse:
        try:
            return await self._read(context, lambda r: r.get_message(request))
        except NotFound:
            dropped = self.node.pipeline.dropped.get(bytes(request.hash))  # admitted here, then dropped: why
            if dropped is not None:
                raise MessageDropped(request.hash.hex(), dropped.reason, dropped.detail, dropped.height) from None
            raise

    async def ListMessages(
        self,
        request: rpc_pb2.ListMessagesRequest,
        context: ServicerContext[rpc_pb2.ListMessagesRequest, rpc_pb2.ListMessagesResponse],
    ) -> rpc_pb2.ListMessagesResponse:
        return await self._read(context, lambda r: r.list_messages(request))

    # ---- proofs ----
    async def GetOperationProof(
        self,
        request: rpc_pb2.GetOperationProofRequest,
        context: ServicerContext[rpc_pb2.GetOperationProofRequest, rpc_pb2.GetOperationProofResponse],
    ) -> rpc_pb2.GetOperationProofResponse:
        return await self._read(context, lambda r: r.get_operation_proof(request))

    async def GetExclusionProof(
        self,
        request: rpc_pb2.GetExclusionProofRequest,
        context: ServicerContext[rpc_pb2.GetExclusionProofRequest, rpc_pb2.GetExclusionProofResponse],
    ) -> rpc_pb2.GetExclusionProofResponse:
        return await self._read(context, lambda r: r.get_exclusion_proof(request))

    async def VerifyOperationProof(
        self,
        request: rpc_pb2.VerifyOperationProofRequest,
        context: ServicerContext[rpc_pb2.VerifyOperationProofRequest, rpc_pb2.VerifyOperationProofResponse],
    ) -> rpc_pb2.VerifyOperationProofResponse:
        return await self._read(context, lambda r: r.verify_operation_proof(request))

    async def GetStorageQuotaProof(
        self,
        request: rpc_pb2.GetStorageQuotaProofRequest,
        context: ServicerContext[rpc_pb2.GetStorageQuotaProofRequest, rpc_pb2.GetStorageQuotaProofResponse],
    ) -> rpc_pb2.GetStorageQuotaProofResponse:
        return await self._read(context, lambda r: r.get_storage_quota_proof(request))

    # ---- node operations ----
    async def GetNodeStatus(
        self,
        request: rpc_pb2.GetNodeStatusRequest,
        context: ServicerContext[rpc_pb2.GetNodeStatusRequest, rpc_pb2.GetNodeStatusResponse],
    ) -> rpc_pb2.GetNodeStatusResponse:
        if (wish := wish_of(context.invocation_metadata())) is not None:  # a --follow replica's read index
            await self.reads.settle(wish, context.time_remaining())
        head = self.node.chain.head().header
        context.set_trailing_metadata(((CHAIN_HEIGHT, str(head.number)),))
        status = node_info_pb2.NodeStatus(
            block_height=head.number,
            mempool_size=len(self.node.mempool),
            pending_blocks=self.node.orderer.pending_blocks,
            network=pb.Network.Name(self.node.chain.params.network).removeprefix("NETWORK_").lower(),
            version=VERSION,
            uptime_seconds=int(time.monotonic() - self.node.started_at),
            state_root=head.state_root,
            role=self.node.orderer.role,
            leader=self.node.orderer.leader,
            applied_height=head.number,
            log_height=max(self.node.orderer.log_height, head.number),
        )
        return rpc_pb2.GetNodeStatusResponse(status=status)

    async def GetHealth(
        self,
        request: rpc_pb2.GetHealthRequest,
        context: ServicerContext[rpc_pb2.GetHealthRequest, rpc_pb2.GetHealthResponse],
    ) -> rpc_pb2.GetHealthResponse:
        ready = self.node.serving
        detail = "serving" if ready else "not serving"
        if not self.node.storage.ok:
            detail = f"not serving: storage failed: {self.node.storage.failure}"
        corrupted = self.node.chain.store.fault.problem
        if corrupted is not None:
            detail = f"not serving: store corrupted: {corrupted}"
        return rpc_pb2.GetHealthResponse(live=True, ready=ready, detail=detail)

    async def GetChainStats(
        self,
        request: rpc_pb2.GetChainStatsRequest,
        context: ServicerContext[rpc_pb2.GetChainStatsRequest, rpc_pb2.GetChainStatsResponse],
    ) -> rpc_pb2.GetChainStatsResponse:
        return await self._read(context, lambda r: rpc_pb2.GetChainStatsResponse(stats=r.chain_stats()))

    async def GetSnapshotInfo(
        self,
        request: rpc_pb2.GetSnapshotInfoRequest,
        context: ServicerContext[rpc_pb2.GetSnapshotInfoRequest, rpc_pb2.GetSnapshotInfoResponse],
    ) -> rpc_pb2.GetSnapshotInfoResponse:
        latest = self.node.snapshots.latest()
        if latest is None:
            raise NotFound("snapshot", "no snapshot has been taken (AdminService.CreateSnapshot)")
        return rpc_pb2.GetSnapshotInfoResponse(snapshot=latest)

    async def GetMempoolInfo(
        self,
        request: rpc_pb2.GetMempoolInfoRequest,
        context: ServicerContext[rpc_pb2.GetMempoolInfoRequest, rpc_pb2.GetMempoolInfoResponse],
    ) -> rpc_pb2.GetMempoolInfoResponse:
        counts = [
            node_info_pb2.MessageTypeCount(type=pb.MessageType.ValueType(t), count=n)
            for t, n in sorted(self.node.mempool.counts().items())
        ]
        info = node_info_pb2.MempoolInfo(
            size=len(self.node.mempool), counts=counts, capacity=self.node.mempool.capacity
        )
        return rpc_pb2.GetMempoolInfoResponse(mempool=info)

    # ---- streams ----
    async def SubscribeMessages(
        self,
        request: rpc_pb2.SubscribeMessagesRequest,
        context: ServicerContext[rpc_pb2.SubscribeMessagesRequest, rpc_pb2.SubscribeMessagesResponse],
    ) -> AsyncIterator[rpc_pb2.SubscribeMessagesResponse]:
        types = set(request.types)
        project = bytes(request.project_id)

        def wanted(m: block_pb2.CommittedMessage) -> bool:
            if types and m.message.data.type not in types:
                return False
            return not project or _project_of(m) == project

        sub = self.node.hub.subscribe("messages")
        try:
            last = self._message_start(request)
            while True:  # history from the store, in chunks, until caught up with what the hub will deliver
                chunk = self._events_after(last)
                for m in chunk:
                    last = m.event_id
                    if wanted(m):
                        yield rpc_pb2.SubscribeMessagesResponse(event_id=m.event_id, message=m)
                if len(chunk) < HISTORY_CHUNK:
                    break
            while True:
                item = await _next(sub, context)
                assert isinstance(item, block_pb2.CommittedMessage)
                if item.event_id <= last:
                    continue  # already sent from history
                last = item.event_id
                if wanted(item):
                    yield rpc_pb2.SubscribeMessagesResponse(event_id=item.event_id, message=item)
        finally:
            self.node.hub.unsubscribe(sub)

    def _events_after(self, after: int) -> list[block_pb2.CommittedMessage]:
        with self.node.chain.read() as (view, nodes):
            return _events_after(Reader(view, nodes), after, HISTORY_CHUNK)

    def _block(self, number: int) -> block_pb2.Block:
        with self.node.chain.read() as (view, nodes):
            return Reader(view, nodes).get_block(rpc_pb2.GetBlockRequest(block_number=number)).block

    def _message_start(self, request: rpc_pb2.SubscribeMessagesRequest) -> int:
        """The event id after which to deliver (exclusive)."""
        if request.after_event_id:
            return int(request.after_event_id)
        if request.from_block:
            return self._read_now(lambda r: _last_event_before(r, int(request.from_block)))
        return int(self._read_now(lambda r: r.chain_stats()).total_messages)

    async def SubscribeBlocks(
        self,
        request: rpc_pb2.SubscribeBlocksRequest,
        context: ServicerContext[rpc_pb2.SubscribeBlocksRequest, rpc_pb2.SubscribeBlocksResponse],
    ) -> AsyncIterator[rpc_pb2.SubscribeBlocksResponse]:
        sub = self.node.hub.subscribe("blocks")
        try:
            if request.after_event_id:
                last = int(request.after_event_id)
            elif request.from_block:
                last = int(request.from_block) - 1
            else:
                last = self.node.chain.height
            while True:
                height = self.node.chain.height
                if last >= height:
                    break
                for number in range(last + 1, min(height, last + HISTORY_CHUNK) + 1):
                    block = self._block(number)
                    last = number
                    yield rpc_pb2.SubscribeBlocksResponse(event_id=number, block=_shape(block, request.include_chunks))
            while True:
                item = await _next(sub, context)
                assert isinstance(item, block_pb2.Block)
                if item.header.number <= last:
                    continue
                last = item.header.number
                yield rpc_pb2.SubscribeBlocksResponse(event_id=last, block=_shape(item, request.include_chunks))
        finally:
            self.node.hub.unsubscribe(sub)


async def _next(sub: Subscriber, context: ServicerContext[Any, Any]) -> block_pb2.Block | block_pb2.CommittedMessage:
    try:
        return await sub.next()
    except Overflowed:
        await context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "subscriber fell too far behind; resume with after_event_id",
            reason_trailers(Reason.SLOW_SUBSCRIBER),
        )
        raise  # abort raises; this is for type checkers
    except Draining:
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            "this node is shutting down; resume with after_event_id on another node",
            reason_trailers(Reason.DRAINING),
        )
        raise


def _shape(block: block_pb2.Block, include_chunks: bool) -> block_pb2.Block:
    if include_chunks or not block.chunks:
        return block
    return block_pb2.Block(header=block.header, hash=block.hash)  # the header only: no copy of the messages


def _project_of(m: block_pb2.CommittedMessage) -> bytes:
    return project_of(m.message.data, m.message.hash)


def _events_after(r: Reader, after: int, limit: int) -> list[block_pb2.CommittedMessage]:
    out = []
    for key, value in r.view.scan(schema.events_prefix(), schema.event_key(after + 1)):
        record = chainlog.event_record(r.view, value)
        if record is None:
            raise NotFound("message", f"of event {int.from_bytes(key[1:], 'big')}")
        out.append(record)
        if len(out) == limit:
            break
    return out


def _last_event_before(r: Reader, block_number: int) -> int:
    """The event id of the last message committed before `block_number`."""
    for number in range(block_number, r.head().header.number + 1):
        block = r.get_block(rpc_pb2.GetBlockRequest(block_number=number)).block
        for chunk in block.chunks:
            for m in chunk.messages:
                return int(r.get_message(rpc_pb2.GetMessageRequest(hash=m.hash)).message.event_id) - 1
    return int(r.chain_stats().total_messages)


class KeychainServicer(keychain_service_pb2_grpc.KeychainServiceServicer):
    def __init__(self, node: NodeState) -> None:
        self.node = node
        self.reads = Reads(node.chain, node.orderer, node.hub.heights)

    async def ListCustodyKeys(
        self,
        request: rpc_pb2.ListCustodyKeysRequest,
        context: ServicerContext[rpc_pb2.ListCustodyKeysRequest, rpc_pb2.ListCustodyKeysResponse],
    ) -> rpc_pb2.ListCustodyKeysResponse:
        return await self.reads.answer(context, lambda r: r.list_custody_keys(request))

    async def GetCustodyKey(
        self,
        request: rpc_pb2.GetCustodyKeyRequest,
        context: ServicerContext[rpc_pb2.GetCustodyKeyRequest, rpc_pb2.GetCustodyKeyResponse],
    ) -> rpc_pb2.GetCustodyKeyResponse:
        return await self.reads.answer(context, lambda r: r.get_custody_key(request))

    async def GetWebAuthnPolicy(
        self,
        request: keychain_service_pb2.GetWebAuthnPolicyRequest,
        context: ServicerContext[
            keychain_service_pb2.GetWebAuthnPolicyRequest, keychain_service_pb2.GetWebAuthnPolicyResponse
        ],
    ) -> keychain_service_pb2.GetWebAuthnPolicyResponse:
        """The network's passkey relying party (its genesis parameters; docs/crypto.md)."""
        params = self.node.chain.params
        return keychain_service_pb2.GetWebAuthnPolicyResponse(
            rp_id=params.webauthn_rp_id,
            allowed_origins=sorted(params.webauthn_origins),
            origins_derived=not params.webauthn_origins,
            algorithms=[COSE_ES256],
            user_verification_required=True,
        )
