"""Following a paginated read: ask with `page_token`, yield the page's items, go on with `next_page_token`
until it is empty (the last page). Every list read of the node paginates this way (at most 200 items a page)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")


class Page(Protocol):
    """A paginated response: its items and the token of the next page ("" on the last)."""

    @property
    def next_page_token(self) -> str: ...


P = TypeVar("P", bound=Page)


def pages(fetch: Callable[[str], P], items: Callable[[P], Iterable[T]]) -> Iterator[T]:
    """The items of every page, in order: `fetch(token)` gets one page."""
    token = ""
    while True:
        page = fetch(token)
        yield from items(page)
        token = page.next_page_token
        if not token:
            return


async def apages(fetch: Callable[[str], Awaitable[P]], items: Callable[[P], Iterable[T]]) -> AsyncIterator[T]:
    """`pages` for a coroutine `fetch` (AsyncChainClient)."""
    token = ""
    while True:
        page = await fetch(token)
        for item in items(page):
            yield item
        token = page.next_page_token
        if not token:
            return
