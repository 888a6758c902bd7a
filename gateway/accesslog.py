"""The gateway's access log: aiohttp's default line, written without aiohttp's generic formatter.

    web.AppRunner(app, access_log_class=LeanAccessLogger)

aiohttp's `AccessLogger` parses its format into a list of field functions and builds a dict of `extra`
values for every request (about a sixth of the gateway's CPU per REST GET). For the
default format — `%a %t "%r" %s %b "%{Referer}i" "%{User-Agent}i"` — this writes the same line with one
f-string and the timestamp formatted once per second; for any other format it defers to aiohttp's logger.
The request target is the one the client sent (`raw_path`), not aiohttp's `path_qs`, which yarl rebuilds
from its parts on every call (~2.5k of the ~400k instructions of a REST GET) and which
can differ from what was sent: `GET http://host/v1/x` logs as `/v1/x`, `//x/y` as `////x/y`, `/v1/a?` as `/v1/a`.
For every other target the text is the same: the HTTP parser refuses control characters and non-ASCII
bytes in a target before any line is written, so a raw target cannot break the line.
The first field is the client (gateway/clientip.py): the peer, or with `--trusted-proxies` the address a
trusted proxy's `X-Forwarded-For` names (`LeanAccessLogger.keyed(clients)` makes the class that reads it).
The line's fields are not repeated as `extra` attributes of the record (no formatter here reads them), and
the record names no caller (`Logger.info` would walk the stack for one; no formatter here shows it).

When the process logs through the one handler `configure_logging` installed and nothing else would see the
record (node/observability/logs.py, `sole_handler`), no record is made at all: the handler writes the text it
would have written for it (`LogHandler.write_line`): about 7% of the instructions of a REST GET. Under any
other set-up (a log capture, a second handler) the record is made and handled as usual.
"""

from __future__ import annotations

import logging
import time
from typing import ClassVar

from aiohttp import hdrs
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_log import AccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from gateway.clientip import ClientAddress
from node.observability.logs import sole_handler

DEFAULT_FORMAT = AccessLogger.LOG_FORMAT


class LeanAccessLogger(AbstractAccessLogger):
    __slots__ = ("_generic", "_second", "_stamp")
    clients: ClassVar[ClientAddress] = ClientAddress()  # no trusted proxies: the peer is the client

    @classmethod
    def keyed(cls, clients: ClientAddress) -> type[LeanAccessLogger]:
        """The logger class aiohttp is given (it makes the instance): the client as `clients` finds it."""
        return type("KeyedAccessLogger", (cls,), {"__slots__": (), "clients": clients})

    def __init__(self, logger: logging.Logger, log_format: str) -> None:
        super().__init__(logger, log_format)
        self._generic = None if log_format == DEFAULT_FORMAT else AccessLogger(logger, log_format)
        self._second = -1
        self._stamp = ""

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)

    def _start_stamp(self, duration: float) -> str:
        """`[23/Nov/2026:15:46:02 +0000]`, the request's start in local time (as aiohttp's `%t`)."""
        second = int(time.time() - duration)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(second))
        return self._stamp

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        if self._generic is not None:
            self._generic.log(request, response, time)
            return
        try:
            version = request.version
            headers = request.headers
            line = (
                f"{self.clients.of(request)} {self._start_stamp(time)} "
                f'"{request.method} {request.raw_path} HTTP/{version.major}.{version.minor}" '
                f"{response.status} {response.body_length} "
                f'"{headers.get(hdrs.REFERER, "-")}" "{headers.get(hdrs.USER_AGENT, "-")}"'
            )
            logger = self.logger
            out = sole_handler(logger, logging.INFO)
            if out is not None:  # the process's one handler and nothing else: the line without a record
                out.write_line(logger.name, logging.INFO, line)
            elif logger.isEnabledFor(logging.INFO):
                # the record made here, not by `Logger.info`: no caller lookup (a frame walk per request)
                logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, line, (), None))
        except Exception:
            self.logger.exception("Error in logging")
