"""A storage authority's keys, as a client reads them (``chainctl account fund --authority FILE``).

The file format and the bootstrap message are shared with the node's devnet genesis, so they live in the
core module node.authority; this is the SDK's name for it.
"""

from __future__ import annotations

from node.authority import Authority

__all__ = ["Authority"]
