"""Before any part is wired: the store a node serves, opened, verified, restored, joined and agreed.

    opened = await Bootstrap(config).open()   # Opened(chain, bootstrap, devnet_authority, etcd)

Solo (and `--follow`): `--restore DIR` staged and renamed into place (or a leftover of an interrupted restore
removed), then the store opened, or created in a directory that never held one (a devnet makes its genesis
and storage authority here; mainnet and testnet need `--genesis`). A store that is damaged, foreign or
missing is refused (StoreRefused, docs/operations.md "Store identity and integrity"); with `--reinitialize`
it is moved aside once and the start goes on from an empty directory.

Replicated (`--orderer etcd`): the data dir is first brought to a store the etcd log continues (`join`, which
`chain-node state-sync` runs alone: a state sync from a member when it cannot), then opened with the genesis
published in etcd; a new devnet that lost the race to publish its genesis is dropped for the one agreed.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from chain.v1 import message_pb2
from node.chain import Chain
from node.errors import ConfigError, StoreRefused
from node.params import ChainParams
from node.server.config import NodeConfig
from node.server.devnet import AUTHORITY_FILE, new_devnet
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.genesis import agree_genesis, check_same, published_genesis
from node.server.ordering.etcd.join import join
from node.server.ordering.etcd.log import Keys
from node.server.snapshots import SnapshotManager, restore
from node.server.snapshots.staging import Staging
from node.server.transport import NodeTLS, etcd_tls
from node.storage.fault import REMEDY_DAMAGED
from node.storage.identity import DATA_FILE, IDENTITY_FILE, LOCK_FILE, move_aside, network_name
from node.storage.integrity import REMEDY_FOREIGN, check_files, identity_of, is_fresh

log = logging.getLogger("chain.node")
NETWORKS = MappingProxyType({"mainnet": message_pb2.NETWORK_MAINNET, "testnet": message_pb2.NETWORK_TESTNET})
STORE_FILES = (DATA_FILE, LOCK_FILE, IDENTITY_FILE, AUTHORITY_FILE)  # what --reinitialize moves aside
T = TypeVar("T")


@dataclass(frozen=True)
class Opened:
    """What the node serves: the chain; whether it is a new devnet whose bootstrap message is still to be
    submitted; the devnet authority's file ("" when none is here); the etcd client (replicated mode)."""

    chain: Chain
    bootstrap: bool
    devnet_authority: str = ""
    etcd: EtcdClient | None = None


def node_id(config: NodeConfig) -> str:
    """`--node-id`, or the one kept in the data dir (made once)."""
    if config.node_id:
        return config.node_id
    path = config.data_dir / "node-id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(8) + "\n")
    return path.read_text().strip()


class Bootstrap:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.etcd: EtcdClient | None = None
        self._published: ChainParams | None = None  # genesis published in etcd (replicated mode)

    async def open(self) -> Opened:
        """The chain this node serves. StoreRefused, RestoreFailed, ConfigError: nothing is left open."""
        if self.config.orderer != "etcd":
            self._restore_local()
            chain, bootstrap = await self._reinitializing(self._open_store)
            return Opened(chain, bootstrap, self._authority())
        self.etcd = EtcdClient(self.config.etcd_endpoints, tls=etcd_tls(self.config))
        try:
            chain, bootstrap = await self._open_replicated(self.etcd)
        except BaseException:
            await self.close()  # the refusal stops the process: leave no session open behind it
            raise
        return Opened(chain, bootstrap, self._authority(), self.etcd)

    async def close(self) -> None:
        if self.etcd is not None:
            await self.etcd.close()

    async def _reinitializing(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt`; when it refuses the store and --reinitialize is given, the store is moved aside and
        `attempt` runs once more from an empty directory."""
        cfg = self.config
        try:
            return await attempt()
        except StoreRefused as refused:
            if not cfg.reinitialize:
                raise
            aside = move_aside(cfg.data_dir, STORE_FILES)
            log.warning("--reinitialize: %s; the old store was moved to %s", refused.problem, aside)
        return await attempt()

    def _restore_local(self) -> None:
        """`--restore DIR`, or (replicated, empty data dir) the newest snapshot in --snapshot-dir: both staged,
        verified and renamed into place; without either, a leftover of an interrupted restore is removed."""
        cfg = self.config
        if cfg.restore is not None:
            info = restore(cfg.restore, cfg.data_dir, timeout=cfg.restore_timeout)
            log.info("restored snapshot %s at block %d", info.name, info.block_number)
        elif cfg.orderer == "etcd" and not (cfg.data_dir / "data.mdb").exists():
            newest = SnapshotManager(None, cfg.snapshots).latest()
            if newest is not None:  # a new member with an empty disk starts from the newest snapshot
                info = restore(cfg.snapshots / newest.name, cfg.data_dir, timeout=cfg.restore_timeout)
                log.info("empty data dir: restored the newest snapshot %s at block %d", info.name, info.block_number)
        elif cfg.orderer != "etcd":  # the replicated join resumes a state sync instead
            Staging(cfg.data_dir).discard()

    async def join(self) -> str:
        """Replicated: bring the data dir to a store the etcd log continues (state sync when it cannot);
        `chain-node state-sync` runs only this. Says what it did."""
        cfg = self.config
        self._restore_local()
        if self.etcd is None:
            self.etcd = EtcdClient(cfg.etcd_endpoints, tls=etcd_tls(cfg))
        etcd, keys, member = self.etcd, Keys(cfg.etcd_prefix.encode()), node_id(cfg)
        tls = NodeTLS.from_config(cfg).members

        async def attempt() -> str:
            return await join(etcd, keys, cfg.data_dir, node_id=member, timeout=cfg.restore_timeout, tls=tls)

        done = await self._reinitializing(attempt)  # a damaged store: set aside and state-synced instead
        # only a state sync is news; a store the log continues stays quiet (a refusal after it is one line)
        log.log(logging.INFO if done.startswith("state-synced") else logging.DEBUG, "join: %s", done)
        return done

    async def _open_store(self) -> tuple[Chain, bool]:
        return self.open_store()  # an awaitable, as `_reinitializing` takes (`join` is one too)

    def open_store(self) -> tuple[Chain, bool]:
        """Open (or, in a directory that never held one, create) the store; True when it is a new devnet.
        StoreRefused when it is damaged, foreign or missing (docs/operations.md, "Store identity and
        integrity")."""
        cfg = self.config
        fresh = is_fresh(cfg.data_dir) and not (cfg.data_dir / AUTHORITY_FILE).exists()
        if is_fresh(cfg.data_dir) and not fresh:
            problem = f"{AUTHORITY_FILE} is here but no store (data.mdb deleted, or the first start stopped early)"
            raise StoreRefused(str(cfg.data_dir), problem, REMEDY_DAMAGED)
        if not fresh and not (cfg.data_dir / DATA_FILE).exists():
            check_files(cfg.data_dir)  # refuses: the directory held a store that is gone
        params: ChainParams | None = None
        bootstrap = False
        if cfg.genesis is not None:
            params = ChainParams.load(cfg.genesis)
        elif fresh and self._published is not None:
            params = self._published
        elif fresh and cfg.follow:
            raise ConfigError("a new --follow replica needs --restore SNAPSHOT or --genesis")
        elif fresh:
            if cfg.network != "devnet":
                raise ConfigError(f"a new {cfg.network} node needs --genesis")
            params, _ = new_devnet(cfg.data_dir)
            bootstrap = True
        chain = Chain.open(cfg.data_dir, params, tree_cache_nodes=cfg.tree_cache_nodes, history=cfg.state_history)
        if cfg.network != "devnet" and chain.params.network != NETWORKS[cfg.network]:
            held = network_name(chain.params.network)
            chain.close()
            raise StoreRefused(str(cfg.data_dir), f"holds a {held} chain, not {cfg.network}", REMEDY_FOREIGN)
        return chain, bootstrap

    def _authority(self) -> str:
        path = self.config.data_dir / AUTHORITY_FILE
        return str(path) if path.exists() else ""

    async def _open_replicated(self, etcd: EtcdClient) -> tuple[Chain, bool]:
        """Open the chain of an etcd member: its genesis must be the one published in etcd."""
        cfg = self.config
        await self.join()
        keys = Keys(cfg.etcd_prefix.encode())
        self._published = await published_genesis(etcd, keys)
        chain, bootstrap = await self._reinitializing(self._open_store)
        agreed = await agree_genesis(etcd, keys, chain.params)
        if agreed != chain.params and bootstrap:
            # another member published its devnet first: drop the one just made here and join that one
            chain.close()
            for name in STORE_FILES:
                (cfg.data_dir / name).unlink(missing_ok=True)
            self._published = agreed
            chain, bootstrap = await self._reinitializing(self._open_store)
        if chain.params != agreed:
            ours, theirs = identity_of(chain.params).describe(), identity_of(agreed).describe()
            problem = f"holds a {ours}, but the network in etcd agreed on a {theirs}"
            chain.close()
            raise StoreRefused(str(cfg.data_dir), problem, REMEDY_FOREIGN)
        check_same(chain.params, agreed)
        return chain, bootstrap
