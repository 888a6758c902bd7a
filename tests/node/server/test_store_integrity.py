"""Damaged and foreign stores over real chain-node processes: refused with one line, or detected while
serving (DATA_LOSS / DATA_CORRUPTED, NOT_SERVING, one log line); never wrong data, never a crash."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import lmdb
import pytest
from blake3 import blake3
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import block_pb2, rpc_pb2
from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.merkle.codec import PLACED_INTERNAL_LEN
from node.params import ChainParams
from node.sdk.keys import Secp256k1Key
from node.sdk.rpc import reason_of
from node.storage import chainlog, schema
from node.storage.identity import FORMAT_VERSION, StoreIdentity, read_identity_file, write_identity_file
from node.storage.lmdb_file import read_meta, walk
from tests.fixtures.actors import new_account
from tests.fixtures.formats import to_format_1
from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.fixtures.replicaset import ReplicaSet

REFUSED = 2
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class BaseStore:
    path: Path
    height: int
    blocks: dict[int, bytes]  # number -> GetBlockResponse bytes, read while the node was sound
    proofs: dict[bytes, bytes]  # public state key -> GetOperationProofResponse bytes


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> BaseStore:
    """A devnet store with accounts, projects and more than 64 blocks (so old blocks lie beyond the start-up
    head-chain check), and what a sound node answered for it."""
    path = tmp_path_factory.mktemp("base") / "node"
    node = NodeProcess(path, "--empty-block-interval", "0.01").start()
    try:
        client = node.client()
        keys = []
        for i in range(3):
            actor = new_account(client, node.authority())
            client.commit(actor.b.project_create(f"p{i}"))
            keys.append(schema.account_key(actor.address))
        deadline = time.monotonic() + 60
        while client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height < 90:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        assert node.stop() == 0
    store = Chain.open(path)  # read what it holds, from the stopped store
    height = store.height
    store.close()
    node = NodeProcess(path).start()
    try:
        client = node.client()
        blocks = {
            n: client.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=n)).SerializeToString()
            for n in range(height + 1)
        }
        proofs = {
            k: client.stub.GetOperationProof(rpc_pb2.GetOperationProofRequest(key=k)).SerializeToString() for k in keys
        }
    finally:
        assert node.stop() == 0
    return BaseStore(path, height, blocks, proofs)


def copy_of(base: BaseStore, dest: Path) -> Path:
    shutil.copytree(base.path, dest)
    (dest / "lock.mdb").unlink(missing_ok=True)
    return dest


def run_refused(data_dir: Path, *args: str) -> tuple[int, list[str]]:
    """Run chain-node expecting it to stop by itself: (exit status, non-empty stderr lines)."""
    cmd = [sys.executable, "-m", "node.server.main", "--data-dir", str(data_dir)]
    cmd += ["--grpc-addr", "127.0.0.1:0", "--web-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"]
    cmd += ["--internal-addr", "127.0.0.1:0"]
    cmd += ["--metrics-addr", "127.0.0.1:0", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "ready" not in proc.stdout
    return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()]


def assert_refused(data_dir: Path, *must_say: str, args: tuple[str, ...] = ()) -> str:
    code, lines = run_refused(data_dir, *args)
    assert code == REFUSED, lines
    assert len(lines) == 1, lines
    line = lines[0]
    assert "Traceback" not in line and line.startswith("chain-node: refusing to start: ")
    for words in must_say:
        assert words in line, line
    return line


def verify_store(data_dir: Path) -> tuple[int, list[str], str]:
    cmd = [sys.executable, "-m", "node.server.main", "verify-store", "--data-dir", str(data_dir)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()], proc.stdout


def health_of(node: NodeProcess) -> int:
    with grpc.insecure_channel(node.grpc_target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return int(stub.Check(health_pb2.HealthCheckRequest(service="")).status)


def wait_health(node: NodeProcess, wanted: int) -> None:
    deadline = time.monotonic() + 10
    while health_of(node) != wanted:
        assert time.monotonic() < deadline, "health did not change"
        time.sleep(0.1)


def flip_everywhere(data: Path, needle: bytes, at: int) -> int:
    """Flip one byte `at` bytes into every copy of `needle` in the file (old copies on free pages too)."""
    raw = bytearray(data.read_bytes())
    found = 0
    start = raw.find(needle)
    while start >= 0:
        raw[start + at] ^= 0x5A
        found += 1
        start = raw.find(needle, start + 1)
    data.write_bytes(bytes(raw))
    return found


# ---- refused at start-up ----


@pytest.mark.parametrize(
    ("size", "says"),
    [
        (lambda n: 0, "data.mdb is empty (0 bytes)"),
        (lambda n: n // 2, "is truncated"),
        (lambda n: 8192, "is truncated"),
    ],
    ids=["zero", "half", "8KiB"],
)
def test_truncated_store_is_refused_with_one_line_and_never_reinitialised(base, tmp_path, size, says):
    d = copy_of(base, tmp_path / "node")
    before = (d / "data.mdb").stat().st_size
    os.truncate(d / "data.mdb", size(before))
    assert_refused(d, says, "--restore DIR", "--reinitialize")
    assert (d / "data.mdb").stat().st_size == size(before)  # left as it was: no new devnet in its place


def test_deleted_data_file_is_refused(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    (d / "data.mdb").unlink()
    assert_refused(d, "data.mdb is missing but this directory has held a store")
    assert not (d / "data.mdb").exists()


def test_devnet_authority_without_a_store_is_refused(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    for name in ("data.mdb", "store-identity.json"):  # lock.mdb is not copied: only the authority file is left
        (d / name).unlink()
    assert_refused(d, "devnet-authority.json is here but no store")


def test_identity_file_alone_still_marks_the_directory(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    Chain.open(d).close()  # adopts the store: writes its identity file
    assert (d / "store-identity.json").exists()
    for name in ("data.mdb", "lock.mdb", "devnet-authority.json"):
        (d / name).unlink(missing_ok=True)
    assert_refused(d, "data.mdb is missing", "store-identity.json is there")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_overwritten_page_is_refused_or_never_serves_wrong_data(base, tmp_path, seed):
    d = copy_of(base, tmp_path / "node")
    data = d / "data.mdb"
    meta = read_meta(data)
    rng = random.Random(seed)
    reachable = [p for p, hit in enumerate(walk(data, meta).seen) if hit]
    page = rng.choice([*reachable, 0, 1]) if seed % 3 else rng.randrange(meta.last_pg + 1)  # any page, too
    with open(data, "r+b") as f:
        f.seek(page * meta.page_size)
        f.write(rng.randbytes(meta.page_size))
    code, lines = run_refused(d) if page in reachable or page < 2 else (None, [])
    if code is not None:  # every page LMDB would read was checked before mapping: refused, not crashed
        assert code == REFUSED and len(lines) == 1 and "is damaged" in lines[0], (page, lines)
        return
    node = NodeProcess(d).start()  # a free page: nothing reads it
    try:
        client = node.client()
        for n, expected in base.blocks.items():
            assert client.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=n)).SerializeToString() == expected
    finally:
        node.stop()


def test_store_of_a_newer_format_is_refused(base, tmp_path):
    """A store a later release wrote (format 4, say) is refused by its identity record, with the formats this
    node reads, before anything reads its tree."""
    d = copy_of(base, tmp_path / "node")
    identity = read_identity_file(d)
    assert identity is not None
    newer = StoreIdentity(4, identity.network, identity.genesis_hash)
    env = lmdb.open(str(d), max_dbs=4, map_size=64 * 1024**3)
    try:
        with env.begin(write=True, db=env.open_db(b"state")) as txn:
            txn.put(schema.meta_key(schema.META_IDENTITY), newer.encode())
    finally:
        env.close()
    write_identity_file(d, newer)
    line = assert_refused(d, "store format version 4, this node reads 1, 2, 3")
    assert "run a chain-node release that reads it" in line


def test_store_of_another_network_is_refused(tmp_path):
    testnet = ChainParams(network=pb.NETWORK_TESTNET, storage_authorities=frozenset({Secp256k1Key.generate().address}))
    mainnet = ChainParams(network=pb.NETWORK_MAINNET, storage_authorities=testnet.storage_authorities)
    d = tmp_path / "node"
    Chain.open(d, testnet).close()
    mainnet.save(tmp_path / "mainnet.json")
    line = assert_refused(
        d, "holds a testnet chain", args=("--network", "mainnet", "--genesis", str(tmp_path / "mainnet.json"))
    )
    assert "--reinitialize" in line
    testnet.save(tmp_path / "testnet.json")
    assert_refused(d, "holds a testnet chain, not mainnet", args=("--network", "mainnet"))


def test_store_of_another_genesis_than_the_one_agreed_in_etcd_is_refused(etcd1, tmp_path):
    nodes = ReplicaSet(tmp_path / "cluster", etcd1).start(1)  # publishes its devnet genesis in etcd
    try:
        foreign = tmp_path / "foreign"
        Chain.open(foreign).close()  # another devnet
        args = ("--orderer", "etcd", "--etcd-endpoints", etcd1.endpoints_flag, "--node-id", "n9")
        line = assert_refused(foreign, "but the network in etcd agreed on a devnet chain with genesis", args=args)
        assert "--reinitialize" in line
    finally:
        nodes.stop()


def test_identity_file_of_another_store_is_refused(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    Chain.open(d).close()
    other = tmp_path / "other"
    Chain.open(other).close()  # another devnet: another genesis
    shutil.copy(other / "store-identity.json", d / "store-identity.json")
    assert_refused(d, "store-identity.json names a devnet chain with genesis")


def test_reinitialize_moves_a_refused_store_aside_and_keeps_a_sound_one(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    node = NodeProcess(d, "--reinitialize").start()  # sound: kept
    try:
        assert node.ready["height"] >= base.height
    finally:
        node.stop()
    os.truncate(d / "data.mdb", 0)
    node = NodeProcess(d, "--reinitialize").start()
    try:
        assert node.ready["height"] <= 1  # a new devnet
    finally:
        node.stop()
    (aside,) = d.glob("replaced-*")
    assert (aside / "data.mdb").stat().st_size == 0  # the old store, moved, not deleted
    assert (aside / "devnet-authority.json").exists()


# ---- detected while serving ----


def expect_corrupted(call) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert isinstance(info.value, grpc.Call) and info.value.code() == grpc.StatusCode.DATA_LOSS
    assert reason_of(info.value) == "DATA_CORRUPTED"


def stored_shell(block: block_pb2.Block) -> bytes:
    """The bytes of a block's record that hold its header and hash (store format 3: node/storage/chainlog.py)."""
    return chainlog.encode(block_pb2.Block(header=block.header, hash=block.hash))


def test_damaged_old_block_is_reported_while_serving_never_served(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    victim = 5  # far below the head: the start-up check does not read it
    block = rpc_pb2.GetBlockResponse.FromString(base.blocks[victim]).block
    assert flip_everywhere(d / "data.mdb", stored_shell(block), 8) >= 1
    node = NodeProcess(d).start()
    try:
        client = node.client()
        assert health_of(node) == SERVING
        for n in (1, 2, 3, base.height):
            got = client.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=n)).SerializeToString()
            assert got == base.blocks[n]
        expect_corrupted(lambda: client.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=victim)))
        wait_health(node, NOT_SERVING)
        health = client.stub.GetHealth(rpc_pb2.GetHealthRequest())
        assert (health.live, health.ready) == (True, False) and f"block {victim}" in health.detail
        expect_corrupted(lambda: client.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=1)))  # latched
    finally:
        node.stop()
    logged = [line for line in node.stderr_lines if "store corrupted" in line]
    assert len(logged) == 1 and f"block {victim}" in logged[0]


def test_damaged_tree_node_is_reported_when_a_proof_reads_it(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    key = next(iter(base.proofs))
    assert flip_everywhere(d / "data.mdb", b"\x00" + blake3(key).digest(), 40) >= 1  # the leaf's value hash
    node = NodeProcess(d).start()
    try:
        client = node.client()
        assert health_of(node) == SERVING
        expect_corrupted(lambda: client.stub.GetOperationProof(rpc_pb2.GetOperationProofRequest(key=key)))
        wait_health(node, NOT_SERVING)
    finally:
        node.stop()
    assert sum("store corrupted" in line and "tree node" in line for line in node.stderr_lines) == 1


# ---- verify-store ----


def test_verify_store_passes_a_sound_store(base, tmp_path):
    d = copy_of(base, tmp_path / "node")
    code, lines, out = verify_store(d)
    assert code == 0, lines
    doc = json.loads(out)
    assert doc["height"] == base.height and doc["blocks"] == base.height + 1 and doc["keys"] > 0
    assert "sound" in lines[-1] and "keys/s" in lines[-1]


def placed_internal_node(data_dir: Path) -> bytes:
    """The stored form of an internal node whose left child is a node (not EMPTY), read from a closed store."""
    env = lmdb.open(str(data_dir), max_dbs=4, readonly=True, lock=False)
    try:
        with env.begin(db=env.open_db(b"nodes", create=False)) as txn:
            return next(v for _, v in txn.cursor().iternext() if len(v) == PLACED_INTERNAL_LEN and v[1:33] != bytes(32))
    finally:
        env.close()


@pytest.mark.parametrize("damage", ["block", "tree", "location", "truncated"])
def test_verify_store_names_the_first_problem(base, tmp_path, damage):
    d = copy_of(base, tmp_path / "node")
    data = d / "data.mdb"
    if damage == "location":  # the node still hashes to its name: only where it says its left child is, is wrong
        assert flip_everywhere(data, placed_internal_node(d), 66) >= 1
        says = "where it is not stored"
    elif damage == "block":
        block = rpc_pb2.GetBlockResponse.FromString(base.blocks[5]).block
        flip_everywhere(data, stored_shell(block), 8)
        says = "block 5"
    elif damage == "tree":
        flip_everywhere(data, b"\x00" + blake3(next(iter(base.proofs))).digest(), 40)
        says = "does not hash to its name"
    else:
        os.truncate(data, data.stat().st_size // 2)
        says = "truncated"
    code, lines, out = verify_store(d)
    assert code == 1 and out == ""
    assert len(lines) == 1 and lines[0].startswith("verify-store: DAMAGED: ") and says in lines[0], lines


# ---- a store of the format before ----


def test_a_node_serves_a_format_1_store_continues_it_and_marks_it_format_2(base, tmp_path):
    """A store as the release before wrote it (tree nodes by hash): chain-node starts on it, answers every
    proof as the sound node did, commits new blocks beside the old nodes, and marks it format 2; verify-store
    then finds it sound."""
    d = copy_of(base, tmp_path / "node")
    to_format_1(d)
    node = NodeProcess(d).start()
    try:
        client = node.client()
        assert health_of(node) == SERVING
        for key, answer in base.proofs.items():  # the same proofs, read from the nodes stored by hash
            got = client.stub.GetOperationProof(rpc_pb2.GetOperationProofRequest(key=key))
            expected = rpc_pb2.GetOperationProofResponse.FromString(answer)  # (an empty block may follow: same root)
            assert (got.proof, got.state_root) == (expected.proof, expected.state_root)
        actor = new_account(client, node.authority())
        client.commit(actor.b.project_create("after-the-upgrade"))
        proof = client.stub.GetOperationProof(rpc_pb2.GetOperationProofRequest(key=schema.account_key(actor.address)))
        assert proof.proof.siblings
    finally:
        assert node.stop() == 0
    identity = read_identity_file(d)
    assert identity is not None and identity.format_version == FORMAT_VERSION
    code, lines, _ = verify_store(d)
    assert code == 0, lines
