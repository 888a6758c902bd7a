"""Fixtures of the gRPC-web tests: the JavaScript client generated from proto/chain/v1 at test time."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
JS_DIR = Path(__file__).resolve().parent / "js"
NODE_MODULES = ROOT / "node_modules"


@pytest.fixture(scope="session")
def generated_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    needed = [
        NODE_MODULES / ".bin" / "buf",
        NODE_MODULES / ".bin" / "protoc-gen-es",
        NODE_MODULES / "@connectrpc" / "connect-web",
    ]
    missing = [str(p.relative_to(ROOT)) for p in needed if not p.exists()]
    assert not missing, f"npm packages missing ({missing}): run `make install-test`"
    out = tmp_path_factory.mktemp("grpcweb-js")
    subprocess.run(
        [
            str(NODE_MODULES / ".bin" / "buf"),
            "generate",
            "--template",
            str(JS_DIR / "buf.gen.yaml"),
            "-o",
            str(out),
            "proto",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert (out / "chain" / "v1" / "service_pb.js").exists()
    # The generated modules are ES modules that import @bufbuild/protobuf: give them both.
    (out / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    (out / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
    return out
