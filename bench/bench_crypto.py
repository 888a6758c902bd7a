"""Throughput of the node's signature and hash primitives.

Run: ``python -m bench.bench_crypto [--seconds 0.3] [--repeats 5]``. Prints a markdown table with
ops/s (best of the repeats), microseconds per op and the throughput ratio to a bare Ed25519 verify
(``cryptography``, public key loaded afresh on every call).
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from node.crypto import eip712
from node.crypto.custody import verify_custody_signature
from node.crypto.ed25519 import Ed25519Verifier, verify_ed25519
from node.crypto.hashing import blake3_256, keccak256
from node.crypto.webauthn import WebAuthnPolicy
from node.sdk.keys import P256Key, Secp256k1Key, WebAuthnKey

RP_ID = "chain.example"
MESSAGE = bytes(range(200))


@dataclass(frozen=True)
class Result:
    name: str
    ops_per_second: float

    @property
    def microseconds(self) -> float:
        return 1e6 / self.ops_per_second


def calibrate(function: Callable[[], object], seconds: float) -> int:
    """How many calls take about ``seconds``."""
    function()
    batch = 1
    while True:
        start = time.perf_counter()
        for _ in range(batch):
            function()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 10:
            return max(1, int(batch * seconds / elapsed))
        batch *= 2


def run(function: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return calls / (time.perf_counter() - start)


def measure(named: list[tuple[str, Callable[[], object]]], seconds: float, repeats: int) -> list[Result]:
    """Best-of-``repeats`` ops/s per case; repeats are interleaved across cases so that background load
    drifting over time affects every case alike."""
    calls = [calibrate(function, seconds) for _, function in named]
    best = [0.0] * len(named)
    for _ in range(repeats):
        for index, (_, function) in enumerate(named):
            best[index] = max(best[index], run(function, calls[index]))
    return [Result(name, ops) for (name, _), ops in zip(named, best, strict=True)]


def cases() -> list[tuple[str, Callable[[], object]]]:
    ed_key = Ed25519PrivateKey.generate()
    ed_public = ed_key.public_key().public_bytes_raw()
    ed_signature = ed_key.sign(MESSAGE)
    forged = ed_key.sign(MESSAGE + b"x")
    verifier = Ed25519Verifier()

    def bare_ed25519() -> None:
        Ed25519PublicKey.from_public_bytes(ed_public).verify(ed_signature, MESSAGE)

    policy = WebAuthnPolicy(rp_id=RP_ID)
    owner = bytes(range(20))
    digest_args = dict(
        owner=owner,
        key=ed_public,
        scope=1,
        allowed_projects=[b"\x01" * 32, b"\x02" * 32],
        nonce=3,
        valid_after=1_700_000_000,
        deadline=1_700_003_600,
    )
    digest = eip712.signer_add_digest(eip712.NetworkId.MAINNET, **digest_args)  # type: ignore[arg-type]
    secp = Secp256k1Key.generate().custody_signature(digest)
    p256 = P256Key.generate().custody_signature(digest)
    webauthn = WebAuthnKey.generate(rp_id=RP_ID).custody_signature(digest)

    return [
        ("Ed25519 verify, bare (fresh key load)", bare_ed25519),
        ("Ed25519 verify_ed25519() (libsodium)", lambda: verify_ed25519(ed_public, MESSAGE, ed_signature)),
        ("Ed25519 Ed25519Verifier (libsodium)", lambda: verifier.verify(ed_public, MESSAGE, ed_signature)),
        ("Ed25519 refused (libsodium, then OpenSSL)", lambda: verifier.verify(ed_public, MESSAGE, forged)),
        ("secp256k1 recover + address", lambda: verify_custody_signature(secp, digest, webauthn_policy=policy)),
        ("P-256 verify", lambda: verify_custody_signature(p256, digest, webauthn_policy=policy)),
        ("WebAuthn verify", lambda: verify_custody_signature(webauthn, digest, webauthn_policy=policy)),
        (
            "EIP-712 digest (SignerAdd)",
            lambda: eip712.signer_add_digest(eip712.NetworkId.MAINNET, **digest_args),  # type: ignore[arg-type]
        ),
        ("BLAKE3-256, 200 bytes", lambda: blake3_256(MESSAGE)),
        ("Keccak-256, 200 bytes", lambda: keccak256(MESSAGE)),
    ]


def bare_ed25519_rate(seconds: float = 0.3, repeats: int = 5) -> float:
    """One core's bare Ed25519 verifies per second (``cryptography``, key loaded per call), best of repeats:
    the unit of the goals table's ingest rows (bench_node)."""
    return measure(cases()[:1], seconds, repeats)[0].ops_per_second


def table(results: list[Result]) -> str:
    baseline = results[0].ops_per_second
    lines = [
        "| operation | ops/s | us/op | vs bare Ed25519 verify |",
        "|---|---:|---:|---:|",
    ]
    for result in results:
        ratio = result.ops_per_second / baseline
        lines.append(f"| {result.name} | {result.ops_per_second:,.0f} | {result.microseconds:.2f} | {ratio:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.3, help="duration of one repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats; the best is reported")
    args = parser.parse_args()
    results = measure(cases(), args.seconds, args.repeats)
    machine = f"Python {platform.python_version()} on {platform.machine()}"
    print(f"{machine}, single thread, best of {args.repeats} interleaved runs\n")
    print(table(results))


if __name__ == "__main__":
    main()
