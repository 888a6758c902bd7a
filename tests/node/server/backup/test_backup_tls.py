"""`chain-node backup create` against a node serving TLS, over its internal listener (mutual TLS): with the
cluster's CA and a client certificate it signed the backup is made; without a client certificate, or trusting
another CA, it is one SOURCE_UNAVAILABLE line naming the target and the CA; TLS flags beside a plaintext
target are a usage error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.actors import new_account
from tests.fixtures.backupcli import backup
from tests.fixtures.certs import Leaf, TestCA
from tests.fixtures.motoproc import MotoProcess, serving_bucket
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles

BUCKET = "chain-backups-tls"
NODE_ARGS = ("--verify-workers", "0", "--snapshot-chunk-bytes", "4096", "--empty-block-interval", "3600")


@dataclass(frozen=True)
class TLSSource:
    node: NodeProcess
    ca: TestCA
    client: Leaf  # the backup job's certificate, signed by the cluster's CA
    other: TestCA

    @property
    def target(self) -> str:
        return f"grpcs://{self.node.internal_target}"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    with serving_bucket(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSSource]:
    base = tmp_path_factory.mktemp("tls-source")
    ca = TestCA.make(base / "pki")
    node = NodeProcess(base / "data", *NODE_ARGS, tls=NodeTLSFiles.issue(ca, "node-0")).start()
    try:
        with node.client() as c:
            actor = new_account(c, node.authority())
            c.commit(actor.b.project_create("over-tls"))
            assert c.admin is not None
            c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), timeout=60)
        yield TLSSource(node, ca, ca.issue("backup"), TestCA.make(base / "other"))
    finally:
        node.stop()


def test_backup_over_mutual_tls(moto: MotoProcess, source: TLSSource) -> None:
    url = f"s3://{BUCKET}/tls"
    client = ("--tls-cert", str(source.client.cert), "--tls-key", str(source.client.key))
    made = backup(moto, "create", "--node", source.target, "--ca-file", str(source.ca.cert), *client, "--url", url)
    assert made.code == 0, made.stderr
    assert made.doc["event"] == "backup-created" and made.doc["chunks"] > 0
    (listed,) = backup(moto, "list", "--url", url).doc["backups"]
    assert listed["complete"] is True


def test_backup_without_a_client_certificate_is_one_line(moto: MotoProcess, source: TLSSource) -> None:
    url = f"s3://{BUCKET}/no-cert"
    refused = backup(moto, "create", "--node", source.target, "--ca-file", str(source.ca.cert), "--url", url)
    assert refused.code == 1
    line = refused.stderr.strip()
    assert "\n" not in line, refused.stderr
    assert line.startswith(
        f"chain-node backup create: SOURCE_UNAVAILABLE: {source.target} GetNodeStatus: TLS handshake"
    )
    assert f"trusting CA {source.ca.cert}, client certificate none" in line


def test_backup_trusting_another_ca_is_one_line(moto: MotoProcess, source: TLSSource) -> None:
    client = ("--tls-cert", str(source.client.cert), "--tls-key", str(source.client.key))
    url = f"s3://{BUCKET}/other-ca"
    args = ("create", "--node", source.target, "--ca-file", str(source.other.cert), *client, "--url", url)
    refused = backup(moto, *args)
    assert refused.code == 1 and "\n" not in refused.stderr.strip(), refused.stderr
    assert f"TLS handshake failed (trusting CA {source.other.cert}" in refused.stderr


def test_tls_flags_with_a_plaintext_target_are_a_usage_error(moto: MotoProcess, source: TLSSource) -> None:
    url = f"s3://{BUCKET}/plain"
    args = ("create", "--node", source.node.internal_target, "--ca-file", str(source.ca.cert), "--url", url)
    refused = backup(moto, *args)
    assert refused.code == 2 and "are for a TLS node" in refused.stderr, refused.stderr


def test_unreadable_client_key_is_one_line(moto: MotoProcess, source: TLSSource, tmp_path: Path) -> None:
    missing = tmp_path / "none.key"
    args = ("create", "--node", source.target, "--ca-file", str(source.ca.cert), "--tls-cert",
            str(source.client.cert), "--tls-key", str(missing), "--url", f"s3://{BUCKET}/bad-key")  # fmt: skip
    refused = backup(moto, *args)
    assert refused.code == 1
    assert refused.stderr.strip() == (
        f"chain-node backup create: INVALID_ARGUMENT: --tls-key {missing}: cannot read it: No such file or directory"
    )
