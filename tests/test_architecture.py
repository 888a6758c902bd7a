"""The house plan, checked: import layering, no cycles, module and function sizes.

Read from the source with `ast`, so function-level and `TYPE_CHECKING` imports count as much as top-level
ones. Production code is `node/`, `gateway/` and `operator/chain_operator/` (generated protobuf code aside).

Libraries are used through their public APIs: no module imports a private name or module of another package
(`from x import _y`, `import x._y`), and no module reads a private attribute it does not define itself
(`obj._private`, `getattr(obj, "_private")`), which is how code reaches into an aiohttp or grpc object. The
few exceptions are listed below with the reason each is needed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"node": ROOT / "node", "gateway": ROOT / "gateway", "chain_operator": ROOT / "operator" / "chain_operator"}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# Layers: the server side (the node, its state, storage and queries, the gateway) never reaches the client side.
CLIENT_PACKAGES = ("node.sdk", "node.cli")
# Observability shared by the node and the gateway knows neither of them.
SHARED_OBSERVABILITY = "node.observability"


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for top, base in PACKAGES.items():
        for path in sorted(base.rglob("*.py")):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            parts = [top, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            found[name] = Module(name, path, ast.parse(path.read_text(), str(path)))
    return found


MODULES = _modules()


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: Module) -> Iterator[tuple[str, int]]:
    """Every project module `module` imports, anywhere in its body, with the line."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield from _known(full if full in MODULES else target, node.lineno)


def _known(name: str, line: int) -> Iterator[tuple[str, int]]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name:
        yield name, line


def _graph() -> dict[str, set[str]]:
    return {name: {target for target, _ in imports_of(m) if target != name} for name, m in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_server_side_never_imports_client_code() -> None:
    offenders = [
        f"{m.path.relative_to(ROOT)}:{line} imports {target}"
        for m in MODULES.values()
        if not any(_within(m.name, c) for c in CLIENT_PACKAGES)
        for target, line in imports_of(m)
        if any(_within(target, c) for c in CLIENT_PACKAGES)
    ]
    assert offenders == []


def test_shared_observability_knows_neither_node_server_nor_gateway() -> None:
    offenders = [
        f"{m.path.relative_to(ROOT)}:{line} imports {target}"
        for m in MODULES.values()
        if _within(m.name, SHARED_OBSERVABILITY)
        for target, line in imports_of(m)
        if _within(target, "node.server") or _within(target, "gateway")
    ]
    assert offenders == []


# Below the state transition: storage, the block format, the Merkle tree and the genesis parameters (a leaf)
# never import it; the transition builds on them.
BELOW_STATE = ("node.storage", "node.block", "node.merkle", "node.params")
STATE = "node.state"


def upward_imports(modules: list[Module]) -> list[str]:
    """Imports of node.state by a module below it."""
    return [
        f"{m.path.relative_to(ROOT)}:{line} imports {target}"
        for m in modules
        if any(_within(m.name, low) for low in BELOW_STATE)
        for target, line in imports_of(m)
        if _within(target, STATE)
    ]


def test_storage_block_and_merkle_never_import_the_state_transition() -> None:
    assert upward_imports(list(MODULES.values())) == []


def test_the_layering_check_sees_an_upward_import() -> None:
    """Not vacuous: a storage module importing the transition, or a name from a node.state module, is caught."""
    source = "from node.state.transition import BlockOutput\nfrom node.state import access\nimport node.merkle\n"
    fake = Module("node.storage.fake", ROOT / "node" / "storage" / "fake.py", ast.parse(source))
    assert upward_imports([fake]) == [
        "node/storage/fake.py:1 imports node.state.transition",
        "node/storage/fake.py:2 imports node.state.access",
    ]
    assert upward_imports([Module("node.state.fake", fake.path, fake.tree)]) == []


def test_modules_stay_small() -> None:
    sizes = {str(m.path.relative_to(ROOT)): len(m.path.read_text().splitlines()) for m in MODULES.values()}
    assert {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_functions_stay_short() -> None:
    long_ones = {}
    for m in MODULES.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_ones[f"{m.path.relative_to(ROOT)}:{node.lineno} {node.name}"] = length
    assert long_ones == {}


# Module-level tables under node/ are read-only (MappingProxyType, frozenset, tuple): a module holds no
# mutable state. None is pending any more.
MUTABLE_TABLES_PENDING: frozenset[str] = frozenset()
MUTABLE_LITERALS = (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp, ast.ListComp)


def mutable_tables(tree: ast.Module) -> list[str]:
    """Names bound at module level to a dict, set or list display (`__all__` aside)."""
    found = []
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign)
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if target is not None and isinstance(value, MUTABLE_LITERALS) and ast.unparse(target) != "__all__":
            found.append(f"{ast.unparse(target)}:{node.lineno}")
    return found


def test_module_level_tables_are_read_only() -> None:
    offenders = {
        path: names
        for m in MODULES.values()
        if m.name.startswith(("node.", "gateway.", "chain_operator."))
        and (path := str(m.path.relative_to(ROOT))) not in MUTABLE_TABLES_PENDING
        and (names := mutable_tables(m.tree))
    }
    assert offenders == {}


def test_the_table_check_sees_a_mutable_table() -> None:
    assert mutable_tables(ast.parse("A = {1: 2}\nB: list[int] = []\n__all__ = ['A']\nC = frozenset({1})\n")) == [
        "A:1",
        "B:2",
    ]


def test_no_test_module_imports_another() -> None:
    tests = ROOT / "tests"
    offenders = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"  # type: ignore[attr-defined]
                for n in names
                if n.startswith("tests.") and n.rpartition(".")[2].startswith("test_")  # not aiohttp.test_utils
            ]
    assert offenders == []


def test_the_checker_sees_a_cycle() -> None:
    """The cycle finder is not vacuous: a two-module loop and a self-contained chain."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# Private names of the standard library that are its public interface, or that it offers no other way to
# reach (allowed in every module).
STDLIB_PRIVATE_NAMES: dict[str, str] = {
    "_exit": "os._exit: the documented way for a forked child to end without running the parent's handlers",
    "_replace": "namedtuple's documented API (the underscore keeps it apart from field names)",
    "_asdict": "namedtuple's documented API",
    "_fields": "namedtuple's documented API",
    "_make": "namedtuple's documented API",
    "_actions": "argparse: a parser's flags, for environment variables and shell completion; no public list",
    "_SubParsersAction": "argparse: the type `add_subparsers` returns, for annotations; no public name",
    "_value2member_map_": "Enum: whether a value names a member without raising (a status read from outside)",
}

# (module, private name) of a third-party package that a module uses, and why there is no public way.
THIRD_PARTY_PRIVATE: dict[tuple[str, str], str] = {
    ("gateway/protocol.py", "_loop"): "aiohttp offers no public hook for the answer its parser gives a request it "
    "cannot read; the JSON error protocol is made as `web.Server.__call__` makes its own (loop and kwargs)",
    ("gateway/protocol.py", "_kwargs"): "as `_loop`: the server's protocol keywords, passed on unchanged",
    ("node/merkle/lmdb_store.py", "_Database"): "py-lmdb has no public name for the handle `open_db` returns "
    "(annotations only)",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_private_names(tree: ast.Module) -> set[str]:
    """The private names a module defines itself: its functions and classes, names it binds, attributes it
    assigns (`self._x = ...`), keyword arguments it passes."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.alias):
            own.add((node.asname or node.name).split(".")[0])
    return {name for name in own if _private(name)}


def private_uses(tree: ast.Module, first_party: tuple[str, ...] = (*PACKAGES, "chain")) -> list[str]:
    """`name:line` of every private name of another package `tree` imports and every private attribute it
    reads without defining it (first-party imports aside: the project's own modules may share a name)."""
    own = _own_private_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in first_party:
                parts = [*node.module.split("."), *(a.name for a in node.names)]
                found += [f"{part}:{node.lineno}" for part in parts if _private(part)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in first_party:
                    found += [f"{part}:{node.lineno}" for part in alias.name.split(".") if _private(part)]
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            if _private(node.attr) and node.attr not in own:
                found.append(f"{node.attr}:{node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
                found += [f"{name.value}:{node.lineno}"] if name.value not in own else []
    return found


def test_libraries_are_used_through_their_public_api() -> None:
    offenders: list[str] = []
    excused: set[tuple[str, str]] = set()
    for m in MODULES.values():
        path = str(m.path.relative_to(ROOT))
        for use in private_uses(m.tree):
            name = use.partition(":")[0]
            if name in STDLIB_PRIVATE_NAMES:
                continue
            if (path, name) in THIRD_PARTY_PRIVATE:
                excused.add((path, name))
                continue
            offenders.append(f"{path}:{use.partition(':')[2]} {name}")
    assert offenders == []
    assert set(THIRD_PARTY_PRIVATE) - excused == set(), "an exception that no longer occurs: remove it"


def test_the_private_use_check_sees_each_form() -> None:
    """Each form is found; a module's own private attributes and the project's own modules are not."""
    source = """
from aiohttp.web_urldispatcher import _unquote_path_safe
from grpc._channel import Channel
import grpc._cython.cygrpc
from node.memo import _entry

class Mine:
    def __init__(self) -> None:
        self._own = 1

    def f(self, app, other) -> None:
        app._handle(self._own)
        other.router._get_resource_index_key(self._own)
        getattr(app, "_loop")
        getattr(self, "_own")
"""
    assert sorted(private_uses(ast.parse(source)), key=lambda s: int(s.partition(":")[2])) == [
        "_unquote_path_safe:2",
        "_channel:3",
        "_cython:4",
        "_handle:12",
        "_get_resource_index_key:13",
        "_loop:14",
    ]
