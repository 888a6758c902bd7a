"""Cryptographic primitives the node verifies with.

Modules, one concept each:

- ``hashing``: Keccak-256, BLAKE3-256, SHA-256.
- ``ed25519``: delegated-key signature verification (with an instance-owned key cache).
- ``eip712_encoding``: a generic EIP-712 typed-data encoder written from the EIP.
- ``eip712``: the chain's domain (``NetworkId``) and custody structs.
- ``address``: 20-byte key addresses of custody public keys.
- ``ecdsa``: secp256k1 recovery and P-256 verification with low-S rules.
- ``webauthn``: the relying-party checks of a WebAuthn assertion (``WebAuthnPolicy``).
- ``errors``: ``CustodySignatureError`` and its ``CustodyReason`` codes.
- ``custody``: ``verify_custody_signature``, the single entry point for custody signatures.
"""
