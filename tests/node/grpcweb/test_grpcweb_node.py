"""A real JavaScript gRPC-web client (connect-web, run by Node.js) against chain-node's --web-addr."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from chain.v1 import message_pb2 as pb
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.node.grpcweb.conftest import JS_DIR, ROOT


def test_connect_web_against_the_node(node: NodeProcess, generated_js: Path):
    c = node.client()
    alice = new_account(c, node.authority())
    for i in range(3):  # a few more blocks of history
        c.commit(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {i}"))
    config = {
        "baseUrl": node.web_url,
        "genDir": str(generated_js),
        "allowedOrigin": "http://allowed.test",
        "refusedOrigin": "https://evil.example",
        "blocks": 4,
    }
    proc = subprocess.run(
        ["node", str(JS_DIR / "node_client.mjs"), json.dumps(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"]["network"] == "devnet" and out["status"]["role"] == "solo"
    assert int(out["status"]["height"]) >= 4
    assert int(out["stats"]["blocks"]) >= 5
    assert out["notFound"] == {"code": "NotFound", "reasonCode": "NOT_FOUND"}
    assert out["blocks"] == [1, 2, 3, 4]
    assert out["streamEnd"] == "Canceled"
    assert out["preflightAllowed"] == {"status": 204, "allowOrigin": "http://allowed.test"}
    assert out["preflightRefused"]["status"] == 403
    assert out["preflightRefused"]["allowOrigin"] is None
