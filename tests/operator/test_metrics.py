"""The operator's metrics registry against what the chart's PrometheusRule reads, and the names promised to
the backup code."""

from __future__ import annotations

import re

import pytest

from chain_operator.config import parse_config
from chain_operator.metrics import OperatorMetrics
from node.errors import ConfigError
from tests.charts.helm import PROFILES, Manifests, template

EVERYTHING_ON = (
    *PROFILES["replicated"],
    "--set",
    "metrics.prometheusRule.enabled=true,metrics.serviceMonitor.enabled=true,etcd.backup.enabled=true",
)


def rule_exprs() -> list[str]:
    (rule,) = Manifests(template(*EVERYTHING_ON)).kind("PrometheusRule")
    return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]


def exported(metrics: OperatorMetrics) -> set[str]:
    """Every sample name, once each labelled series exists (a labelled metric exports nothing before)."""
    metrics.snapshot_failed("ns", "net")
    metrics.snapshot_succeeded("ns", "net")
    metrics.snapshot_running("ns", "net")
    metrics.rollout("ns", "net", "Progressing")
    return metrics.names()


def test_every_operator_metric_the_rules_read_is_registered():
    used = {m for expr in rule_exprs() for m in re.findall(r"\b(chain_operator_[a-z_]+)", expr)}
    assert "chain_operator_snapshot_failures_total" in used
    assert "chain_operator_snapshot_last_success_timestamp_seconds" in used
    assert used <= exported(OperatorMetrics()), used - exported(OperatorMetrics())


def test_snapshot_and_rollout_names_are_the_agreed_ones():
    names = exported(OperatorMetrics())
    for name in (
        "chain_operator_snapshot_failures_total",
        "chain_operator_snapshot_last_success_timestamp_seconds",
        "chain_operator_rollout_phase",
    ):
        assert name in names


def test_metrics_count_per_network():
    m = OperatorMetrics()
    m.snapshot_failed("a", "x")
    m.snapshot_failed("a", "x")
    m.snapshot_succeeded("a", "y", at=1234.0)
    m.rollout("a", "x", "Failed")
    get = m.registry.get_sample_value
    assert get("chain_operator_snapshot_failures_total", {"namespace": "a", "network": "x"}) == 2
    assert get("chain_operator_snapshot_failures_total", {"namespace": "a", "network": "y"}) == 0
    assert get("chain_operator_snapshot_last_success_timestamp_seconds", {"namespace": "a", "network": "y"}) == 1234
    assert get("chain_operator_rollout_phase", {"namespace": "a", "network": "x", "phase": "Failed"}) == 1
    assert get("chain_operator_rollout_phase", {"namespace": "a", "network": "x", "phase": "Progressing"}) == 0


def test_metrics_and_job_timeout_flags():
    cfg = parse_config(
        [], env={"CHAIN_OPERATOR_METRICS_ADDR": "0.0.0.0:9464", "CHAIN_OPERATOR_SNAPSHOT_JOB_TIMEOUT": "60"}
    )
    assert cfg.metrics_addr == "0.0.0.0:9464" and cfg.snapshot_job_timeout == 60
    assert parse_config([], env={}).metrics_addr == ""  # off unless asked (the chart sets it)
    with pytest.raises(ConfigError, match="--metrics-addr"):
        parse_config(["--metrics-addr", "9464"], env={})
    with pytest.raises(ConfigError, match="--snapshot-job-timeout"):
        parse_config(["--snapshot-job-timeout", "0"], env={})
