"""Staging refs: how a push keeps every commit it sends protected from commit pruning until its refs land.

A project past MAX_COMMITS_PER_PROJECT prunes, at each COMMIT_BUNDLE, its oldest commits that no ref head
and none of that bundle's commits reach (docs/protocol.md, "Commit pruning"). A push sends its commits in
several bundles before its REF_UPDATEs, so the commits of one bundle must be reached by something when
the next one is applied. After each bundle (but the last) the push therefore points *staging refs*
(``refs/chain/staging/N``) at the tips of what it has sent so far, except the tips the next bundle's own
commits descend from (those it protects itself; a linear history needs no staging ref at all). Staging
updates are forced (the chain checks no ancestry for them) and carry the hash they replace. They are sent
in order with the bundles, in the same calls, so each is applied before the next bundle; once the push's
own refs are committed the staging refs are deleted. Staging refs left by an interrupted push are reused
and deleted by the next push to the project.

Only a push that can take the project past the limit stages (``needs_staging``); below it nothing is
pruned and a push is its bundles, then its refs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.sdk.messages import MessageBuilder

STAGING_PREFIX = b"refs/chain/staging/"


def needs_staging(project: state_pb2.Project, new_commits: int, bundles: int) -> bool:
    """Can the push's bundles prune what it sends? Only past the limit, and only with more than one bundle."""
    return bundles > 1 and project.commit_count + new_commits > C.MAX_COMMITS_PER_PROJECT


def tips_to_stage(bundles: Sequence[Sequence[pb.CommitMeta]]) -> list[list[bytes]]:
    """For each bundle but the last: the tips of every commit sent up to it that the next bundle's commits
    do not name as parents (sorted: the same plan every time)."""
    tips: dict[bytes, None] = {}
    out: list[list[bytes]] = []
    for index, group in enumerate(bundles[:-1]):
        for meta in group:
            for parent in meta.parents:
                tips.pop(bytes(parent), None)
            tips[bytes(meta.hash)] = None
        named = {bytes(p) for meta in bundles[index + 1] for p in meta.parents}
        out.append(sorted(t for t in tips if t not in named))
    return out


@dataclass
class Slot:
    name: bytes
    hash: bytes = b""  # b"": the ref does not exist on chain (yet)
    nonce: int = 0


@dataclass
class StagingRefs:
    """The staging refs of one push: which chain ref holds which tip, and the next nonce of each."""

    project_id: bytes
    slots: list[Slot] = field(default_factory=list)

    @classmethod
    def on_chain(cls, project_id: bytes, refs: Mapping[bytes, state_pb2.Ref]) -> StagingRefs:
        """Start from the staging refs the chain already has (an interrupted push's)."""
        found = sorted((name, r) for name, r in refs.items() if name.startswith(STAGING_PREFIX))
        return cls(project_id, [Slot(name, bytes(r.hash), r.nonce) for name, r in found])

    def point_at(self, builder: MessageBuilder, tips: Sequence[bytes]) -> list[pb.Message]:
        """REF_UPDATEs so that every tip is held by a staging ref (slots already holding one keep it)."""
        held = {s.hash for s in self.slots}
        wanted = [t for t in tips if t not in held]
        free = [s for s in self.slots if s.hash not in tips]
        out: list[pb.Message] = []
        for tip in wanted:
            if free:
                slot = free.pop(0)
            else:
                slot = Slot(STAGING_PREFIX + str(len(self.slots)).encode())
                self.slots.append(slot)
            out.append(
                builder.ref_update(self.project_id, slot.name, tip, slot.nonce + 1, old_hash=slot.hash, force=True)
            )
            slot.hash, slot.nonce = tip, slot.nonce + 1
        return out

    def deletes(self, builder: MessageBuilder) -> list[pb.Message]:
        """REF_DELETEs for every staging ref the chain holds."""
        return [builder.ref_delete(self.project_id, s.name, s.nonce + 1, old_hash=s.hash) for s in self.slots if s.hash]
