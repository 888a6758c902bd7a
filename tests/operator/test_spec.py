"""ChainNetwork spec parsing: typed refusals with a reason, never a half-parsed spec."""

import pytest

from chain_operator.errors import SpecInvalid
from chain_operator.spec import ImageRef, parse_duration, parse_spec, same_image

GOOD = {"statefulSet": "chain-node", "image": "ghcr.io/x/chain-node", "version": "1.2.3", "replicas": 3}


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("15m", 900), ("6h", 21600), ("1d", 86400), ("1h30m", 5400)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["6", "h", "1w", "every tuesday", "0s", "1h 30m", "-5m"])
def test_bad_durations(text):
    with pytest.raises(SpecInvalid) as err:
        parse_duration(text)
    assert err.value.reason == "InvalidSpec"


def test_a_full_spec():
    spec = parse_spec({**GOOD, "container": "main", "snapshots": {"every": "30m", "retention": 4}})
    assert spec.desired_image == "ghcr.io/x/chain-node:1.2.3"
    assert spec.pod_name(2) == "chain-node-2"
    assert spec.container == "main"
    assert spec.snapshots.enabled and spec.snapshots.every_seconds == 1800 and spec.snapshots.retention == 4


def test_defaults():
    spec = parse_spec({"statefulSet": "n", "image": "i", "version": "v1"})
    assert (spec.container, spec.replicas, spec.snapshots.enabled, spec.snapshots.retention) == ("node", 1, False, 7)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"statefulSet": ""}, "statefulSet"),
        ({"statefulSet": "Bad_Name"}, "statefulSet"),
        ({"version": "1.0:latest"}, "version"),
        ({"version": 2}, "version"),
        ({"image": ""}, "image"),
        ({"replicas": 0}, "replicas"),
        ({"replicas": True}, "replicas"),
        ({"snapshots": {"retention": 0}}, "retention"),
        ({"snapshots": {"every": 5}}, "every"),
        ({"snapshots": []}, "snapshots"),
    ],
)
def test_bad_specs_name_the_field(change, field):
    with pytest.raises(SpecInvalid) as err:
        parse_spec({**GOOD, **change})
    assert field in str(err.value)


DIGEST_A = "sha256:" + "a" * 64


def test_a_digest_pins_the_image_reference():
    spec = parse_spec({**GOOD, "digest": DIGEST_A})
    assert spec.desired_image == f"ghcr.io/x/chain-node@{DIGEST_A}"
    assert parse_spec({**GOOD, "digest": ""}).desired_image == "ghcr.io/x/chain-node:1.2.3"


@pytest.mark.parametrize(
    ("field", "value"), [("digest", "sha256:abc"), ("digest", "md5:" + "a" * 64), ("image", f"x/y@{DIGEST_A}")]
)
def test_a_bad_digest_is_refused(field, value):
    with pytest.raises(SpecInvalid) as err:
        parse_spec({**GOOD, field: value})
    assert err.value.reason == "InvalidSpec" and f"spec.{field}" in str(err.value)


def test_references_compare_by_digest_when_both_have_one():
    repo = "registry.local:5000/x/chain-node"
    assert same_image(f"{repo}@{DIGEST_A}", f"{repo}:1.2@{DIGEST_A}")
    assert not same_image(f"{repo}@{DIGEST_A}", f"{repo}@sha256:{'b' * 64}")
    assert not same_image(f"{repo}@{DIGEST_A}", f"{repo}:1.2")
    assert not same_image(f"{repo}@{DIGEST_A}", f"other/chain-node@{DIGEST_A}")
    assert same_image(f"{repo}:1.2", f"{repo}:1.2") and not same_image(f"{repo}:1.2", f"{repo}:1.3")
    assert ImageRef.parse(f"{repo}:1.2@{DIGEST_A}") == ImageRef(repo, "1.2", DIGEST_A)
    assert ImageRef.parse(repo) == ImageRef(repo, "", "")
