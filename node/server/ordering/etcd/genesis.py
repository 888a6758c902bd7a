"""Agreeing on genesis through etcd: every member of a replicated network must share its parameters.

The first member to start publishes its chain parameters under `genesis`
(only if the key is absent); the others compare theirs and refuse to start
on a difference. A member with an empty disk and no `--genesis` file takes
the published parameters, so only the first member of a devnet needs to
create one (and holds the devnet authority's keys).
"""

from __future__ import annotations

import json

from node.errors import InvariantBroken
from node.params import ChainParams
from node.server.ordering.etcd.client import EtcdClient, cmp_absent, op_put, op_range
from node.server.ordering.etcd.log import Keys


async def published_genesis(client: EtcdClient, keys: Keys) -> ChainParams | None:
    kv = await client.get(keys.genesis)
    return None if kv is None else ChainParams.from_json(json.loads(kv.value))


async def agree_genesis(client: EtcdClient, keys: Keys, params: ChainParams) -> ChainParams:
    """Publish `params` unless some are published already; returns the published ones."""
    value = json.dumps(params.to_json(), sort_keys=True).encode()
    result = await client.txn([cmp_absent(keys.genesis)], [op_put(keys.genesis, value)], [op_range(keys.genesis)])
    if result.succeeded:
        return params
    return ChainParams.from_json(json.loads(result.ranges(0)[0].value))


def check_same(ours: ChainParams, published: ChainParams) -> None:
    if ours != published:
        raise InvariantBroken(
            "this node's genesis parameters differ from the ones published in etcd "
            f"(ours {ours.to_json()}, etcd {published.to_json()}); use the network's genesis file"
        )
