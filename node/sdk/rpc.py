"""A small synchronous gRPC client for ChainService (tests, chainctl, benchmarks).

with ChainClient("localhost:50051") as c:
    h = c.submit(msg)
    committed = c.wait_committed(h)

with ChainClient("grpcs://node.example:50051", ca_file=Path("ca.pem")) as c: ...

Targets (node/tls.py): `grpcs://host:port` and `https://host:port` are TLS, checked against `ca_file` (the
system's roots without one); `grpc://`, `http://` and a bare `host:port` are plaintext. The admin channel
(`admin_target`) takes TLS from its own scheme, and a bare admin address follows the main target's; it
presents `cert_file`/`key_file` when given (a node with TLS requires a client certificate on its admin
listener). The admin token goes only over TLS or to a loopback address: anything else is a `ConfigError`.
A TLS handshake that fails surfaces as the call's UNAVAILABLE; `tls_problem(err, client)` turns it into one
line naming the target and the CA.

`retry_seconds`: how long a write refused as a whole *for now* is sent again, waiting each time as long as
the refusal's `retry-after-ms` says (no leader yet, a draining node, a store or etcd that cannot write).
Such a refusal admitted nothing, so sending the same messages again is safe. 0 (the default here; chainctl
gives 30) raises the first refusal. A refusal without the hint, or one whose wait would end past the
budget, is raised as it came.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import grpc

from chain.v1 import (
    admin_service_pb2_grpc,
    block_pb2,
    keychain_service_pb2_grpc,
    rpc_pb2,
    service_pb2_grpc,
)
from chain.v1 import message_pb2 as pb
from node.errors import REASON_CODE, RETRY_AFTER_MS, CliCode, ConfigError, trailer
from node.tls import ClientTLS, Target, is_loopback, parse_target, sync_channel, tls_failure

T = TypeVar("T")


def reason_of(err: grpc.RpcError) -> str:
    """The stable reason code a node put in the trailing metadata of a failed call."""
    if not isinstance(err, grpc.Call):
        return CliCode.UNKNOWN
    return trailer(err.trailing_metadata(), REASON_CODE) or err.code().name


class Dropped(Exception):
    """A submitted message was accepted but dropped before commit."""


def retry_after(err: grpc.RpcError) -> float | None:
    """Seconds a refused call says to wait before trying again (its `retry-after-ms`); None when it says none."""
    if not isinstance(err, grpc.Call):
        return None
    hint = trailer(err.trailing_metadata(), RETRY_AFTER_MS)
    try:
        return None if hint is None else max(0.0, int(hint) / 1000)
    except ValueError:
        return None


class ChainClient:
    def __init__(
        self,
        target: str,
        *,
        timeout: float = 30.0,
        admin_target: str = "",
        admin_token: str = "",
        retry_seconds: float = 0.0,
        on_retry: Callable[[grpc.RpcError, float], None] | None = None,
        ca_file: Path | None = None,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        server_name: str = "",
    ) -> None:
        self.target = parse_target(target)
        self.tls = ClientTLS(ca_file, cert_file, key_file, server_name)
        admin = parse_target(admin_target, secure=self.target.secure) if admin_target else None
        if admin_token and admin is not None and not admin.secure and not is_loopback(admin.address):
            raise ConfigError(
                f"refusing to send the admin token in plaintext to {admin.address}: use grpcs:// or a loopback address"
            )
        self.admin_address = admin
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        self.channel = sync_channel(self.target.address, self.tls, options, secure=self.target.secure)
        self.stub = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)
        self.timeout = timeout
        self._admin_channel = sync_channel(admin.address, self.tls, secure=admin.secure) if admin is not None else None
        self.admin = (
            admin_service_pb2_grpc.AdminServiceStub(self._admin_channel) if self._admin_channel is not None else None
        )
        self.admin_metadata = (("authorization", f"Bearer {admin_token}"),) if admin_token else ()
        self.retry_seconds = retry_seconds
        self.on_retry = on_retry  # told (refusal, seconds to wait) before each retry

    def __enter__(self) -> ChainClient:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()
        if self._admin_channel is not None:
            self._admin_channel.close()

    def submit(self, msg: pb.Message) -> bytes:
        req = rpc_pb2.SubmitMessageRequest(message=msg)
        resp = self._retrying(lambda: self.stub.SubmitMessage(req, timeout=self.timeout))
        return bytes(resp.hash)

    def batch(self, msgs: Sequence[pb.Message]) -> list[rpc_pb2.SubmitResult]:
        req = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        return list(self._retrying(lambda: self.stub.BatchSubmitMessages(req, timeout=self.timeout)).results)

    def _retrying(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                return call()
            except grpc.RpcError as err:
                wait = retry_after(err)
                if wait is None or time.monotonic() + wait > deadline:
                    raise
                if self.on_retry is not None:
                    self.on_retry(err, wait)
                time.sleep(wait)

    def wait_committed(self, message_hash: bytes, timeout: float = 30.0) -> block_pb2.CommittedMessage:
        deadline = time.monotonic() + timeout
        while True:
            try:
                resp = self.stub.GetMessage(rpc_pb2.GetMessageRequest(hash=message_hash), timeout=self.timeout)
                return resp.message
            except grpc.RpcError as err:
                if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                if "dropped" in (err.details() or ""):
                    raise Dropped(err.details()) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {message_hash.hex()} not committed within {timeout} s")
            time.sleep(0.05)

    def commit(self, *msgs: pb.Message, timeout: float = 30.0) -> list[block_pb2.CommittedMessage]:
        """Submit messages (in order, one batch) and wait until all are committed."""
        results = self.batch(msgs)
        bad = [r for r in results if not r.accepted]
        if bad:
            raise ValueError(f"rejected: {[(r.index, r.reason_code, r.detail) for r in bad]}")
        return [self.wait_committed(r.hash, timeout) for r in results]


def target_text(target: Target) -> str:
    """A target as the user wrote it: with `grpcs://` when it is TLS."""
    return f"grpcs://{target.address}" if target.secure else target.address


def tls_problem(err: grpc.RpcError, target: Target, tls: ClientTLS) -> str | None:
    """One line for a call that failed in the TLS handshake (or a plaintext call a TLS server closed), naming
    the target and the CA; None for any other failure."""
    if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    details = err.details() or ""
    where = target_text(target)
    if not target.secure:
        if "socket closed" in details.lower() or "connection reset" in details.lower():
            return (
                f"{where} closed the connection without a gRPC answer: if the node serves TLS, "
                f"use grpcs://{target.address}"
            )
        return None
    if "socket closed" in details.lower():
        return (
            f"{where} closed the connection in the TLS handshake: it takes only client certificates signed by "
            f"its CA ({tls.flags[1]}, {tls.flags[2]})"
        )
    if not (tls_failure(details) or "hostname verification" in details.lower()):
        return None
    return f"TLS with {where} failed: {tls_reason(details, target, tls)}"


def tls_reason(details: str, target: Target, tls: ClientTLS) -> str:
    text = details.upper()
    if "WRONG_VERSION_NUMBER" in text or "PACKET_LENGTH_TOO_LONG" in text or "HTTP_REQUEST" in text:
        return f"the server does not speak TLS (use grpc://{target.address} for a plaintext node)"
    if "HOSTNAME VERIFICATION" in text:
        name = tls.server_name or target.host
        return f"the node's certificate does not name {name!r}"
    if "CERTIFICATE_VERIFY_FAILED" in text or "BAD_SIGNATURE" in text or "ISSUER" in text:
        return f"the node's certificate is not signed by {tls.describe()}"
    if "CERTIFICATE_REQUIRED" in text or "PEER_DID_NOT_RETURN_A_CERTIFICATE" in text:
        return f"the node requires a client certificate ({tls.flags[1]}, {tls.flags[2]})"
    if "EXPIRED" in text:
        return "the node's certificate has expired"
    return f"handshake refused ({' '.join(details.split()[-12:])}); trusting {tls.describe()}"
