"""bench.bench_tls against a real node serving TLS: its load clients (over grpcs:// with the CA) get every
message committed and seen by its commit watcher, a plaintext client is refused (the TLS side really speaks
TLS), and h2load's framed GetAccount over https:// is answered. Tiny loads; the figures are not checked."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bench.bench_node import workload
from bench.bench_reads import SERVICE, frame, h2load, populate
from bench.bench_tls import Side, Totals, client_tls, ingest_phase, submit_over
from bench.clients import ClientProcesses
from chain.v1 import service_pb2_grpc
from node.tls import sync_channel
from tests.fixtures.certs import TestCA
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles


@pytest.fixture(scope="module")
def tls_side(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Side]:
    work = tmp_path_factory.mktemp("tls-bench")
    tls = NodeTLSFiles.issue(TestCA.make(work / "pki"), "node")
    node = NodeProcess(work / "node", "--web-addr", "", tls=tls).start()
    try:
        yield Side("TLS", node, str(tls.ca))
    finally:
        node.stop()


def test_the_tls_side_commits_every_message_its_clients_send_over_grpcs(tls_side: Side) -> None:
    assert tls_side.target.startswith("grpcs://")
    load = workload(tls_side.node, 2, 300)  # 2 clients, 150 messages each, batches of 100
    totals = Totals()
    ingest_phase(tls_side, load, totals)
    assert totals.count == 300
    assert totals.seconds > 0 and totals.node_cpu > 0


def test_a_plaintext_client_of_the_tls_node_fails_the_run(tls_side: Side) -> None:
    load = workload(tls_side.node, 1, 100)
    clients = ClientProcesses(functools.partial(submit_over, ca_file=""), [tls_side.node.grpc_target], load)
    with pytest.raises(RuntimeError, match="a load client failed"):
        clients.run(timeout=60)


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load (nghttp2-client) is not installed")
def test_h2load_reads_get_account_over_https(tls_side: Side, tmp_path: Path) -> None:
    request, check = populate(tls_side.node)["GetAccount"]
    with sync_channel(tls_side.target, client_tls(tls_side.ca_file)) as channel:
        check(service_pb2_grpc.ChainServiceStub(channel))  # the same request answered OK over TLS
    with grpc.insecure_channel(tls_side.node.grpc_target) as channel, pytest.raises(grpc.RpcError):
        check(service_pb2_grpc.ChainServiceStub(channel))
    body = tmp_path / "GetAccount.bin"
    body.write_bytes(frame(request))
    url = f"https://{tls_side.node.grpc_target}{SERVICE}/GetAccount"
    assert h2load(url, body, 1, 2, 2, 1) > 0  # h2load asserts none failed or errored
