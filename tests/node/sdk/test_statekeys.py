"""node.sdk.statekeys builds the same bytes as the node's store (node.storage.schema), for every public
state key a client asks proofs for."""

from __future__ import annotations

import os

from node.sdk import statekeys as sk
from node.storage import schema


def test_prefixes_are_the_stores() -> None:
    for prefix in sk.StatePrefix:
        assert int(schema.Prefix[prefix.name]) == int(prefix)
        assert schema.in_tree(bytes([prefix]))
    assert {p.name: int(p) for p in sk.LinkTarget} == {p.name: int(p) for p in schema.LinkTarget}


def test_every_builder_matches_the_store() -> None:
    a, b, h, g = os.urandom(20), os.urandom(20), os.urandom(32), os.urandom(32)
    ref = b"refs/heads/\xff-odd"
    pairs = [
        (sk.account_key(a), schema.account_key(a)),
        (sk.custody_key_key(a, b), schema.custody_key_key(a, b)),
        (sk.signer_key(a, h), schema.signer_key(a, h)),
        (sk.project_key(h), schema.project_key(h)),
        (sk.project_name_key(a, "Hello"), schema.project_name_key(a, "Hello")),
        (sk.ref_key(h, ref), schema.ref_key(h, ref)),
        (sk.commit_key(h, g), schema.commit_key(h, g)),
        (sk.collaborator_key(h, a), schema.collaborator_key(h, a)),
        (sk.merge_request_key(h, g), schema.merge_request_key(h, g)),
        (sk.verification_key(a, b), schema.verification_key(a, b)),
        (sk.link_key(a, sk.LinkTarget.ACCOUNT, b), schema.link_key(a, schema.LinkTarget.ACCOUNT, b)),
        (sk.link_key(a, sk.LinkTarget.PROJECT, h), schema.link_key(a, schema.LinkTarget.PROJECT, h)),
        (sk.reaction_key(a, sk.REACTION_LIKE, h, g), schema.reaction_key(a, 1, h, g)),
        (sk.storage_grant_key(a, g), schema.storage_grant_key(a, g)),
        (sk.storage_grant_index_key(a), schema.storage_grant_index_key(a)),
        (sk.tombstone_key(sk.account_key(a)), schema.tombstone_key(schema.account_key(a))),
    ]
    for ours, theirs in pairs:
        assert ours == theirs
