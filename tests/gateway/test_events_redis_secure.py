"""The SSE fan-out over a Redis that requires credentials and TLS: a real redis-server (an ACL user, TLS only;
or requirepass with the password from a file), a real node and two real gateways. Wrong credentials or a
Redis certificate of another CA stop the gateway at start with one line (exit 2)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from redis.asyncio import Redis

from gateway.events.model import Kind
from gateway.events.redis_client import masked
from gateway.events.redis_streams import stream_name
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.certs import TestCA
from tests.fixtures.events import bio_messages, commit_in_batches, event_ids, sse
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.redisproc import RedisProcess

PASSWORD = "fan-out-Secret-42"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def acl_tls_redis(tmp_path_factory: pytest.TempPathFactory, ca: TestCA) -> Iterator[RedisProcess]:
    """TLS only, the ACL user `gateway`; the passwordless default user is off."""
    proc = RedisProcess(
        tmp_path_factory.mktemp("redis"), user="gateway", password=PASSWORD, tls=ca.issue("redis"), ca=ca.cert
    ).start()
    yield proc
    proc.stop()


@pytest.fixture
def actor(node: NodeProcess) -> RemoteActor:
    with node.client() as c:
        return new_account(c, node.authority())


async def fan_out(node: NodeProcess, actor: RemoteActor, *gateways: GatewayProcess) -> list[str]:
    """Messages committed while an SSE client of each gateway listens: the event ids each one saw."""
    async with aiohttp.ClientSession() as session:
        streams = [sse(session, f"{gw.url}/v1/events/messages") for gw in gateways]
        opened = [await s.__aenter__() for s in streams]
        try:

            def run() -> list[str]:
                with node.client() as c:
                    return event_ids(commit_in_batches(c, bio_messages(actor, 20, "secure"), 10))

            committed = await asyncio.to_thread(run)
            for stream in opened:
                assert [e.id for e in await stream.events(20)] == committed
            return committed
        finally:
            for s in reversed(streams):
                await s.__aexit__(None, None, None)


async def test_fan_out_over_an_acl_user_and_tls(
    node: NodeProcess, acl_tls_redis: RedisProcess, ca: TestCA, actor: RemoteActor
) -> None:
    assert acl_tls_redis.url.startswith(f"rediss://gateway:{PASSWORD}@")
    flags = ("--redis-url", acl_tls_redis.url, "--redis-ca-file", str(ca.cert))
    a = GatewayProcess(node.grpc_target, args=flags).start()
    b = GatewayProcess(node.grpc_target, args=flags).start()
    try:
        committed = await fan_out(node, actor, a, b)
    finally:
        a.stop()
        b.stop()
    client = Redis.from_url(acl_tls_redis.url, ssl_ca_certs=str(ca.cert))
    try:  # the events went through this Redis, not around it
        assert await client.xlen(stream_name(Kind.MESSAGES)) >= len(committed)
    finally:
        await client.aclose()


async def test_fan_out_with_the_password_in_a_file(node: NodeProcess, tmp_path: Path, actor: RemoteActor) -> None:
    redis = RedisProcess(tmp_path / "redis", password=PASSWORD).start()
    try:
        secret = tmp_path / "redis-password"
        secret.write_text(PASSWORD + "\n")  # as a Secret volume or an editor leaves it
        flags = ("--redis-url", redis.bare_url, "--redis-password-file", str(secret))
        gw = GatewayProcess(node.grpc_target, args=flags).start()
        try:
            await fan_out(node, actor, gw)
        finally:
            gw.stop()
    finally:
        redis.stop()


def refused(node: NodeProcess, *args: str) -> str:
    """The one stderr line of a gateway that stops at start (exit 2, no ready line)."""
    cmd = [*GatewayProcess(node.grpc_target, args=args).command()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
    return lines[0]


def test_a_wrong_password_is_one_line(node: NodeProcess, acl_tls_redis: RedisProcess, ca: TestCA) -> None:
    wrong = acl_tls_redis.url.replace(PASSWORD, "not-the-password")
    line = refused(node, "--redis-url", wrong, "--redis-ca-file", str(ca.cert))
    assert line.startswith("chain-gateway: --redis-url rediss://gateway:***@127.0.0.1:"), line
    assert "Redis refused the credentials: invalid username-password pair" in line
    assert "not-the-password" not in line  # never the password


def test_no_credentials_for_a_redis_that_wants_them_is_one_line(
    node: NodeProcess, acl_tls_redis: RedisProcess, ca: TestCA
) -> None:
    line = refused(node, "--redis-url", acl_tls_redis.bare_url, "--redis-ca-file", str(ca.cert))
    assert "refused the credentials" in line, line


def test_a_redis_certificate_of_another_ca_is_one_line(
    node: NodeProcess, acl_tls_redis: RedisProcess, tmp_path: Path
) -> None:
    stranger = TestCA.make(tmp_path / "other")
    line = refused(node, "--redis-url", acl_tls_redis.url, "--redis-ca-file", str(stranger.cert))
    assert "TLS with Redis failed" in line and "certificate" in line.lower(), line
    assert PASSWORD not in line


def test_masked() -> None:
    assert masked("rediss://u:p%40ss@h:6380/0") == "rediss://u:***@h:6380/0"
    assert masked("redis://:pw@h:6379") == "redis://:***@h:6379"
    assert masked("redis://h:6379/0") == "redis://h:6379/0"
