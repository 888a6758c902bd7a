"""Every client of the node over TLS, against a real chain-node serving TLS (`--tls-cert/--tls-key`, the admin
listener requiring client certificates of `--tls-client-ca`):

- chainctl `--node grpcs://... --ca-file` does an account round trip; a wrong CA, a certificate that does not
  name the host, a plaintext client on the TLS port, a TLS client on a plaintext node and an unreadable CA file
  are each one line on stderr with exit status 1, naming the target and the CA, never a traceback (and none of
  gRPC's own log lines);
- git-remote-chain pushes to a `chain::grpcs://` remote with CHAINCTL_CA_FILE, and says a wrong CA in one line;
- the SDK's ChainClient over grpcs://, its admin channel with and without a client certificate, and its refusal
  to send the admin token in plaintext beyond loopback;
- `buf curl --cacert` calls the node over TLS: native gRPC (schema by reflection) and gRPC-web on the web port.

The node's certificate names only `localhost`: `grpcs://localhost:PORT` verifies, `grpcs://127.0.0.1:PORT` is
the wrong name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2
from node.errors import CliCode, ConfigError
from node.sdk.rpc import ChainClient, tls_problem
from tests.fixtures.certs import Leaf, TestCA
from tests.fixtures.nodeproc import ROOT, NodeProcess, NodeTLSFiles
from tests.node.sdk.gitrepos import git_env, sh

BUF = ROOT / "node_modules" / ".bin" / "buf"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Pki:
    ca: TestCA
    node: Leaf  # the node's certificate: SAN localhost only
    client: Leaf  # a client certificate of the same CA (the admin listener's)
    other: TestCA  # a CA the node's certificate does not chain to


@dataclass(frozen=True)
class Nodes:
    tls: NodeProcess
    plain: NodeProcess
    pki: Pki

    @property
    def grpcs(self) -> str:
        return f"grpcs://localhost:{self.tls.ready['grpc_port']}"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    base = tmp_path_factory.mktemp("tls-clients")
    ca = TestCA.make(base / "pki")
    pki = Pki(ca, ca.issue("node", sans=("localhost",)), ca.issue("client"), TestCA.make(base / "other"))
    tls = NodeProcess(base / "tls", tls=NodeTLSFiles(pki.node.cert, pki.node.key, ca.cert))
    plain = NodeProcess(base / "plain", "--web-addr", "", "--internal-addr", "")
    try:
        tls.start()
        plain.start()
        yield Nodes(tls, plain, pki)
    finally:
        tls.stop()
        plain.stop()


def chainctl(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """chainctl as a user runs it: its own process, so its stderr is all it prints (gRPC's C logs too)."""
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    full.pop("GRPC_VERBOSITY", None)  # chainctl quiets gRPC itself
    return subprocess.run(
        [sys.executable, "-m", "node.cli.main", "--home", str(home), *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT, env=full,
    )  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # no traceback, no gRPC log line
    return lines[0]


# ---- chainctl ----


def test_chainctl_account_round_trip_over_grpcs(nodes: Nodes, tmp_path: Path) -> None:
    tls = ("--node", nodes.grpcs, "--ca-file", str(nodes.pki.ca.cert))
    authority = str(nodes.tls.ready["devnet_authority"])
    assert chainctl("keys", "create", "wallet", "--type", "secp256k1", home=tmp_path).returncode == 0
    init = chainctl(*tls, "--json", "account", "init", "--wallet", "wallet", home=tmp_path)
    assert init.returncode == 0, init.stderr
    owner = json.loads(init.stdout)["owner_address"]
    funded = chainctl(*tls, "account", "fund", owner, "--units", "1", "--authority", authority, home=tmp_path)
    assert funded.returncode == 0, funded.stderr
    shown = chainctl(*tls, "--json", "account", "show", home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert owner.removeprefix("0x") in shown.stdout.lower()
    # the CA from the environment, as CHAINCTL_NODE and the rest
    env = {"CHAINCTL_NODE": nodes.grpcs, "CHAINCTL_CA_FILE": str(nodes.pki.ca.cert)}
    queried = chainctl("--json", "query", "GetNodeStatus", home=tmp_path, env=env)
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout)["status"]["network"] == "devnet"


def test_chainctl_wrong_ca_is_one_line(nodes: Nodes, tmp_path: Path) -> None:
    done = chainctl("--node", nodes.grpcs, "--ca-file", str(nodes.pki.other.cert), "status", home=tmp_path)
    line = one_error_line(done)
    assert line.startswith(f"error: {CliCode.TLS_FAILED}: TLS with {nodes.grpcs} failed: "), line
    assert f"not signed by CA {nodes.pki.other.cert}" in line


def test_chainctl_system_roots_do_not_trust_a_private_ca(nodes: Nodes, tmp_path: Path) -> None:
    line = one_error_line(chainctl("--node", nodes.grpcs, "status", home=tmp_path))
    assert "not signed by the system's CA roots" in line and CliCode.TLS_FAILED in line


def test_chainctl_wrong_host_name_is_one_line(nodes: Nodes, tmp_path: Path) -> None:
    target = f"grpcs://127.0.0.1:{nodes.tls.ready['grpc_port']}"
    line = one_error_line(chainctl("--node", target, "--ca-file", str(nodes.pki.ca.cert), "status", home=tmp_path))
    assert (
        line
        == f"error: {CliCode.TLS_FAILED}: TLS with {target} failed: the node's certificate does not name '127.0.0.1'"
    )


def test_chainctl_plaintext_to_a_tls_node_is_one_line(nodes: Nodes, tmp_path: Path) -> None:
    target = f"localhost:{nodes.tls.ready['grpc_port']}"
    line = one_error_line(chainctl("--node", target, "status", home=tmp_path))
    assert CliCode.TLS_FAILED in line and f"use grpcs://{target}" in line, line


def test_chainctl_tls_to_a_plaintext_node_is_one_line(nodes: Nodes, tmp_path: Path) -> None:
    target = f"grpcs://localhost:{nodes.plain.ready['grpc_port']}"
    line = one_error_line(chainctl("--node", target, "--ca-file", str(nodes.pki.ca.cert), "status", home=tmp_path))
    assert line.startswith(f"error: {CliCode.TLS_FAILED}: TLS with {target} failed: the server does not speak TLS")


def test_chainctl_unreadable_ca_file_is_one_line(nodes: Nodes, tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    line = one_error_line(chainctl("--node", nodes.grpcs, "--ca-file", str(missing), "status", home=tmp_path))
    assert line == f"error: INVALID_ARGUMENT: --ca-file {missing}: cannot read it: No such file or directory"


# ---- git-remote-chain ----


def git_push(repo: Path, home: Path, url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**git_env(1_700_000_000), "CHAINCTL_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    full.update(env)
    return subprocess.run(
        ["git", "-C", str(repo), "push", url, "main"], env=full, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_git_remote_chain_pushes_over_grpcs(nodes: Nodes, tmp_path: Path) -> None:
    home = tmp_path / "home"
    tls = ("--node", nodes.grpcs, "--ca-file", str(nodes.pki.ca.cert))
    authority = str(nodes.tls.ready["devnet_authority"])
    for args in (
        ("keys", "create", "pusher", "--type", "secp256k1"),
        (*tls, "account", "init", "--wallet", "pusher"),
        (*tls, "account", "fund", "pusher", "--units", "1", "--authority", authority),
        (*tls, "project", "create", "tls-demo"),
    ):
        done = chainctl(*args, home=home)
        assert done.returncode == 0, done.stderr
    repo = tmp_path / "repo"
    repo.mkdir()
    sh(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    sh(repo, "add", "a.txt")
    sh(repo, "commit", "-q", "-m", "first")
    url = f"chain::grpcs://localhost:{nodes.tls.ready['grpc_port']}/pusher/tls-demo"
    wrong = git_push(repo, home, url, {"CHAINCTL_CA_FILE": str(nodes.pki.other.cert)})
    assert wrong.returncode != 0
    fatal = [line for line in wrong.stderr.splitlines() if line.startswith("fatal: chain:")]
    assert len(fatal) == 1 and f"not signed by CA {nodes.pki.other.cert}" in fatal[0], wrong.stderr
    assert "Traceback" not in wrong.stderr and "ssl_transport_security" not in wrong.stderr
    pushed = git_push(repo, home, url, {"CHAINCTL_CA_FILE": str(nodes.pki.ca.cert)})
    assert pushed.returncode == 0, pushed.stderr
    assert "[new branch]" in pushed.stderr


# ---- the SDK ----


def test_sdk_over_grpcs(nodes: Nodes) -> None:
    with ChainClient(nodes.grpcs, ca_file=nodes.pki.ca.cert) as c:
        status = c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10).status
        assert status.network == "devnet"
    with ChainClient(nodes.grpcs, ca_file=nodes.pki.other.cert) as c:
        with pytest.raises(grpc.RpcError) as failed:
            c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10)
        problem = tls_problem(failed.value, c.target, c.tls)
        assert (
            problem
            == f"TLS with {nodes.grpcs} failed: the node's certificate is not signed by CA {nodes.pki.other.cert}"
        )


def test_sdk_admin_channel_takes_tls_and_the_client_certificate(nodes: Nodes) -> None:
    """A bare admin address follows the main target's TLS; the admin listener wants the cluster CA's client
    certificate."""
    admin = f"localhost:{nodes.tls.ready['admin_port']}"
    pki = nodes.pki
    with ChainClient(
        nodes.grpcs, admin_target=admin, ca_file=pki.ca.cert, cert_file=pki.client.cert, key_file=pki.client.key
    ) as c:
        assert c.admin is not None
        listed = c.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest(), timeout=10)
        assert list(listed.snapshots) == []
    with ChainClient(nodes.grpcs, admin_target=admin, ca_file=pki.ca.cert) as c:
        assert c.admin is not None
        with pytest.raises(grpc.RpcError) as failed:
            c.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest(), timeout=10)
        assert c.admin_address is not None
        problem = tls_problem(failed.value, c.admin_address, c.tls)
        assert problem is not None and "client certificate" in problem, failed.value


def test_sdk_never_sends_the_admin_token_in_plaintext_beyond_loopback() -> None:
    """The gate: a token with a plaintext admin address off loopback is refused before any channel exists."""
    with pytest.raises(ConfigError, match=r"refusing to send the admin token in plaintext to 10\.1\.2\.3:50053"):
        ChainClient("10.1.2.3:50051", admin_target="10.1.2.3:50053", admin_token="secret")
    with pytest.raises(ConfigError, match=r"in plaintext to 10\.1\.2\.3:50053"):  # grpc:// says plaintext explicitly
        ChainClient("grpcs://10.1.2.3:50051", admin_target="grpc://10.1.2.3:50053", admin_token="secret")
    ChainClient("grpcs://10.1.2.3:50051", admin_target="10.1.2.3:50053", admin_token="secret").close()  # TLS
    ChainClient("127.0.0.1:50051", admin_target="127.0.0.1:50053", admin_token="secret").close()  # loopback


# ---- buf curl ----


def buf_curl(*args: str) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), "buf missing: run `make install-test`"
    return subprocess.run([str(BUF), "curl", *args], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_buf_curl_grpc_over_tls_by_reflection(nodes: Nodes) -> None:
    url = f"https://localhost:{nodes.tls.ready['grpc_port']}/chain.v1.ChainService/GetNodeStatus"
    got = buf_curl("--protocol", "grpc", "--cacert", str(nodes.pki.ca.cert), "-d", "{}", url)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["status"]["network"] == "devnet"
    wrong_ca = ("--cacert", str(nodes.pki.other.cert))
    refused = buf_curl("--protocol", "grpc", "--schema", "proto", *wrong_ca, "-d", "{}", url)  # no reflection
    assert refused.returncode != 0 and "certificate" in refused.stderr, refused.stderr


def test_buf_curl_grpc_web_over_tls(nodes: Nodes) -> None:
    url = f"https://localhost:{nodes.tls.ready['web_port']}/chain.v1.ChainService/GetNodeStatus"
    got = buf_curl("--protocol", "grpcweb", "--schema", "proto", "--cacert", str(nodes.pki.ca.cert), "-d", "{}", url)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["status"]["network"] == "devnet"
