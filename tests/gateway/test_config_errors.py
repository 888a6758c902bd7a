"""An operator's mistake at start-up: `chain-gateway` says what is wrong on one line of stderr and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.procs import free_port

GATEWAY = Path(sys.executable).with_name("chain-gateway")


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--metrics-addr", "nowhere"], {}, "--metrics-addr"),
        ([], {"OTEL_TRACES_SAMPLER_ARG": "often"}, "OTEL_TRACES_SAMPLER_ARG"),
        (["--workers", "0"], {}, "--workers"),  # no serving process: refused, not a gateway that never answers
        (["--read-batch", "-1"], {}, "--read-batch"),  # a negative batch size: refused, not taken as off
        ([], {"CHAIN_GATEWAY_REST_MEMO_BYTES": "-1"}, "--rest-memo-bytes"),  # from the environment too
        # the trust boundaries: each refusal below is a gate (a gateway that started would serve insecurely)
        (["--node-internal-addr", "grpcs://127.0.0.1:1"], {}, "--node-tls-cert"),  # mTLS needs a certificate
        (["--node-tls-cert", "c.pem"], {}, "--node-tls-key"),
        (["--tls-key", "k.pem"], {}, "--tls-cert and --tls-key go together"),
        (["--trusted-proxies", "10.0.0.0/33"], {}, "--trusted-proxies"),
        ([], {"CHAIN_GATEWAY_TRUSTED_PROXIES": "10.0.0.0/8,proxy.local"}, "'proxy.local'"),
        (["--redis-password-file", "p"], {}, "--redis-url"),
        (["--redis-url", "redis://u:pw@127.0.0.1:1", "--redis-password-file", "p"], {}, "keep one"),
        (["--redis-url", "redis://127.0.0.1:1", "--redis-ca-file", "ca.pem"], {}, "rediss://"),
        (["--redis-url", "http://127.0.0.1:1"], {}, "--redis-url"),
        (["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"], {}, "--tls-cert /nonexistent.pem"),
        (["--node-ca-file", "/nonexistent.pem"], {}, "--node-ca-file /nonexistent.pem"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(args: list[str], env: dict[str, str], says: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CHAIN_GATEWAY_", "OTEL_"))}
    done = subprocess.run(
        [str(GATEWAY), "--http-addr", f"127.0.0.1:{free_port()}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("chain-gateway: ") and says in lines[0]
    assert done.stdout == ""  # no ready line
