"""REST bodies remembered by the node answer they were made from (gateway/rest/memo.py): the same answer
gives the same body without shaping it again, a changed record is a changed answer and so a new body, and
the memo keeps within its bytes."""

from __future__ import annotations

import json
from typing import Any

from chain.v1 import rpc_pb2
from gateway.keys import BODIES
from gateway.rest import reads, shapes
from gateway.rest.accounts import GET_ACCOUNT_BODY
from gateway.rest.memo import BodyMemo, Shaped
from node.memo import ENTRY_OVERHEAD
from tests.fixtures.actors import authority_builder, new_account
from tests.fixtures.nodeproc import NodeProcess


def answer(owner: bytes, units: int) -> bytes:
    out = rpc_pb2.GetAccountResponse(storage_units=units)
    out.account.owner_address = owner
    out.account.storage_units = units
    return out.SerializeToString()


def test_the_same_answer_gives_the_same_body_once_made() -> None:
    memo = BodyMemo(1 << 20)
    raw = answer(b"\x01" * 20, 3)
    made = memo.body(GET_ACCOUNT_BODY, raw)
    assert made == GET_ACCOUNT_BODY.body(raw) and json.loads(made)["storage_units"] == 3
    assert memo.body(GET_ACCOUNT_BODY, bytes(raw)) is made  # equal bytes of another object: the body kept
    assert (memo.hits, memo.misses) == (1, 1)
    other = memo.body(GET_ACCOUNT_BODY, answer(b"\x01" * 20, 4))
    assert json.loads(other)["storage_units"] == 4 and memo.misses == 2
    # another route's shape of the same read is its own entry (a Shaped is its route's, by identity)
    keys_only = Shaped(reads.GET_ACCOUNT, lambda r: shapes.to_json_list(r.keys))
    assert memo.body(keys_only, raw) == b"[]" and memo.misses == 3


def test_an_entry_costs_its_answer_and_its_body() -> None:
    one = answer(b"\x02" * 20, 0)
    cost = len(one) + len(GET_ACCOUNT_BODY.body(one)) + ENTRY_OVERHEAD
    memo = BodyMemo(64 * cost * 2)  # an entry's cost is well under a sixty-fourth: 128 fit (node/memo.py)
    memo.body(GET_ACCOUNT_BODY, one)
    assert (memo.size, len(memo)) == (cost, 1)
    for i in range(300):
        memo.body(GET_ACCOUNT_BODY, answer(i.to_bytes(20, "big"), 0))
        assert memo.size <= memo.max_bytes
    assert len(memo) == 128  # the same cost each: the bound is kept by counting answer and body
    small = BodyMemo(cost * 64 - 64)  # one entry over a sixty-fourth of the bound: not kept
    small.body(GET_ACCOUNT_BODY, one)
    assert len(small) == 0 and small.size == 0
    off = BodyMemo(0)
    assert off.body(GET_ACCOUNT_BODY, one) == GET_ACCOUNT_BODY.body(one) and len(off) == 0


async def test_a_remembered_body_is_the_node_s_current_answer(node: NodeProcess, make_gateway_client: Any) -> None:
    """Over a real node: a second GET of an account is a hit with the same bytes; a block that changes the
    account changes the node's answer, and the next GET has the new body, not the remembered one."""
    client = await make_gateway_client()
    memo: BodyMemo = client.app[BODIES]
    chain = node.client()
    actor = new_account(chain, node.authority(), units=1)
    path = f"/v1/accounts/0x{actor.address.hex()}"
    first = await client.get(path)
    body = await first.read()
    assert first.status == 200 and first.headers["Content-Type"] == "application/json; charset=utf-8"
    hits = memo.hits
    again = await client.get(path)
    assert again.status == 200 and await again.read() == body and memo.hits == hits + 1
    head = await client.head(path)
    assert head.status == 200 and int(head.headers["Content-Length"]) == len(body)
    chain.commit(authority_builder(node.authority()).storage_grant(actor.address, 2))
    changed = await client.get(path)
    assert json.loads(await changed.read())["storage_units"] == 3
    assert json.loads(body)["storage_units"] == 1


async def test_turned_off_the_bodies_are_made_every_time(node: NodeProcess, make_gateway_client: Any) -> None:
    client = await make_gateway_client(rest_memo_bytes=0)
    memo: BodyMemo = client.app[BODIES]
    actor = new_account(node.client(), node.authority())
    path = f"/v1/accounts/0x{actor.address.hex()}"
    bodies = [await (await client.get(path)).read() for _ in range(3)]
    assert bodies[0] == bodies[1] == bodies[2] and json.loads(bodies[0])["storage_units"] == 1
    assert (memo.hits, memo.misses, len(memo)) == (0, 3, 0)
