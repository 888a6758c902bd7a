"""etcd over mutual TLS (docs/replication.md, etcd over TLS), on real etcd members serving `https://` with
`--client-cert-auth` and talking to each other over peer TLS.

The client reads and writes with a certificate the cluster's CA signed; without one, or with one another CA
signed, etcd refuses it, and a client that does not trust etcd's certificate refuses etcd: each is one
`EtcdTLSError` naming the endpoint. The controls (etcd without `--client-cert-auth`, the right CA) show the
refusals are the gates under test. A chain-node member on such a cluster elects itself and commits.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.errors import CONFIG_EXIT_STATUS, ConfigError
from node.server.ordering.etcd.client import EtcdClient, EtcdTLSError
from node.tls import ClientTLS, TLSFileError
from tests.fixtures.certs import TestCA
from tests.fixtures.etcdproc import ETCD_TLS_FLAGS, EtcdCluster
from tests.fixtures.nodeproc import ROOT
from tests.fixtures.replicaset import ReplicaSet, funded_actors, leader_index

SECRET = "cluster-secret-for-tests-0123456789"


@pytest.fixture
def etcd_tls(tmp_path: Path) -> Iterator[EtcdCluster]:
    """A one-member etcd serving clients over TLS with --client-cert-auth."""
    cluster = EtcdCluster(tmp_path / "etcd", 1, tls=True).start()
    yield cluster
    cluster.stop()


def tls(ca: Path | None, cert: Path | None = None, key: Path | None = None) -> ClientTLS:
    return ClientTLS(ca, cert, key, flags=ETCD_TLS_FLAGS)


async def put_get(client: EtcdClient, key: bytes = b"/tls/k", value: bytes = b"v") -> bytes | None:
    try:
        await client.put(key, value)
        kv = await client.get(key)
        return kv.value if kv is not None else None
    finally:
        await client.close()


def refusal(endpoints: list[str], client_tls: ClientTLS) -> str:
    with pytest.raises(EtcdTLSError) as err:
        asyncio.run(put_get(EtcdClient(endpoints, tls=client_tls, timeout=3)))
    return str(err.value)


def test_client_certificate_reads_and_writes_across_a_tls_cluster(tmp_path: Path) -> None:
    cluster = EtcdCluster(tmp_path / "etcd", 3, tls=True).start()  # the members agree over peer TLS
    try:

        async def run() -> bytes | None:
            writer = EtcdClient(cluster.endpoints[:1], tls=cluster.client_tls())
            await put_get(writer, b"/tls/across", b"written on etcd0")
            reader = EtcdClient(cluster.endpoints[2:], tls=cluster.client_tls())
            try:
                kv = await reader.get(b"/tls/across")
                return kv.value if kv is not None else None
            finally:
                await reader.close()

        assert asyncio.run(run()) == b"written on etcd0"
    finally:
        cluster.stop()


@pytest.mark.parametrize("who", ["no client certificate", "a certificate of another CA"])
def test_etcd_refuses_a_client_without_a_certificate_it_trusts(tmp_path: Path, etcd_tls: EtcdCluster, who: str) -> None:
    other = TestCA.make(tmp_path / "other").issue("stranger")
    client_tls = tls(etcd_tls.ca_file) if who.startswith("no") else tls(etcd_tls.ca_file, other.cert, other.key)
    message = refusal(etcd_tls.endpoints, client_tls)
    assert f"TLS handshake with etcd at {etcd_tls.endpoints[0]} failed" in message
    assert "\n" not in message
    if who.startswith("no"):
        assert "etcd asks for a client certificate and none was given (--etcd-cert, --etcd-key)" in message
    else:
        assert f"etcd refused the client certificate {other.cert}" in message


def test_the_refusal_is_etcds_client_cert_auth(tmp_path: Path) -> None:
    """The control: the same clients on an etcd serving TLS without --client-cert-auth get through."""
    cluster = EtcdCluster(tmp_path / "etcd", 1, tls=True, client_cert_auth=False).start()
    try:
        other = TestCA.make(tmp_path / "other").issue("stranger")
        for client_tls in (tls(cluster.ca_file), tls(cluster.ca_file, other.cert, other.key)):
            assert asyncio.run(put_get(EtcdClient(cluster.endpoints, tls=client_tls))) == b"v"
    finally:
        cluster.stop()


def test_client_refuses_an_etcd_its_ca_did_not_sign(tmp_path: Path, etcd_tls: EtcdCluster) -> None:
    other_ca = TestCA.make(tmp_path / "other")
    message = refusal(etcd_tls.endpoints, tls(other_ca.cert, etcd_tls.client_cert, etcd_tls.client_key))
    assert f"TLS handshake with etcd at {etcd_tls.endpoints[0]} failed, trusting CA {other_ca.cert}" in message
    # the control: the CA that signed etcd's certificate
    good = tls(etcd_tls.ca_file, etcd_tls.client_cert, etcd_tls.client_key)
    assert asyncio.run(put_get(EtcdClient(etcd_tls.endpoints, tls=good))) == b"v"


def test_a_renewed_client_certificate_is_read_after_a_refusal(tmp_path: Path, etcd_tls: EtcdCluster) -> None:
    """The files are read again after a failed handshake: a certificate renewed on disk (here: one etcd
    refused replaced by one it trusts) is presented on the next call of the same client."""
    assert etcd_tls.ca is not None
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    TestCA.make(tmp_path / "other").issue("stranger", cert_path=cert, key_path=key)

    async def run() -> bytes | None:
        client = EtcdClient(etcd_tls.endpoints, tls=tls(etcd_tls.ca_file, cert, key), timeout=3)
        with pytest.raises(EtcdTLSError):
            await client.put(b"/tls/renewed", b"v")
        assert etcd_tls.ca is not None
        etcd_tls.ca.issue("renewed", cert_path=cert, key_path=key)
        return await put_get(client, b"/tls/renewed", b"after renewal")

    assert asyncio.run(run()) == b"after renewal"


def test_a_plain_outage_is_not_reported_as_tls(tmp_path: Path, etcd_tls: EtcdCluster) -> None:
    endpoints = etcd_tls.endpoints
    etcd_tls.stop()
    with pytest.raises(Exception) as err:
        asyncio.run(put_get(EtcdClient(endpoints, tls=etcd_tls.client_tls(), timeout=1)))
    assert not isinstance(err.value, EtcdTLSError) and "TLS" not in str(err.value)


def test_tls_settings_checked_before_dialing(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=re.escape("--etcd-ca-file given but etcd endpoint http://127.0.0.1:1 is plaintext")
    ):
        EtcdClient(["http://127.0.0.1:1"], tls=tls(tmp_path / "ca.pem"))
    with pytest.raises(TLSFileError, match=re.escape(f"--etcd-ca-file {tmp_path / 'missing.pem'}: cannot read it")):
        EtcdClient(["https://127.0.0.1:1"], tls=tls(tmp_path / "missing.pem"))
    with pytest.raises(ConfigError, match="--etcd-cert and --etcd-key go together"):
        tls(None, tmp_path / "c.pem")
    bare = EtcdClient(["127.0.0.1:1"], tls=tls(None))  # a bare host:port is TLS when TLS is configured
    assert bare.endpoints == ["127.0.0.1:1"]


def test_chain_node_member_on_etcd_over_tls(tmp_path: Path, etcd_tls: EtcdCluster) -> None:
    assert shutil.which("etcd")
    nodes = ReplicaSet(tmp_path / "nodes", etcd_tls, *etcd_tls.tls_flags, "--cluster-secret", SECRET).start(1)
    try:
        assert leader_index(nodes) == 0
        with nodes.nodes[0].client() as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            c.commit(actor.b.follow(b"\x01" * 20))
    finally:
        nodes.stop()


def test_chain_node_without_a_client_certificate_stops_with_one_line(tmp_path: Path, etcd_tls: EtcdCluster) -> None:
    cmd = [sys.executable, "-m", "node.server.main", "--data-dir", str(tmp_path / "n0"), "--orderer", "etcd"]
    cmd += ["--etcd-endpoints", etcd_tls.endpoints_flag, "--etcd-ca-file", str(etcd_tls.ca_file)]
    cmd += ["--grpc-addr", "127.0.0.1:0", "--web-addr", "", "--admin-addr", "", "--metrics-addr", ""]
    cmd += ["--internal-addr", "127.0.0.1:0"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == CONFIG_EXIT_STATUS, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "etcd" in line]
    assert line.startswith(f"chain-node: TLS handshake with etcd at {etcd_tls.endpoints[0]} failed"), line
    assert "none was given (--etcd-cert, --etcd-key)" in line
