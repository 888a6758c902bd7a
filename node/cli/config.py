"""chainctl's local key store and account profile (``--home``, default ``~/.chainctl``).

Layout (directories 0700, files 0600, written atomically)::

    HOME/keys/NAME.json     one key: {"version", "name", "type", "private_key" (hex), "public_key",
                            "address", "rp_id", "origin", "created_at"}
    HOME/accounts.json      {"default": "0x<owner>", "accounts": {"0x<owner>": {"signer": NAME,
                            "wallet": NAME}}, "custody": {NAME: "0x<owner>"}}

``type`` is ``ed25519`` (a delegated key that signs messages), ``secp256k1`` (an Ethereum wallet),
``p256`` (a raw P-256 key) or ``webauthn`` (a software passkey with its relying-party id and origin).
``custody`` records which account each custody key was used for, so later commands need no ``--owner``.
Private keys are stored unencrypted: protect the directory like an SSH key directory.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.errors import CliCode
from node.sdk.keys import Ed25519Key, P256Key, Secp256k1Key, WebAuthnKey

HOME_ENV = "CHAINCTL_HOME"
DEFAULT_HOME = "~/.chainctl"
KEY_TYPES = ("ed25519", "secp256k1", "p256", "webauthn")
CUSTODY_TYPES = ("secp256k1", "p256", "webauthn")
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
DEFAULT_RP_ID = "localhost"
STORE_VERSION = 1

AnyKey = Ed25519Key | Secp256k1Key | P256Key | WebAuthnKey
CustodyKeyT = Secp256k1Key | P256Key | WebAuthnKey


class StoreError(Exception):
    """A key store problem; ``reason`` is the code chainctl prints."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _os_text(exc: OSError | UnicodeDecodeError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 ({exc.reason})"
    return exc.strerror or str(exc)


def default_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise StoreError(
            CliCode.INVALID_NAME, f"key name {name!r}: 1-64 of A-Z a-z 0-9 . _ - , not starting with . or -"
        )
    return name


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class StoredKey:
    name: str
    type: str
    private_key: bytes
    rp_id: str = ""
    origin: str = ""
    created_at: int = 0

    def load(self) -> AnyKey:
        """The key itself; a private key the type cannot take (a wrong length, an invalid scalar) is
        ``INVALID_KEY``."""
        try:
            if self.type == "ed25519":
                return Ed25519Key.from_private_bytes(self.private_key)
            if self.type == "secp256k1":
                return Secp256k1Key.from_private_bytes(self.private_key)
            if self.type == "p256":
                return P256Key.from_private_bytes(self.private_key)
            if self.type == "webauthn":
                return WebAuthnKey.from_private_bytes(self.private_key, rp_id=self.rp_id, origin=self.origin or None)
        except ValueError as exc:
            raise StoreError(CliCode.INVALID_KEY, f"key {self.name}: {self.type} {exc}") from None
        raise StoreError(CliCode.INVALID_KEY, f"key {self.name}: unknown type {self.type!r}")

    @property
    def is_custody(self) -> bool:
        return self.type in CUSTODY_TYPES

    def ed25519(self) -> Ed25519Key:
        key = self.load()
        if not isinstance(key, Ed25519Key):
            raise StoreError(
                CliCode.WRONG_KEY_TYPE, f"key {self.name} is {self.type}, an ed25519 (delegated) key is needed"
            )
        return key

    def custody(self) -> CustodyKeyT:
        key = self.load()
        if isinstance(key, Ed25519Key):
            raise StoreError(
                CliCode.WRONG_KEY_TYPE,
                f"key {self.name} is ed25519; a custody key (secp256k1, p256, webauthn) is needed",
            )
        return key

    @property
    def public_key(self) -> bytes:
        return self.load().public_key

    @property
    def address(self) -> bytes | None:
        """The 20-byte custody key id (None for ed25519 keys, which have no address)."""
        key = self.load()
        return None if isinstance(key, Ed25519Key) else key.address

    def public_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "type": self.type, "public_key": "0x" + self.public_key.hex()}
        address = self.address
        doc["address"] = "0x" + address.hex() if address is not None else None
        if self.type == "webauthn":
            doc["rp_id"] = self.rp_id
            doc["origin"] = self.origin
        doc["created_at"] = self.created_at
        return doc

    def to_json(self) -> dict[str, Any]:
        doc = {"version": STORE_VERSION, **self.public_json(), "private_key": self.private_key.hex()}
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> StoredKey:
        missing = [k for k in ("name", "type", "private_key") if not isinstance(doc.get(k), str)]
        if missing:
            raise StoreError(CliCode.INVALID_KEY, f"malformed key file: no {', '.join(missing)} (text)")
        try:
            private_key = bytes.fromhex(doc["private_key"])
        except ValueError:
            raise StoreError(CliCode.INVALID_KEY, "malformed key file: private_key is not hex") from None
        try:
            return cls(
                name=doc["name"],
                type=doc["type"],
                private_key=private_key,
                rp_id=str(doc.get("rp_id") or ""),
                origin=str(doc.get("origin") or ""),
                created_at=int(doc.get("created_at") or 0),
            )
        except (ValueError, TypeError) as exc:
            raise StoreError(CliCode.INVALID_KEY, f"malformed key file: created_at: {exc}") from None


def generate(name: str, key_type: str, *, rp_id: str = DEFAULT_RP_ID, origin: str = "") -> StoredKey:
    """A fresh key of ``key_type``."""
    key: AnyKey
    if key_type == "ed25519":
        key = Ed25519Key.generate()
    elif key_type == "secp256k1":
        key = Secp256k1Key.generate()
    elif key_type == "p256":
        key = P256Key.generate()
    elif key_type == "webauthn":
        key = WebAuthnKey.generate(rp_id=rp_id, origin=origin or None)
        origin = key.authenticator.origin
    else:
        raise StoreError(CliCode.INVALID_KEY, f"unknown key type {key_type!r}; one of {', '.join(KEY_TYPES)}")
    return StoredKey(
        name=name,
        type=key_type,
        private_key=key.private_bytes(),
        rp_id=rp_id if key_type == "webauthn" else "",
        origin=origin if key_type == "webauthn" else "",
        created_at=int(time.time()),
    )


def from_private(
    name: str, key_type: str, private_key: bytes, *, rp_id: str = DEFAULT_RP_ID, origin: str = ""
) -> StoredKey:
    """An imported key (checked by loading it)."""
    if key_type not in KEY_TYPES:
        raise StoreError(CliCode.INVALID_KEY, f"unknown key type {key_type!r}; one of {', '.join(KEY_TYPES)}")
    webauthn = key_type == "webauthn"
    stored = StoredKey(
        name=name,
        type=key_type,
        private_key=private_key,
        rp_id=rp_id if webauthn else "",
        origin=(origin or f"https://{rp_id}") if webauthn else "",
        created_at=int(time.time()),
    )
    try:
        stored.load()
    except ValueError as exc:
        raise StoreError(CliCode.INVALID_KEY, f"{key_type} private key: {exc}") from None
    return stored


class KeyStore:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.keys_dir = home / "keys"

    def path(self, name: str) -> Path:
        return self.keys_dir / f"{check_name(name)}.json"

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def add(self, key: StoredKey) -> StoredKey:
        path = self.path(key.name)
        if path.exists():
            raise StoreError(CliCode.KEY_EXISTS, f"a key named {key.name!r} already exists ({path})")
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(path, json.dumps(key.to_json(), indent=2) + "\n")
        return key

    def get(self, name: str) -> StoredKey:
        """The key file ``name``, checked: a file that is not a key chainctl can use is ``INVALID_KEY``,
        naming the file."""
        path = self.path(name)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StoreError(CliCode.KEY_NOT_FOUND, f"no key named {name!r} in {self.keys_dir}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(CliCode.INVALID_KEY, f"key file {path}: cannot read it: {_os_text(exc)}") from None
        except json.JSONDecodeError as exc:
            raise StoreError(CliCode.INVALID_KEY, f"key file {path}: not JSON ({exc})") from None
        try:
            if not isinstance(doc, dict):
                raise StoreError(CliCode.INVALID_KEY, "malformed key file: not a JSON object")
            key = StoredKey.from_json(doc)
            key.load()
        except StoreError as exc:
            raise StoreError(exc.reason, f"key file {path}: {exc}") from None
        return key

    def scan(self) -> tuple[list[StoredKey], list[StoreError]]:
        """The keys that can be read, and what is wrong with each key file that cannot."""
        if not self.keys_dir.is_dir():
            return [], []
        keys: list[StoredKey] = []
        problems: list[StoreError] = []
        for path in sorted(self.keys_dir.glob("*.json")):
            if not NAME_RE.match(path.stem):
                continue
            try:
                keys.append(self.get(path.stem))
            except StoreError as exc:
                problems.append(exc)
        return keys, problems

    def list(self) -> list[StoredKey]:
        """Every key of the store; the first file that cannot be read fails it (``scan`` lists around it)."""
        keys, problems = self.scan()
        if problems:
            raise problems[0]
        return keys

    def delete(self, name: str) -> None:
        path = self.path(name)
        if not path.exists():
            raise StoreError(CliCode.KEY_NOT_FOUND, f"no key named {name!r} in {self.keys_dir}")
        path.unlink()


@dataclass
class AccountEntry:
    owner: bytes
    signer: str
    wallet: str = ""

    def to_json(self) -> dict[str, str]:
        return {"signer": self.signer, "wallet": self.wallet}


@dataclass
class Profile:
    """Which accounts this home has initialized, the default one, and custody key owners."""

    path: Path
    default: bytes | None = None
    accounts: dict[bytes, AccountEntry] = field(default_factory=dict)
    custody: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def load(cls, home: Path) -> Profile:
        path = home / "accounts.json"
        profile = cls(path)
        if not path.exists():
            return profile
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            default = doc.get("default") or ""
            profile.default = bytes.fromhex(default.removeprefix("0x")) if default else None
            for owner_hex, entry in (doc.get("accounts") or {}).items():
                owner = bytes.fromhex(owner_hex.removeprefix("0x"))
                profile.accounts[owner] = AccountEntry(owner, str(entry["signer"]), str(entry.get("wallet") or ""))
            for name, owner_hex in (doc.get("custody") or {}).items():
                profile.custody[str(name)] = bytes.fromhex(str(owner_hex).removeprefix("0x"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(CliCode.INVALID_PROFILE, f"{path}: {exc}") from None
        return profile

    def save(self) -> None:
        doc = {
            "default": "0x" + self.default.hex() if self.default else "",
            "accounts": {"0x" + o.hex(): e.to_json() for o, e in sorted(self.accounts.items())},
            "custody": {name: "0x" + o.hex() for name, o in sorted(self.custody.items())},
        }
        write_private(self.path, json.dumps(doc, indent=2) + "\n")

    def find(self, ref: str) -> AccountEntry | None:
        """An account by 0x-address, by the name of its signer key, or of a custody key used for it."""
        text = ref.removeprefix("0x")
        for owner, entry in self.accounts.items():
            if text.lower() == owner.hex() or ref in (entry.wallet, entry.signer):
                return entry
        custody_owner = self.custody.get(ref)
        return self.accounts.get(custody_owner) if custody_owner is not None else None
