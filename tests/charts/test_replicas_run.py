"""A read replica runs as the chart renders it: the replica container's environment (the chart's genesis, the
nodes' certificate Secret, --follow of the internal listener, no AdminService) starts a real `chain-node` that
follows a real node serving the same rendered certificate over mutual TLS, and applies the same blocks."""

from __future__ import annotations

import json
import time
from pathlib import Path

from chain.v1 import node_info_pb2, rpc_pb2
from node.params import ChainParams
from node.sdk.rpc import ChainClient
from tests.charts.helm import RELEASE, Manifests, env_of, remount, secret_files, template
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles

FULL = f"{RELEASE}-chain"
NODE, REPLICA = f"{FULL}-node", f"{FULL}-replica"


def test_a_replica_started_from_the_rendered_environment_follows_the_node_over_mutual_tls(tmp_path: Path) -> None:
    genesis = ChainParams(genesis_time_ms=1_700_000_000_000).to_json()
    m = Manifests(template("--set", "readReplicas.enabled=true", "--set-json", f"node.genesis={json.dumps(genesis)}"))
    tls = secret_files(m, f"{NODE}-tls", tmp_path / "tls")
    config = tmp_path / "genesis"
    config.mkdir()
    (config / "genesis.json").write_text(m.get("ConfigMap", f"{NODE}-genesis")["data"]["genesis.json"])
    files = NodeTLSFiles(tls / "tls.crt", tls / "tls.key", tls / "ca.crt")
    sts = m.get("StatefulSet", REPLICA)
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    rendered = {k: v for k, v in env_of(c).items() if isinstance(v, str) and k.startswith("CHAIN_NODE_")}
    env = remount(rendered, {"/etc/chain/tls": tls, "/etc/chain/genesis": config})
    node = NodeProcess(
        tmp_path / "node", "--genesis", str(config / "genesis.json"), "--empty-block-interval", "0.1", tls=files
    ).start()
    replica: NodeProcess | None = None
    try:
        # the rendered follow target is the node Service; here the node's internal listener on loopback (its
        # certificate names 127.0.0.1 too). Addresses, data dir and metrics are the test's; the admin listener
        # stays off as rendered.
        assert env["CHAIN_NODE_FOLLOW"] == f"{NODE}.chain.svc:50054"
        env["CHAIN_NODE_FOLLOW"] = node.internal_target
        replica = NodeProcess(tmp_path / "replica", "--admin-addr", "", env=env).start()
        assert "admin_port" not in replica.ready or not replica.ready["admin_port"]
        deadline = time.monotonic() + 60
        with (
            ChainClient(node.grpcs_target, ca_file=files.ca) as upstream,
            ChainClient(f"grpcs://{replica.grpc_target}", ca_file=files.ca) as follower,
        ):

            def status(client: ChainClient) -> node_info_pb2.NodeStatus:
                return client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10).status

            target = status(upstream).block_height + 5
            while (seen := status(follower)).block_height < target:
                assert time.monotonic() < deadline, f"the replica is at {seen.block_height}, not {target}"
                time.sleep(0.1)
            assert seen.role == "replica"
            for number in (1, target):
                request = rpc_pb2.GetBlockRequest(block_number=number)
                ours, theirs = follower.stub.GetBlock(request, timeout=10), upstream.stub.GetBlock(request, timeout=10)
                assert ours.block.header == theirs.block.header
    finally:
        if replica is not None:
            replica.stop()
        node.stop()
