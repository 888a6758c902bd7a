"""The node pods' probe with TLS on (the kubelet's own grpc probe speaks no TLS).

    python grpc-health-probe.py HOST:PORT SERVICE CA_FILE

asks grpc.health.v1.Health/Check for SERVICE over TLS, trusting CA_FILE, and exits 0 when the answer is
SERVING, 1 otherwise with one line on stderr. It uses only the image's Python and grpcio.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # the one line below is the probe's whole output

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TIMEOUT_SECONDS = 10.0  # the kubelet's timeoutSeconds ends it sooner


def check(addr: str, service: str, ca_file: str) -> str:
    """'' when SERVING, else what was wrong."""
    try:
        with open(ca_file, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    except OSError as err:
        return f"CA file {ca_file}: {err.strerror}"
    with grpc.secure_channel(addr, credentials) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT_SECONDS)
        except grpc.RpcError as err:
            return f"{err.code().name}: {err.details()}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
    return ""


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: grpc-health-probe.py HOST:PORT SERVICE CA_FILE", file=sys.stderr)
        return 2
    problem = check(*argv)
    if problem:
        print(f"{argv[0]} {argv[1]!r}: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
