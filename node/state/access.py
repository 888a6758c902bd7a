"""Typed access to state records over an overlay.

The state transition reads and writes records only through this class, so
key construction stays in node.storage.schema and (de)serialization here.
Records are stored as deterministic protobuf encodings (their bytes are what
the Merkle tree commits to).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from google.protobuf.message import Message as ProtoMessage

from chain.v1 import block_pb2, node_info_pb2, state_pb2
from node.storage import schema
from node.storage.kv import Overlay

R = TypeVar("R", bound=ProtoMessage)


def encode(record: ProtoMessage) -> bytes:
    return record.SerializeToString(deterministic=True)


def decode(cls: type[R], raw: bytes) -> R:
    record = cls()
    record.ParseFromString(raw)
    return record


class StateAccess:
    def __init__(self, kv: Overlay) -> None:
        self.kv = kv

    # ---- generic ----
    def load(self, cls: type[R], key: bytes) -> R | None:
        raw = self.kv.get(key)
        return None if raw is None else decode(cls, raw)

    def store(self, key: bytes, record: ProtoMessage) -> None:
        self.kv.put(key, encode(record))

    def exists(self, key: bytes) -> bool:
        return self.kv.get(key) is not None

    def delete(self, key: bytes) -> None:
        self.kv.delete(key)

    def mark(self, key: bytes) -> None:
        """An index entry with no payload."""
        self.kv.put(key, b"")

    def scan(self, cls: type[R], prefix: bytes) -> Iterator[tuple[bytes, R]]:
        for key, raw in self.kv.scan(prefix):
            yield key, decode(cls, raw)

    # ---- stamps: tombstones and LWW registers ----
    def stamp(self, key: bytes) -> int | None:
        record = self.load(state_pb2.Stamp, key)
        return None if record is None else record.timestamp

    def set_stamp(self, key: bytes, timestamp: int) -> None:
        self.store(key, state_pb2.Stamp(timestamp=timestamp))

    # ---- accounts ----
    def account(self, owner: bytes) -> state_pb2.Account | None:
        return self.load(state_pb2.Account, schema.account_key(owner))

    def account_or_new(self, owner: bytes) -> state_pb2.Account:
        """Missing account state means zero counters, not an error."""
        return self.account(owner) or state_pb2.Account(owner_address=owner)

    def put_account(self, account: state_pb2.Account) -> None:
        self.store(schema.account_key(account.owner_address), account)

    def custody_key(self, owner: bytes, key_id: bytes) -> state_pb2.CustodyKey | None:
        return self.load(state_pb2.CustodyKey, schema.custody_key_key(owner, key_id))

    def put_custody_key(self, owner: bytes, key: state_pb2.CustodyKey) -> None:
        self.store(schema.custody_key_key(owner, key.key_id), key)

    def signer(self, owner: bytes, public_key: bytes) -> state_pb2.KeyEntry | None:
        return self.load(state_pb2.KeyEntry, schema.signer_key(owner, public_key))

    # ---- projects ----
    def project(self, project_id: bytes) -> state_pb2.Project | None:
        return self.load(state_pb2.Project, schema.project_key(project_id))

    def put_project(self, project: state_pb2.Project) -> None:
        self.store(schema.project_key(project.project_id), project)

    def project_id_by_name(self, owner: bytes, name: str) -> bytes | None:
        return self.kv.get(schema.project_name_key(owner, name))

    def ref(self, project_id: bytes, name: bytes) -> state_pb2.Ref | None:
        return self.load(state_pb2.Ref, schema.ref_key(project_id, name))

    def commit(self, project_id: bytes, commit_hash: bytes) -> state_pb2.Commit | None:
        return self.load(state_pb2.Commit, schema.commit_key(project_id, commit_hash))

    def collaborator(self, project_id: bytes, address: bytes) -> state_pb2.Collaborator | None:
        return self.load(state_pb2.Collaborator, schema.collaborator_key(project_id, address))

    def merge_request(self, project_id: bytes, request_id: bytes) -> state_pb2.MergeRequest | None:
        return self.load(state_pb2.MergeRequest, schema.merge_request_key(project_id, request_id))

    # ---- storage ----
    def grant_index(self, owner: bytes) -> state_pb2.StorageGrantIndex:
        return self.load(state_pb2.StorageGrantIndex, schema.storage_grant_index_key(owner)) or (
            state_pb2.StorageGrantIndex()
        )

    def grant(self, owner: bytes, grant_id: bytes) -> state_pb2.StorageGrant | None:
        return self.load(state_pb2.StorageGrant, schema.storage_grant_key(owner, grant_id))

    def active_units(self, owner: bytes, now: int) -> int:
        total = 0
        for grant_id in self.grant_index(owner).grant_ids[:]:  # a list: upb's container iterates by IndexError
            grant = self.grant(owner, grant_id)
            if grant is not None and grant.expires_at > now:
                total += grant.units
        return total

    # ---- chain data ----
    def message_seen(self, message_hash: bytes) -> bool:
        return self.exists(schema.message_key(message_hash))

    def head(self) -> block_pb2.Block | None:
        return self.load(block_pb2.Block, schema.meta_key(schema.META_HEAD))

    def stats(self) -> node_info_pb2.ChainStats:
        return self.load(node_info_pb2.ChainStats, schema.meta_key(schema.META_STATS)) or node_info_pb2.ChainStats()
