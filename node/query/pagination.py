"""Cursor pagination over ordered prefix scans.

page_size 0 means the default (50); anything above 200 is capped at 200,
never an error. A page token is the base64url (unpadded) of the storage key
the next page starts at, so walking pages visits every item exactly once even
while new items are appended.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TypeVar

from node.constants import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from node.errors import InvalidArgument
from node.storage.kv import ReadView

T = TypeVar("T")


def page_size(requested: int) -> int:
    if requested <= 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def encode_token(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode()


def decode_token(token: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise InvalidArgument("page_token", "not a token returned by this service") from None


def scan_page(
    view: ReadView,
    prefix: bytes,
    token: str,
    requested: int,
    decode: Callable[[bytes, bytes], T | None],
    *,
    reverse: bool = False,
) -> tuple[list[T], str]:
    """One page of decoded items under `prefix`; `decode` may return None to skip an item."""
    limit = page_size(requested)
    start: bytes | None = None
    if token:
        start = decode_token(token)
        if not start.startswith(prefix):
            raise InvalidArgument("page_token", "token does not belong to this listing")
    items: list[T] = []
    for key, value in view.scan(prefix, start, reverse):
        if len(items) == limit:
            return items, encode_token(key)
        item = decode(key, value)
        if item is not None:
            items.append(item)
    return items, ""
