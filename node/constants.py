"""Protocol limits and constants: the one place they are defined.

Figures follow docs/protocol.md; node flags may tighten the operational ones
(mempool capacity, message size) but never the consensus ones.
"""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final = 1

# ---- sizes ----
ADDRESS_LEN: Final = 20
HASH_LEN: Final = 32
ED25519_KEY_LEN: Final = 32
ED25519_SIG_LEN: Final = 64
MAX_MESSAGE_BYTES: Final = 256 * 1024
MAX_REF_NAME_LEN: Final = 254
MAX_PROJECT_NAME_LEN: Final = 100
MAX_TEXT_FIELD_LEN: Final = 1024
MAX_TITLE_LEN: Final = 256
MAX_DESCRIPTION_LEN: Final = 4096
MAX_COMMIT_PARENTS: Final = 16

# ---- cluster ----
MIN_CLUSTER_SECRET_BYTES: Final = 16  # the replicated members' shared secret (node.server.write.membership)
# server streams (SubscribeBlocks, SubscribeEvents, ...) one node holds open at once; more are RESOURCE_EXHAUSTED
MAX_STREAMS: Final = 4096

# ---- pipeline ----
MEMPOOL_CAPACITY: Final = 100_000
# State-tree nodes the latest blocks created, kept in memory for the next blocks' updates (about 220 bytes
# each: 250,000 is ~55 MB). Each doubling saves about one store read per changed key once the tree holds
# more nodes than this (docs/merkle.md, "Storage").
TREE_CACHE_NODES: Final = 250_000
# bytes of answers a read worker keeps per snapshot (node/server/readers/answers.py), within the 64 MiB
# budgeted for each worker (node/server/write/sizing.py)
READ_ANSWER_BYTES: Final = 8 << 20
MAX_BLOCK_MESSAGES: Final = 10_000
MAX_BLOCK_MESSAGES_PER_PROJECT: Final = 500
# The producer's cap on the serialized bytes of a block's messages: a block it builds (sealed from the open
# blocks or built from the mempool) stays well under the 64 MiB per gRPC message that followers, stream
# subscribers and the gateway accept. A policy of the block's producer, like closing a block early; blocks
# from elsewhere are not checked against it, so it is not a consensus rule (docs/state.md).
MAX_BLOCK_BYTES: Final = 16 * 1024 * 1024
MAX_BATCH_SUBMIT: Final = 100
MESSAGES_PER_CHUNK: Final = 500

# ---- time (seconds) ----
MAX_FUTURE_DRIFT: Final = 300
MAX_QUOTA_MESSAGE_AGE: Final = 300
MAX_CUSTODY_VALIDITY_WINDOW: Final = 3_600
STORAGE_GRANT_DURATION: Final = 395 * 24 * 3600

# ---- git objects ----
MAX_COMMITS_PER_BUNDLE: Final = 1_000
MAX_COMMITS_PER_PROJECT: Final = 10_000  # the commits a project keeps before its unprotected ones are pruned
MAX_PROTECTED_SET: Final = 100_000  # the protected-set walk's bound: reaching it skips pruning
MAX_REFS_PER_PROJECT: Final = 200
MAX_FAST_FORWARD_DEPTH: Final = 10_000

# ---- keys ----
MAX_DELEGATED_KEYS: Final = 1_000
MAX_CUSTODY_KEYS: Final = 100
MAX_ALLOWED_PROJECTS: Final = 100

# ---- storage units: what one unit buys ----
UNIT_PROJECTS: Final = 10
UNIT_COLLABORATORS: Final = 50
UNIT_VERIFICATIONS: Final = 50
UNIT_LINKS: Final = 5_000
UNIT_REACTIONS: Final = 10_000
MAX_GRANT_UNITS: Final = 1_000
MAX_ACTIVE_GRANTS: Final = 100

# ---- queries ----
DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 200
MAX_ANCESTOR_WALK: Final = 10_000
