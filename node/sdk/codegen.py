"""Writes node/sdk/reads.py, read_iters.py, aio_reads.py and aio_read_iters.py from the service descriptors.

Run `python -m node.sdk.codegen` after a change to the services.

Every unary read RPC of ChainService and KeychainService (all but the writes) becomes a typed method named
in snake case, its request fields as keyword arguments, returning the response message (the three proof
reads return it wrapped with a `verify(root)`, node.sdk.proofs). Every read with `page_token` and
`next_page_token` also gets `iter_<name>` (the name without its `list_`/`get_`), which follows the pages and
yields the items. tests/node/sdk/test_codegen.py fails when the generated files are not what this writes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor

from chain.v1 import keychain_service_pb2, service_pb2

HERE = Path(__file__).resolve().parent
WRITES = frozenset({"SubmitMessage", "BatchSubmitMessages", "DryRunMessage"})
# The proof reads return the response wrapped: (wrapper class, the request field it keeps as what was asked).
WRAPPED = MappingProxyType(
    {
        "GetOperationProof": ("InclusionProof", "key"),
        "GetExclusionProof": ("ExclusionProof", "key"),
        "GetStorageQuotaProof": ("QuotaProof", "owner_address"),
    }
)
PURPOSE = MappingProxyType(
    {
        "GetProject": "Project metadata and status by project id.",
        "GetProjectByName": "A project by its owner's address and its name.",
        "SearchProjects": "Projects whose name starts with `name_prefix`, one page.",
        "ListProjects": "Projects, optionally of one owner (`owner_address`), one page.",
        "GetProjectActivity": "Recent committed messages of a project, newest first, one page.",
        "GetMergeRequest": "One active merge request by target project and request id.",
        "ListMergeRequests": "Active merge requests targeting a project, one page.",
        "ListMergeRequestsByRequester": "Active merge requests opened by an account, one page.",
        "GetRef": "One ref by project id and ref name (bytes).",
        "ListRefs": "The refs of a project, one page.",
        "GetRefLog": "The update history of a ref, newest first, one page.",
        "GetCommit": "Commit metadata by project id and commit hash.",
        "ListCommits": "The commits of a project, newest first, one page.",
        "GetCommitAncestors": "The ancestors of a commit, breadth first, one page.",
        "ListCollaborators": "The collaborators of a project, one page.",
        "GetAccount": "An account: metadata, keys, custody keys, verifications, storage units.",
        "GetAccountActivity": "Recent committed messages of an account, newest first, one page.",
        "GetKey": "One delegated key of an account (scope, allowed projects, added_at).",
        "ListKeys": "The delegated keys of an account, one page.",
        "ListVerifications": "The verified external addresses of an account, one page.",
        "ListLinks": "The links (follows, stars) of an account, optionally of one type, one page.",
        "ListLinksByTarget": "The links to an account or a project (exactly one target), one page.",
        "ListReactions": "The reactions of an account, one page.",
        "ListReactionsByTarget": "The reactions to a commit, one page.",
        "GetBlock": "A committed block by number, with its transaction chunks.",
        "ListBlocks": "Recent committed blocks, newest first, one page.",
        "GetMessage": "A committed message by its BLAKE3 hash.",
        "ListMessages": "Committed messages of a range of blocks (end 0: the head), one page.",
        "GetOperationProof": "An inclusion proof of a public state key (node.sdk.statekeys), with `verify(root)`.",
        "GetExclusionProof": "An exclusion proof of an absent public state key, with `verify(root)`.",
        "VerifyOperationProof": "The node's verdict on a proof against its current committed root.",
        "GetStorageQuotaProof": "The proof bundle of an account's active storage grants, with `verify(root)`.",
        "GetNodeStatus": "Height, mempool size, pending blocks, network, version, uptime.",
        "GetHealth": "Liveness and readiness.",
        "GetChainStats": "Cumulative totals of messages, projects, accounts and blocks.",
        "GetSnapshotInfo": "The latest snapshot: block number, entry count, state root.",
        "GetMempoolInfo": "Mempool size and per-type message counts.",
        "ListCustodyKeys": "The custody keys of an account, one page.",
        "GetCustodyKey": "One custody key of an account by key id.",
        "GetWebAuthnPolicy": "The relying party and origins this network accepts passkey signatures from.",
    }
)
SCALARS = MappingProxyType(
    {
        FieldDescriptor.TYPE_BYTES: ("bytes", 'b""'),
        FieldDescriptor.TYPE_STRING: ("str", '""'),
        FieldDescriptor.TYPE_BOOL: ("bool", "False"),
        FieldDescriptor.TYPE_UINT32: ("int", "0"),
        FieldDescriptor.TYPE_UINT64: ("int", "0"),
        FieldDescriptor.TYPE_INT32: ("int", "0"),
        FieldDescriptor.TYPE_INT64: ("int", "0"),
    }
)


def module_of(file_name: str) -> str:
    """`chain/v1/rpc.proto` -> `rpc_pb2`."""
    return Path(file_name).stem + "_pb2"


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def iter_name(method: str) -> str:
    name = snake(method)
    for prefix in ("list_", "get_"):
        if name.startswith(prefix):
            return "iter_" + name.removeprefix(prefix)
    return "iter_" + name


@dataclass(frozen=True)
class Read:
    rpc: str
    stub: str  # the client attribute holding the stub: "stub" or "keychain"
    method: MethodDescriptor

    @property
    def name(self) -> str:
        return snake(self.rpc)

    @property
    def request(self) -> Descriptor:
        return self.method.input_type

    @property
    def response(self) -> Descriptor:
        return self.method.output_type

    def paginated(self) -> bool:
        fields = self.request.fields_by_name
        return "page_token" in fields and "next_page_token" in self.response.fields_by_name

    def items(self) -> FieldDescriptor:
        (field,) = [f for f in self.response.fields if f.is_repeated]
        return field


def reads() -> Iterator[Read]:
    """Every unary read of the two public services, in declaration order."""
    services = (
        ("stub", service_pb2.DESCRIPTOR.services_by_name["ChainService"]),
        ("keychain", keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"]),
    )
    for stub, service in services:
        for method in service.methods:
            if method.name not in WRITES and not method.server_streaming:
                yield Read(method.name, stub, method)


def annotation(field: FieldDescriptor) -> tuple[str, str]:
    """(type, default) of a request field as a keyword argument."""
    if field.enum_type is not None:
        module = module_of(field.enum_type.file.name)
        kind, default = f"{module}.{field.enum_type.name}.ValueType", f"{module}.{field.enum_type.values[0].name}"
    elif field.message_type is not None:
        kind, default = f"{module_of(field.message_type.file.name)}.{field.message_type.name}", "None"
        if not field.is_repeated:
            return f"{kind} | None", default
    else:
        kind, default = SCALARS[field.type]
    if field.is_repeated:
        return f"Sequence[{kind}]", "()"
    return kind, default


def params(fields: list[FieldDescriptor]) -> str:
    out = ["self", "*"]
    out += [f"{f.name}: {annotation(f)[0]} = {annotation(f)[1]}" for f in fields]
    return ", ".join([*out, "timeout: float | None = None", "**read: Unpack[ReadOptions]"])


def returns(read: Read) -> str:
    if read.rpc in WRAPPED:
        return WRAPPED[read.rpc][0]
    return f"{module_of(read.response.file.name)}.{read.response.name}"


def unary(read: Read, aio: bool) -> str:
    fields = list(read.request.fields)
    args = ", ".join(f"{f.name}={f.name}" for f in fields)
    request = f"{module_of(read.request.file.name)}.{read.request.name}({args})"
    call = f"self._read(self.{read.stub}.{read.rpc}, {request}, timeout, read)"
    call = f"await {call}" if aio else call
    if read.rpc in WRAPPED:
        cls, asked = WRAPPED[read.rpc]
        body = f"return {cls}({asked}, {call})"
    else:
        body = f"return {call}"
    head = "async def" if aio else "def"
    doc = f"{read.rpc}: {PURPOSE[read.rpc]}"
    return f'    {head} {read.name}({params(fields)}) -> {returns(read)}:\n        """{doc}"""\n        {body}\n'


def pager(read: Read, aio: bool) -> str:
    fields = [f for f in read.request.fields if f.name != "page_token"]
    items = read.items()
    message = items.message_type
    assert message is not None, f"{read.rpc}: its items are not messages"
    item = f"{module_of(message.file.name)}.{message.name}"
    args = ", ".join([*(f"{f.name}={f.name}" for f in fields), "page_token=token", "timeout=timeout", "**read"])
    kind, helper = ("AsyncIterator", "apages") if aio else ("Iterator", "pages")
    doc = f"Every item of {read.rpc}, page after page (it follows `next_page_token`)."
    return (
        f"    def {iter_name(read.rpc)}({params(fields)}) -> {kind}[{item}]:\n"
        f'        """{doc}"""\n'
        f"        return {helper}(lambda token: self.{read.name}({args}), lambda page: page.{items.name})\n"
    )


HEADER = '''"""{title} (generated by node.sdk.codegen: do not edit).

{about}
"""

from __future__ import annotations

{imports}


class {cls}:
    """{doc}"""

{members}
'''
READS_ABOUT = """One method per unary read RPC of ChainService and KeychainService, named in snake case, its request
fields as keyword arguments (`timeout` in seconds, the client's own by default; `consistency="linearizable"` and
`min_height` as docs/sdk.md, "Read consistency", says), returning the response message; the proof reads return
node.sdk.proofs wrappers."""
ITERS_ABOUT = """`iter_<name>` for every paginated read (`<name>`: the read's name without `list_`/`get_`): the read's
keyword arguments but `page_token`; it follows `next_page_token` and yields the items of every page."""


def imports(body: str, aio: bool, iters: bool) -> str:
    """The import block: only the modules the generated methods name."""
    if iters:
        abc = ["AsyncIterator" if aio else "Iterator"]
        head = [
            "from typing import Unpack",
            "",
            "from chain.v1 import ({chain},)",
            "from node.sdk.consistency import ReadOptions",
            f"from node.sdk.paging import {'apages' if aio else 'pages'}",
        ]
        base = "aio_reads import AsyncReads" if aio else "reads import Reads"
        head.append(f"from node.sdk.{base}")
    else:
        abc = ["Sequence"] if "Sequence[" in body else []
        head = [
            "from typing import TypeVar, Unpack",
            "",
            "import grpc.aio" if aio else "import grpc",
            "",
            "from chain.v1 import ({chain},)",
            "from node.sdk.consistency import ReadOptions",
            "from node.sdk.proofs import ExclusionProof, InclusionProof, QuotaProof",
        ]
    names = re.findall(r"\b(\w+_pb2(?:_grpc)?)\.", body)
    chain = ", ".join(sorted(set(names)))
    lines = ([f"from collections.abc import {', '.join(abc)}", ""] if abc else []) + head
    return "\n".join(lines).replace("{chain}", chain)


def reads_members(aio: bool) -> str:
    kind = "Async" if aio else ""
    module = "grpc.aio" if aio else "grpc"
    head = (
        f"    stub: service_pb2_grpc.ChainService{kind}Stub\n"
        f"    keychain: keychain_service_pb2_grpc.KeychainService{kind}Stub\n\n"
        f"    {'async ' if aio else ''}def _read(self, method: {module}.UnaryUnaryMultiCallable[Req, Resp], "
        "request: Req, timeout: float | None, read: ReadOptions) -> Resp:\n"
        "        raise NotImplementedError\n"
    )
    return "\n".join([head, *(unary(read, aio) for read in reads())])


def render(aio: bool, iters: bool) -> str:
    if iters:
        members = "\n".join(pager(read, aio) for read in reads() if read.paginated())
        cls = "AsyncReadIterators(AsyncReads)" if aio else "ReadIterators(Reads)"
        doc = "The `iter_*` of AsyncChainClient (async iterators)." if aio else "The `iter_*` of ChainClient."
        title = "Iterators over the paginated reads of " + ("AsyncChainClient" if aio else "ChainClient")
        about = ITERS_ABOUT
    else:
        members = reads_members(aio)
        cls = "AsyncReads" if aio else "Reads"
        doc = "The typed reads of AsyncChainClient (coroutines)." if aio else "The typed reads of ChainClient."
        title = "Typed reads of " + ("AsyncChainClient" if aio else "ChainClient")
        about = READS_ABOUT
    text = HEADER.format(
        title=title, about=about, imports=imports(members, aio, iters), cls=cls, doc=doc, members=members
    )
    if not iters:
        text = text.replace("\n\n\nclass", '\n\nReq = TypeVar("Req")\nResp = TypeVar("Resp")\n\n\nclass', 1)
    return text


def formatted(source: str) -> str:
    """`source` with its imports sorted and formatted by ruff (the repository's settings)."""
    ruff = str(Path(sys.executable).parent / "ruff")
    for args in (("check", "--select", "I", "--fix", "--quiet"), ("format",)):
        cmd = [ruff, *args, "--stdin-filename", str(HERE / "generated.py"), "-"]
        source = subprocess.run(cmd, input=source, capture_output=True, text=True, check=True).stdout
    return source


def outputs() -> dict[Path, str]:
    """Each generated file and the text it must hold."""
    return {
        HERE / "reads.py": formatted(render(aio=False, iters=False)),
        HERE / "read_iters.py": formatted(render(aio=False, iters=True)),
        HERE / "aio_reads.py": formatted(render(aio=True, iters=False)),
        HERE / "aio_read_iters.py": formatted(render(aio=True, iters=True)),
    }


def main() -> None:
    for path, text in outputs().items():
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
