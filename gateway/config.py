"""chain-gateway configuration: flags, each also read from `CHAIN_GATEWAY_<FLAG>` in the environment."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from node.envflags import add_version, describe_env, env_defaults
from node.errors import ConfigError, config_exit
from node.observability.address import split_addr

ENV_PREFIX = "CHAIN_GATEWAY_"


@dataclass(frozen=True)
class GatewayConfig:
    http_addr: str = "localhost:8080"
    node_addrs: tuple[str, ...] = ("localhost:50051",)
    node_web_url: str = ""
    redis_url: str = ""
    redis_stream_maxlen: int = 100_000
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 4 * 1024 * 1024
    request_timeout: float = 10.0
    read_retries: int = 2
    sse_queue: int = 1_000
    sse_max_buffer: int = 1024 * 1024
    sse_heartbeat: float = 15.0
    sse_max_per_ip: int = 32
    log_level: str = "info"
    log_format: str = "text"  # or "json" (docs/observability.md)
    metrics_addr: str = "localhost:9465"  # Prometheus endpoint; '' disables
    # connection hygiene (gateway/connections.py)
    header_timeout: float = 10.0  # a request's headers must be complete this long after its first byte
    idle_timeout: float = 15.0  # an idle keep-alive connection is closed after this long
    max_connections: int = 1024  # open HTTP connections (per serving process); more are closed at once
    workers: int = 1  # serving processes (gateway/workers.py)
    read_batch: int = 64  # reads coalesced into one ReadBatch node call at most (gateway/batching.py); 0: off
    rest_memo_bytes: int = 8 << 20  # REST bodies kept by the node answer they came from (gateway/rest/memo.py)

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.http_addr.rpartition(":")
        return host or "localhost", int(port)


def _parser() -> argparse.ArgumentParser:
    d = GatewayConfig()
    p = argparse.ArgumentParser(prog="chain-gateway", description="REST/SSE gateway for chain-node.")
    p.add_argument("--http-addr", default=d.http_addr, help="REST/SSE listen address")
    p.add_argument(
        "--node-addr",
        action="append",
        dest="node_addrs",
        default=None,
        metavar="ADDR",
        help="node gRPC address (repeatable; dns:///NAME:PORT balances over every address NAME resolves to)",
    )
    p.add_argument("--node-web-url", default=d.node_web_url, help="node gRPC-web URL for the passthrough")
    p.add_argument("--redis-url", default=d.redis_url, help="Redis for event fan-out; in-process relay when empty")
    p.add_argument(
        "--redis-stream-maxlen", type=int, default=d.redis_stream_maxlen, help="events kept per Redis Stream (about)"
    )
    p.add_argument(
        "--cors-origin", action="append", dest="cors_origins", default=None, metavar="ORIGIN", help="allowed origin"
    )
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes, help="largest request body accepted")
    p.add_argument("--request-timeout", type=float, default=d.request_timeout, help="deadline of node calls (s)")
    p.add_argument("--read-retries", type=int, default=d.read_retries, help="retries of reads on UNAVAILABLE")
    p.add_argument("--sse-queue", type=int, default=d.sse_queue, help="events an SSE client may lag")
    p.add_argument(
        "--sse-max-buffer-bytes",
        dest="sse_max_buffer",
        type=int,
        default=d.sse_max_buffer,
        help="bytes a caught-up SSE client may have unsent before it is cut off",
    )
    p.add_argument("--sse-heartbeat", type=float, default=d.sse_heartbeat, help="seconds between heartbeats")
    p.add_argument("--sse-max-per-ip", type=int, default=d.sse_max_per_ip, help="open streams per client IP")
    p.add_argument("--log-level", default=d.log_level, help="debug, info, warning or error")
    p.add_argument("--log-format", default=d.log_format, choices=["text", "json"], help="json: one object per line")
    p.add_argument("--metrics-addr", default=d.metrics_addr, help="Prometheus metrics listen address; '' disables")
    p.add_argument("--header-timeout", type=float, default=d.header_timeout, help="seconds to send request headers")
    p.add_argument("--idle-timeout", type=float, default=d.idle_timeout, help="seconds a keep-alive connection idles")
    p.add_argument(
        "--max-connections", type=int, default=d.max_connections, help="open HTTP connections at most, per worker"
    )
    p.add_argument(
        "--workers", type=int, default=d.workers, help="serving processes behind the one listening socket (SSE fan-out)"
    )
    p.add_argument(
        "--read-batch",
        type=int,
        default=d.read_batch,
        help="reads of one event-loop turn sent to the node as one call, at most; 0 sends each read alone",
    )
    p.add_argument(
        "--rest-memo-bytes",
        type=int,
        default=d.rest_memo_bytes,
        help="bytes of REST bodies kept by the node answer they were made from, per process; 0 keeps none",
    )
    describe_env(p, ENV_PREFIX, lists=LIST_FLAGS, shown={"node_addrs": ",".join(d.node_addrs)})
    add_version(p)
    return p


LIST_FLAGS = frozenset({"node_addrs", "cors_origins"})


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> GatewayConfig:
    env = os.environ if env is None else env
    parser = _parser()
    env_defaults(parser, ENV_PREFIX, env, lists=LIST_FLAGS)
    values = vars(parser.parse_args(argv))
    values["node_addrs"] = tuple(values["node_addrs"] or GatewayConfig.node_addrs)
    values["cors_origins"] = tuple(values["cors_origins"] or ())
    if values["workers"] < 1:
        config_exit(parser.prog, ConfigError(f"--workers: at least 1, got {values['workers']}"))
    for flag in ("read_batch", "rest_memo_bytes"):
        if values[flag] < 0:
            name = "--" + flag.replace("_", "-")
            config_exit(parser.prog, ConfigError(f"{name}: at least 0, got {values[flag]}"))
    if values["metrics_addr"]:
        try:
            split_addr(values["metrics_addr"])
        except ValueError as err:
            config_exit(parser.prog, ConfigError(f"--metrics-addr: {err}"))
    return GatewayConfig(**values)
