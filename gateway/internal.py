"""Metadata that only members of one deployment say to each other: the gateway never forwards it.

    if is_internal(key): drop it                      # gateway/rest/grpcweb.py, gateway/rest/grpcweb_bridge.py

A node honours such metadata only on its internal listener, from a peer with a certificate of the cluster's
CA (node/server/write/membership.py); the gateway's public surface (REST, gRPC-web, the passthrough to
`--node-web-url` and the bridge onto native gRPC) drops it from every request before anything reaches a
node, so a header a client writes can never pass for what a member says. This is the one list.
"""

from __future__ import annotations

from node.server.write.membership import PROOF_KEY

# `chain-member-proof`: a forwarded batch's proof that a member verified its signatures
INTERNAL_METADATA = frozenset({PROOF_KEY})


def is_internal(key: str) -> bool:
    """True for a header or metadata key (any case) that is the members' own and never forwarded."""
    return key.lower() in INTERNAL_METADATA
