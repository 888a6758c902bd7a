"""The second-language consumer: tests/conformance/js/check.mjs reproduces every vector under Node.js.

It uses @noble/curves, @noble/hashes, viem and @bufbuild/protobuf (package.json; `make install-test` installs
them) and the rules in docs/, not the project's code. A tampered copy of the vectors must make it fail.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "conformance" / "js" / "check.mjs"
VECTORS = ROOT / "tests" / "conformance" / "v1"
NEEDED = ("@noble/curves", "@noble/hashes", "viem", "@bufbuild/protobuf", ".bin/buf")


def run_check(vectors: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed")
    missing = [name for name in NEEDED if not (ROOT / "node_modules" / name).exists()]
    assert not missing, f"npm packages missing ({missing}): run `make install-test`"
    return subprocess.run(
        ["node", str(CHECK), str(vectors)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_js_consumer_reproduces_every_vector() -> None:
    proc = run_check(VECTORS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    counts = {f: len(json.loads((VECTORS / f"{f}.json").read_text())[key]) for f, key in _KEYS.items()}
    counts["proofs"] += len(json.loads((VECTORS / "proofs.json").read_text())["storage_quota"])
    assert summary["vectors"] == counts
    assert summary["mismatches"] == 0 and summary["checks"] > 600


_KEYS = {"messages": "vectors", "custody": "vectors", "proofs": "proofs", "rejected": "cases"}


def _flip_after(text: str, marker: str) -> str:
    """`text` with the hex digit after the first `marker` changed."""
    at = text.index(marker) + len(marker)
    return text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1 :]


def test_js_consumer_fails_on_wrong_vectors(tmp_path: Path) -> None:
    """One changed value in each family is reported as a mismatch and exits 1 (the check is not vacuous)."""
    vectors = tmp_path / "v1"
    shutil.copytree(VECTORS, vectors)
    edits = {
        "messages": lambda t: _flip_after(t, '"hash": "0x'),
        "custody": lambda t: _flip_after(t, '"digest": "0x'),
        "proofs": lambda t: _flip_after(t, '"root": "0x'),
        "rejected": lambda t: t.replace('"reason": "HASH_MISMATCH"', '"reason": "INVALID_SIGNATURE"', 1),
    }
    for family, edit in edits.items():
        path = vectors / f"{family}.json"
        path.write_text(edit(path.read_text()))
    proc = run_check(vectors)
    assert proc.returncode == 1, proc.stdout
    reported = [line.split(": got")[0] for line in proc.stderr.splitlines() if line.startswith("MISMATCH")]
    # Each edited vector is named; nothing else is.
    assert {line.split(": ")[0] for line in reported} == {
        "MISMATCH messages/signer_add_authority_bootstrap",
        "MISMATCH custody/SignerAdd/scope_owner",
        "MISMATCH custody/SignerAdd/scope_owner/alice/custody-wallet",
        "MISMATCH proofs/account_alice",
        "MISMATCH rejected/hash_mismatch",
    }
    assert "MISMATCH messages/signer_add_authority_bootstrap: hash = BLAKE3-256(data_bytes)" in reported
    assert "MISMATCH custody/SignerAdd/scope_owner: digest" in reported
    assert "MISMATCH proofs/account_alice: verifies" in reported
    assert "MISMATCH rejected/hash_mismatch: reason" in reported
