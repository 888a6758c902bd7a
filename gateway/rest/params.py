"""Parameters shared by the REST routes, with the schemas the OpenAPI validation enforces."""

from __future__ import annotations

from types import MappingProxyType

from gateway.rest.shapes import UINT64_MAX, SchemaFragment
from gateway.rest.table import Param
from node.constants import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_REF_NAME_LEN
from node.state.structural import PROJECT_NAME_RE
from node.storage.schema import TREE_PREFIX_LIMIT

ADDRESS: SchemaFragment = MappingProxyType(
    {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "examples": ["0x" + "ab" * 20]}
)
HASH32: SchemaFragment = MappingProxyType(
    {"type": "string", "pattern": "^0x[0-9a-fA-F]{64}$", "examples": ["0x" + "cd" * 32]}
)
REF_HEX: SchemaFragment = MappingProxyType(
    {
        "type": "string",
        "pattern": f"^(0[xX])?([0-9a-fA-F]{{2}}){{1,{MAX_REF_NAME_LEN}}}$",
        "examples": [b"refs/heads/main".hex()],
    }
)
# A public state key: its first byte is below TREE_PREFIX_LIMIT (docs/state.md); other keys are not in the tree.
STATE_KEY: SchemaFragment = MappingProxyType(
    {
        "type": "string",
        "pattern": f"^0x[0-{(TREE_PREFIX_LIMIT >> 4) - 1}][0-9a-fA-F]([0-9a-fA-F]{{2}}){{0,399}}$",
    }
)
UINT64: SchemaFragment = MappingProxyType({"type": "integer", "minimum": 0, "maximum": UINT64_MAX})
# The node's own rule (node.state.structural), so the gateway refuses exactly the names the node refuses.
PROJECT_NAME: SchemaFragment = MappingProxyType({"type": "string", "pattern": PROJECT_NAME_RE.pattern})

OWNER = Param("ownerAddress", "path", ADDRESS, "`owner_address` of the account: 0x-prefixed 20-byte address")
PROJECT = Param("projectId", "path", HASH32, "project ID: 0x-prefixed 32 bytes")
REQUEST_ID = Param("requestId", "path", HASH32, "merge request ID: 0x-prefixed 32 bytes")
KEY_ID = Param("key_id", "path", ADDRESS, "custody key ID: 0x-prefixed 20-byte address of the key")
DELEGATED_KEY = Param("key", "path", HASH32, "delegated Ed25519 public key: 0x-prefixed 32 bytes")
REF = Param(
    "refHex", "path", REF_HEX, "ref name as hex-encoded bytes, bare or 0x-prefixed (`refs/heads/main` → 726566…)"
)
COMMIT = Param("hash", "path", HASH32, "commit hash: 0x-prefixed 32 bytes")
MESSAGE_HASH = Param("hash", "path", HASH32, "BLAKE3 hash of the message: 0x-prefixed 32 bytes")
BLOCK_NUMBER = Param("number", "path", UINT64, "block number")
STATE_KEY_PARAM = Param("keyHex", "path", STATE_KEY, "public state key (docs/state.md), 0x-prefixed hex")
PROJECT_NAME_PARAM = Param("name", "path", PROJECT_NAME, "project name (case-insensitive)")

LIMIT = Param(
    "limit",
    "query",
    {"type": "integer", "minimum": 0},
    f"page size; {DEFAULT_PAGE_SIZE} when absent or 0, values above {MAX_PAGE_SIZE} are capped at {MAX_PAGE_SIZE} "
    "(never an error)",
)
CURSOR = Param(
    "cursor",
    "query",
    # base64url without padding (lengths 4n, 4n+2 and 4n+3 decode); which values belong to a listing, only
    # the service knows: another is 400 (`field` page_token).
    {"type": "string", "maxLength": 512, "pattern": "^([A-Za-z0-9_-]{4})*([A-Za-z0-9_-]{2,3})?$"},
    "`next_cursor` of the previous page of the same listing (anything else is 400); absent or empty for the first page",
    opaque=True,
)
PAGE = (LIMIT, CURSOR)
