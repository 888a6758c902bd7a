"""chain-gateway configuration: flags, each also read from `CHAIN_GATEWAY_<FLAG>` in the environment."""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from node.envflags import add_version, describe_env, env_defaults
from node.errors import ConfigError, config_exit
from node.observability.address import split_addr

ENV_PREFIX = "CHAIN_GATEWAY_"
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
SECURE_SCHEMES = ("grpcs://", "https://")  # node.tls's (not imported: it loads grpc, and --help stays quick)


@dataclass(frozen=True)
class GatewayConfig:
    http_addr: str = "localhost:8080"
    node_addrs: tuple[str, ...] = ("localhost:50051",)
    node_web_url: str = ""
    # internal listeners of the same nodes (ReadBatch/ReadStream); empty: reads go as plain calls to node_addrs
    node_internal_addrs: tuple[str, ...] = ()
    node_ca_file: Path | None = None  # the CA the nodes' certificates chain to (grpcs:// and https:// targets)
    node_tls_cert: Path | None = None  # the gateway's client certificate for the nodes' internal listeners
    node_tls_key: Path | None = None
    tls_cert: Path | None = None  # the gateway's own HTTP listener serves TLS with these
    tls_key: Path | None = None
    trusted_proxies: tuple[IpNetwork, ...] = ()  # direct peers whose X-Forwarded-For is believed
    redis_url: str = ""
    redis_password_file: Path | None = None
    redis_ca_file: Path | None = None
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
    read_batch: int = 64  # reads coalesced into one ReadBatch node call at most (gateway/upstream/batching.py); 0: off
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
    _trust_flags(p, d)
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


def _trust_flags(p: argparse.ArgumentParser, d: GatewayConfig) -> None:
    """TLS to the nodes and on the listener, the nodes' internal listener, trusted proxies, Redis."""
    p.add_argument(
        "--node-internal-addr",
        action="append",
        dest="node_internal_addrs",
        default=None,
        metavar="ADDR",
        help="the nodes' internal listener (repeatable): reads batched there, with --node-tls-cert over TLS; "
        "none: each read is a plain call to --node-addr",
    )
    p.add_argument("--node-ca-file", type=Path, default=None, help="CA of the nodes' certificates (grpcs://, https://)")
    p.add_argument("--node-tls-cert", type=Path, default=None, help="client certificate for the internal listener")
    p.add_argument("--node-tls-key", type=Path, default=None, help="its private key")
    p.add_argument("--tls-cert", type=Path, default=None, help="certificate of the HTTP listener (TLS)")
    p.add_argument("--tls-key", type=Path, default=None, help="its private key")
    p.add_argument(
        "--trusted-proxies",
        default="",
        metavar="CIDR,...",
        help="peers whose X-Forwarded-For names the client (SSE per-IP cap, access log); none: the peer is the client",
    )
    p.add_argument(
        "--redis-url",
        default=d.redis_url,
        help="Redis for event fan-out (redis://[user:pass@]host:port/db, rediss:// for TLS); in-process when empty",
    )
    p.add_argument("--redis-password-file", type=Path, default=None, help="file holding the Redis password")
    p.add_argument("--redis-ca-file", type=Path, default=None, help="CA of Redis's certificate (rediss://)")


LIST_FLAGS = frozenset({"node_addrs", "node_internal_addrs", "cors_origins"})


def parse_networks(text: str) -> tuple[IpNetwork, ...]:
    """`10.0.0.0/8, 192.168.1.7` -> networks (a bare address is its own /32 or /128); ValueError naming a bad one."""
    out: list[IpNetwork] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an address or CIDR range") from None
    return tuple(out)


def _pairs(values: dict[str, Any]) -> None:
    """Flags that go together, and what a flag needs from another."""
    for cert, key in (("node_tls_cert", "node_tls_key"), ("tls_cert", "tls_key")):
        if (values[cert] is None) != (values[key] is None):
            raise ConfigError(f"--{cert.replace('_', '-')} and --{key.replace('_', '-')} go together")
    if values["node_tls_cert"] is not None and not values["node_internal_addrs"]:
        raise ConfigError("--node-tls-cert is for the nodes' internal listener: give --node-internal-addr too")
    for addr in values["node_internal_addrs"]:
        if addr.startswith(SECURE_SCHEMES) and values["node_tls_cert"] is None:
            raise ConfigError(
                f"--node-internal-addr {addr}: the internal listener takes members' and gateways' certificates "
                "only: give --node-tls-cert and --node-tls-key"
            )
    redis_url = str(values["redis_url"])
    for flag in ("redis_password_file", "redis_ca_file"):
        if values[flag] is not None and not redis_url:
            raise ConfigError(f"--{flag.replace('_', '-')} needs --redis-url")
    if redis_url:
        try:
            parts = urlsplit(redis_url)
            parts.port  # noqa: B018 (a bad port raises here)
        except ValueError as err:
            raise ConfigError(f"--redis-url: {err}") from None
        if parts.scheme not in ("redis", "rediss"):
            raise ConfigError("--redis-url: use redis://host:port/db, or rediss:// for TLS")
        if parts.password and values["redis_password_file"] is not None:
            raise ConfigError("--redis-url carries a password and --redis-password-file gives one: keep one")
        if values["redis_ca_file"] is not None and parts.scheme != "rediss":
            raise ConfigError("--redis-ca-file is for TLS: use a rediss:// --redis-url")


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> GatewayConfig:
    env = os.environ if env is None else env
    parser = _parser()
    env_defaults(parser, ENV_PREFIX, env, lists=LIST_FLAGS)
    values = vars(parser.parse_args(argv))
    values["node_addrs"] = tuple(values["node_addrs"] or GatewayConfig.node_addrs)
    values["cors_origins"] = tuple(values["cors_origins"] or ())
    values["node_internal_addrs"] = tuple(values["node_internal_addrs"] or ())
    try:
        values["trusted_proxies"] = parse_networks(values["trusted_proxies"])
    except ValueError as err:
        config_exit(parser.prog, ConfigError(f"--trusted-proxies: {err}"))
    try:
        _pairs(values)
    except ConfigError as err:
        config_exit(parser.prog, err)
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
