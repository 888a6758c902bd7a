"""Regenerate the Python code for the chain.v1 protocol and for the etcd v3 API subset the replicated
orderer speaks (node/server/ordering/etcd/rpc.proto).

Usage: python proto/generate.py [--out DIR]

Writes *_pb2.py, *_pb2.pyi and *_pb2_grpc.py next to the .proto files (or
under DIR, keeping their layout). tests/proto/test_protocol.py runs it
into a temporary directory and fails when the committed code is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
ETCD = Path("node/server/ordering/etcd")  # relative to the repository root, which is its import root


def generate(out: Path) -> list[Path]:
    """Generate chain/v1 under `out`; returns the generated files."""
    sources = sorted((PROTO_ROOT / "chain" / "v1").glob("*.proto"))
    _protoc(PROTO_ROOT, out, [str(s.relative_to(PROTO_ROOT)) for s in sources])
    return sorted((out / "chain" / "v1").glob("*_pb2*"))


def generate_etcd(out: Path) -> list[Path]:
    """Generate the etcd API subset under `out` / node/server/ordering/etcd; returns the generated files."""
    (out / ETCD).mkdir(parents=True, exist_ok=True)
    _protoc(REPO_ROOT, out, [str(ETCD / "rpc.proto")])
    return sorted((out / ETCD).glob("*_pb2*"))


def _protoc(include: Path, out: Path, sources: list[str]) -> None:
    bin_dir = Path(sys.executable).parent
    args = [
        "protoc",
        f"-I{include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--mypy_out={out}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--mypy_grpc_out={out}",
        *sources,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="a directory for both trees (default: in place)")
    ns = parser.parse_args()
    for path in [*generate(ns.out or PROTO_ROOT), *generate_etcd(ns.out or REPO_ROOT)]:
        print(path)


if __name__ == "__main__":
    main()
