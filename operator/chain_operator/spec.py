"""The ChainNetwork spec, parsed once into frozen dataclasses with typed errors for bad input.

spec:
  statefulSet: chain-node        # the node StatefulSet this network manages
  container: node                # its node container
  image: ghcr.io/example/chain-node
  version: "0.2.0"               # desired image tag; changing it starts a rolling upgrade
  digest: sha256:...             # optional: pins the image (repo@digest); changing it rolls too
  replicas: 3
  snapshots:
    every: 6h                    # schedule: a duration (s, m, h, d); "" or absent = no snapshots
    retention: 7                 # ChainSnapshot objects (and snapshot directories) kept
    perMember: 3                 # at most this many on one pod's volume (0 or absent: retention / replicas,
                                 # rounded up): the operator rotates the pod that takes them
  readReplicas:                  # optional: the read-replica StatefulSet, rolled after the nodes (replicas.py)
    statefulSet: chain-replica
  etcd:                          # optional: the in-chart etcd whose membership the operator runs (etcd_cluster.py)
    statefulSet: chain-etcd
    service: chain-etcd-headless # its headless Service: member NAME is NAME.SERVICE.NAMESPACE.svc
    configMap: chain-etcd-members  # the initial cluster and state a starting member reads
    replicas: 3
    scheme: http                 # https with TLS
    clientPort: 2379
    peerPort: 2380
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from chain_operator.errors import SpecInvalid

DURATION = re.compile(r"([0-9]+)(s|m|h|d)")
UNITS = MappingProxyType({"s": 1, "m": 60, "h": 3600, "d": 86400})
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class ImageRef:
    """An image reference split into repository, tag and digest (`repo[:tag][@sha256:...]`)."""

    repository: str
    tag: str
    digest: str

    @classmethod
    def parse(cls, ref: str) -> ImageRef:
        name, _, digest = ref.partition("@")
        repo, colon, tag = name.rpartition(":")
        if not colon or "/" in tag:  # no tag: the colon (if any) belonged to a registry port
            repo, tag = name, ""
        return cls(repo, tag, digest)


def same_image(a: str, b: str) -> bool:
    """Two references name the same image: by digest when both carry one (the tag is then only a label),
    else by the whole reference."""
    ra, rb = ImageRef.parse(a), ImageRef.parse(b)
    if ra.digest and rb.digest:
        return ra.repository == rb.repository and ra.digest == rb.digest
    return a == b


def parse_duration(text: str) -> float:
    """ "90s", "15m", "6h", "1d", or concatenations like "1h30m"."""
    text = text.strip()
    if not text:
        return 0.0
    total, pos = 0, 0
    for match in DURATION.finditer(text):
        if match.start() != pos:
            break
        total += int(match.group(1)) * UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or total <= 0:
        raise SpecInvalid(f"snapshots.every: {text!r} is not a duration like 30m, 6h or 1d")
    return float(total)


@dataclass(frozen=True)
class SnapshotPolicy:
    every_seconds: float
    retention: int
    per_member: int = 0  # 0: retention / replicas, rounded up (NetworkSpec.per_member)

    @property
    def enabled(self) -> bool:
        return self.every_seconds > 0


@dataclass(frozen=True)
class EtcdSpec:
    statefulset: str
    service: str
    config_map: str
    replicas: int
    scheme: str
    client_port: int
    peer_port: int

    def pod_name(self, ordinal: int) -> str:
        return f"{self.statefulset}-{ordinal}"


def parse_etcd(doc: Any) -> EtcdSpec | None:
    if doc is None:
        return None
    if not isinstance(doc, Mapping):
        raise SpecInvalid("spec.etcd must be an object")
    names = {key: _str(doc, key) for key in ("statefulSet", "service", "configMap")}
    for key, value in names.items():
        if not NAME.fullmatch(value):
            raise SpecInvalid(f"spec.etcd.{key} {value!r} is not a Kubernetes name")
    scheme = _str(doc, "scheme", "http")
    if scheme not in ("http", "https"):
        raise SpecInvalid(f"spec.etcd.scheme must be http or https, not {scheme!r}")
    return EtcdSpec(
        statefulset=names["statefulSet"],
        service=names["service"],
        config_map=names["configMap"],
        replicas=_int(doc, "replicas", 3, 1, 9),
        scheme=scheme,
        client_port=_int(doc, "clientPort", 2379, 1, 65535),
        peer_port=_int(doc, "peerPort", 2380, 1, 65535),
    )


@dataclass(frozen=True)
class NetworkSpec:
    statefulset: str
    container: str
    image: str
    version: str
    replicas: int
    snapshots: SnapshotPolicy
    digest: str = ""
    etcd: EtcdSpec | None = None
    read_replicas: str = ""  # the read-replica StatefulSet ("" when there is none): rolled after the nodes

    @property
    def desired_image(self) -> str:
        """The full reference the nodes must run: `repo@sha256:...` when pinned (as the chart renders it),
        else `repo:version`."""
        return f"{self.image}@{self.digest}" if self.digest else f"{self.image}:{self.version}"

    @property
    def per_member(self) -> int:
        """Snapshots kept on one pod's volume at most."""
        return self.snapshots.per_member or -(-self.snapshots.retention // self.replicas)

    def pod_name(self, ordinal: int) -> str:
        return f"{self.statefulset}-{ordinal}"


def _str(doc: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        raise SpecInvalid(f"spec.{key} must be a non-empty string")
    return value


def _int(doc: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = doc.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SpecInvalid(f"spec.{key} must be an integer in [{low}, {high}], got {value!r}")
    return value


def parse_spec(spec: Mapping[str, Any]) -> NetworkSpec:
    statefulset = _str(spec, "statefulSet")
    if not NAME.fullmatch(statefulset):
        raise SpecInvalid(f"spec.statefulSet {statefulset!r} is not a Kubernetes name")
    version = _str(spec, "version")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", version):
        raise SpecInvalid(f"spec.version {version!r} is not an image tag")
    snaps = spec.get("snapshots")
    snaps = {} if snaps is None else snaps
    if not isinstance(snaps, Mapping):
        raise SpecInvalid("spec.snapshots must be an object")
    every = snaps.get("every", "")
    if not isinstance(every, str):
        raise SpecInvalid("spec.snapshots.every must be a string such as 6h")
    digest = spec.get("digest") or ""
    if not isinstance(digest, str) or (digest and not DIGEST.fullmatch(digest)):
        raise SpecInvalid(f"spec.digest {digest!r} is not an image digest like sha256:<64 hex digits>")
    image = _str(spec, "image")
    if "@" in image:
        raise SpecInvalid(f"spec.image {image!r} carries a digest: put it in spec.digest")
    return NetworkSpec(
        statefulset=statefulset,
        container=_str(spec, "container", "node"),
        image=image,
        version=version,
        replicas=_int(spec, "replicas", 1, 1, 99),
        snapshots=SnapshotPolicy(
            every_seconds=parse_duration(every),
            retention=_int(snaps, "retention", 7, 1, 1000),
            per_member=_int(snaps, "perMember", 0, 0, 1000),
        ),
        digest=digest,
        etcd=parse_etcd(spec.get("etcd")),
        read_replicas=parse_read_replicas(spec.get("readReplicas")),
    )


def parse_read_replicas(doc: Any) -> str:
    if doc is None:
        return ""
    if not isinstance(doc, Mapping):
        raise SpecInvalid("spec.readReplicas must be an object")
    name = doc.get("statefulSet")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SpecInvalid(f"spec.readReplicas.statefulSet {name!r} is not a Kubernetes name")
    return name


@dataclass(frozen=True)
class Network:
    """The ChainNetwork being handled: identity plus its parsed spec (what snapshots, upgrades and gates act on)."""

    namespace: str
    name: str
    uid: str
    spec: NetworkSpec


def parse_time(text: str) -> datetime.datetime | None:
    """A status timestamp (RFC 3339, UTC, whole seconds) as written by the operator; None when absent or malformed."""
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except (TypeError, ValueError):
        return None
