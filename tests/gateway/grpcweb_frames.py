"""gRPC-web by hand for the gateway's tests: request frames, and an answer's frames read back."""

from __future__ import annotations

GRPC_WEB = {"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"}


def frame(payload: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


def frames(body: bytes) -> list[tuple[int, bytes]]:
    out = []
    i = 0
    while i + 5 <= len(body):
        n = int.from_bytes(body[i + 1 : i + 5], "big")
        out.append((body[i], body[i + 5 : i + 5 + n]))
        i += 5 + n
    assert i == len(body), "truncated frame"
    return out


def unary(body: bytes) -> tuple[bytes, str]:
    """(the response message bytes, the trailers text) of a unary gRPC-web answer."""
    got = frames(body)
    data = [payload for flag, payload in got if not flag & 0x80]
    trailers = [payload for flag, payload in got if flag & 0x80]
    assert len(data) == 1 and len(trailers) == 1, got
    return data[0], trailers[0].decode()
