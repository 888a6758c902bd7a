"""How the node's processes share its public gRPC port and still hold it against every other process.

With read workers the main process and its workers all bind the public address with SO_REUSEPORT (the
kernel spreads connections over them). A socket without SO_REUSEPORT (every other chain-node's start-up
check, node/listen.py, and any program that did not ask for sharing) is refused with "address already in
use", and so is a process of another user. Two chain-nodes with read workers starting on the same port at
the same moment could both pass that check before either binds: `PortLock` closes that window with a name
in the abstract unix-socket namespace (per network namespace, like ports; released by the kernel when the
process dies, however it dies), taken before the check and held while the node runs.

    lock = PortLock.take("--grpc-addr", "0.0.0.0:50051")   # ListenError when another node holds the port
    target = private_target()                              # the main process's listener for relayed calls
"""

from __future__ import annotations

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
