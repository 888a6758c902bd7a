"""Generate the conformance vectors: `python -m tests.conformance.generate [--out DIR]`.

Writes one JSON file per family into tests/conformance/v1/ (or DIR). Deterministic: fixed keys, clock and
signing nonces, so the same code gives byte-identical files; tests/conformance/test_vectors.py fails when
the committed files are stale. Generation itself asserts what the vectors claim (every scenario message is
committed, every rejected case is dropped with its reason), using the project's own code.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from tests.conformance import fixed, gen_custody, gen_messages, gen_proofs, gen_rejected, scenario

HERE = Path(__file__).resolve().parent
VECTORS_DIR = HERE / f"v{fixed.VERSION}"
FAMILIES = ("messages", "custody", "proofs", "rejected")


def families() -> dict[str, dict[str, Any]]:
    """Every family's document, built on chains in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        s = scenario.build(Path(tmp) / "scenario")
        try:
            docs = {
                "messages": gen_messages.family(s),
                "custody": gen_custody.family(),
                "proofs": gen_proofs.family(s),
            }
        finally:
            s.h.chain.close()
        docs["rejected"] = gen_rejected.family(Path(tmp) / "rejected")
    return docs


def render() -> dict[str, str]:
    """File name -> exact file text."""
    return {f"{name}.json": fixed.dump(doc) for name, doc in families().items()}


def write(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=VECTORS_DIR, help=f"output directory (default {VECTORS_DIR})")
    args = parser.parse_args()
    for path in write(args.out):
        print(path)


if __name__ == "__main__":
    main()
