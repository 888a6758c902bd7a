"""The operator's calls to node pods over TLS, against a real chain-node serving TLS whose certificate names only
the pod's DNS name under its headless Service (`chain-0.chain-headless.chain.svc`), dialled by IP: health,
height and the admin snapshot calls with the operator's client certificate and the admin token; a name the
certificate does not carry and a missing client certificate fail as NodeUnreachable naming the CA; the admin
token is never sent in plaintext beyond loopback; the TLS flags are checked at start."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from chain_operator.conditions import ConditionReason
from chain_operator.config import OperatorConfig, parse_config
from chain_operator.errors import NodeUnreachable
from chain_operator.nodes import NodeClient, PodView, pod_view
from node.errors import ConfigError
from tests.fixtures.certs import Leaf, TestCA
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles

TOKEN = "operator-secret"
POD_NAME = "chain-0.chain-headless.chain.svc"


@dataclass(frozen=True)
class Cluster:
    node: NodeProcess
    ca: TestCA
    operator: Leaf  # the operator's client certificate

    def pod(self, **changes: Any) -> PodView:
        base = {
            "metadata": {"name": "chain-0", "namespace": "chain"},
            "spec": {
                "hostname": "chain-0",
                "subdomain": "chain-headless",
                "containers": [
                    {
                        "name": "node",
                        "image": "chain:1",
                        "ports": [
                            {"name": "grpc", "containerPort": self.node.ready["grpc_port"]},
                            {"name": "admin", "containerPort": self.node.ready["admin_port"]},
                        ],
                    }
                ],
            },
            "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        return replace(pod_view(base, "node"), **changes)

    def config(self, **overrides: Any) -> OperatorConfig:
        values: dict[str, Any] = {
            "admin_token": TOKEN,
            "rpc_timeout": 5.0,
            "node_ca_file": self.ca.cert,
            "node_tls_cert": self.operator.cert,
            "node_tls_key": self.operator.key,
        }
        values.update(overrides)
        return OperatorConfig(**values)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("operator-tls")
    ca = TestCA.make(base / "pki")
    leaf = ca.issue("node", sans=(POD_NAME,))
    tls = NodeTLSFiles(leaf.cert, leaf.key, ca.cert)
    node = NodeProcess(base / "data", "--web-addr", "", "--admin-token", TOKEN, tls=tls).start()
    try:
        yield Cluster(node, ca, ca.issue("operator"))
    finally:
        node.stop()


async def test_health_height_and_snapshot_jobs_over_tls(cluster: Cluster) -> None:
    pod = cluster.pod()
    assert pod.server_name("") == POD_NAME
    client = NodeClient(pod, cluster.config())
    assert await client.serving()
    assert await client.height() >= 0
    started = await client.start_snapshot()
    assert started.job.id
    assert await client.snapshot_job(started.job.id) is not None


async def test_a_name_the_certificate_lacks_is_refused(cluster: Cluster) -> None:
    client = NodeClient(cluster.pod(), cluster.config(node_server_name="{pod}.elsewhere.{namespace}.svc"))
    assert not await client.serving()
    with pytest.raises(NodeUnreachable) as failed:
        await client.height()
    text = str(failed.value)
    assert "TLS handshake failed" in text and f"CA {cluster.ca.cert}" in text and "chain-0.elsewhere.chain.svc" in text


async def test_the_admin_listener_wants_the_client_certificate(cluster: Cluster) -> None:
    client = NodeClient(cluster.pod(), cluster.config(node_tls_cert=None, node_tls_key=None))
    assert await client.height() >= 0  # the public listener takes any client
    with pytest.raises(NodeUnreachable) as failed:
        await client.start_snapshot()
    assert failed.value.reason == ConditionReason.NODE_UNREACHABLE


async def test_the_admin_token_never_goes_in_plaintext_beyond_loopback(cluster: Cluster) -> None:
    """The gate: no TLS configured and a pod off loopback: the admin call is not made at all."""
    remote = cluster.pod(ip="10.255.255.1")
    plaintext = cluster.config(node_ca_file=None, node_tls_cert=None, node_tls_key=None, rpc_timeout=1.0)
    with pytest.raises(NodeUnreachable) as failed:
        await NodeClient(remote, plaintext).start_snapshot()
    assert failed.value.reason == ConditionReason.ADMIN_TOKEN_NEEDS_TLS
    assert "not sending the admin token in plaintext to 10.255.255.1" in str(failed.value)
    with pytest.raises(NodeUnreachable) as failed:
        await NodeClient(remote, plaintext).delete_snapshot("snap")
    assert failed.value.reason == ConditionReason.ADMIN_TOKEN_NEEDS_TLS


def test_tls_flags_and_environment(cluster: Cluster, tmp_path: Path) -> None:
    ca, cert, key = str(cluster.ca.cert), str(cluster.operator.cert), str(cluster.operator.key)
    cfg = parse_config(["--node-tls-cert", cert, "--node-tls-key", key], env={"CHAIN_OPERATOR_NODE_CA_FILE": ca})
    tls = cfg.node_tls()
    assert tls is not None and tls.ca_file == cluster.ca.cert and tls.cert_file == cluster.operator.cert
    assert parse_config([], env={}).node_tls() is None
    bad = {
        "--node-tls-cert and --node-tls-key go together": ["--node-ca-file", ca, "--node-tls-cert", cert],
        "--node-tls-cert needs --node-ca-file": ["--node-tls-cert", cert, "--node-tls-key", key],
        f"--node-ca-file {tmp_path / 'x.pem'}: cannot read it": ["--node-ca-file", str(tmp_path / "x.pem")],
        "--node-server-name '{host}.svc'": ["--node-server-name", "{host}.svc"],
    }
    for message, argv in bad.items():
        with pytest.raises(ConfigError) as failed:
            parse_config(argv, env={})
        assert str(failed.value).startswith(message), failed.value
