"""Proof that a forwarded batch comes from a member of this cluster, so its signatures are not checked again.

Members of one cluster (the etcd members of a network, and read replicas that forward to them) share a
secret (`--cluster-secret-file`, or `CHAIN_NODE_CLUSTER_SECRET`). A member verifies every message it
forwards (envelope, hash, Ed25519) and attaches `chain-member-proof`: HMAC-SHA256 under the secret of
the exact encoding of the batch, each message length-prefixed. The receiver recomputes the HMAC over the
messages it received and compares with `hmac.compare_digest`; on a match it skips the signature checks
(it still validates every message against its state). The secret itself never crosses the wire, and the
proof binds the bytes: a changed, added, dropped or reordered message makes it fail.

The proof is honoured only on the internal listener, from a peer whose client certificate the cluster's CA
signed (`member_peer`): whoever learns the secret still cannot skip the signature checks from outside. On
the public listener, or over a plaintext internal listener, a proof is ignored and the batch verified in full.

A proof that does not match (another secret, a forgery, a re-encoding that differs), a proof sent to a
node without a secret, or one that arrives where it is not honoured is not an error: the batch is verified
in full like any client's, and a warning (at most one a minute) says so. Nothing here logs the secret or a
proof.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import grpc

from chain.v1 import message_pb2 as pb
from node.constants import MIN_CLUSTER_SECRET_BYTES
from node.observability.logs import Every

PROOF_KEY = "chain-member-proof"
MIN_SECRET_BYTES = MIN_CLUSTER_SECRET_BYTES
_DOMAIN = b"chain-node forwarded batch v1\x00"
WARN_EVERY = 60.0
log = logging.getLogger("chain.membership")


class MemberProof:
    """Makes and checks the member proof of forwarded batches; inert without a secret."""

    def __init__(self, secret: bytes = b"") -> None:
        if secret and len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"the cluster secret must be at least {MIN_SECRET_BYTES} bytes")
        self._key = secret
        self._warning = Every(WARN_EVERY)

    def __repr__(self) -> str:  # never the key
        return f"MemberProof(enabled={self.enabled})"

    @property
    def enabled(self) -> bool:
        return bool(self._key)

    def _digest(self, msgs: Sequence[pb.Message]) -> bytes:
        mac = hmac.new(self._key, _DOMAIN, hashlib.sha256)
        mac.update(len(msgs).to_bytes(4, "big"))
        for m in msgs:
            raw = m.SerializeToString()
            mac.update(len(raw).to_bytes(8, "big"))
            mac.update(raw)
        return mac.hexdigest().encode()

    def metadata(self, msgs: Sequence[pb.Message]) -> tuple[tuple[str, str], ...]:
        """Call metadata for forwarding `msgs` (which this member has verified); none without a secret."""
        return ((PROOF_KEY, self._digest(msgs).decode()),) if self._key else ()

    def vouched(self, metadata: Iterable[tuple[str, Any]] | None, msgs: Sequence[pb.Message]) -> bool:
        """True iff the call carries a proof from a member for exactly these messages."""
        given = next((v for k, v in metadata or () if k == PROOF_KEY), None)
        if given is None:
            return False
        if not self._key:
            self._warn("a forwarded batch carries a member proof but this node has no cluster secret")
            return False
        raw = given.encode() if isinstance(given, str) else bytes(given)
        if hmac.compare_digest(raw, self._digest(msgs)):
            return True
        self._warn("a forwarded batch carries a member proof that does not match (is the cluster secret the same)")
        return False

    def vouched_call(
        self, context: grpc.aio.ServicerContext[Any, Any], msgs: Sequence[pb.Message], *, internal: bool
    ) -> bool:
        """True iff this call may skip the signature checks: it came to the internal listener (`internal`) from
        a peer that completed mutual TLS, and carries a proof for exactly `msgs`. A proof anywhere else is
        said (at most once a minute) and never honoured."""
        metadata = context.invocation_metadata()
        if internal and member_peer(context):
            return self.vouched(metadata, msgs)
        if any(k == PROOF_KEY for k, _ in metadata or ()):
            self._warn("a batch carries a member proof outside the internal listener's mutual TLS: ignored")
        return False

    def _warn(self, what: str) -> None:
        if self._warning.due():
            log.warning("%s; its signatures are verified in full", what)


def member_peer(context: grpc.aio.ServicerContext[Any, Any]) -> bool:
    """True when the call's peer completed mutual TLS: gRPC verified its certificate against the listener's
    client CA (the internal listener requires one, so only members and gateways of the cluster get here)."""
    auth = context.auth_context()
    return auth.get("transport_security_type") == [b"ssl"] and bool(auth.get("x509_pem_cert"))
