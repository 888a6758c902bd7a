"""The REST reads' lane: a GET that aiohttp would route to a REST read skips its router walk and app wrapper.

    lane = install_rest_lane(runner, app)     # gateway/rest/routes.py, once the runner is set up

aiohttp finds a request's route by walking its resource index from the full path back to "/" and asking
every resource filed under each prefix in turn, each through a coroutine (the twelve account routes share
`/v1/accounts`); then the app wraps the handler in its middlewares, the outermost its own sub-application
fix-up. The lane becomes the server's request handler, with the app's `_handle` behind it.

It takes a request when it can tell, without asking, what the app would do with it:

- the method is GET, the request has no `Expect` header (aiohttp answers that before the handler), and the
  path aiohttp matches (`rel_url.path_safe`) has no `%` left (an escaped `/` or `%`: rare, and kept on the
  app's own path; `_match` would unquote such values as aiohttp does, so this decides the path, not the answer);
- the path is not a fixed path that serves no GET (`/v1/messages/batch`: `fixed_path_middleware` answers
  405 where aiohttp alone would route it to the `/v1/messages/{hash}` template);
- walking the same index in the same order, the first resource whose path matches and that serves GET is
  a REST read (a GET route of gateway/rest/routes.py).

Such a request gets aiohttp's own match information for that route (so `request.app`, `match_info` and the
response-prepare hooks are what they would be) and the app's middlewares in order, except those marked
`lane_inert`: they pass every request the lane takes straight on (the CORS preflight acts on OPTIONS only,
the fixed-path check on the paths the lane leaves to the app). Every other request goes to `_handle`.

The lane is off (everything to `_handle`) when the app has a middleware that is not a `@web.middleware`
function, a sub-application, or a resource other than a plain or a template path (a static directory,
say): it could not then tell which route aiohttp would pick. The index keys and each resource's path test
are aiohttp's own (`_get_resource_index_key`, `_match`). tests/gateway/test_lane.py checks its pick against aiohttp's
router over every route and around them, and its answers against the app's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from aiohttp import hdrs, web
from aiohttp.web_urldispatcher import DynamicResource, PlainResource, ResourceRoute, UrlMappingMatchInfo

from gateway.errors import Handler

M = TypeVar("M", bound=Callable[..., Awaitable[web.StreamResponse]])  # a middleware


def lane_inert(middleware: M) -> M:
    """Marks a middleware as passing every request the lane takes (a GET of a REST read) straight on."""
    middleware.lane_inert = True  # type: ignore[attr-defined]
    return middleware


@dataclass(frozen=True)
class _Candidate:
    """One resource under an index key, its GET route, and the lane's handler for it (None: a route the lane
    leaves to the app)."""

    resource: PlainResource | DynamicResource
    route: ResourceRoute | None  # the route serving GET (None: the resource serves no GET)
    chain: Handler | None


class Lane:
    def __init__(
        self, app: web.Application, index: Mapping[str, Sequence[_Candidate]] | None, refused: Collection[str]
    ) -> None:
        self.app = app
        self._fallback: Handler = app._handle
        self._index = index  # None: the lane is off
        self._refused = frozenset(refused)  # fixed paths that serve no GET
        self.taken = 0  # requests the lane took (the tests read it)

    @property
    def on(self) -> bool:
        return self._index is not None

    @classmethod
    def build(cls, app: web.Application, names: Collection[str], fixed: Mapping[str, Collection[str]]) -> Lane:
        """The lane of a set-up `app` for the routes named `names`. `fixed`: template-free paths and the methods
        they serve; a GET of one that does not serve GET goes to the app (which answers 405)."""
        middlewares = list(app.middlewares)
        router = app.router
        known = all(getattr(m, "__middleware_version__", None) == 1 for m in middlewares)
        if not known or router._matched_sub_app_resources:
            return cls(app, None, ())
        outer = [m for m in middlewares if not getattr(m, "lane_inert", False)]
        index: dict[str, list[_Candidate]] = {}
        for resource in router.resources():
            if not isinstance(resource, PlainResource | DynamicResource):
                return cls(app, None, ())
            routes = {r.method: r for r in resource}
            route = routes.get(hdrs.METH_GET) or routes.get(hdrs.METH_ANY)  # as `Resource.resolve` picks
            chain: Handler | None = None
            if route is not None and route.name in names:
                chain = route.handler
                for m in reversed(outer):
                    chain = partial(m, handler=chain)
            key = router._get_resource_index_key(resource)  # where aiohttp files it
            index.setdefault(key, []).append(_Candidate(resource, route, chain))
        return cls(app, index, [path for path, methods in fixed.items() if hdrs.METH_GET not in methods])

    def pick(self, method: str, path: str) -> tuple[_Candidate, dict[str, str]] | None:
        """The resource aiohttp would route a `method` request for `path` to, with its path values, when
        the lane takes it; None when it leaves the request to the app."""
        index = self._index
        if index is None or method != hdrs.METH_GET or "%" in path or path in self._refused:
            return None
        part = path
        while part:
            for c in index.get(part, ()):
                values = c.resource._match(path)  # the resource's own test, without `resolve`'s coroutine
                if values is None or c.route is None:
                    continue  # not this path, or no GET here: aiohttp goes on to the next candidate
                return (c, values) if c.chain is not None else None
            if part == "/":
                break
            part = part.rpartition("/")[0] or "/"
        return None

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """The server's request handler: the lane for a request it takes, the app's `_handle` otherwise."""
        assert isinstance(request, web.Request)  # made by the app's request factory
        picked = self.pick(request.method, request.rel_url.path_safe)
        if picked is None or request.headers.get(hdrs.EXPECT):
            return await self._fallback(request)
        candidate, values = picked
        assert candidate.route is not None and candidate.chain is not None
        match_info = UrlMappingMatchInfo(values, candidate.route)
        match_info.add_app(self.app)
        match_info.freeze()
        request._match_info = match_info  # what the app's `_handle` sets
        self.taken += 1
        return await candidate.chain(request)
