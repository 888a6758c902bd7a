"""What a handler knows about the message it is applying."""

from __future__ import annotations

from dataclasses import dataclass

from chain.v1 import message_pb2 as pb
from node.params import ChainParams
from node.state.access import StateAccess


@dataclass(frozen=True)
class MessageContext:
    st: StateAccess
    params: ChainParams
    data: pb.MessageData
    message_hash: bytes
    signer: bytes
    block_number: int
    # Event id this message gets if it is accepted (cumulative message count).
    event_id: int
    # Block time in unix seconds: the only clock the transition sees.
    now: int

    @property
    def owner(self) -> bytes:
        return bytes(self.data.owner_address)

    @property
    def ts(self) -> int:
        return int(self.data.timestamp)
