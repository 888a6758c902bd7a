"""TLS for every hop: the one target syntax clients take, client credentials, and server credentials that
follow certificate files renewed on disk.

    target = parse_target("grpcs://node.example:443")     # Target("node.example:443", secure=True)
    channel = aio_channel("grpcs://node:50051", ClientTLS(ca_file=Path("ca.pem")))
    server.add_secure_port(addr, ServerTLS(cert, key, client_ca=ca).grpc_credentials())

Targets: `grpcs://host:port` and `https://host:port` are TLS, `grpc://host:port`, `http://host:port` and a bare
`host:port` are plaintext (a `dns:///name:port` target keeps its scheme and takes TLS from `ClientTLS`). A client
with no CA file trusts the system's roots (gRPC's bundled roots, or `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`).

Server certificates are read again when their files change (size, mtime or inode, as a Kubernetes Secret
volume's symlink swap or cert-manager's renewal changes them): gRPC asks `ServerTLS` on each new handshake
(`grpc.dynamic_ssl_server_credentials`), aiohttp's `ssl.SSLContext` swaps its context in the SNI callback, which
OpenSSL calls for every ClientHello. Connections already open keep the certificate they were made with, so
open streams survive a renewal. A renewed pair that does not load (a half-written file, a key that does not
match) is logged once and the previous pair stays in use.

Every file problem at start is a `TLSFileError`: one line naming the flag and the file.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from node.errors import ConfigError

log = logging.getLogger("chain.tls")
SECURE_SCHEMES = ("grpcs://", "https://")
PLAIN_SCHEMES = ("grpc://", "http://")
# a server looks at its files at most this often (each new handshake asks; a stat per handshake is wasted work)
RELOAD_CHECK_SECONDS = 1.0
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "ip6-localhost"})


class TLSFileError(ConfigError):
    """A certificate, key or CA file that cannot be read or used: one line naming the flag and the file."""

    def __init__(self, flag: str, path: Path | str, why: str) -> None:
        super().__init__(f"{flag} {path}: {why}")
        self.flag = flag
        self.path = str(path)


@dataclass(frozen=True)
class Target:
    address: str  # what gRPC dials: host:port, or a dns:/// target
    secure: bool

    @property
    def host(self) -> str:
        hostport = self.address.removeprefix("dns:///")
        return hostport.rpartition(":")[0].strip("[]") or hostport


def parse_target(target: str, *, secure: bool = False) -> Target:
    """`grpcs://`/`https://` are TLS, `grpc://`/`http://` plaintext; anything else is `secure` (plaintext by
    default). A trailing slash is dropped. ValueError for an empty address."""
    value = target.strip()
    for scheme in SECURE_SCHEMES:
        if value.startswith(scheme):
            value, secure = value[len(scheme) :], True
            break
    else:
        for scheme in PLAIN_SCHEMES:
            if value.startswith(scheme):
                value, secure = value[len(scheme) :], False
                break
    value = value.rstrip("/")
    if not value:
        raise ValueError(f"no address in target {target!r}")
    return Target(value, secure)


def is_loopback(addr: str) -> bool:
    """True for a host:port (or bare host) on loopback; a wildcard or any other host is not."""
    host = addr.rpartition(":")[0] if ":" in addr and not addr.endswith("]") else addr
    host = host.strip("[]")
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def read_file(flag: str, path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TLSFileError(flag, path, f"cannot read it: {err.strerror}") from None
    if b"-----BEGIN" not in data:
        raise TLSFileError(flag, path, "not a PEM file (no -----BEGIN line)")
    return data


@dataclass(frozen=True)
class ClientTLS:
    """How a client checks a TLS server and, for mutual TLS, presents itself.

    `ca_file`: the CA bundle the server's certificate must chain to (None: the system's roots);
    `cert_file`/`key_file`: this client's certificate (members, the gateway on the internal listener);
    `server_name`: the name checked against the server's certificate instead of the target's host."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""
    flags: tuple[str, str, str] = field(default=("--ca-file", "--tls-cert", "--tls-key"), compare=False)

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError(f"{self.flags[1]} and {self.flags[2]} go together")

    def check(self) -> None:
        """Read every file once: a TLSFileError now rather than a handshake failure later."""
        self._read()

    def _read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        ca = read_file(self.flags[0], self.ca_file) if self.ca_file is not None else None
        cert = read_file(self.flags[1], self.cert_file) if self.cert_file is not None else None
        key = read_file(self.flags[2], self.key_file) if self.key_file is not None else None
        return ca, key, cert

    def credentials(self) -> grpc.ChannelCredentials:
        ca, key, cert = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    def options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []

    def ssl_context(self) -> ssl.SSLContext:
        """The same trust for clients that take an `ssl.SSLContext` (aiohttp, redis-py, the S3 client)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file is not None else None)
        if self.cert_file is not None and self.key_file is not None:
            try:
                ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
            except (OSError, ssl.SSLError) as err:
                raise TLSFileError(self.flags[1], self.cert_file, f"cannot load with {self.key_file}: {err}") from None
        return ctx

    def describe(self) -> str:
        return f"CA {self.ca_file}" if self.ca_file is not None else "the system's CA roots"


def aio_channel(
    target: str, tls: ClientTLS | None = None, options: Sequence[tuple[str, Any]] = (), *, secure: bool = False
) -> grpc.aio.Channel:
    """A grpc.aio channel to `target` (parse_target's syntax): TLS when the target says so, or when `secure`
    (a bare address to a server known to speak TLS, e.g. a member's advertised internal address)."""
    parsed = parse_target(target, secure=secure)
    if not parsed.secure:
        return grpc.aio.insecure_channel(parsed.address, options=list(options))
    tls = tls or ClientTLS()
    return grpc.aio.secure_channel(parsed.address, tls.credentials(), options=[*options, *tls.options()])


def sync_channel(
    target: str, tls: ClientTLS | None = None, options: Sequence[tuple[str, Any]] = (), *, secure: bool = False
) -> grpc.Channel:
    """aio_channel's blocking twin (the SDK, chainctl, `chain-node backup`)."""
    parsed = parse_target(target, secure=secure)
    if not parsed.secure:
        return grpc.insecure_channel(parsed.address, options=list(options))
    tls = tls or ClientTLS()
    return grpc.secure_channel(parsed.address, tls.credentials(), options=[*options, *tls.options()])


def tls_failure(details: str | None) -> bool:
    """True when a failed call's details are a TLS handshake failure rather than a refusal or an outage."""
    text = (details or "").lower()
    # gRPC reports a refused client certificate only as "Unwrap failed (TSI_DATA_CORRUPTED)"
    words = ("ssl", "tls", "handshake", "certificate", "x509", "wrong_version", "alpn", "tsi_", "hostname verification")
    return any(word in text for word in words)


@dataclass(frozen=True)
class _Stamp:
    """What changes when a file is replaced or rewritten (a Secret volume swaps a symlink: a new inode)."""

    values: tuple[tuple[int, int, int], ...]

    @classmethod
    def of(cls, paths: Sequence[Path]) -> _Stamp:
        out = []
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                out.append((0, 0, 0))
                continue
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return cls(tuple(out))


@dataclass(frozen=True)
class _Pair:
    key: bytes
    cert: bytes
    client_ca: bytes | None
    context: ssl.SSLContext


class ServerTLS:
    """A server's certificate and key (and, for mutual TLS, the CA its clients' certificates must chain to),
    read again when the files change."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        client_ca: Path | None = None,
        *,
        flags: tuple[str, str, str] = ("--tls-cert", "--tls-key", "--tls-client-ca"),
        check_every: float = RELOAD_CHECK_SECONDS,
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca = client_ca
        self.flags = flags
        self.check_every = check_every
        self._lock = threading.Lock()  # gRPC's fetcher runs on its own threads
        self._paths = [p for p in (cert_file, key_file, client_ca) if p is not None]
        self._stamp = _Stamp.of(self._paths)
        self._pair = self._load()  # TLSFileError at start: the node does not come up with a bad pair
        self._checked = time.monotonic()
        self._warned: _Stamp | None = None
        self.reloads = 0

    @property
    def mutual(self) -> bool:
        return self.client_ca is not None

    def _load(self) -> _Pair:
        cert = read_file(self.flags[0], self.cert_file)
        key = read_file(self.flags[1], self.key_file)
        ca = read_file(self.flags[2], self.client_ca) if self.client_ca is not None else None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])  # the context serves aiohttp (gRPC-web, REST); gRPC has its own
        try:
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        except (OSError, ssl.SSLError) as err:
            raise TLSFileError(self.flags[0], self.cert_file, f"does not load with {self.key_file}: {err}") from None
        if self.client_ca is not None:
            try:
                ctx.load_verify_locations(cafile=str(self.client_ca))
            except (OSError, ssl.SSLError) as err:
                raise TLSFileError(self.flags[2], self.client_ca, f"not a CA bundle: {err}") from None
            ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.sni_callback = self._on_hello
        return _Pair(key, cert, ca, ctx)

    def _fresh(self) -> _Pair:
        """The current pair, loaded again first when the files changed (looked at once a `check_every`)."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked < self.check_every:
                return self._pair
            self._checked = now
            stamp = _Stamp.of(self._paths)
            if stamp == self._stamp:
                return self._pair
            try:
                pair = self._load()
            except TLSFileError as err:
                if self._warned != stamp:  # once per change of the files, not once per handshake
                    self._warned = stamp
                    log.warning("renewed TLS files not loaded, still serving the previous ones: %s", err)
                return self._pair
            self._stamp, self._pair = stamp, pair
            self.reloads += 1
        log.info("TLS certificate reloaded from %s", self.cert_file)
        return pair

    def reload_now(self) -> None:
        """Look at the files at the next handshake, whatever `check_every` says (tests, SIGHUP)."""
        with self._lock:
            self._checked = float("-inf")

    # ---- gRPC ----
    def _configuration(self, pair: _Pair) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration([(pair.key, pair.cert)], root_certificates=pair.client_ca)

    def grpc_credentials(self) -> grpc.ServerCredentials:
        served = [self._pair]

        def fetch() -> grpc.ServerCertificateConfiguration | None:
            pair = self._fresh()
            if pair is served[0]:
                return None  # unchanged: gRPC keeps what it has
            served[0] = pair
            return self._configuration(pair)

        # the fetcher's None (keep what you have) is gRPC's documented answer; its stubs type it without None
        return grpc.dynamic_ssl_server_credentials(
            self._configuration(self._pair),
            fetch,  # type: ignore[arg-type]
            require_client_authentication=self.mutual,
        )

    # ---- aiohttp and other ssl.SSLContext servers ----
    def ssl_context(self) -> ssl.SSLContext:
        """A context whose handshakes use the newest pair: its SNI callback (called for every ClientHello,
        with or without a server name) moves the connection to the current context."""
        return self._pair.context

    def _on_hello(self, sock: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext) -> None:
        pair = self._fresh()
        if sock.context is not pair.context:
            sock.context = pair.context


def plaintext_warning(program: str, flag: str, addr: str) -> str | None:
    """The one line a server says when it listens beyond loopback without TLS; None on loopback."""
    if not addr or is_loopback(addr):
        return None
    return (
        f"{program}: {flag} {addr} listens beyond loopback without TLS: "
        "anyone on the network can read and change what it carries"
    )
