"""The store's writer process: state-tree updates and block commits off the node's GIL
(`chain-node --store-writer process`).

    writer = WriterProcess(path, sync=True)   # spawns `python -m node.storage.writer` (no handshake)
    update = writer.update_tree(root, changes, here=u64(n), root_at=at)  # block n's tree update, in the child
    writer.commit(writes, update.nodes, n)  # one block, one LMDB write transaction, in the child
    writer.close()

py-lmdb releases the GIL around every single put of a write transaction, so a commit run in a thread of
the node's own process hands the GIL back and forth with admission about eleven times a message. The child
owns the store's write transactions instead; the parent keeps its environment open for read snapshots
(LMDB serves many processes and serialises writers across them with its own lock, so there is still one
writer). A block's writes go to the child as one pickled frame; the answer is one status byte.

The state-tree update of each block runs in the child too (`update_tree`, a `merkle.TreeUpdater`): the
transition sends the tree's changes, the parent root and where it is, and gets the new root back. The
child reads the old nodes from its own store, through its own memo of the nodes the latest committed blocks
made (`RecentNodes`, `--tree-cache-nodes`), and keeps the new nodes until the commit that names them
(`BlockNodes` without `placed`): they never cross the pipe, and the memo takes them only once that block is committed. A
commit that reaches a child which does not hold them (a fresh one, after a kill or after a refused write)
is preceded by the same update again, whose root must be the same (`merkle.update` is deterministic; a
different root is InvariantBroken).

Failure, and what the caller (node.chain.Chain.commit) does with it:
- the disk refuses: `StorageFailed`, nothing written. The child exits after answering, so the next
  attempt starts from a fresh environment (an LMDB environment whose write failed may stay in panic);
- the file is damaged: `WriteDamaged`, which the caller latches as the store's fault; a tree node the
  update reads is missing or damaged: `TreeDamaged`, a `MerkleError`, which the caller's read guard latches;
- the child dies before answering (kill -9, the OOM killer): `WriterLost`. The transaction is atomic, so
  the block is either wholly stored or not at all: the caller reads the stored head to tell which. The next
  commit starts a new child. An update is only read: one whose child dies is sent once more to a new child.

The child never outlives the node: it asks the kernel for SIGKILL when its parent dies (also in the middle
of a commit, whose transaction LMDB then discards), and it exits when its input pipe closes. Linux sends
that signal when the *thread* that started the child ends: the first child is started from the node's
main thread, a replacement from the thread that commits (a worker of the event loop's default executor,
which lives as long as the loop).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from node.constants import TREE_CACHE_NODES
from node.errors import DataCorrupted, InvariantBroken, StorageFailed
from node.merkle import BlockNodes, InvalidChange, MerkleError, TreeUpdate, update
from node.merkle.store import RecentNodes
from node.storage.lmdb_store import LmdbStore
from node.storage.retention import StateHistory

OK, FAILED, DAMAGED, BROKEN = 0, 1, 2, 3  # the child's answer: one status byte, then a 4-byte length and body
HEADER = 8  # a request: the payload's length (big-endian), then the pickled request (UPDATE or COMMIT first)
UPDATE, COMMIT = "update", "commit"
KEPT_UPDATES = 4  # the latest updates' requests the parent keeps, to send again to a child that lacks them
PR_SET_PDEATHSIG = 1
STOP_WAIT = 5.0
log = logging.getLogger(__name__)
DIE_ENV = "CHAIN_TEST_WRITER_DIE"  # tests only: the child exits at the first request of a kind, "before"
# (a commit, before its transaction), "after" (a commit, after it, unanswered), or "update" (unanswered);
# "<kind>:<path>" does so only while the file <path> exists (a node's test turns the fault off without a restart)


class WriterLost(StorageFailed):
    """The writer process exited before it answered: the block may or may not be stored."""


class WriteDamaged(Exception):
    """The writer's LMDB found the store's file damaged (the caller latches it as the store's fault)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class TreeDamaged(MerkleError):
    """A tree node the writer's update read is missing or damaged (the caller's read guard latches it)."""


class WriterProcess:
    def __init__(
        self,
        path: Path | str,
        *,
        sync: bool = True,
        on_restart: Callable[[], object] | None = None,
        tree_cache_nodes: int = TREE_CACHE_NODES,
        history: StateHistory | None = None,
    ) -> None:
        """`on_restart`: called before a child replaces one that exited (the store frees the dead child's
        LMDB reader slot: every process that opens the environment takes one, and a killed one keeps it).
        `tree_cache_nodes`: the child's memo of the nodes the latest committed blocks made. `history`: the
        trees the store keeps; the child collects older stale nodes after answering each commit."""
        self.path = Path(path)
        self.sync = sync
        self.tree_cache_nodes = tree_cache_nodes
        self.history = history or StateHistory()
        self._on_restart = on_restart
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # one request and its answer at a time
        # (block, new root) -> the request that made it; the update whose nodes the running child holds
        self._updates: OrderedDict[tuple[int, bytes], bytes] = OrderedDict()
        self._child_holds: tuple[int, bytes] | None = None
        self._spawn()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _spawn(self) -> None:
        sync = "1" if self.sync else "0"
        argv = [sys.executable, "-m", "node.storage.writer", str(self.path), sync, str(os.getpid())]
        argv += [str(self.tree_cache_nodes), str(self.history)]
        # stderr is the node's: a child that cannot start says why there
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self._child_holds = None
        self.starts += 1

    def update_tree(
        self, root: bytes, changes: Mapping[bytes, bytes | None], *, here: bytes, root_at: bytes
    ) -> TreeUpdate:
        """Block `here`'s state-tree update, run in the child over its store (`merkle.TreeUpdater`): the new
        root and where it is; the nodes stay in the child (`BlockNodes` held there) for the commit of that block.
        TreeDamaged when a node it reads is missing or damaged; WriterLost when two children in a row die."""
        block = int.from_bytes(here, "big")
        request = _frame((UPDATE, root, dict(changes), here, root_at))
        with self._lock:
            for attempt in (1, 2):
                try:
                    new_root, new_at, count = self._updated(block, request)
                    break
                except WriterLost as lost:  # nothing is written by an update: a new child runs it again
                    if attempt == 2:
                        raise
                    log.warning("%s during a tree update: running it again in a new writer", lost)
            self._updates[block, new_root] = request
            self._updates.move_to_end((block, new_root))
            while len(self._updates) > KEPT_UPDATES:
                self._updates.popitem(last=False)
        return TreeUpdate(new_root, BlockNodes(block, new_root, count), new_at)

    def _updated(self, block: int, request: bytes) -> tuple[bytes, bytes | None, int]:
        status, body = self._exchange(request)
        if status == OK:
            new_root, new_at, count = pickle.loads(body)
            self._child_holds = (block, new_root)
            return new_root, new_at, count
        text = body.decode()
        if status == DAMAGED:
            raise TreeDamaged(text)
        raise InvariantBroken(f"the store writer's tree update failed: {text}")

    def commit(
        self,
        writes: Mapping[bytes, bytes | None],
        tree_nodes: Mapping[bytes, bytes] | BlockNodes,
        block: int | None = None,
    ) -> None:
        """Write one block atomically in the child: StorageFailed (nothing written), WriterLost (the child
        died: stored or not, read the head), WriteDamaged (the file is damaged). `tree_nodes`: a block's
        nodes from an update (held: this writer's update of that block, sent again first when this child
        does not hold them), or nodes as they are stored."""
        with self._lock:
            nodes = self._sent(tree_nodes, block) if isinstance(tree_nodes, BlockNodes) else tree_nodes
            status, body = self._exchange(_frame((COMMIT, writes, nodes, block)))
            self._child_holds = None
        if status == OK:
            return
        text = body.decode()
        if status == FAILED:
            raise StorageFailed(text)
        if status == DAMAGED:
            raise WriteDamaged(text)
        raise WriterLost(f"the store writer process failed: {text}")

    def _sent(self, nodes: BlockNodes, block: int | None) -> Mapping[bytes, bytes] | None:
        """What a commit sends for `nodes`: placed ones themselves; None for the child's own, once it holds
        them (InvariantBroken when they are held for another block)."""
        if nodes.placed is not None:
            return nodes.here()
        if nodes.block != block:
            raise InvariantBroken(f"block {block}: its tree nodes are held for block {nodes.block}")
        self._hold(nodes.block, nodes.root)
        return None

    def _hold(self, block: int, root: bytes) -> None:
        """Make the child hold the nodes of block `block`'s update to `root` (run it again if not)."""
        if self._live() and self._child_holds == (block, root):
            return
        request = self._updates.get((block, root))
        if request is None:  # an update of another writer, or one too old: nothing can give its nodes
            raise InvariantBroken(f"the store writer made no tree update of block {block} to root {root.hex()}")
        again, _at, _count = self._updated(block, request)
        if again != root:
            raise InvariantBroken(f"the tree update gave root {again.hex()} again, not {root.hex()}")

    def _live(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _exchange(self, request: bytes) -> tuple[int, bytes]:
        """One request to the child (a new one when it exited) and its answer; WriterLost when it dies first."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._reap()
            if self._on_restart is not None:
                self._on_restart()
            self._spawn()
            proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
            return _read_answer(proc.stdout)
        except (OSError, EOFError, ValueError):
            proc.kill()  # dead already, or in a state no answer can come from: stored or not, the head tells
            code = proc.wait()
            self._child_holds = None
            raise WriterLost(f"the store writer process exited ({_describe(code)}) before it answered") from None

    def _reap(self) -> None:
        proc = self._proc
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a write the dead child never read
                    pipe.close()
        proc.wait()
        self._proc = None

    def close(self) -> bool:
        """Close its input (the child finishes what it is writing, then exits), then wait; kill if stuck.
        Whether it exited by itself with status 0 (False: killed, or it had failed)."""
        proc = self._proc
        if proc is None:
            return True
        clean = False
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            clean = proc.wait(STOP_WAIT) == 0
        except OSError:
            pass
        except subprocess.TimeoutExpired:
            proc.kill()
        self._reap()
        return clean


def _frame(request: tuple[Any, ...]) -> bytes:
    payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    return len(payload).to_bytes(HEADER, "big") + payload


def _read_answer(stream: IO[bytes]) -> tuple[int, bytes]:
    head = _read_exact(stream, 5)
    return head[0], _read_exact(stream, int.from_bytes(head[1:], "big"))


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError
    return data


def _describe(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


# ---- the child ----
def _die_with(parent: int) -> None:
    """SIGKILL when the parent dies (Linux), then make sure it had not died already."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the closed input pipe still ends the child once it is idle
    if os.getppid() != parent:
        os._exit(0)


def _answer(out: IO[bytes], status: int, body: bytes = b"") -> None:
    out.write(bytes([status]) + len(body).to_bytes(4, "big") + body)
    out.flush()


def _broken(out: IO[bytes], exc: Exception) -> int:
    """Say a bug to the node; the child's exit status after it (a fresh child for the next request)."""
    _answer(out, BROKEN, f"{type(exc).__name__}: {exc}".encode())
    return 1


class _Child:
    """The child's side: its store, the memo of the nodes the latest committed blocks made, and the nodes of
    the latest update until a commit takes them."""

    def __init__(self, store: LmdbStore, tree_cache_nodes: int, history: StateHistory) -> None:
        self.store = store
        self.recent = RecentNodes(tree_cache_nodes)
        self.held: dict[bytes, bytes] | None = None
        self.history = history

    def update(self, root: bytes, changes: dict[bytes, bytes | None], here: bytes, root_at: bytes) -> bytes:
        self.held = None
        with self.store.read() as (_, nodes):
            result = update(self.recent.over(nodes), root, changes, here=here, root_at=root_at)
        assert isinstance(result.new_nodes, dict)
        self.held = result.new_nodes
        return pickle.dumps((result.root, result.root_at, len(result.new_nodes)), protocol=pickle.HIGHEST_PROTOCOL)

    def commit(self, writes: Mapping[bytes, bytes | None], nodes: Mapping[bytes, bytes] | None, block: int) -> None:
        if nodes is None:
            if self.held is None:
                raise InvariantBroken(f"block {block}: the writer holds no tree nodes")
            nodes = self.held
        self.held = None
        self.store.commit(writes, nodes, block)
        self.recent.add(nodes)  # after the transaction: never a node of a block not committed

    def prune(self, block: int) -> None:
        """After block `block`'s commit is answered: collect what the retained trees no longer need (a failure
        here is the next commit's to meet: nothing of a block is lost by a collection not made)."""
        with contextlib.suppress(StorageFailed):
            self.history.collect(self.store, block)


def serve(
    path: str,
    sync: bool,
    inp: IO[bytes],
    out: IO[bytes],
    tree_cache_nodes: int = TREE_CACHE_NODES,
    history: StateHistory | None = None,
) -> int:
    store = LmdbStore(path, sync=sync)
    child = _Child(store, tree_cache_nodes, history or StateHistory())
    try:
        while True:
            head = inp.read(HEADER)
            if not head or len(head) < HEADER:
                return 0  # the node closed the pipe, or exited
            request = pickle.loads(inp.read(int.from_bytes(head, "big")))
            die = _die_at()  # test hook: killed at an update, or before or after a commit
            if request[0] == UPDATE:
                if die == "update":
                    os._exit(9)
                root, changes, here, root_at = request[1:]
                try:
                    _answer(out, OK, child.update(root, changes, here, root_at))
                except InvalidChange as exc:  # the caller's bug, not the store's damage
                    return _broken(out, exc)
                except (MerkleError, DataCorrupted) as exc:
                    _answer(out, DAMAGED, str(exc).encode())
                except Exception as exc:  # a bug: said to the node
                    return _broken(out, exc)
                continue
            writes, tree_nodes, block = request[1:]
            if die == "before":
                os._exit(9)
            try:
                child.commit(writes, tree_nodes, block)
            except StorageFailed as exc:
                _answer(out, FAILED, str(exc).encode())
                return 1  # a fresh environment for the next attempt
            except DataCorrupted as exc:
                _answer(out, DAMAGED, str(exc).encode())
                return 1
            except Exception as exc:  # a bug: said to the node, which counts the block as not stored
                return _broken(out, exc)
            if die == "after":  # stored, never answered
                os._exit(9)
            _answer(out, OK)
            try:
                if block is not None:  # a commit of records alone (tools, tests) stores no block's tree
                    child.prune(block)
            except DataCorrupted:
                return 1  # latched by the next request's store, which meets the same damage
    finally:
        store.close()


def _die_at() -> str:
    """The request kind the test hook (`DIE_ENV`) kills this child at ("" for none)."""
    kind, _, while_exists = os.environ.get(DIE_ENV, "").partition(":")
    return "" if while_exists and not os.path.exists(while_exists) else kind


def main(argv: list[str]) -> int:
    path, sync, parent, tree_cache_nodes, history = argv
    _die_with(int(parent))
    logging.disable(logging.CRITICAL)  # the node logs what the child answers; the child stays quiet
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the node, which then closes the pipe
    return serve(
        path, sync == "1", sys.stdin.buffer, sys.stdout.buffer, int(tree_cache_nodes), StateHistory.parse(history)
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
