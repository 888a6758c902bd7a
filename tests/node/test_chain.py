"""The chain on disk: genesis, reopening, and crash safety under SIGKILL."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.chain import Chain
from node.errors import DataCorrupted, InvalidArgument, InvariantBroken
from node.params import ChainParams
from node.query.reader import Reader
from node.storage import schema
from tests.harness import Harness, recomputed_root

ROOT = Path(__file__).resolve().parents[2]


def test_reopen_keeps_state_and_rejects_other_genesis(tmp_path):
    h = Harness(tmp_path / "chain")
    h.actor()
    root, height, params = h.root(), h.chain.height, h.chain.params
    h.chain.close()
    again = Chain.open(tmp_path / "chain")
    assert (again.height, bytes(again.head().header.state_root)) == (height, root)
    assert again.params == params
    again.close()
    with pytest.raises(InvariantBroken):
        Chain.open(tmp_path / "chain", ChainParams(network=pb.NETWORK_MAINNET))


def kill_mid_block(data_dir: Path, rng: random.Random) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.node.crash_writer", str(data_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    last = 0
    wanted = rng.randint(3, 8)
    deadline = time.monotonic() + 120
    while last < wanted and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        last = int(line)
    time.sleep(rng.uniform(0.0, 0.15))  # land somewhere inside a later block's work or commit
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert last >= wanted, "writer did not make progress"
    for line in proc.stdout:  # what it reported between our read and the kill
        last = int(line)
    return last


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_mid_block_leaves_previous_block(tmp_path, seed):
    data_dir = tmp_path / "chain"
    reported = kill_mid_block(data_dir, random.Random(seed))
    chain = Chain.open(data_dir)
    head = chain.head()
    # every block the writer reported is durable; at most one more landed between commit and report
    assert reported <= head.header.number <= reported + 1
    assert recomputed_root(chain) == head.header.state_root
    with chain.read() as (view, _):
        assert view.get(schema.block_key(head.header.number + 1)) is None
    # and the chain goes on from there
    out = chain.build((head.header.timestamp_ms // 1000 + 1) * 1000, [])
    chain.commit(out)
    assert chain.height == head.header.number + 1
    chain.close()


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(100, 120))
def test_sigkill_soak(tmp_path, seed):
    test_sigkill_mid_block_leaves_previous_block(tmp_path, seed)


READER = """
import sys
from node.chain import Chain
from node.errors import StorageFailed
chain = Chain.open_reader(sys.argv[1])
print(chain.height, flush=True)
sys.stdin.readline()  # the writer committed a block meanwhile
print(chain.height, flush=True)
try:
    chain.store.commit({b"x": b"y"}, {})
    print("wrote", flush=True)
except StorageFailed as err:
    print("refused", err, flush=True)
"""


def test_a_read_only_opener_in_another_process_sees_new_blocks_and_cannot_write(tmp_path):
    """What a read worker relies on: its read transactions see the writer's newest commit, and it cannot write."""
    h = Harness(tmp_path / "chain")
    h.actor()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path / "chain")],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert reader.stdin is not None and reader.stdout is not None
    try:
        before = int(reader.stdout.readline())
        assert before == h.chain.height
        h.actor()  # more blocks, committed by this process while the reader holds the store open
        reader.stdin.write("go\n")
        reader.stdin.flush()
        assert int(reader.stdout.readline()) == h.chain.height > before
        assert reader.stdout.readline().startswith("refused")
    finally:
        reader.kill()
        reader.wait()
    assert h.chain.store.entry_count() > 0 and h.chain.height > before  # the writer's store is untouched


# ---- damage found by a read (Chain.read maps it and latches the store's fault) ----


def test_a_stored_record_that_does_not_parse_latches_the_fault(tmp_path):
    h = Harness(tmp_path / "chain")
    actor = h.actor()
    h.chain.store.commit({schema.account_key(actor.address): b"\xff\xff\xff"}, {})  # a record damaged in place
    request = rpc_pb2.GetAccountRequest(owner_address=actor.address)
    with pytest.raises(DataCorrupted, match="does not decode"), h.chain.read() as (view, nodes):
        Reader(view, nodes).get_account(request)
    with pytest.raises(DataCorrupted), h.chain.read():  # latched: every later read refuses at once
        pass


def test_a_value_that_does_not_match_its_leaf_latches_the_fault(tmp_path):
    h = Harness(tmp_path / "chain")
    actor = h.actor()
    key = schema.account_key(actor.address)
    with h.chain.read() as (view, _):
        sound = view.get(key)
    assert sound is not None
    h.chain.store.commit({key: sound + b"\x08\x01"}, {})  # parses, but the tree holds the old value's hash
    with pytest.raises(DataCorrupted), h.chain.read() as (view, nodes):
        Reader(view, nodes).get_operation_proof(rpc_pb2.GetOperationProofRequest(key=key))
    assert h.chain.store.fault.problem is not None


def test_a_refusal_inside_a_read_is_not_damage(tmp_path):
    h = Harness(tmp_path / "chain")
    with pytest.raises(InvalidArgument), h.chain.read() as (view, nodes):
        Reader(view, nodes).get_account(rpc_pb2.GetAccountRequest(owner_address=b"\x01"))
    assert h.chain.store.fault.problem is None
    with h.chain.read() as (view, _):  # the transaction was closed; the store serves on
        assert view.get(schema.account_key(b"\x01" * 20)) is None
