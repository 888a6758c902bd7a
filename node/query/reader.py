"""Read queries for every read RPC, over one consistent snapshot of the store.

Each method takes the RPC's request message and returns its response message;
servicers stay thin. Absent things raise NotFound, malformed requests raise
InvalidArgument. Lists are ordered prefix scans with cursor pagination.
"""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import Callable
from typing import Any

from chain.v1 import block_pb2, node_info_pb2, rpc_pb2, state_pb2
from chain.v1 import message_pb2 as pb
from node import merkle
from node.constants import ADDRESS_LEN, HASH_LEN, MAX_ANCESTOR_WALK, MAX_PAGE_SIZE, MAX_REF_NAME_LEN
from node.errors import InvalidArgument, NotFound
from node.merkle.wire import proof_from_proto, proof_to_proto
from node.query.heads import HEAD_KEY, HeadMemo
from node.query.pagination import decode_token, encode_token, page_size, scan_page
from node.state.access import R, decode
from node.storage import chainlog, schema
from node.storage.kv import ReadView

MAX_FORK_DEPTH = 16


def need(field: str, value: bytes, length: int) -> bytes:
    if len(value) != length:
        raise InvalidArgument(field, f"must be {length} bytes, got {len(value)}")
    return bytes(value)


def need_ref(field: str, value: bytes) -> bytes:
    if not 1 <= len(value) <= MAX_REF_NAME_LEN:
        raise InvalidArgument(field, f"must be 1-{MAX_REF_NAME_LEN} bytes")
    return bytes(value)


class Reader:
    def __init__(self, view: ReadView, nodes: merkle.NodeStore, heads: HeadMemo | None = None) -> None:
        self.view = view
        self.nodes = nodes
        self.heads = heads  # a read worker's: the head decoded once per head record (node/query/heads.py)

    # ---- helpers ----
    def _load(self, cls: type[R], key: bytes) -> R | None:
        raw = self.view.get(key)
        return None if raw is None else decode(cls, raw)

    def _must(self, cls: type[R], key: bytes, what: str, ident: bytes) -> R:
        record = self._load(cls, key)
        if record is None:
            raise NotFound(what, ident.hex())
        return record

    def _records(self, cls: type[R]) -> Callable[[bytes, bytes], R | None]:
        return lambda _key, raw: decode(cls, raw)

    def _list(self, cls: type[R], prefix: bytes, req: Any) -> tuple[list[R], str]:
        """One page of records stored directly under `prefix` (the common list shape)."""
        return scan_page(self.view, prefix, req.page_token, req.page_size, self._records(cls))

    def head(self) -> block_pb2.Block:
        """The head block (with a HeadMemo, shared between calls: read it, never change it)."""
        if self.heads is None:
            head = self._load(block_pb2.Block, HEAD_KEY)
        else:
            raw = self.view.get(HEAD_KEY)
            head = None if raw is None else self.heads.block(raw)
        if head is None:
            raise NotFound("head block")
        return head

    def _message_by_hash(self, _key: bytes, message_hash: bytes) -> block_pb2.CommittedMessage | None:
        return chainlog.read_message(self.view, message_hash)

    def _project(self, project_id: bytes) -> state_pb2.Project:
        pid = need("project_id", project_id, HASH_LEN)
        return self._must(state_pb2.Project, schema.project_key(pid), "project", pid)

    def _project_by_id_suffix(self, key: bytes, _raw: bytes) -> state_pb2.Project | None:
        return self._load(state_pb2.Project, schema.project_key(key[-HASH_LEN:]))

    # ---- projects ----
    def get_project(self, req: rpc_pb2.GetProjectRequest) -> rpc_pb2.GetProjectResponse:
        return rpc_pb2.GetProjectResponse(project=self._project(req.project_id))

    def get_project_by_name(self, req: rpc_pb2.GetProjectByNameRequest) -> rpc_pb2.GetProjectByNameResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        pid = self.view.get(schema.project_name_key(owner, req.name))
        if pid is None:
            raise NotFound("project", f"{owner.hex()}/{req.name}")
        return rpc_pb2.GetProjectByNameResponse(project=self._project(pid))

    def search_projects(self, req: rpc_pb2.SearchProjectsRequest) -> rpc_pb2.SearchProjectsResponse:
        if not req.name_prefix:
            raise InvalidArgument("name_prefix", "must not be empty")
        items, token = scan_page(
            self.view,
            schema.projects_by_name_prefix(req.name_prefix),
            req.page_token,
            req.page_size,
            self._project_by_id_suffix,
        )
        return rpc_pb2.SearchProjectsResponse(projects=items, next_page_token=token)

    def list_projects(self, req: rpc_pb2.ListProjectsRequest) -> rpc_pb2.ListProjectsResponse:
        if req.owner_address:
            prefix = schema.projects_by_owner_prefix(need("owner_address", req.owner_address, ADDRESS_LEN))
        else:
            prefix = schema.live_projects_prefix()
        items, token = scan_page(self.view, prefix, req.page_token, req.page_size, self._project_by_id_suffix)
        return rpc_pb2.ListProjectsResponse(projects=items, next_page_token=token)

    def get_project_activity(self, req: rpc_pb2.GetProjectActivityRequest) -> rpc_pb2.GetProjectActivityResponse:
        pid = self._project(req.project_id).project_id
        items, token = scan_page(
            self.view, schema.project_activity_prefix(pid), req.page_token, req.page_size, self._message_by_hash
        )
        return rpc_pb2.GetProjectActivityResponse(messages=items, next_page_token=token)

    def get_merge_request(self, req: rpc_pb2.GetMergeRequestRequest) -> rpc_pb2.GetMergeRequestResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        rid = need("request_id", req.request_id, HASH_LEN)
        record = self._must(state_pb2.MergeRequest, schema.merge_request_key(pid, rid), "merge request", rid)
        return rpc_pb2.GetMergeRequestResponse(merge_request=record)

    def list_merge_requests(self, req: rpc_pb2.ListMergeRequestsRequest) -> rpc_pb2.ListMergeRequestsResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        items, token = self._list(state_pb2.MergeRequest, schema.merge_requests_prefix(pid), req)
        return rpc_pb2.ListMergeRequestsResponse(merge_requests=items, next_page_token=token)

    def list_merge_requests_by_requester(
        self, req: rpc_pb2.ListMergeRequestsByRequesterRequest
    ) -> rpc_pb2.ListMergeRequestsByRequesterResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)

        def load(key: bytes, target: bytes) -> state_pb2.MergeRequest | None:
            return self._load(state_pb2.MergeRequest, schema.merge_request_key(target, key[-HASH_LEN:]))

        items, token = scan_page(
            self.view, schema.merge_requests_by_requester_prefix(owner), req.page_token, req.page_size, load
        )
        return rpc_pb2.ListMergeRequestsByRequesterResponse(merge_requests=items, next_page_token=token)

    # ---- git objects ----
    def get_ref(self, req: rpc_pb2.GetRefRequest) -> rpc_pb2.GetRefResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        name = need_ref("ref_name", req.ref_name)
        return rpc_pb2.GetRefResponse(ref=self._must(state_pb2.Ref, schema.ref_key(pid, name), "ref", name))

    def list_refs(self, req: rpc_pb2.ListRefsRequest) -> rpc_pb2.ListRefsResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        items, token = self._list(state_pb2.Ref, schema.refs_prefix(pid), req)
        return rpc_pb2.ListRefsResponse(refs=items, next_page_token=token)

    def get_ref_log(self, req: rpc_pb2.GetRefLogRequest) -> rpc_pb2.GetRefLogResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        name = need_ref("ref_name", req.ref_name)
        items, token = self._list(state_pb2.RefLogEntry, schema.ref_log_prefix(pid, name), req)
        return rpc_pb2.GetRefLogResponse(entries=items, next_page_token=token)

    def _find_commit(self, project: state_pb2.Project, commit_hash: bytes) -> state_pb2.Commit | None:
        current: state_pb2.Project | None = project
        for _ in range(MAX_FORK_DEPTH):
            if current is None:
                return None
            commit = self._load(state_pb2.Commit, schema.commit_key(current.project_id, commit_hash))
            if commit is not None or not current.forked_from:
                return commit
            current = self._load(state_pb2.Project, schema.project_key(current.forked_from))
        return None

    def get_commit(self, req: rpc_pb2.GetCommitRequest) -> rpc_pb2.GetCommitResponse:
        project = self._project(req.project_id)
        commit_hash = need("commit_hash", req.commit_hash, HASH_LEN)
        commit = self._find_commit(project, commit_hash)
        if commit is None:
            raise NotFound("commit", commit_hash.hex())
        return rpc_pb2.GetCommitResponse(commit=commit)

    def list_commits(self, req: rpc_pb2.ListCommitsRequest) -> rpc_pb2.ListCommitsResponse:
        pid = need("project_id", req.project_id, HASH_LEN)

        def load(_key: bytes, commit_hash: bytes) -> state_pb2.Commit | None:
            return self._load(state_pb2.Commit, schema.commit_key(pid, commit_hash))

        items, token = scan_page(self.view, schema.commits_by_sequence_prefix(pid), req.page_token, req.page_size, load)
        return rpc_pb2.ListCommitsResponse(commits=items, next_page_token=token)

    def get_commit_ancestors(self, req: rpc_pb2.GetCommitAncestorsRequest) -> rpc_pb2.GetCommitAncestorsResponse:
        """Breadth-first over parent links (first parents only on request), each commit once."""
        project = self._project(req.project_id)
        start = need("commit_hash", req.commit_hash, HASH_LEN)
        if self._find_commit(project, start) is None:
            raise NotFound("commit", start.hex())
        skip = _offset_token(req.page_token)
        limit = page_size(req.page_size)
        seen = {start}
        queue = deque([start])
        out: list[state_pb2.Commit] = []
        walked = 0
        while queue and walked < MAX_ANCESTOR_WALK:
            commit = self._find_commit(project, queue.popleft())
            if commit is None:
                continue
            parents = commit.parents[:1] if req.first_parent else commit.parents
            for parent in parents:
                if parent in seen:
                    continue
                seen.add(parent)
                queue.append(parent)
                found = self._find_commit(project, parent)
                if found is None:
                    continue
                walked += 1
                if walked <= skip:
                    continue
                if len(out) == limit:
                    return rpc_pb2.GetCommitAncestorsResponse(commits=out, next_page_token=_offset(skip + limit))
                out.append(found)
        return rpc_pb2.GetCommitAncestorsResponse(commits=out, next_page_token="")

    def list_collaborators(self, req: rpc_pb2.ListCollaboratorsRequest) -> rpc_pb2.ListCollaboratorsResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        items, token = self._list(state_pb2.Collaborator, schema.collaborators_prefix(pid), req)
        return rpc_pb2.ListCollaboratorsResponse(collaborators=items, next_page_token=token)

    # ---- accounts ----
    def active_units(self, owner: bytes, now: int) -> int:
        index = self._load(state_pb2.StorageGrantIndex, schema.storage_grant_index_key(owner))
        total = 0
        for grant_id in index.grant_ids[:] if index else ():  # a list: upb's container iterates by IndexError
            grant = self._load(state_pb2.StorageGrant, schema.storage_grant_key(owner, grant_id))
            if grant is not None and grant.expires_at > now:
                total += grant.units
        return total

    def get_account(self, req: rpc_pb2.GetAccountRequest) -> rpc_pb2.GetAccountResponse:
        """Any 20-byte address is an account: missing state reads as zero counters. The records are parsed
        straight into the response (no record decoded and then copied into it)."""
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        out = rpc_pb2.GetAccountResponse()
        raw = self.view.get(schema.account_key(owner))
        if raw is None:
            out.account.owner_address = owner
        else:
            out.account.ParseFromString(raw)
        units = self.active_units(owner, self.head().header.timestamp_ms // 1000)
        out.account.storage_units = units
        out.storage_units = units
        for into, prefix in (
            (out.keys, schema.signers_prefix(owner)),
            (out.custody_keys, schema.custody_keys_prefix(owner)),
            (out.verifications, schema.verifications_prefix(owner)),
        ):
            for _key, raw in self.view.scan(prefix):
                if len(into) == MAX_PAGE_SIZE:
                    break
                into.add().ParseFromString(raw)
        return out

    def get_account_activity(self, req: rpc_pb2.GetAccountActivityRequest) -> rpc_pb2.GetAccountActivityResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        items, token = scan_page(
            self.view, schema.account_activity_prefix(owner), req.page_token, req.page_size, self._message_by_hash
        )
        return rpc_pb2.GetAccountActivityResponse(messages=items, next_page_token=token)

    def get_key(self, req: rpc_pb2.GetKeyRequest) -> rpc_pb2.GetKeyResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        key = need("key", req.key, 32)
        return rpc_pb2.GetKeyResponse(key=self._must(state_pb2.KeyEntry, schema.signer_key(owner, key), "key", key))

    def list_keys(self, req: rpc_pb2.ListKeysRequest) -> rpc_pb2.ListKeysResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        items, token = self._list(state_pb2.KeyEntry, schema.signers_prefix(owner), req)
        return rpc_pb2.ListKeysResponse(keys=items, next_page_token=token)

    def list_custody_keys(self, req: rpc_pb2.ListCustodyKeysRequest) -> rpc_pb2.ListCustodyKeysResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        items, token = self._list(state_pb2.CustodyKey, schema.custody_keys_prefix(owner), req)
        return rpc_pb2.ListCustodyKeysResponse(custody_keys=items, next_page_token=token)

    def get_custody_key(self, req: rpc_pb2.GetCustodyKeyRequest) -> rpc_pb2.GetCustodyKeyResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        key_id = need("key_id", req.key_id, ADDRESS_LEN)
        record = self._must(state_pb2.CustodyKey, schema.custody_key_key(owner, key_id), "custody key", key_id)
        return rpc_pb2.GetCustodyKeyResponse(custody_key=record)

    def list_verifications(self, req: rpc_pb2.ListVerificationsRequest) -> rpc_pb2.ListVerificationsResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        items, token = self._list(state_pb2.Verification, schema.verifications_prefix(owner), req)
        return rpc_pb2.ListVerificationsResponse(verifications=items, next_page_token=token)

    def list_links(self, req: rpc_pb2.ListLinksRequest) -> rpc_pb2.ListLinksResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        kind = {pb.LINK_TYPE_FOLLOW: schema.LinkTarget.ACCOUNT, pb.LINK_TYPE_STAR: schema.LinkTarget.PROJECT}.get(
            req.type
        )
        items, token = self._list(state_pb2.Link, schema.links_prefix(owner, kind), req)
        return rpc_pb2.ListLinksResponse(links=items, next_page_token=token)

    def list_links_by_target(self, req: rpc_pb2.ListLinksByTargetRequest) -> rpc_pb2.ListLinksByTargetResponse:
        if bool(req.target_owner_address) == bool(req.target_project_id):
            raise InvalidArgument("target", "give exactly one of target_owner_address and target_project_id")
        if req.target_owner_address:
            kind, target = schema.LinkTarget.ACCOUNT, need("target_owner_address", req.target_owner_address, 20)
        else:
            kind, target = schema.LinkTarget.PROJECT, need("target_project_id", req.target_project_id, HASH_LEN)

        def load(key: bytes, _raw: bytes) -> state_pb2.Link | None:
            return self._load(state_pb2.Link, schema.link_key(key[-ADDRESS_LEN:], kind, target))

        items, token = scan_page(
            self.view, schema.links_by_target_prefix(kind, target), req.page_token, req.page_size, load
        )
        return rpc_pb2.ListLinksByTargetResponse(links=items, next_page_token=token)

    def list_reactions(self, req: rpc_pb2.ListReactionsRequest) -> rpc_pb2.ListReactionsResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        items, token = self._list(state_pb2.Reaction, schema.reactions_prefix(owner), req)
        return rpc_pb2.ListReactionsResponse(reactions=items, next_page_token=token)

    def list_reactions_by_target(
        self, req: rpc_pb2.ListReactionsByTargetRequest
    ) -> rpc_pb2.ListReactionsByTargetResponse:
        pid = need("project_id", req.project_id, HASH_LEN)
        commit_hash = need("commit_hash", req.commit_hash, HASH_LEN)

        def load(key: bytes, _raw: bytes) -> state_pb2.Reaction | None:
            owner, rtype = key[-ADDRESS_LEN - 1 : -1], key[-1]
            return self._load(state_pb2.Reaction, schema.reaction_key(owner, rtype, pid, commit_hash))

        items, token = scan_page(
            self.view, schema.reactions_by_target_prefix(pid, commit_hash), req.page_token, req.page_size, load
        )
        return rpc_pb2.ListReactionsByTargetResponse(reactions=items, next_page_token=token)

    # ---- blocks and messages ----
    def get_block(self, req: rpc_pb2.GetBlockRequest) -> rpc_pb2.GetBlockResponse:
        block = chainlog.read_block(self.view, req.block_number)
        if block is None:
            raise NotFound("block", str(req.block_number))
        return rpc_pb2.GetBlockResponse(block=block)

    def list_blocks(self, req: rpc_pb2.ListBlocksRequest) -> rpc_pb2.ListBlocksResponse:
        def load(_key: bytes, raw: bytes) -> block_pb2.Block:
            return chainlog.block_of(self.view, raw, messages=req.include_chunks)

        items, token = scan_page(self.view, schema.blocks_prefix(), req.page_token, req.page_size, load, reverse=True)
        return rpc_pb2.ListBlocksResponse(blocks=items, next_page_token=token)

    def get_message(self, req: rpc_pb2.GetMessageRequest) -> rpc_pb2.GetMessageResponse:
        h = need("hash", req.hash, HASH_LEN)
        record = chainlog.read_message(self.view, h)
        if record is None:
            raise NotFound("message", h.hex())
        return rpc_pb2.GetMessageResponse(message=record)

    def list_messages(self, req: rpc_pb2.ListMessagesRequest) -> rpc_pb2.ListMessagesResponse:
        """Committed messages of blocks start_block..end_block (inclusive), in commit order."""
        height = self.head().header.number
        end = min(req.end_block or height, height)
        limit = page_size(req.page_size)
        block_no, index = max(req.start_block, 1), 0
        if req.page_token:
            raw = decode_token(req.page_token)
            if len(raw) != 12:
                raise InvalidArgument("page_token", "not a token returned by this service")
            block_no, index = int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:], "big")
        out: list[block_pb2.CommittedMessage] = []
        while block_no <= end:
            block = chainlog.read_block(self.view, block_no)
            messages = [m for c in block.chunks for m in c.messages] if block else []
            while index < len(messages):
                if len(out) == limit:
                    token = encode_token(block_no.to_bytes(8, "big") + index.to_bytes(4, "big"))
                    return rpc_pb2.ListMessagesResponse(messages=out, next_page_token=token)
                record = chainlog.read_message(self.view, messages[index].hash)
                if record is not None:
                    out.append(record)
                index += 1
            block_no, index = block_no + 1, 0
        return rpc_pb2.ListMessagesResponse(messages=out, next_page_token="")

    # ---- proofs ----
    def _prove(self, key: bytes) -> tuple[merkle.MerkleProof, block_pb2.BlockHeader]:
        if not key or not schema.in_tree(key):
            raise InvalidArgument("key", "not a public state key (see docs/state.md)")
        header = self.head().header
        return merkle.prove(self.nodes, header.state_root, key, self.view.get), header

    def get_operation_proof(self, req: rpc_pb2.GetOperationProofRequest) -> rpc_pb2.GetOperationProofResponse:
        proof, header = self._prove(bytes(req.key))
        if proof.value is None:
            raise NotFound("state key", req.key.hex())
        return rpc_pb2.GetOperationProofResponse(
            proof=proof_to_proto(proof), state_root=header.state_root, block_number=header.number
        )

    def get_exclusion_proof(self, req: rpc_pb2.GetExclusionProofRequest) -> rpc_pb2.GetExclusionProofResponse:
        proof, header = self._prove(bytes(req.key))
        if proof.value is not None:
            raise InvalidArgument("key", "the key is present; ask GetOperationProof")
        return rpc_pb2.GetExclusionProofResponse(
            proof=proof_to_proto(proof), state_root=header.state_root, block_number=header.number
        )

    def verify_operation_proof(self, req: rpc_pb2.VerifyOperationProofRequest) -> rpc_pb2.VerifyOperationProofResponse:
        header = self.head().header
        proof = proof_from_proto(req.proof)
        current = bytes(header.state_root)
        resp = rpc_pb2.VerifyOperationProofResponse(current_root=current, block_number=header.number)
        if merkle.verify_proof(proof, current):
            resp.valid = True
        elif req.state_root and req.state_root != current and merkle.verify_proof(proof, bytes(req.state_root)):
            resp.stale = True
            resp.reason = "valid against the given root, which is no longer the committed root"
        else:
            resp.reason = "does not verify against the committed root"
        return resp

    def get_storage_quota_proof(self, req: rpc_pb2.GetStorageQuotaProofRequest) -> rpc_pb2.GetStorageQuotaProofResponse:
        owner = need("owner_address", req.owner_address, ADDRESS_LEN)
        header = self.head().header
        root = header.state_root
        now = header.timestamp_ms // 1000

        def prove(key: bytes) -> merkle.MerkleProof:
            return merkle.prove(self.nodes, root, key, self.view.get)

        index = self._load(state_pb2.StorageGrantIndex, schema.storage_grant_index_key(owner))
        bundle = rpc_pb2.GetStorageQuotaProofResponse().proof
        bundle.owner_address = owner
        bundle.state_root = root
        bundle.block_number = header.number
        bundle.block_timestamp = now
        bundle.account_proof.CopyFrom(proof_to_proto(prove(schema.account_key(owner))))
        bundle.index_proof.CopyFrom(proof_to_proto(prove(schema.storage_grant_index_key(owner))))
        for grant_id in index.grant_ids[:] if index else ():  # a list: upb's container iterates by IndexError
            key = schema.storage_grant_key(owner, grant_id)
            bundle.grant_proofs.append(proof_to_proto(prove(key)))
            grant = self._load(state_pb2.StorageGrant, key)
            if grant is not None and grant.expires_at > now:
                bundle.active_grants.append(grant)
                bundle.active_units += grant.units
        return rpc_pb2.GetStorageQuotaProofResponse(proof=bundle)

    # ---- node data ----
    def chain_stats(self) -> node_info_pb2.ChainStats:
        return self._load(node_info_pb2.ChainStats, schema.meta_key(schema.META_STATS)) or node_info_pb2.ChainStats()


def _offset(n: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(4, "big")).rstrip(b"=").decode()


def _offset_token(token: str) -> int:
    if not token:
        return 0
    raw = decode_token(token)
    if len(raw) != 4:
        raise InvalidArgument("page_token", "not a token returned by this service")
    return int.from_bytes(raw, "big")
