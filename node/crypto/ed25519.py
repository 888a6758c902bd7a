"""Ed25519 verification for delegated keys.

``verify_ed25519`` is the stateless form: it loads the public key on every call. ``Ed25519Verifier`` keeps
an instance-owned LRU cache of loaded public-key objects, which skips building the key object on each
call. With OpenSSL the gain is small (about 1-2 us of a ~100+ us verification, see docs/crypto.md):
loading only copies the 32 bytes, and the point is decoded inside every verification anyway. The node
may own one verifier per process; ``verify_ed25519`` is equally correct.

Verification semantics are those of the linked OpenSSL (RFC 8032, cofactorless, ``S < L`` enforced). All
nodes of a network must run the same semantics, so the library is part of the consensus surface.

Every signature is first checked by libsodium (PyNaCl), which takes about half of OpenSSL's time here.
libsodium's rules are OpenSSL's plus more refusals (a small-order or non-canonical public key, a
small-order R): the same cofactorless equation on the same hash, with the computed R compared to the
signature's by its encoding. So what libsodium accepts OpenSSL accepts, and only a signature libsodium
refuses is asked of OpenSSL, whose answer is the verdict. The accepted set is exactly OpenSSL's; a valid
signature costs one libsodium check, an invalid one both.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64
DEFAULT_CACHE_SIZE = 4096


def _well_formed(public_key: object, message: object, signature: object) -> bool:
    return (
        isinstance(public_key, bytes)
        and isinstance(message, bytes)
        and isinstance(signature, bytes)
        and len(public_key) == PUBLIC_KEY_SIZE
        and len(signature) == SIGNATURE_SIZE
    )


def _load(public_key: bytes) -> Ed25519PublicKey | None:
    try:
        return Ed25519PublicKey.from_public_bytes(public_key)
    except ValueError:
        return None


def _verify_loaded(key: Ed25519PublicKey, message: bytes, signature: bytes) -> bool:
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def sodium_accepts(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """libsodium's verdict on well-formed input (stricter than OpenSSL's: see the module's docstring)."""
    try:
        crypto_sign_open(signature + message, public_key)
    except BadSignatureError:
        return False
    return True


def verify_ed25519(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is a valid Ed25519 signature of ``message`` by ``public_key``.

    Never raises: wrong types, a key that is not 32 bytes or does not decode, or a signature that is
    not 64 bytes all give False.
    """
    if not _well_formed(public_key, message, signature):
        return False
    if sodium_accepts(public_key, message, signature):
        return True
    key = _load(public_key)
    return key is not None and _verify_loaded(key, message, signature)


class Ed25519Verifier:
    """Ed25519 verification with a bounded LRU cache of loaded public-key objects (thread-safe).

    Any 32 bytes load (the curve point is checked during verification), so junk keys occupy cache slots
    like real ones; the bound keeps that harmless.
    """

    def __init__(self, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        self._cache_size = cache_size
        self._keys: OrderedDict[bytes, Ed25519PublicKey] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._keys)

    def _key(self, public_key: bytes) -> Ed25519PublicKey | None:
        with self._lock:
            key = self._keys.get(public_key)
            if key is not None:
                self._keys.move_to_end(public_key)
                return key
        key = _load(public_key)
        if key is None:
            return None
        with self._lock:
            self._keys[public_key] = key
            self._keys.move_to_end(public_key)
            while len(self._keys) > self._cache_size:
                self._keys.popitem(last=False)
        return key

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """Same contract as ``verify_ed25519``: never raises, False on malformed input."""
        if not _well_formed(public_key, message, signature):
            return False
        if sodium_accepts(public_key, message, signature):
            return True
        key = self._key(public_key)
        return key is not None and _verify_loaded(key, message, signature)
