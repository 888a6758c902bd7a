"""The SDK works without the node's server code: in a fresh interpreter where node.server, node.storage,
node.query, node.state, the gateway and lmdb cannot be imported, every node.sdk module imports, every
public name resolves, and a client writes, reads, proves and streams against a real node. Every public name
of `node.sdk.__all__` has its own docstring."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import node.sdk as sdk
from tests.fixtures.nodeproc import ROOT, NodeProcess

BLOCKED = ("node.server", "node.storage", "node.query", "node.state", "gateway", "lmdb")

HARNESS = """
import importlib.abc, sys
BLOCKED = {blocked!r}

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked: {{name}}")
        return None

sys.meta_path.insert(0, Refuse())
"""

USE = """
import pkgutil, importlib, os
import node.sdk
for info in pkgutil.iter_modules(node.sdk.__path__):
    importlib.import_module("node.sdk." + info.name)
for name in node.sdk.__all__:
    getattr(node.sdk, name)
from node.sdk import ChainClient, MessageBuilder, Ed25519Key, Secp256k1Key, statekeys
from node.sdk.authority import Authority
target, authority_file = sys.argv[1:3]
wallet, key = Secp256k1Key.generate(), Ed25519Key.generate()
me = MessageBuilder(wallet.address, key)
authority = Authority.load(__import__("pathlib").Path(authority_file))
grant = MessageBuilder(authority.wallet.address, authority.key).storage_grant(wallet.address, 1)
with ChainClient(target) as c:
    c.commit(me.signer_add(wallet, 0), grant)
    assert c.get_account(owner_address=wallet.address).storage_units == 1
    proof = c.get_operation_proof(key=statekeys.account_key(wallet.address))
    assert proof.verify(bytes(c.get_block(block_number=proof.block_number).block.header.state_root))
    assert next(iter(c.subscribe_blocks(from_block=1))).event_id == 1
loaded = [m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in BLOCKED)]
assert loaded == [], loaded
print("OK")
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path_factory.mktemp("standalone") / "data").start()
    yield proc
    proc.stop()


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = HARNESS.format(blocked=BLOCKED) + code
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_sdk_runs_without_the_server_code(node: NodeProcess) -> None:
    done = _run(USE, node.grpc_target, node.ready["devnet_authority"])
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stderr[-3000:]


@pytest.mark.parametrize("module", ["node.storage.schema", "node.server.main", "lmdb", "gateway.main"])
def test_the_harness_blocks_what_it_names(module: str) -> None:
    """The check above can fail: the harness refuses each blocked module."""
    done = _run(f"import {module}")
    assert done.returncode != 0 and "blocked" in done.stderr


def test_every_public_name_has_its_own_docstring() -> None:
    missing = [name for name in sdk.__all__ if not (getattr(sdk, name).__doc__ or "").strip()]
    assert missing == []
    assert sorted(sdk.__all__) == sorted(set(sdk.__all__))


def test_every_sdk_module_imports() -> None:
    for info in pkgutil.iter_modules(sdk.__path__):
        importlib.import_module(f"node.sdk.{info.name}")
    assert Path(sdk.__file__).parent.name == "sdk"
