"""The client a request comes from: its direct peer, or what trusted proxies say in `X-Forwarded-For`.

    clients = ClientAddress(config.trusted_proxies)   # app[CLIENTS]
    clients.of(request)                                # "203.0.113.7"

Without `--trusted-proxies` the client is the TCP peer (`request.remote`) and no header is read: anyone can
write `X-Forwarded-For`, so believing it from any peer would let one client pose as many (and escape the SSE
per-IP cap) or as another (and use up its share).

With it, a request whose peer is in one of the ranges is read right to left: each proxy appends the address
it received the connection from, so the right-most hop that is not itself a trusted proxy is the client.
Hops further left were written by that client and are not believed. When every hop is a trusted proxy, the
left-most is the client. A hop that is not an address (a proxy that writes `unknown`, a client's garbage
the proxies passed on) ends the walk at the trusted proxy that wrote it. A request from any other peer is
keyed on the peer, whatever its headers say.

What reads it: the SSE per-IP cap (gateway/events/sse.py) and the access log (gateway/accesslog.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aiohttp import hdrs
from aiohttp.web_request import BaseRequest

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOPS = 32  # hops of X-Forwarded-For looked at, right to left; a longer chain's client is the 32nd


def parse_ip(text: str) -> IpAddress | None:
    """An address as proxies write one: `1.2.3.4`, `1.2.3.4:5678`, `::1`, `[::1]:5678`; None otherwise.
    An IPv4-mapped IPv6 address is its IPv4 address (a dual-stack listener reports IPv4 peers so)."""
    value = text.strip()
    if value.startswith("["):
        value = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        value = value.partition(":")[0]
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


class ClientAddress:
    def __init__(self, trusted: Sequence[IpNetwork] = ()) -> None:
        self.trusted = tuple(trusted)

    def is_trusted(self, ip: IpAddress) -> bool:
        return any(ip in net for net in self.trusted)

    def of(self, request: BaseRequest) -> str:
        """The client's address as text ("-" when the peer is unknown, e.g. a closed transport)."""
        remote = request.remote
        if not self.trusted or not remote:
            return remote or "-"
        peer = parse_ip(remote)
        if peer is None or not self.is_trusted(peer):
            return remote
        forwarded = request.headers.getall(hdrs.X_FORWARDED_FOR, [])
        if not forwarded:
            return str(peer)
        return str(self.walk(peer, ",".join(forwarded)))

    def walk(self, peer: IpAddress, forwarded: str) -> IpAddress:
        """The client named by `forwarded` (X-Forwarded-For's hops) as received from the trusted `peer`."""
        client = peer
        for hop in reversed(forwarded.split(",")[-MAX_HOPS:]):
            ip = parse_ip(hop)
            if ip is None:
                return client  # the proxy that wrote this (or passed it on) is the last one known
            client = ip
            if not self.is_trusted(ip):
                return ip
        return client
