"""Exclusive listeners: an address another process holds stops this one with one line, never a shared port.

    check_free("--grpc-addr", "localhost:50051")   # ListenError when any address it resolves to is taken

gRPC servers are created with `("grpc.so_reuseport", 0)` (gRPC sets SO_REUSEPORT by default, so a second
process on the same port would silently share it); aiohttp sites and the Prometheus endpoint set only
SO_REUSEADDR, which on Linux never lets two processes listen on one port. `check_free` binds the address
itself first, so a taken port is reported before a store is opened and without gRPC's own error log line.
Used by `chain-node` and `chain-gateway`: their `main` turns a `ListenError` into its one line and exit 1.
"""

from __future__ import annotations

import errno
import socket

import grpc

GRPC_EXCLUSIVE = ("grpc.so_reuseport", 0)  # gRPC turns SO_REUSEPORT on unless told not to


class ListenError(OSError):
    """A listener cannot bind its address: `flag` is the command-line flag that set it."""

    def __init__(self, flag: str, addr: str, why: str) -> None:
        super().__init__(f"{flag} {addr}: {why}")
        self.flag = flag
        self.addr = addr
        self.why = why

    def line(self, program: str) -> str:
        """e.g. `chain-node: --grpc-addr: cannot listen on grpc address 127.0.0.1:50051: address already in use`"""
        what = self.flag.removeprefix("--").removesuffix("-addr")
        return f"{program}: {self.flag}: cannot listen on {what} address {self.addr}: {self.why}"


def split_host_port(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)


def check_free(flag: str, addr: str) -> None:
    """ListenError unless every address `addr` resolves to can be bound now (port 0 always can)."""
    try:
        host, port = split_host_port(addr)
    except ValueError as err:
        raise ListenError(flag, addr, str(err)) from None
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ListenError(flag, addr, f"cannot resolve {host!r}: {err.strerror}") from None
    bound = 0
    last: OSError | None = None
    for family, kind, proto, _name, sockaddr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no conflict
            try:
                s.bind(sockaddr)
                s.listen(1)
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    raise ListenError(flag, addr, "address already in use (another process listens there)") from None
                last = err  # e.g. ::1 on a host without IPv6: fine while another address binds
                continue
            bound += 1
    if not bound:
        why = last.strerror if last is not None and last.strerror else "no address could be bound"
        raise ListenError(flag, addr, why)


def grpc_add_port(
    server: grpc.aio.Server, flag: str, addr: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """`server.add_insecure_port(addr)` (or `add_secure_port` with `credentials`), a failure (taken meanwhile)
    raised as ListenError."""
    try:
        if credentials is None:
            port = int(server.add_insecure_port(addr))
        else:
            port = int(server.add_secure_port(addr, credentials))
    except RuntimeError:
        port = 0
    if port == 0:
        raise ListenError(flag, addr, "address already in use or not local")
    return port
