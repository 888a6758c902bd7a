"""The gateway's Redis client: credentials, TLS, and a check at start that says a wrong one in one line.

    client = redis_client(config)        # gateway/events/service.py
    await check_redis(config)            # gateway/serve.py, before serving: ConfigError for wrong credentials

Credentials: an ACL user and password in the URL (`redis://user:pass@host:6379/0`), or the password in
`--redis-password-file` (the user, if any, still in the URL: `redis://gateway@host:6379/0`), which keeps it
out of the command line and the environment; the file's trailing newline is not part of it. `rediss://` is
TLS, the server's certificate checked against `--redis-ca-file` (the system's roots without one).

At start the gateway sends one PING. Redis refusing the credentials, or a TLS handshake that fails, is an
operator's mistake: one line naming `--redis-url` (its password masked) and what Redis said, exit status 2.
A Redis that does not answer yet is not: the relays and feeds retry until it does (gateway/events/feeds.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.config import GatewayConfig
from node.errors import ConfigError
from node.tls import read_file, tls_failure

log = logging.getLogger(__name__)
CONNECT_TIMEOUT = 5.0
REFUSED = ("WRONGPASS", "NOAUTH", "NOPERM", "invalid password", "invalid username-password")


def masked(url: str) -> str:
    """The URL with its password replaced by `***` (what a log line or an error may show)."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _password(path: Path) -> str:
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"--redis-password-file {path}: cannot read it: {err.strerror}") from None
    password = text.rstrip("\r\n")
    if not password:
        raise ConfigError(f"--redis-password-file {path}: the file is empty")
    return password


def redis_client(config: GatewayConfig, *, once: bool = False) -> Redis:
    """A client for `--redis-url` with the password file and CA applied; ConfigError for an unreadable file.
    `once`: no retries (the start's check: a Redis that does not answer is not waited for)."""
    options: dict[str, Any] = {"socket_connect_timeout": CONNECT_TIMEOUT, "health_check_interval": 30}
    if once:
        options["retry"] = Retry(NoBackoff(), 0)
    if config.redis_password_file is not None:
        options["password"] = _password(config.redis_password_file)
    if urlsplit(config.redis_url).scheme == "rediss":
        options["ssl_cert_reqs"] = "required"
        if config.redis_ca_file is not None:
            read_file("--redis-ca-file", config.redis_ca_file)  # one line naming it, not a handshake failure
            options["ssl_ca_certs"] = str(config.redis_ca_file)
    return Redis.from_url(config.redis_url, **options)


def _refused(err: RedisError) -> bool:
    return isinstance(err, AuthenticationError) or (
        isinstance(err, ResponseError) and any(word in str(err) for word in REFUSED)
    )


async def check_redis(config: GatewayConfig) -> None:
    """One PING: ConfigError when Redis refuses the credentials or the TLS handshake fails; an unreachable
    Redis is logged and left to the relays' retries."""
    if not config.redis_url:
        return
    client = redis_client(config, once=True)
    try:
        await client.ping()
    except RedisError as err:
        where = f"--redis-url {masked(config.redis_url)}"
        if _refused(err):
            raise ConfigError(f"{where}: Redis refused the credentials: {err}") from None
        if isinstance(err, RedisConnectionError) and tls_failure(str(err)):
            raise ConfigError(f"{where}: TLS with Redis failed: {err}") from None
        log.info("Redis at %s does not answer yet (%s); the event relays retry", masked(config.redis_url), err)
    finally:
        await client.aclose()
