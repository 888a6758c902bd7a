"""Node addresses as users write them: ``host``, ``host:port``, ``grpc://host:port``, ``http://host:port``
(plaintext) and ``grpcs://host:port``, ``https://host:port`` (TLS).

gRPC's own target syntax reads a bare ``localhost`` as ``localhost:443``; chainctl never passes user
text to gRPC unchanged: it parses it here and fills in the node's default gRPC port, 50051 (also for TLS:
the node serves TLS on its gRPC port).
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_GRPC_PORT = 50051
SCHEMES = ("grpc", "http")
TLS_SCHEMES = ("grpcs", "https")


class AddressError(ValueError):
    """An address chainctl cannot turn into host:port."""


def node_target(text: str, default_port: int = DEFAULT_GRPC_PORT) -> str:
    """``host:port`` (``[v6]:port`` for IPv6) for a plaintext ``text``, ``grpcs://host:port`` for a TLS one
    (node.tls.parse_target's syntax); the port defaults to ``default_port``."""
    raw = text.strip()
    if not raw:
        raise AddressError("empty node address")
    scheme = raw.partition("://")[0].lower() if "://" in raw else ""
    if scheme and scheme not in SCHEMES + TLS_SCHEMES:
        raise AddressError(
            f"{text!r}: unknown scheme {scheme!r} (use HOST:PORT, grpc://HOST:PORT or grpcs://HOST:PORT for TLS)"
        )
    if not scheme and raw.count(":") > 1 and not raw.startswith("["):
        raw = f"[{raw}]"  # a bare IPv6 address, no port
    parts = urlsplit(raw if scheme else f"grpc://{raw}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise AddressError(f"{text!r}: a node address is HOST[:PORT], without a path")
    try:
        port = parts.port
    except ValueError:
        raise AddressError(f"{text!r}: the port must be a number 0-65535") from None
    host = parts.hostname
    if not host:
        raise AddressError(f"{text!r}: no host")
    host_text = f"[{host}]" if ":" in host else host
    address = f"{host_text}:{port if port is not None else default_port}"
    return f"grpcs://{address}" if scheme in TLS_SCHEMES else address


def looks_like_http1(details: str) -> bool:
    """A gRPC failure that means the address answers HTTP/1.1 (the REST gateway, not the node)."""
    return "http1.x server" in details or "HTTP/1" in details
