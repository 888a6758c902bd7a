"""chainctl in-process against a node: ``Cli(node, home)("keys", "list")`` runs ``main`` and captures output."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.cli.main import main
from tests.fixtures.nodeproc import NodeProcess


@dataclass
class Result:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Cli:
    node: NodeProcess
    home: Path

    def __call__(self, *args: str, ok: bool = True) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(["--node", self.node.grpc_target, "--home", str(self.home), *args])
        result = Result(rc, out.getvalue(), err.getvalue())
        if ok:
            assert rc == 0, result.err
        return result

    def json(self, *args: str) -> Any:
        return self("--json", *args).json()


def authority(node: NodeProcess) -> str:
    return str(node.ready["devnet_authority"])


def funded(cli: Cli, wallet: str = "wallet", units: int = 1) -> str:
    """A new account (secp256k1 wallet + delegated key) with storage; returns its address."""
    cli("keys", "create", wallet, "--type", "secp256k1")
    owner = str(cli.json("account", "init", "--wallet", wallet)["owner_address"])
    cli("account", "fund", owner, "--units", str(units), "--authority", authority(cli.node))
    return owner
