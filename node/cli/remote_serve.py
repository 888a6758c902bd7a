"""git-remote-chain at work: the helper's commands over git's stdin/stdout (node/cli/remote_helper.py is the
entry point and documents the protocol). Loaded once the URL has been read, with grpc, protobuf and the SDK."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

import grpc

from chain.v1 import rpc_pb2
from node.cli.common import CliError, Context
from node.cli.config import StoreError, default_home
from node.cli.online import rpc_failure
from node.cli.remote_helper import ACCOUNT_ENV, CA_FILE_ENV, NO_OBJECTS, ChainUrl, HelperError
from node.cli.run import TRACEBACK_ENV
from node.errors import CliCode, ConfigError, Reason
from node.sdk import git
from node.sdk.push import BundleCommitted, PushError, plan_push, submit_push
from node.sdk.rpc import Dropped

NODE_REASONS: Mapping[str, str] = MappingProxyType(
    {CliCode.NOT_FAST_FORWARD: "non-fast-forward", Reason.REF_HASH_MISMATCH: "stale info"}
)


@dataclass
class Options:
    verbosity: int = 1
    progress: bool = False
    dry_run: bool = False
    force: bool = False


@dataclass
class Helper:
    ctx: Context
    url: ChainUrl
    repo: git.GitRepo
    out: BinaryIO
    err: BinaryIO
    options: Options = field(default_factory=Options)
    _pid: bytes | None = None

    def say(self, *lines: str) -> None:
        self.out.write(b"".join(line.encode("utf-8", errors="surrogateescape") + b"\n" for line in lines))
        self.out.flush()

    def note(self, text: str, end: str = "\n") -> None:
        self.err.write((text + end).encode("utf-8", errors="replace"))
        self.err.flush()

    @property
    def project_id(self) -> bytes:
        if self._pid is None:
            self._pid = self.ctx.project_id(self.url.project)
        return self._pid

    # ---- commands ----
    def capabilities(self) -> None:
        self.say("push", "option", "fetch", "")

    def option(self, name: str, value: str) -> None:
        if name == "verbosity":
            if not value.lstrip("-").isdigit():
                self.say(f"error verbosity must be a whole number, not {value!r}")  # gitremote-helpers(7)
                return
            self.options.verbosity = int(value)
        elif name == "progress":
            self.options.progress = value == "true"
        elif name == "dry-run":
            self.options.dry_run = value == "true"
        elif name == "force":
            self.options.force = value == "true"
        elif name == "followtags":
            pass  # git lists the tags to follow in the push batch itself
        else:
            self.say("unsupported")
            return
        self.say("ok")

    def list_refs(self) -> None:
        pid = self.project_id
        stub = self.ctx.client.stub
        id_len = self.repo.id_len()
        lines: list[str] = []
        token = ""
        while True:
            resp = stub.ListRefs(rpc_pb2.ListRefsRequest(project_id=pid, page_token=token), timeout=self.ctx.timeout)
            for ref in resp.refs:
                name = bytes(ref.name).decode("utf-8", errors="surrogateescape")
                req = rpc_pb2.GetCommitRequest(project_id=pid, commit_hash=bytes(ref.hash))
                commit = stub.GetCommit(req, timeout=self.ctx.timeout).commit
                sha = git.git_id_of_content_digest(bytes(commit.content_digest), id_len)
                lines.append(f"{self._local_alias(name, sha) or sha or '?'} {name}")
            token = resp.next_page_token
            if not token:
                break
        self.say(*lines, "")

    def _local_alias(self, name: str, sha: str | None) -> str | None:
        """The local ref's own id when it peels to ``sha`` (an annotated tag), else None."""
        if sha is None or not self.repo.ref_exists(name):
            return None
        found, _ = self.repo.resolve_refs([name])
        if not found or found[0].sha != sha:
            return None
        own = self.repo.run("rev-parse", "--verify", "--quiet", name, check=False).decode().strip()
        return own or None

    def push(self, specs: Sequence[str]) -> None:
        dsts = [s.lstrip("+").partition(":")[2] or s.lstrip("+") for s in specs]
        try:
            statuses = self._push(specs, dsts)
        except CliError as exc:
            statuses = dict.fromkeys(dsts, _one_line(f"{exc.reason}: {exc.message}"))
        except (git.GitError, PushError, StoreError, Dropped, TimeoutError) as exc:
            statuses = dict.fromkeys(dsts, _one_line(str(exc)))
        except grpc.RpcError as exc:
            statuses = dict.fromkeys(dsts, ": ".join(rpc_failure(self.ctx, exc)))
        lines = [f"ok {d}" if statuses.get(d) is None else f"error {d} {statuses[d]}" for d in dsts]
        self.say(*lines, "")

    def _push(self, specs: Sequence[str], dsts: Sequence[str]) -> dict[str, str | None]:
        builder = None if self.options.dry_run else self.ctx.account_builder()
        plan = plan_push(
            self.ctx.client, self.repo, self.project_id, refs=specs, force=self.options.force, strict=False
        )
        statuses: dict[str, str | None] = dict.fromkeys(dsts)
        statuses.update(plan.refused)
        if builder is None:
            return statuses
        if plan.bundles and self.options.verbosity > 0:
            self.note(f"Sending {len(plan.commits)} commit(s) in {len(plan.bundles)} bundle(s)")
        result = submit_push(self.ctx.client, builder, plan, on_bundle=self._progress(), strict=False)
        for name, why in result.ref_errors.items():
            reason = why.partition(":")[0]
            statuses[name] = NODE_REASONS.get(reason, _one_line(why))
        return statuses

    def _progress(self) -> Callable[[BundleCommitted], None]:
        def report(event: BundleCommitted) -> None:
            if not self.options.progress or self.options.verbosity < 1:
                return
            done = event.index + 1
            pct = 100 * done // event.total
            end = ", done.\n" if done == event.total else "\r"
            self.note(f"Writing commit bundles: {pct:3d}% ({done}/{event.total})", end=end)

        return report


def _one_line(text: str) -> str:
    return " ".join(text.split())


def serve(helper: Helper, stdin: BinaryIO) -> int:
    """Answer git's commands until a blank line or end of input."""
    batch: list[str] = []
    for raw in stdin:
        line = raw.rstrip(b"\n").decode("utf-8", errors="surrogateescape")
        if line.startswith("push "):
            batch.append(line[5:])
            continue
        if batch:  # the blank line that ends a push batch
            helper.push(batch)
            batch = []
            continue
        if not line:
            return 0
        cmd, _, rest = line.partition(" ")
        if cmd == "capabilities":
            helper.capabilities()
        elif cmd == "list":
            helper.list_refs()
        elif cmd == "option":
            name, _, value = rest.partition(" ")
            helper.option(name, value)
        elif cmd in ("fetch", "import"):
            raise HelperError(NO_OBJECTS)
        else:
            raise HelperError(f"unsupported remote-helper command {cmd!r}")
    return 0


def run(url: ChainUrl, err: BinaryIO) -> int:
    """Serve git on stdin/stdout for `url`; every failure is one `fatal: chain: ...` line and exit 1."""
    try:
        # git sets GIT_DIR, often relative ("."/".git"); GitRepo runs `git -C DIR`, so make it absolute.
        git_dir = str(Path(os.environ.get("GIT_DIR", ".")).resolve())
        os.environ["GIT_DIR"] = git_dir
        repo = git.GitRepo(git_dir)
    except git.GitError as exc:
        return fatal(err, str(exc))
    ca_file = Path(os.environ[CA_FILE_ENV]) if os.environ.get(CA_FILE_ENV) else None
    account = os.environ.get(ACCOUNT_ENV) or None
    ctx = Context(node=url.node, home=default_home(), json=False, account_ref=account, ca_file=ca_file)
    try:
        return serve(Helper(ctx, url, repo, sys.stdout.buffer, err), sys.stdin.buffer)
    except CliError as exc:
        return fatal(err, f"{exc.reason}: {exc.message}")
    except (HelperError, git.GitError, StoreError, ConfigError) as exc:
        return fatal(err, str(exc))
    except grpc.RpcError as exc:
        return fatal(err, ": ".join(rpc_failure(ctx, exc)))  # before close: the line names the client's CA
    except BrokenPipeError:
        return 1
    except Exception as exc:  # the helper's own fault: still one line (CHAINCTL_TRACEBACK=1 raises it)
        if os.environ.get(TRACEBACK_ENV):
            raise
        return fatal(err, f"UNKNOWN: {type(exc).__name__}: {exc} (set {TRACEBACK_ENV}=1 to see where)")
    finally:
        ctx.close()


def fatal(err: BinaryIO, text: str) -> int:
    err.write(f"fatal: chain: {_one_line(text)}\n".encode(errors="replace"))
    return 1
