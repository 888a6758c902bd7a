"""`host:port` addresses of the listeners the observability endpoints open (standard library only: the
node's and the gateway's argument parsers check them before anything heavy is imported)."""

from __future__ import annotations


def split_addr(addr: str) -> tuple[str, int]:
    """`host:port` (host may be empty: localhost; IPv6 in brackets); ValueError when malformed."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]") or "localhost", int(port)
