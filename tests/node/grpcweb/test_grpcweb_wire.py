"""The gRPC-web wire helpers on their own: encodings that are easy to get subtly wrong."""

from __future__ import annotations

import base64

import grpc
import pytest

from node.grpcweb.wire import (
    Mode,
    ProtocolError,
    decode_text_body,
    encode_frame,
    headers_to_metadata,
    metadata_to_headers,
    parse_content_type,
    parse_timeout,
    percent_encode,
    single_request_message,
)


def test_percent_encoding_keeps_printable_ascii_and_escapes_the_rest() -> None:
    assert percent_encode("not found: 50% of ü\r\n") == "not found: 50%25 of %C3%BC%0D%0A"
    assert percent_encode("plain message") == "plain message"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1H", 3600.0), ("2M", 120.0), ("5S", 5.0), ("100m", 0.1), ("250u", 0.00025), ("7n", 7e-9)],
)
def test_grpc_timeout_units(value: str, seconds: float) -> None:
    assert parse_timeout(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "5", "S", "123456789S", "1.5S", "-1S", "5s"])
def test_malformed_grpc_timeout(value: str) -> None:
    with pytest.raises(ValueError):
        parse_timeout(value)


def test_content_types() -> None:
    assert parse_content_type("application/grpc-web") == (Mode.BINARY, "application/grpc-web")
    assert parse_content_type("Application/GRPC-Web+proto; charset=x") == (Mode.BINARY, "application/grpc-web+proto")
    assert parse_content_type("application/grpc-web-text") == (Mode.TEXT, "application/grpc-web-text")
    assert parse_content_type("application/grpc-web-text+proto") == (Mode.TEXT, "application/grpc-web-text+proto")
    for unsupported in (None, "application/grpc-web+json", "application/grpc", "text/plain"):
        assert parse_content_type(unsupported) is None


def test_text_body_with_chunks_whitespace_and_no_padding() -> None:
    data = bytes(range(40))
    chunked = base64.b64encode(data[:1]) + b"\r\n" + base64.b64encode(data[1:5]) + base64.b64encode(data[5:])
    assert decode_text_body(chunked) == data
    assert decode_text_body(base64.b64encode(data[:4]).rstrip(b"=")) == data[:4]
    with pytest.raises(ProtocolError):
        decode_text_body(b"****")


def test_text_frames_are_encoded_one_by_one() -> None:
    assert encode_frame(0x80, b"a", Mode.TEXT) == base64.b64encode(b"\x80\x00\x00\x00\x01a")


def test_request_framing_rules() -> None:
    one = encode_frame(0, b"abc", Mode.BINARY)
    assert single_request_message(one, 10) == b"abc"
    assert single_request_message(one + encode_frame(0x80, b"", Mode.BINARY), 10) == b"abc"
    for body, code in [
        (b"", grpc.StatusCode.INTERNAL),
        (one + one, grpc.StatusCode.INTERNAL),
        (one[:-1], grpc.StatusCode.INTERNAL),
        (encode_frame(1, b"abc", Mode.BINARY), grpc.StatusCode.UNIMPLEMENTED),
        (encode_frame(0, b"x" * 11, Mode.BINARY), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ]:
        with pytest.raises(ProtocolError) as err:
            single_request_message(body, 10)
        assert err.value.code == code


def test_metadata_to_headers_encodes_binary_and_refuses_what_would_break_the_response() -> None:
    lines, rejected = metadata_to_headers(
        [
            ("Reason-Code", "X"),
            ("trace-bin", b"\x00\x01\x02\x03"),
            ("grpc-status", "0"),
            ("content-type", "text/html"),
            ("access-control-allow-origin", "*"),
            ("bad key", "v"),
            ("inject", "a\r\nb: c"),
            ("latin", "ü"),
        ]
    )
    assert [(line.name, line.value) for line in lines] == [("reason-code", "X"), ("trace-bin", "AAECAw")]
    assert rejected == ["grpc-status", "content-type", "access-control-allow-origin", "bad key", "inject", "latin"]


def test_headers_to_metadata() -> None:
    headers = [
        ("X-Request-Id", "r"),
        ("Host", "h"),
        ("Connection", "keep-alive"),
        ("Grpc-Timeout", "1S"),
        ("Trace-Bin", "AAE, AgM="),
        ("broken-bin", "***"),
    ]
    metadata = headers_to_metadata(headers)
    assert [(m.key, m.value) for m in metadata] == [
        ("x-request-id", "r"),
        ("trace-bin", b"\x00\x01"),
        ("trace-bin", b"\x02\x03"),
    ]
