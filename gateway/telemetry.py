"""The gateway's metrics: HTTP requests, SSE clients, the Redis relay (names in docs/observability.md).

    metrics = GatewayMetrics(MetricsEndpoint("chain-gateway", addr))
    app = build_app(config, metrics=metrics)        # gateway.app installs the middleware and the event observers

- `http.server.request.duration` (s): every request, by `http.request.method`, `http.route` (the route's
  template, `unmatched` for 404s), `http.response.status_code` and `chain.reason_code` (the `code` of the
  JSON error body; "" on success). Recorded by the outermost middleware, so every error the error
  middleware maps is counted with its final status. SSE streams are recorded when they end.
- `chain.sse.clients` (by `chain.stream.kind`): open SSE streams; `chain.sse.clients.dropped`: streams
  ended because the client fell behind.
- `chain.http.connections`: open HTTP connections of this process (SSE streams hold one each), what
  --max-connections caps: the per-pod gauge the chart's HPA scales on (docs/deploy.md "Gateway scaling").
- `chain.relay.lag` (s): for each block the relay writes to Redis, the time from the block's timestamp
  (set by the node that built it) to the XADD; `chain.relay.events` (by `chain.relay.result`: written /
  duplicate): what the relays appended, and what another relay had written first.

Traces need nothing here: the aiohttp-server, grpc client and redis instrumentations (node.observability.
tracing) make the spans when tracing is on.
"""

from __future__ import annotations

import json
import time

from aiohttp import web
from opentelemetry.metrics import CallbackOptions, Observation

from chain.v1 import block_pb2
from gateway.connections import ConnectionGuard
from gateway.errors import Handler
from gateway.events.model import Event, Kind
from gateway.events.service import EventService
from gateway.rest.memo import BodyMemo
from node.errors import Reason
from node.observability.histogram import Key, series_key
from node.observability.metrics import MetricsEndpoint, memo_lookups
from node.server.telemetry.node_metrics import SECONDS_BUCKETS

INTERNAL = Reason.INTERNAL.value  # a request whose handler raised, until the error middleware answers


def reason_of(response: web.StreamResponse) -> str:
    """The `code` of a JSON error body ("" for anything else)."""
    if response.status < 400 or not isinstance(response, web.Response) or response.content_type != "application/json":
        return ""
    body = response.body
    if not isinstance(body, bytes | bytearray):
        return ""
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return ""
    return code if isinstance(code, str) else ""


def route_of(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def request_series(method: str, route: str, status: int, reason: str) -> Key:
    """The series key of one (method, route, status, reason). The middleware makes each once and keeps it:
    the four are bounded (llhttp's methods, the route templates, HTTP statuses, the reason codes)."""
    attributes: dict[str, str | int] = {
        "http.request.method": method,
        "http.route": route,
        "http.response.status_code": status,
        "chain.reason_code": reason,
    }
    return series_key(attributes)


class GatewayMetrics:
    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self.meter = meter = endpoint.meter
        self._keys: dict[tuple[str, str, int, str], Key] = {}  # request_series, by its four arguments
        # recorded on every request: the endpoint's lean histogram (node/observability/histogram.py)
        self.http_duration = endpoint.histogram(
            "http.server.request.duration",
            "s",
            "Duration of HTTP requests, by route, status and reason code",
            SECONDS_BUCKETS,
        )
        self.relay_lag = meter.create_histogram(
            "chain.relay.lag",
            unit="s",
            description="From a block's timestamp to its append to the Redis Stream by this gateway's relay",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self.relay_events = meter.create_counter(
            "chain.relay.events",
            unit="{event}",
            description="Events the relays appended to Redis (written) or found written already (duplicate)",
        )
        self._service: EventService | None = None
        self._memo: BodyMemo | None = None
        self._guard: ConnectionGuard | None = None
        meter.create_observable_up_down_counter(
            "chain.http.connections",
            [self._connections],
            unit="{connection}",
            description="Open HTTP connections (SSE streams included), at most --max-connections",
        )
        meter.create_observable_counter(
            "chain.rest.memo.lookups",
            [self._memo_lookups],
            unit="{lookup}",
            description="REST bodies looked up by the node answer they were made from: hit (kept) or miss (made)",
        )
        meter.create_observable_up_down_counter(
            "chain.rest.memo.size", [self._memo_size], unit="By", description="Bytes of REST bodies kept, with answers"
        )
        meter.create_observable_up_down_counter(
            "chain.sse.clients", [self._clients], unit="{client}", description="Open SSE streams, by kind"
        )
        meter.create_observable_counter(
            "chain.sse.clients.dropped",
            [self._dropped],
            unit="{client}",
            description="SSE streams ended because the client fell behind (SLOW_SUBSCRIBER)",
        )

    # ---- HTTP ----
    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        status, reason = 500, INTERNAL
        try:
            response = await handler(request)
            status, reason = response.status, reason_of(response)
            return response
        except web.HTTPException as exc:
            status, reason = exc.status, ""
            raise
        finally:
            which = (request.method, route_of(request), status, reason)
            key = self._keys.get(which)
            if key is None:
                key = self._keys[which] = request_series(*which)
            self.http_duration.record_key(time.perf_counter() - started, key)

    # ---- events ----
    def watch(self, service: EventService) -> None:
        """Observe this events service: its hubs (SSE clients) and its relays (Redis appends)."""
        self._service = service
        for relay in service.relays:
            relay.on_append = self.appended

    def appended(self, events: list[Event], written: int) -> None:
        self.relay_events.add(written, {"chain.relay.result": "written"})
        if len(events) > written:
            self.relay_events.add(len(events) - written, {"chain.relay.result": "duplicate"})
        now_ms = time.time() * 1000
        for event in events:
            if event.kind is Kind.BLOCKS:
                header = block_pb2.Block.FromString(event.payload).header
                if header.timestamp_ms:
                    self.relay_lag.record(max(0.0, (now_ms - header.timestamp_ms) / 1000))

    def watch_connections(self, guard: ConnectionGuard) -> None:
        """Observe the listener's connections (gateway/connections.py)."""
        self._guard = guard

    def _connections(self, _options: CallbackOptions) -> list[Observation]:
        return [] if self._guard is None else [Observation(len(self._guard.open))]

    def watch_memo(self, memo: BodyMemo) -> None:
        """Observe this app's REST body memo (gateway/rest/memo.py)."""
        self._memo = memo

    def _memo_lookups(self, _options: CallbackOptions) -> list[Observation]:
        memo = self._memo
        return [] if memo is None else memo_lookups(memo.hits, memo.misses)

    def _memo_size(self, _options: CallbackOptions) -> list[Observation]:
        return [] if self._memo is None else [Observation(self._memo.size)]

    def _clients(self, _options: CallbackOptions) -> list[Observation]:
        if self._service is None:
            return []
        return [Observation(len(hub), {"chain.stream.kind": kind.value}) for kind, hub in self._service.hubs.items()]

    def _dropped(self, _options: CallbackOptions) -> list[Observation]:
        if self._service is None:
            return []
        return [Observation(hub.dropped, {"chain.stream.kind": kind.value}) for kind, hub in self._service.hubs.items()]
