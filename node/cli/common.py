"""What every chainctl command shares: the context (node, key store, output), errors, resolution of
names to addresses and project ids, submitting messages, JSON rendering of protobuf messages."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from chain.v1 import block_pb2, rpc_pb2
from chain.v1 import message_pb2 as pb
from node import constants as C
from node.cli.config import AccountEntry, KeyStore, Profile, StoredKey, StoreError
from node.errors import CliCode
from node.sdk.keys import Ed25519Key
from node.sdk.messages import MessageBuilder
from node.sdk.rpc import ChainClient, Dropped, reason_of

if TYPE_CHECKING:
    import argparse

    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    SubParsers = Any

# Descriptors come from either the pure-Python or the upb implementation; their stubs disagree.
FieldDesc: TypeAlias = Any

NODE_ENV = "CHAINCTL_NODE"
DEFAULT_NODE = "localhost:50051"
HEX_RE = re.compile(r"^(?:0x)?[0-9a-fA-F]*$")
DROPPED_RE = re.compile(r"dropped at block \d+: ([A-Z_]+)\s*(.*)$")


class CliError(Exception):
    """A failure chainctl reports as ``error: REASON: message``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def one_line(text: str) -> str:
    return " ".join(text.split())


def hex0x(data: bytes) -> str:
    return "0x" + data.hex()


def parse_hex(text: str, length: int | None = None, what: str = "value") -> bytes:
    """``0x``-prefixed or bare hex; ``length`` bytes when given."""
    raw = text.removeprefix("0x").removeprefix("0X")
    if not HEX_RE.match(raw) or len(raw) % 2:
        raise CliError(CliCode.INVALID_ARGUMENT, f"{what}: {text!r} is not hex")
    data = bytes.fromhex(raw)
    if length is not None and len(data) != length:
        raise CliError(CliCode.INVALID_ARGUMENT, f"{what}: expected {length} bytes of hex, got {len(data)}")
    return data


def is_hex_of(text: str, length: int) -> bool:
    raw = text.removeprefix("0x")
    return len(raw) == 2 * length and bool(HEX_RE.match(raw))


def ref_name_bytes(name: str) -> bytes:
    """A ref name as the chain stores it: ``main`` means ``refs/heads/main``."""
    full = name if name.startswith("refs/") else f"refs/heads/{name}"
    data = full.encode("utf-8")
    if not 1 <= len(data) <= C.MAX_REF_NAME_LEN or b"\x00" in data:
        raise CliError(CliCode.INVALID_ARGUMENT, f"ref name {name!r}: 1-{C.MAX_REF_NAME_LEN} bytes, no NUL")
    return data


def show_ref_name(name: bytes) -> str:
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        return hex0x(name)


# ---- protobuf <-> JSON (bytes as 0x-hex, enums by name, proto field names) ----


def _scalar_json(fd: FieldDesc, value: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return hex0x(bytes(value))
    if fd.type == FieldDescriptor.TYPE_ENUM:
        enum_value = fd.enum_type.values_by_number.get(int(value))
        return enum_value.name if enum_value is not None else int(value)
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    return value


def to_json(msg: ProtoMessage) -> dict[str, Any]:
    """A protobuf message as JSON: every scalar (defaults included), set sub-messages, bytes as 0x-hex."""
    out: dict[str, Any] = {}
    fields: list[FieldDesc] = list(msg.DESCRIPTOR.fields)
    for fd in fields:
        value = getattr(msg, fd.name)
        if fd.is_repeated:
            if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
                value_fd = fd.message_type.fields_by_name["value"]
                out[fd.name] = {str(k): _scalar_json(value_fd, v) for k, v in value.items()}
            else:
                out[fd.name] = [_scalar_json(fd, v) for v in value]
        elif fd.has_presence and not msg.HasField(fd.name):
            continue
        else:
            out[fd.name] = _scalar_json(fd, value)
    return out


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False)


def render_text(data: Any, indent: int = 0) -> list[str]:
    """A readable listing of JSON-shaped data (``key: value`` lines, nested blocks indented)."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, dict) and value:
                lines.append(f"{pad}{key}:")
                lines.extend(render_text(value, indent + 1))
            elif isinstance(value, list) and value and isinstance(value[0], (dict, list)):
                lines.append(f"{pad}{key}:")
                for item in value:
                    sub = render_text(item, indent + 2)
                    if sub:
                        sub[0] = f"{pad}  - {sub[0].lstrip()}"
                    lines.extend(sub)
            elif isinstance(value, list):
                lines.append(f"{pad}{key}: {', '.join(str(v) for v in value) if value else '[]'}")
            else:
                lines.append(f"{pad}{key}: {'' if value is None else value}")
    elif isinstance(data, list):
        for item in data:
            sub = render_text(item, indent + 1)
            if sub:
                sub[0] = f"{pad}- {sub[0].lstrip()}"
            lines.extend(sub)
    else:
        lines.append(f"{pad}{data}")
    return lines


# ---- progress on stderr ----


class Progress:
    """A plain-text progress bar on stderr (only when stderr is a terminal and output is not JSON)."""

    WIDTH = 30

    def __init__(self, label: str, total: int, stream: TextIO, enabled: bool) -> None:
        self.label = label
        self.total = max(total, 0)
        self.done = 0
        self.stream = stream
        self.enabled = enabled and self.total > 0
        self._last = 0.0

    def advance(self, n: int) -> None:
        self.done = min(self.total, self.done + n)
        now = time.monotonic()
        if self.enabled and (self.done == self.total or now - self._last > 0.1):
            self._last = now
            filled = self.WIDTH * self.done // self.total if self.total else self.WIDTH
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# ---- the context every command gets ----


@dataclass
class Context:
    node: str
    home: Path
    json: bool
    account_ref: str | None = None
    timeout: float = 30.0
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    _client: ChainClient | None = None
    _store: KeyStore | None = None
    _profile: Profile | None = None
    _network: pb.Network.ValueType | None = None

    # -- resources --
    @property
    def client(self) -> ChainClient:
        if self._client is None:
            self._client = ChainClient(self.node, timeout=self.timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def store(self) -> KeyStore:
        if self._store is None:
            self._store = KeyStore(self.home)
        return self._store

    @property
    def profile(self) -> Profile:
        if self._profile is None:
            self._profile = Profile.load(self.home)
        return self._profile

    @property
    def progress_enabled(self) -> bool:
        return not self.json and self.err.isatty()

    # -- output --
    def emit(self, data: Any, text: str | Sequence[str] | None = None) -> None:
        """Print ``data`` as JSON with --json, else ``text`` (or a readable listing of ``data``)."""
        if self.json:
            self.out.write(dump_json(data) + "\n")
            return
        if text is None:
            lines = render_text(data)
        elif isinstance(text, str):
            lines = [text]
        else:
            lines = list(text)
        if lines:
            self.out.write("\n".join(lines) + "\n")

    def note(self, text: str) -> None:
        """Human progress notes on stderr (silent with --json)."""
        if not self.json:
            self.err.write(text + "\n")
            self.err.flush()

    # -- chain --
    def network(self) -> pb.Network.ValueType:
        """The node's network (messages must carry it)."""
        if self._network is None:
            status = self.client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=self.timeout).status
            name = f"NETWORK_{status.network.upper()}"
            if name not in pb.Network.keys():  # noqa: SIM118 - an EnumTypeWrapper, not a dict
                raise CliError(CliCode.WRONG_NETWORK, f"node reports unknown network {status.network!r}")
            self._network = pb.Network.Value(name)
        return self._network

    def builder(self, owner: bytes, signer: Ed25519Key) -> MessageBuilder:
        return MessageBuilder(owner, signer, network=self.network())

    def account(self) -> AccountEntry:
        """The account commands act for: ``--account`` (address or key name) or the profile default."""
        profile = self.profile
        if self.account_ref:
            entry = profile.find(self.account_ref)
            if entry is None:
                raise CliError(
                    CliCode.ACCOUNT_NOT_INITIALIZED,
                    f"no account {self.account_ref!r} in {profile.path}; run `chainctl account init` first",
                )
            return entry
        if profile.default is None or profile.default not in profile.accounts:
            raise CliError(CliCode.ACCOUNT_NOT_INITIALIZED, "no account yet; run `chainctl account init --wallet NAME`")
        return profile.accounts[profile.default]

    def account_builder(self) -> MessageBuilder:
        entry = self.account()
        return self.builder(entry.owner, self.store.get(entry.signer).ed25519())

    def key(self, name: str) -> StoredKey:
        return self.store.get(name)

    def address(self, text: str) -> bytes:
        """A 20-byte address: 0x-hex, a custody key name, or an initialized account's wallet/signer name."""
        if is_hex_of(text, C.ADDRESS_LEN):
            return parse_hex(text, C.ADDRESS_LEN, "address")
        entry = self.profile.find(text)
        if entry is not None:
            return entry.owner
        try:
            key = self.store.get(text)
        except StoreError:
            raise CliError(
                CliCode.INVALID_ARGUMENT, f"{text!r} is neither a 20-byte hex address nor a key name"
            ) from None
        address = key.address
        if address is None:
            raise CliError(CliCode.INVALID_ARGUMENT, f"key {text!r} is ed25519 and has no address")
        return address

    def project_id(self, text: str) -> bytes:
        """A project id: 0x-hex (32 bytes), ``OWNER/NAME``, or ``NAME`` of the current account."""
        if is_hex_of(text, C.HASH_LEN):
            return parse_hex(text, C.HASH_LEN, "project id")
        owner_text, sep, name = text.rpartition("/")
        owner = self.address(owner_text) if sep else self.account().owner
        req = rpc_pb2.GetProjectByNameRequest(owner_address=owner, name=name)
        return bytes(self.client.stub.GetProjectByName(req, timeout=self.timeout).project.project_id)

    # -- writes --
    def submit(self, msgs: Sequence[pb.Message], wait: bool = True) -> list[block_pb2.CommittedMessage]:
        """Submit in one batch, fail on the first rejection, then wait until every message is committed."""
        results = self.client.batch(msgs)
        for r in results:
            if not r.accepted:
                raise CliError(r.reason_code or CliCode.REJECTED, r.detail or "message rejected")
        if not wait:
            return []
        return [self.wait(bytes(r.hash)) for r in results]

    def wait(self, message_hash: bytes, timeout: float = 60.0) -> block_pb2.CommittedMessage:
        try:
            return self.client.wait_committed(message_hash, timeout=timeout)
        except (Dropped, TimeoutError) as exc:
            raise commit_failure(exc) from None


def commit_failure(exc: Dropped | TimeoutError) -> CliError:
    """A message that did not commit, as chainctl reports it (the drop reason when the node gave one)."""
    if isinstance(exc, TimeoutError):
        return CliError(CliCode.TIMEOUT, str(exc))
    text = str(exc)
    match = DROPPED_RE.search(text)
    if match:
        return CliError(match.group(1), f"dropped at commit: {match.group(2) or text}")
    return CliError(CliCode.DROPPED, text)


def committed_json(cm: block_pb2.CommittedMessage) -> dict[str, Any]:
    return {"message_hash": hex0x(bytes(cm.message.hash)), "block_number": cm.block_number}


def rpc_error_line(err: grpc.RpcError) -> tuple[str, str]:
    """(reason code, one-line explanation) of a failed call."""
    reason = reason_of(err)
    details = err.details() if isinstance(err, grpc.Call) else ""
    text = one_line(details or "").removeprefix(f"{reason}: ")
    if isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAVAILABLE:
        text = f"cannot reach the node ({text})" if text else "cannot reach the node"
    return reason, text or "request failed"


def env_default(name: str, fallback: str) -> str:
    return os.environ.get(name) or fallback


Handler = Callable[[Context, Any], None]
