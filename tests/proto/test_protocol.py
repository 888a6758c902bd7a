"""The chain.v1 protocol: generated code is fresh, the service matches the spec exactly."""

import filecmp
import re
import subprocess
import sys
from pathlib import Path

from chain.v1 import message_pb2, service_pb2

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT.parent / "shared" / "spec" / "chain-service-interface.md"

SPEC_RPCS = {
    "SubmitMessage", "BatchSubmitMessages", "DryRunMessage",
    "GetProject", "GetProjectByName", "SearchProjects", "ListProjects", "GetProjectActivity",
    "GetMergeRequest", "ListMergeRequests", "ListMergeRequestsByRequester",
    "GetRef", "ListRefs", "GetRefLog", "GetCommit", "ListCommits", "GetCommitAncestors", "ListCollaborators",
    "GetAccount", "GetAccountActivity", "GetKey", "ListKeys", "ListVerifications", "ListLinks",
    "ListLinksByTarget", "ListReactions", "ListReactionsByTarget",
    "GetBlock", "ListBlocks", "GetMessage", "ListMessages",
    "GetOperationProof", "GetExclusionProof", "VerifyOperationProof", "GetStorageQuotaProof",
    "GetNodeStatus", "GetHealth", "GetChainStats", "GetSnapshotInfo", "GetMempoolInfo",
    "SubscribeMessages", "SubscribeBlocks",
}  # fmt: skip
RETIRED = ["KEY_ADD", "OWNERSHIP_TRANSFER", "STORAGE_RENT", "RELAY_SIGNER_ADD", "RELAY_SIGNER_REMOVE"]


def test_generated_code_is_fresh(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path)], check=True)
    # chain.v1, and the etcd API subset the replicated orderer speaks
    for fresh_dir, committed_dir in (
        (tmp_path / "chain" / "v1", ROOT / "proto" / "chain" / "v1"),
        (tmp_path / "node" / "server" / "ordering" / "etcd", ROOT / "node" / "server" / "ordering" / "etcd"),
    ):
        fresh = sorted(p.name for p in fresh_dir.glob("*_pb2*"))
        committed = sorted(p.name for p in committed_dir.glob("*_pb2*"))
        assert fresh and fresh == committed, "run `make proto`"
        _, mismatch, errors = filecmp.cmpfiles(fresh_dir, committed_dir, fresh, shallow=False)
        assert not mismatch and not errors, f"stale generated code: {mismatch + errors}; run `make proto`"


def test_service_declares_exactly_the_spec_rpcs():
    service = service_pb2.DESCRIPTOR.services_by_name["ChainService"]
    assert service.full_name == "chain.v1.ChainService"
    names = {m.name for m in service.methods}
    assert names == SPEC_RPCS
    assert len(names) == 42
    streaming = {m.name for m in service.methods if m.server_streaming}
    assert streaming == {"SubscribeMessages", "SubscribeBlocks"}
    for method in service.methods:
        assert method.input_type.name == f"{method.name}Request"
        assert method.output_type.name == f"{method.name}Response"


def test_spec_rpc_list_matches_the_spec_document():
    if not SPEC.exists():  # the spec lives beside the repo in the shared folder
        return
    text = SPEC.read_text()
    section = text[text.index("### 4.1") : text.index("### 4.2")]
    assert set(re.findall(r"^\| `(\w+)` \|", section, re.M)) == SPEC_RPCS


def test_retired_types_are_not_modelled_and_their_numbers_are_reserved():
    enum = message_pb2.DESCRIPTOR.enum_types_by_name["MessageType"]
    names = set(enum.values_by_name)
    for retired in RETIRED:
        assert f"MESSAGE_TYPE_{retired}" not in names
    proto = (ROOT / "proto" / "chain" / "v1" / "message.proto").read_text()
    block = proto[proto.index("enum MessageType") : proto.index("}", proto.index("enum MessageType"))]
    reserved_numbers = {int(n) for n in re.findall(r"\b(\d+)\b", block.split("reserved", 1)[1].split(";")[0])}
    assert reserved_numbers == {12, 13, 51, 62, 63}
    for retired in RETIRED:
        assert f'"MESSAGE_TYPE_{retired}"' in block
    assert not (reserved_numbers & {v.number for v in enum.values})
