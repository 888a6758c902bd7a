"""Regenerate the Python code for the chain.v1 protocol.

Usage: python proto/generate.py [--out DIR]

Writes *_pb2.py, *_pb2.pyi and *_pb2_grpc.py next to the .proto files (or
under DIR, keeping the chain/v1 layout). tests/proto/test_generated.py runs it
into a temporary directory and fails when the committed code is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

PROTO_ROOT = Path(__file__).resolve().parent


def generate(out: Path) -> list[Path]:
    sources = sorted((PROTO_ROOT / "chain" / "v1").glob("*.proto"))
    bin_dir = Path(sys.executable).parent
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--mypy_out={out}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--mypy_grpc_out={out}",
        *[str(s.relative_to(PROTO_ROOT)) for s in sources],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((out / "chain" / "v1").glob("*_pb2*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=PROTO_ROOT)
    ns = parser.parse_args()
    for path in generate(ns.out):
        print(path)


if __name__ == "__main__":
    main()
