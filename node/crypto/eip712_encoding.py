"""A generic EIP-712 typed-data encoder, written from the EIP (https://eips.ethereum.org/EIPS/eip-712).

Supported member types: ``address``, ``bool``, ``uint8`` .. ``uint256`` (multiples of 8), ``bytes``,
``bytes1`` .. ``bytes32``, ``string``, struct types declared in ``types``, and dynamic arrays ``T[]`` of
any of these. Types are given in the JSON form wallets and eth-account use::

    {"Mail": [{"name": "from", "type": "address"}, {"name": "contents", "type": "string"}]}

Values may be given natively (``bytes``, ``int``, ``bool``, ``str``) or as JSON-friendly strings:
``0x``-hex for ``address``/``bytes``/``bytesN`` and decimal or ``0x``-hex strings for ``uintN``.
Every value is range- and length-checked; a bad value raises ``TypedDataError`` (a ``ValueError``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from node.crypto.hashing import keccak256

TypeFields = Sequence[Mapping[str, str]]
TypeDefinitions = Mapping[str, TypeFields]

DOMAIN_TYPE = "EIP712Domain"
ADDRESS_SIZE = 20
WORD = 32
_DOMAIN_FIELD_ORDER = (
    ("name", "string"),
    ("version", "string"),
    ("chainId", "uint256"),
    ("verifyingContract", "address"),
    ("salt", "bytes32"),
)
_UINT = re.compile(r"uint(\d{1,3})")
_BYTES_N = re.compile(r"bytes(\d{1,2})")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


class TypedDataError(ValueError):
    """The types or the values do not form valid EIP-712 typed data."""


def _fields(types: TypeDefinitions, type_name: str) -> TypeFields:
    try:
        return types[type_name]
    except KeyError:
        raise TypedDataError(f"unknown struct type {type_name!r}") from None


def _base_type(member_type: str) -> str:
    return member_type[:-2] if member_type.endswith("[]") else member_type


def _dependencies(types: TypeDefinitions, primary_type: str) -> list[str]:
    """Struct types reachable from ``primary_type``, including itself, in discovery order."""
    found: list[str] = []
    pending = [primary_type]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.append(name)
        for field in _fields(types, name):
            base = _base_type(field["type"])
            if base in types and base not in found:
                pending.append(base)
    return found


def encode_type(types: TypeDefinitions, primary_type: str) -> str:
    """``encodeType``: the primary type, then referenced struct types sorted by name."""
    deps = _dependencies(types, primary_type)
    ordered = [primary_type, *sorted(d for d in deps if d != primary_type)]
    parts: list[str] = []
    for name in ordered:
        if not _IDENTIFIER.fullmatch(name):
            raise TypedDataError(f"invalid struct type name {name!r}")
        members = ",".join(f"{f['type']} {f['name']}" for f in _fields(types, name))
        parts.append(f"{name}({members})")
    return "".join(parts)


def type_hash(types: TypeDefinitions, primary_type: str) -> bytes:
    """``typeHash = keccak256(encodeType(type))``."""
    return keccak256(encode_type(types, primary_type).encode())


def _hex_bytes(value: object, what: str) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str) and value[:2] in ("0x", "0X"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise TypedDataError(f"{what}: invalid hex string") from None
    raise TypedDataError(f"{what}: expected bytes or a 0x-hex string, got {type(value).__name__}")


def _uint(value: object, bits: int, what: str) -> int:
    number: int
    if isinstance(value, bool):
        raise TypedDataError(f"{what}: expected an integer, got bool")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value, 16) if value[:2] in ("0x", "0X") else int(value, 10)
        except ValueError:
            raise TypedDataError(f"{what}: invalid integer string {value!r}") from None
    else:
        raise TypedDataError(f"{what}: expected an integer, got {type(value).__name__}")
    if not 0 <= number < (1 << bits):
        raise TypedDataError(f"{what}: {number} out of range for uint{bits}")
    return number


def _encode_atomic(member_type: str, value: object, what: str) -> bytes | None:
    """The 32-byte encoding of an atomic or dynamic primitive, or None if the type is not primitive."""
    if member_type == "address":
        raw = _hex_bytes(value, what)
        if len(raw) != ADDRESS_SIZE:
            raise TypedDataError(f"{what}: address must be {ADDRESS_SIZE} bytes, got {len(raw)}")
        return raw.rjust(WORD, b"\x00")
    if member_type == "bool":
        if not isinstance(value, bool):
            raise TypedDataError(f"{what}: expected bool, got {type(value).__name__}")
        return int(value).to_bytes(WORD, "big")
    if member_type == "string":
        if not isinstance(value, str):
            raise TypedDataError(f"{what}: expected str, got {type(value).__name__}")
        return keccak256(value.encode("utf-8"))
    if member_type == "bytes":
        return keccak256(_hex_bytes(value, what))
    uint = _UINT.fullmatch(member_type)
    if uint is not None:
        bits = int(uint.group(1))
        if bits % 8 or not 8 <= bits <= 256:
            raise TypedDataError(f"{what}: unsupported type {member_type!r}")
        return _uint(value, bits, what).to_bytes(WORD, "big")
    fixed = _BYTES_N.fullmatch(member_type)
    if fixed is not None:
        size = int(fixed.group(1))
        if not 1 <= size <= WORD:
            raise TypedDataError(f"{what}: unsupported type {member_type!r}")
        raw = _hex_bytes(value, what)
        if len(raw) != size:
            raise TypedDataError(f"{what}: {member_type} must be {size} bytes, got {len(raw)}")
        return raw.ljust(WORD, b"\x00")
    return None


def _encode_value(types: TypeDefinitions, member_type: str, value: object, what: str) -> bytes:
    if member_type.endswith("[]"):
        if isinstance(value, str | bytes | bytearray) or not isinstance(value, Sequence):
            raise TypedDataError(f"{what}: expected a list for {member_type}")
        element_type = member_type[:-2]
        encoded = b"".join(_encode_value(types, element_type, item, f"{what}[{i}]") for i, item in enumerate(value))
        return keccak256(encoded)
    if member_type in types:
        if not isinstance(value, Mapping):
            raise TypedDataError(f"{what}: expected a mapping for struct {member_type}")
        return hash_struct(types, member_type, value)
    atomic = _encode_atomic(member_type, value, what)
    if atomic is None:
        raise TypedDataError(f"{what}: unsupported type {member_type!r}")
    return atomic


def encode_data(types: TypeDefinitions, primary_type: str, data: Mapping[str, object]) -> bytes:
    """``encodeData``: the concatenated 32-byte encodings of the members, in declaration order.

    Every declared member must be present and no undeclared member may be given.
    """
    fields = _fields(types, primary_type)
    declared = {f["name"] for f in fields}
    extra = set(data) - declared
    if extra:
        raise TypedDataError(f"{primary_type}: undeclared members {sorted(extra)}")
    parts: list[bytes] = []
    for field in fields:
        name = field["name"]
        if name not in data:
            raise TypedDataError(f"{primary_type}: missing member {name!r}")
        parts.append(_encode_value(types, field["type"], data[name], f"{primary_type}.{name}"))
    return b"".join(parts)


def hash_struct(types: TypeDefinitions, primary_type: str, data: Mapping[str, object]) -> bytes:
    """``hashStruct(s) = keccak256(typeHash ‖ encodeData(s))``."""
    return keccak256(type_hash(types, primary_type) + encode_data(types, primary_type, data))


def domain_type_fields(domain: Mapping[str, object]) -> list[dict[str, str]]:
    """The ``EIP712Domain`` fields implied by the keys present in ``domain``, in the EIP's order."""
    unknown = set(domain) - {name for name, _ in _DOMAIN_FIELD_ORDER}
    if unknown:
        raise TypedDataError(f"EIP712Domain: unknown members {sorted(unknown)}")
    return [{"name": name, "type": kind} for name, kind in _DOMAIN_FIELD_ORDER if name in domain]


def domain_separator(domain: Mapping[str, object], types: TypeDefinitions | None = None) -> bytes:
    """``hashStruct(eip712Domain)``; the domain type is taken from ``types`` or derived from the keys."""
    if types is None or DOMAIN_TYPE not in types:
        types = {DOMAIN_TYPE: domain_type_fields(domain)}
    return hash_struct(types, DOMAIN_TYPE, domain)


def typed_data_digest(
    domain: Mapping[str, object],
    primary_type: str,
    types: TypeDefinitions,
    message: Mapping[str, object],
) -> bytes:
    """``keccak256(0x19 0x01 ‖ domainSeparator ‖ hashStruct(message))``: the 32 bytes a wallet signs."""
    if primary_type == DOMAIN_TYPE:
        raise TypedDataError("the primary type must not be EIP712Domain")
    separator = domain_separator(domain, types)
    return keccak256(b"\x19\x01" + separator + hash_struct(types, primary_type, message))
