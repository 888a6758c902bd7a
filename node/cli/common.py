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

from node import constants as C
from node.cli.config import AccountEntry, KeyStore, Profile, StoredKey, StoreError
from node.entry import lazy
from node.errors import CliCode

if TYPE_CHECKING:
    import argparse

    from chain.v1 import block_pb2
    from chain.v1 import message_pb2 as pb
    from node.sdk.keys import Ed25519Key
    from node.sdk.messages import MessageBuilder
    from node.sdk.rpc import ChainClient

    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    SubParsers = Any

NODE_ENV = "CHAINCTL_NODE"
DEFAULT_NODE = "localhost:50051"
HEX_RE = re.compile(r"^(?:0x)?[0-9a-fA-F]*$")
# What talks to a node (grpc, protobuf: ~0.2 s to import) loads once a command first needs it, so the offline
# commands (keys, git-hash, completion) never import it (node.cli.online; tests/test_startup_imports.py).
ONLINE = "node.cli.online"


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
    retry_seconds: float = 30.0  # how long a write refused for now (with a retry hint) is sent again
    ca_file: Path | None = None  # the CA a grpcs:// node's certificate must chain to (None: the system's roots)
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
            self._client = lazy(ONLINE, "connect")(self)
        return self._client

    @property
    def has_client(self) -> bool:
        return self._client is not None

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
            self._network = lazy(ONLINE, "network")(self)
        return self._network

    def builder(self, owner: bytes, signer: Ed25519Key) -> MessageBuilder:
        builder: MessageBuilder = lazy(ONLINE, "builder")(self, owner, signer)
        return builder

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
        project_id: bytes = lazy(ONLINE, "project_by_name")(self, owner, name)
        return project_id

    # -- writes --
    def submit(self, msgs: Sequence[pb.Message], wait: bool = True) -> list[block_pb2.CommittedMessage]:
        """Submit in one batch, fail on the first rejection, then wait until every message is committed."""
        committed: list[block_pb2.CommittedMessage] = lazy(ONLINE, "submit")(self, msgs, wait)
        return committed

    def wait(self, message_hash: bytes, timeout: float = 60.0) -> block_pb2.CommittedMessage:
        committed: block_pb2.CommittedMessage = lazy(ONLINE, "wait")(self, message_hash, timeout)
        return committed


def env_default(name: str, fallback: str) -> str:
    return os.environ.get(name) or fallback


Handler = Callable[[Context, Any], int | None]  # an int: the exit status of a command that reported itself
