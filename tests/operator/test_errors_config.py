"""The one mapping from our errors to kopf's retry behaviour, and the operator's flags."""

import os
import subprocess
import sys
from pathlib import Path

import kopf
import pytest

from chain_operator.config import parse_config
from chain_operator.errors import KubeError, KubeNotFound, NodeUnreachable, SpecInvalid, UpgradeFailed, to_kopf
from node.errors import ConfigError


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (NodeUnreachable("down", delay=3), kopf.TemporaryError),
        (KubeError(503, "busy"), kopf.TemporaryError),
        (KubeError(409, "conflict"), kopf.TemporaryError),
        (KubeError(403, "forbidden"), kopf.PermanentError),
        (KubeNotFound(404, "gone"), kopf.PermanentError),
        (SpecInvalid("bad"), kopf.PermanentError),
        (UpgradeFailed("pod x never came back"), kopf.PermanentError),
    ],
)
def test_to_kopf(exc, kind):
    mapped = to_kopf(exc)
    assert type(mapped) is kind
    assert exc.reason in str(mapped)


def test_retry_delay_is_kept():
    mapped = to_kopf(NodeUnreachable("down", delay=7))
    assert isinstance(mapped, kopf.TemporaryError) and mapped.delay == 7


def test_flags_and_environment():
    cfg = parse_config(
        ["--pod-timeout", "60"],
        env={"CHAIN_OPERATOR_NAMESPACE": "a,b", "CHAIN_OPERATOR_ADMIN_TOKEN": "t", "CHAIN_OPERATOR_POD_TIMEOUT": "5"},
    )
    assert cfg.namespaces == ("a", "b")
    assert cfg.admin_token == "t"
    assert cfg.pod_timeout == 60  # the command line wins
    assert parse_config([], env={}).namespaces == ()


@pytest.mark.parametrize("flag", ["--snapshot-tick", "--rpc-timeout", "--upgrade-poll", "--pod-timeout"])
def test_a_period_that_is_not_positive_is_a_config_error(flag):
    with pytest.raises(ConfigError, match=flag):
        parse_config([flag, "0"], env={})
    with pytest.raises(ConfigError, match=flag):
        parse_config([], env={"CHAIN_OPERATOR_" + flag[2:].upper().replace("-", "_"): "-1"})


def test_console_script_refuses_a_bad_flag_on_one_line_with_status_2():
    script = Path(sys.executable).parent / "chain-operator"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAIN_OPERATOR_")}
    done = subprocess.run(
        [str(script), "--pod-timeout", "0"], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines == ["chain-operator: --pod-timeout must be a positive number of seconds, not 0.0"]
