"""How the node's processes share its public gRPC port and still hold it against every other process.

With read workers, the workers bind and listen on the public address with SO_REUSEPORT (the kernel
spreads connections over them); the main process holds the address with `PortAnchor`, sockets bound with
SO_REUSEPORT that never listen, so the port stays the node's while workers restart, and the main process
takes no public connection itself (its event loop is left to admission and blocks; what the workers do not
answer reaches it over a private listener). A socket without SO_REUSEPORT (every other chain-node's start-up
check, node/listen.py, and any program that did not ask for sharing) is refused with "address already in
use", and so is a process of another user. Two chain-nodes with read workers starting on the same port at
the same moment could both pass that check before either binds: `PortLock` closes that window with a name
in the abstract unix-socket namespace (per network namespace, like ports; released by the kernel when the
process dies, however it dies), taken before the check and held while the node runs.

    lock = PortLock.take("--grpc-addr", "0.0.0.0:50051")   # ListenError when another node holds the port
    anchor = PortAnchor.bind("--grpc-addr", "0.0.0.0:50051") # anchor.port: the bound port (0 works)
    target = private_target()                              # the main process's listener for relayed calls
"""

from __future__ import annotations

import errno
import os
import secrets
import socket

from node.listen import ListenError, split_host_port


def private_target() -> str:
    """A listener only the node's own processes know: an abstract unix socket with a random name."""
    return f"unix-abstract:chain-node-{os.getpid()}-{secrets.token_hex(8)}"


def lock_name(port: int) -> bytes:
    return f"\0chain-node/grpc-port/{port}".encode()


class PortLock:
    def __init__(self, sock: socket.socket | None) -> None:
        self._sock = sock

    @classmethod
    def take(cls, flag: str, addr: str) -> PortLock:
        """Held until `release` (or the process ends); port 0 needs none (the kernel picks a free port)."""
        try:
            _host, port = split_host_port(addr)
        except ValueError as err:
            raise ListenError(flag, addr, str(err)) from None
        if port == 0:
            return cls(None)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(lock_name(port))
        except OSError:
            sock.close()
            raise ListenError(flag, addr, "address already in use (another chain-node holds this port)") from None
        return cls(sock)

    def release(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class PortAnchor:
    def __init__(self, socks: list[socket.socket], port: int) -> None:
        self._socks = socks
        self.port = port

    @classmethod
    def bind(cls, flag: str, addr: str) -> PortAnchor:
        """Every address `addr` resolves to, bound (as node/listen.py's check_free tries them); port 0 takes
        the port the kernel gives the first and the same port for the others."""
        try:
            host, port = split_host_port(addr)
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except (ValueError, socket.gaierror) as err:
            raise ListenError(flag, addr, str(err)) from None
        anchor = cls([], port)
        try:
            for family, kind, proto, _name, sockaddr in infos:
                anchor._bind_one(flag, addr, socket.socket(family, kind, proto), sockaddr)
        except BaseException:
            anchor.close()
            raise
        if not anchor._socks:
            raise ListenError(flag, addr, "no address could be bound")
        return anchor

    def _bind_one(self, flag: str, addr: str, sock: socket.socket, sockaddr: tuple[object, ...]) -> None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((sockaddr[0], self.port, *sockaddr[2:]))
        except OSError as err:
            sock.close()
            if err.errno == errno.EADDRINUSE:
                raise ListenError(flag, addr, "address already in use (another process listens there)") from None
            return  # e.g. ::1 on a host without IPv6, as check_free allows
        self.port = int(sock.getsockname()[1])
        self._socks.append(sock)

    def close(self) -> None:
        for sock in self._socks:
            sock.close()
        self._socks = []
