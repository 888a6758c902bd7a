"""Server reflection, v1 and v1alpha, over native gRPC and over gRPC-web, against real processes.

- native gRPC: the real `buf curl` resolves the schema by reflection with `--reflect-protocol grpc-v1` and
  `grpc-v1alpha`, and lists both reflection services;
- gRPC-web: the node's own listener (`--web-addr`) and the gateway's passthrough, forwarding and bridging,
  answer a reflection request (half-duplex: the request body's messages, then the answers), and the files
  they return are enough to describe `ChainService` without a local schema;
- `buf curl --protocol grpcweb` needs HTTP/2 for reflection; through the shipped Envoy (HTTP/2 and HTTP/1.1
  on one port) it resolves the schema by reflection with either version.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2

from tests.fixtures.envoyproc import EnvoyProcess, render
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess

ROOT = Path(__file__).resolve().parents[3]
BUF = ROOT / "node_modules" / ".bin" / "buf"
VERSIONS = ("grpc-v1", "grpc-v1alpha")
SERVICES = {
    "grpc-v1": "grpc.reflection.v1.ServerReflection",
    "grpc-v1alpha": "grpc.reflection.v1alpha.ServerReflection",
}
GRPC_WEB = {"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(Path(tmp_path_factory.mktemp("reflect-node")) / "node").start()
    try:
        yield proc
    finally:
        proc.stop()


def buf_curl(*args: str) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), "buf missing: run `make install-test`"
    return subprocess.run([str(BUF), "curl", *args], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT)


def frame(payload: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


def frames(body: bytes) -> list[tuple[int, bytes]]:
    out, i = [], 0
    while i + 5 <= len(body):
        n = int.from_bytes(body[i + 1 : i + 5], "big")
        out.append((body[i], body[i + 5 : i + 5 + n]))
        i += 5 + n
    assert i == len(body), "truncated frame"
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_buf_curl_resolves_the_schema_by_reflection(node: NodeProcess, version: str) -> None:
    url = f"http://{node.grpc_target}/chain.v1.ChainService/GetNodeStatus"
    got = buf_curl("--protocol", "grpc", "--reflect-protocol", version, "-d", "{}", url)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["status"]["network"] == "devnet"
    listed = buf_curl(
        "--protocol", "grpc", "--reflect-protocol", version, "--list-services", f"http://{node.grpc_target}"
    )
    assert listed.returncode == 0, listed.stderr
    assert set(SERVICES.values()) | {"chain.v1.ChainService", "chain.v1.KeychainService"} <= set(listed.stdout.split())


def reflect_over_grpc_web(url: str, service: str) -> tuple[list[str], descriptor_pool.DescriptorPool]:
    """Ask `list_services` and the file of `chain.v1.ChainService` in one half-duplex call; the services
    listed and a fresh pool holding the files returned (dependencies first, as reflection sends them)."""
    body = frame(reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString())
    body += frame(
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="chain.v1.ChainService").SerializeToString()
    )
    resp = requests.post(f"{url}/{service}/ServerReflectionInfo", data=body, headers=GRPC_WEB, timeout=30)
    assert resp.status_code == 200 and resp.headers["Content-Type"] == "application/grpc-web+proto"
    got = frames(resp.content)
    assert got[-1][0] & 0x80 and b"grpc-status: 0" in got[-1][1], got[-1]
    answers = [reflection_pb2.ServerReflectionResponse.FromString(p) for f, p in got if not f & 0x80]
    assert [a.WhichOneof("message_response") for a in answers] == ["list_services_response", "file_descriptor_response"]
    pool = descriptor_pool.DescriptorPool()
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in answers[1].file_descriptor_response.file_descriptor_proto
    ]
    added: set[str] = set()
    while len(added) < len(files):  # in dependency order
        for file in files:
            if file.name not in added and set(file.dependency) <= added:
                pool.Add(file)
                added.add(file.name)
    return [s.name for s in answers[0].list_services_response.service], pool


@pytest.fixture(scope="module")
def gateways(node: NodeProcess) -> Iterator[dict[str, GatewayProcess]]:
    forwarding = GatewayProcess(node.grpc_target, node_web_url=node.web_url).start()
    bridging = GatewayProcess(node.grpc_target).start()
    try:
        yield {"forwarding": forwarding, "bridging": bridging}
    finally:
        forwarding.stop()
        bridging.stop()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("where", ["node", "forwarding", "bridging"])
def test_reflection_over_grpc_web(
    node: NodeProcess, gateways: dict[str, GatewayProcess], where: str, version: str
) -> None:
    url = node.web_url if where == "node" else gateways[where].url + "/v1/grpc-web"
    services, pool = reflect_over_grpc_web(url, SERVICES[version])
    assert set(SERVICES.values()) | {"chain.v1.ChainService"} <= set(services)
    method = pool.FindMethodByName("chain.v1.ChainService.GetNodeStatus")
    assert method.output_type.full_name == "chain.v1.GetNodeStatusResponse"


@pytest.fixture(scope="module")
def envoy(node: NodeProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvoyProcess]:
    host, _, port = node.grpc_target.rpartition(":")
    proxy = EnvoyProcess(render([(host, int(port))]), tmp_path_factory.mktemp("reflect-envoy")).start(healthy_hosts=1)
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_buf_curl_grpc_web_needs_no_local_schema(envoy: EnvoyProcess, version: str) -> None:
    url = f"{envoy.url}/chain.v1.ChainService/GetNodeStatus"
    got = buf_curl("--protocol", "grpcweb", "--reflect-protocol", version, "-d", "{}", url)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["status"]["network"] == "devnet"
