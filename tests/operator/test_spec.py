"""ChainNetwork spec parsing: typed refusals with a reason, never a half-parsed spec."""

import pytest

from chain_operator.errors import SpecInvalid
from chain_operator.spec import parse_duration, parse_spec

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
