"""Proof that a forwarded batch comes from a member of this cluster, so its signatures are not checked again.

Members of one cluster (the etcd members of a network, and read replicas that forward to them) share a
secret (`--cluster-secret-file`, or `CHAIN_NODE_CLUSTER_SECRET`). A member verifies every message it
forwards (envelope, hash, Ed25519) and attaches `chain-member-proof`: HMAC-SHA256 under the secret of
the exact encoding of the batch, each message length-prefixed. The receiver recomputes the HMAC over the
messages it received and compares with `hmac.compare_digest`; on a match it skips the signature checks
(it still validates every message against its state). The secret itself never crosses the wire, and the
proof binds the bytes: a changed, added, dropped or reordered message makes it fail.

A proof that does not match (another secret, a forgery, a re-encoding that differs) or a proof sent to a
node without a secret is not an error: the batch is verified in full like any client's, and a warning
(at most one a minute) says so. Nothing here logs the secret or a proof.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable, Sequence
from typing import Any

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

    def _warn(self, what: str) -> None:
        if self._warning.due():
            log.warning("%s; its signatures are verified in full", what)
