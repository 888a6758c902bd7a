"""Help screens import only what they need: `chainctl --help`, `chain-node --help`
and `chain-gateway --help` run in a fresh interpreter and must not have loaded any heavy package.

Not a timing test: it names the modules. The heavy modules load through node.entry.lazy once the command
line is parsed (docs/performance.md, "Start-up").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.fixtures.procs import children

# Each costs tens to hundreds of milliseconds to import; none is needed to print a help screen.
HEAVY = (
    "grpc", "google.protobuf", "aiohttp", "opentelemetry", "prometheus_client", "cryptography", "coincurve",
    "Crypto", "sha3", "blake3", "lmdb", "chain.v1", "redis", "kopf", "boto3", "botocore", "openapi_core",
    "orjson", "uvloop", "asyncio",
)  # fmt: skip

PROBE = """
import json, sys, importlib
module, function, prog, *args = sys.argv[1:]
sys.argv = [prog, *args]
try:
    getattr(importlib.import_module(module), function)()
except SystemExit:
    pass
sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))
"""

ENTRIES = {
    "chainctl": ("node.cli.main", "main"),
    "chain-node": ("node.server.main", "main"),
    "chain-gateway": ("gateway.main", "main"),
}


def modules_after(prog: str, *args: str) -> tuple[str, set[str]]:
    """(stdout, modules loaded) of a command run to its end in a fresh interpreter."""
    module, function = ENTRIES[prog]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module, function, prog, *args],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    _, sep, listing = done.stderr.rpartition("\nMODULES ")
    assert sep, done.stderr
    return done.stdout, set(json.loads(listing))


def loaded_modules(prog: str, *args: str) -> set[str]:
    out, modules = modules_after(prog, *args)
    assert out  # the help screen was printed
    return modules


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize(
    ("prog", "args"),
    [
        ("chainctl", ("--help",)),
        ("chainctl", ("push", "--help")),
        ("chain-node", ("--help",)),
        ("chain-gateway", ("--help",)),
    ],
)
def test_help_imports_no_heavy_module(prog: str, args: tuple[str, ...]) -> None:
    assert heavy_in(loaded_modules(prog, *args)) == []


def test_the_probe_sees_heavy_modules_when_a_command_runs() -> None:
    # The same probe on a command that does its work (an offline chainctl command) sees the heavy modules:
    # the check above is not vacuous.
    modules = loaded_modules("chainctl", "--home", str(ROOT / "no-such-home-dir"), "keys", "list")
    assert "grpc" in modules or "cryptography" in modules


# What talks to a node: a command that works offline has no use for it.
RPC_STACK = ("grpc", "chain.v1.rpc_pb2", "node.sdk.rpc", "node.cli.online", "aiohttp", "opentelemetry")


def rpc_stack_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in RPC_STACK))


def test_offline_chainctl_commands_do_not_load_the_rpc_stack(tmp_path: Path) -> None:
    # keys and git-hash work without a node: they must not pay grpc's and protobuf's RPC imports: chainctl
    # imports only what the command needs. The key store and the git hashing still load crypto.
    home = str(tmp_path / "home")
    out, modules = modules_after("chainctl", "--home", home, "keys", "create", "alice")
    assert "alice" in out
    assert rpc_stack_in(modules) == []
    assert "cryptography" in modules  # the probe sees what the command did load
    out, modules = modules_after("chainctl", "--home", home, "--json", "keys", "list")
    assert "alice" in out
    assert rpc_stack_in(modules) == []
    _, modules = modules_after("chainctl", "--home", home, "keys", "show", "nobody")  # a failure, reported
    assert rpc_stack_in(modules) == []
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f").write_text("x")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    out, modules = modules_after("chainctl", "git-hash", str(repo), "HEAD")
    assert "first" in out
    assert rpc_stack_in(modules) == []


def test_an_online_chainctl_command_loads_the_rpc_stack(tmp_path: Path) -> None:
    # The same probe on a command that calls a node (here one that is not there): the check above is not vacuous.
    _, modules = modules_after("chainctl", "--node", "127.0.0.1:1", "--timeout", "2", "status")
    assert "grpc" in rpc_stack_in(modules)


def mapped_libraries(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}") / "maps").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def spawned_workers(pid: int) -> list[int]:
    found = []
    for task in (Path(f"/proc/{pid}") / "task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = (Path(f"/proc/{child}") / "cmdline").read_bytes()
            if b"node.server.write.verify_worker" in cmdline:
                found.append(int(child))
    return found


def test_a_spawned_verify_worker_does_not_import_the_server(tmp_path: Path) -> None:
    # A verify worker runs its own module and imports the verify function's, not the whole node (grpc,
    # aiohttp): else every worker pays the node's imports (docs/performance.md, "Start-up"). Nor is it
    # multiprocessing's: no resource-tracker process comes with it.
    node = NodeProcess(tmp_path / "data", "--verify-workers", "1").start()
    try:
        assert node.proc is not None
        deadline = time.monotonic() + 60
        worker_maps = ""
        while time.monotonic() < deadline:  # the pool warms up in the background after SERVING
            workers = spawned_workers(node.proc.pid)
            worker_maps = mapped_libraries(workers[0]) if workers else ""
            if "_upb/_message" in worker_maps:  # protobuf loaded: the verify module's imports are done
                break
            time.sleep(0.1)
        assert "_upb/_message" in worker_maps, "no verify worker came up"
        assert "cygrpc" in mapped_libraries(node.proc.pid)  # the node itself has grpc: the probe sees it
        assert "cygrpc" not in worker_maps
        assert "aiohttp" not in worker_maps
        others = [(Path(f"/proc/{c}") / "cmdline").read_bytes() for c in children(node.proc.pid)]
        assert not [c for c in others if b"multiprocessing" in c], others
    finally:
        node.stop()
