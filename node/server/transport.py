"""The node's TLS, assembled once from its flags: what each listener serves and how it dials other members.

    tls = NodeTLS.from_config(config)
    grpc_add_port(server, "--grpc-addr", addr, tls.public_credentials())   # None: plaintext
    Forwarder(..., tls=tls.members)                                         # mutual TLS to a member

With `--tls-cert/--tls-key`, every listener serves TLS: the public gRPC and gRPC-web ports to anyone; the
internal and admin listeners only to clients whose certificate the cluster's CA (`--tls-client-ca`) signed.
The same certificate is this member's client certificate when it dials another member's internal listener,
and that member's certificate must chain to the same CA. Without `--tls-cert` everything is plaintext, and a
listener bound beyond loopback is said in one line at start (`plaintext_line`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import grpc

from node.server.config import NodeConfig
from node.tls import ClientTLS, ServerTLS, is_loopback


@dataclass(frozen=True)
class NodeTLS:
    public: ServerTLS | None = None  # gRPC and gRPC-web: anyone may connect
    mutual: ServerTLS | None = None  # internal and admin: a client certificate of the cluster's CA
    members: ClientTLS | None = None  # dialling another member's internal listener (or --follow's upstream)

    @classmethod
    def from_config(cls, cfg: NodeConfig) -> NodeTLS:
        """TLSFileError (one line naming the flag and file) when a file is missing or does not load."""
        if cfg.tls_cert is None or cfg.tls_key is None:
            return cls()
        public = ServerTLS(cfg.tls_cert, cfg.tls_key)
        if cfg.tls_client_ca is None:
            return cls(public=public)
        mutual = ServerTLS(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca)
        members = ClientTLS(
            ca_file=cfg.tls_client_ca,
            cert_file=cfg.tls_cert,
            key_file=cfg.tls_key,
            flags=("--tls-client-ca", "--tls-cert", "--tls-key"),
        )
        return cls(public, mutual, members)

    @property
    def enabled(self) -> bool:
        return self.public is not None

    def public_credentials(self) -> grpc.ServerCredentials | None:
        return self.public.grpc_credentials() if self.public is not None else None

    def mutual_credentials(self) -> grpc.ServerCredentials | None:
        """The internal and admin listeners'. With TLS but no client CA these listeners serve TLS to anyone:
        config.py refuses that for the internal listener; the admin listener then relies on its token."""
        if self.mutual is not None:
            return self.mutual.grpc_credentials()
        return self.public_credentials()

    def web_context(self) -> ssl.SSLContext | None:
        return self.public.ssl_context() if self.public is not None else None

    def reload_now(self) -> None:
        for server in (self.public, self.mutual):
            if server is not None:
                server.reload_now()


def etcd_tls(cfg: NodeConfig) -> ClientTLS | None:
    """The etcd client's TLS: the CA of etcd's certificate and the client certificate etcd requires."""
    if cfg.etcd_ca_file is None and cfg.etcd_cert is None:
        return None
    return ClientTLS(
        ca_file=cfg.etcd_ca_file,
        cert_file=cfg.etcd_cert,
        key_file=cfg.etcd_key,
        flags=("--etcd-ca-file", "--etcd-cert", "--etcd-key"),
    )


def plaintext_line(cfg: NodeConfig) -> str | None:
    """The one warning line for listeners bound beyond loopback without TLS (None with --tls-cert, or when
    every listener is on loopback)."""
    if cfg.tls_cert is not None:
        return None
    listeners = {
        "--grpc-addr": cfg.grpc_addr,
        "--web-addr": cfg.web_addr,
        "--internal-addr": cfg.internal_addr,
        "--admin-addr": cfg.admin_addr,
    }
    exposed = [f"{flag} {addr}" for flag, addr in listeners.items() if addr and not is_loopback(addr)]
    if not exposed:
        return None
    return (
        f"listening beyond loopback without TLS ({', '.join(exposed)}): anyone on the network can read and change"
        " what these listeners carry; give --tls-cert, --tls-key and --tls-client-ca (docs/security.md)"
    )
