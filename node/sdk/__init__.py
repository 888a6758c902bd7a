"""The Python client SDK: everything a program needs to write to and read from a chain node.

- ``keys``: delegated Ed25519 keys and the custody keys (secp256k1, P-256, passkeys); ``webauthn``: a
  software authenticator.
- ``messages``: ``MessageBuilder``, a signed message for every type.
- ``rpc``: ``ChainClient``, a small synchronous gRPC client.
- ``git``: a local repository read with the ``git`` CLI and mapped onto chain commits; ``push``: push
  planning and submission with per-bundle progress.
- ``proofs``: offline verification of the node's Merkle proofs (no node, no database).
- ``authority``: a storage authority's key file.

``chainctl`` (node.cli) is built on this package; the node never imports it.
"""
