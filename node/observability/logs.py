"""Log lines: readable in a terminal (default) or one JSON object per line (`--log-format json`).

Both carry the trace and span ids of the span active where the record was made, when there is one:

    2026-11-22 14:03:05,120 INFO chain.node block 12 ... trace_id=4bf92f35... span_id=00f067aa...
    {"time": "2026-11-22T14:03:05.120Z", "level": "INFO", "logger": "chain.node", "message": "...",
     "trace_id": "4bf92f35...", "span_id": "00f067aa..."}

`configure_logging` replaces the root logger's handlers with one stderr handler (`LogHandler`); the ready
line the node and the gateway print on stdout stays as it is.

A line written on every request (the gateway's access log) can skip the `LogRecord`: `sole_handler(logger,
level)` answers the `LogHandler` when a record of that logger and level would reach it and nothing else, and
its `write_line` writes the text that handler would write for such a record (the formatters' `line`, which
their `format` uses too). Any other set-up (a second handler, a filter on the logger, a test's log capture)
gets None, and the caller logs a record as usual.

A condition that lasts and is retried often (etcd down, a peer without the cluster secret) is said now and
then, not once per retry: `Every(seconds).due()` answers True for the first line and then at most once per
`seconds`; `reset()` makes the next line due at once (the condition ended).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from opentelemetry import trace

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# `%03d` of a line's milliseconds, made once: the format spec cost ~2k of the ~7k instructions of a line's
# text. The last entry, "1000", is for a float product that rounds up to it, as `%03d` would print it.
MILLIS = tuple(f"{n:03d}" for n in range(1001))


class Every:
    """When a repeated line is due: the first time, then once the last one is `seconds` old."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._said: float | None = None  # when the last line was due (None: none yet, or reset)

    def due(self) -> bool:
        """True, counting the line as said now, when none was said yet or the last is `seconds` old."""
        now = self._clock()
        if self._said is not None and now - self._said < self.seconds:
            return False
        self._said = now
        return True

    def reset(self) -> None:
        """The condition ended: the next line is due at once."""
        self._said = None


def trace_ids() -> tuple[str, str]:
    """The current span's trace and span ids in hex ("" when no valid span is active)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)


class TraceIdFilter(logging.Filter):
    """Stamps every record with `trace_id` and `span_id` (empty strings outside a span)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id, record.span_id = trace_ids()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """logging's own `asctime`, the date and time part formatted once per second (the gateway logs
        every request): the same text as `logging.Formatter.formatTime`."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached, stamp = self._second
        if cached != second:
            stamp = time.strftime(self.default_time_format, self.converter(second))
            self._second = (second, stamp)
        msec_format = self.default_msec_format
        return msec_format % (stamp, record.msecs) if msec_format else stamp

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        trace_id = getattr(record, "trace_id", "")
        if trace_id:
            line += f" trace_id={trace_id} span_id={getattr(record, 'span_id', '')}"
        return line

    def line(self, created: float, level: str, name: str, message: str, trace_id: str = "", span_id: str = "") -> str:
        """What `format` writes for a record of these fields made at `created` (no exception, no stack)."""
        second = int(created)
        cached, stamp = self._second
        if cached != second:
            stamp = time.strftime(self.default_time_format, self.converter(second))
            self._second = (second, stamp)
        millis = int((created - second) * 1000)
        text = f"{stamp},{MILLIS[millis] if millis >= 0 else f'{millis:03d}'} {level} {name} {message}"
        return f"{text} trace_id={trace_id} span_id={span_id}" if trace_id else text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = _json_doc(
            record.created,
            record.levelname,
            record.name,
            record.getMessage(),
            getattr(record, "trace_id", ""),
            getattr(record, "span_id", ""),
        )
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=False, default=str)

    def line(self, created: float, level: str, name: str, message: str, trace_id: str = "", span_id: str = "") -> str:
        """What `format` writes for a record of these fields made at `created` (no exception, no stack)."""
        return json.dumps(_json_doc(created, level, name, message, trace_id, span_id), ensure_ascii=False)


def _json_doc(created: float, level: str, name: str, message: str, trace_id: str, span_id: str) -> dict[str, Any]:
    msecs = int((created - int(created)) * 1000)  # as LogRecord computes `msecs`
    doc: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{msecs:03d}Z",
        "level": level,
        "logger": name,
        "message": message,
    }
    if trace_id:
        doc["trace_id"] = trace_id
        doc["span_id"] = span_id
    return doc


class LogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The process's one handler (stderr unless told): the trace-id filter and a text or JSON formatter.

    `write_line` (a line without a record) written from an event loop's thread is held until the end of
    that loop turn and written with the others of the turn: one write and one flush per turn instead of one
    per line. A record handled meanwhile, `flush` and `close` write the held lines first, so lines keep
    their order; nothing is held when no loop runs on the writing thread."""

    def __init__(self, fmt: str, stream: TextIO | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        super().__init__(stream or sys.stderr)
        self._held: list[str] = []  # lines of this loop turn, not written yet (under self.lock)
        self._line: Callable[[float, str, str, str, str, str], str] | None = None  # the formatter's `line`
        self.addFilter(TraceIdFilter())
        self.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())

    def setFormatter(self, fmt: logging.Formatter | None) -> None:
        super().setFormatter(fmt)
        self._line = fmt.line if isinstance(fmt, TextFormatter | JsonFormatter) else None

    def write_line(self, name: str, level: int, message: str, created: float | None = None) -> None:
        """Writes what `handle` would write for a record of `name`, `level` and `message` made now (or at
        `created`), without making the record: the trace ids and the formatter's `line`."""
        line = self._line
        if line is None:  # not one of this module's formatters: a record, as `handle` would
            self.handle(logging.LogRecord(name, level, __file__, 0, message, (), None))
            return
        trace_id, span_id = trace_ids()
        when = time.time() if created is None else created
        text = line(when, logging.getLevelName(level), name, message, trace_id, span_id)
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self.lock:  # type: ignore[union-attr]  # made by Handler.__init__
            self._held.append(text)
            if loop is None:
                self._write_held()
            elif len(self._held) == 1:  # the turn's first line: write them all when the turn ends
                loop.call_soon(self.flush)

    def _write_held(self) -> None:
        """The held lines in one write, then the stream flushed (called under self.lock)."""
        lines, self._held = self._held, []
        if not lines:
            return
        try:
            self.stream.write(self.terminator.join(lines) + self.terminator)
            self.stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(logging.LogRecord("logs", logging.ERROR, __file__, 0, lines[0], (), None))

    def emit(self, record: logging.LogRecord) -> None:
        if self._held:  # called under self.lock by Handler.handle
            self._write_held()
        super().emit(record)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_held()
        super().flush()


def sole_handler(logger: logging.Logger, level: int) -> LogHandler | None:
    """The `LogHandler` a record of `logger` at `level` would reach, when it would reach that handler and
    nothing else, and nothing but the handler's own trace-id filter would see it first; else None (the
    record is not wanted, or other handlers, filters or formatters are in place: make a record)."""
    if logger.filters or not logger.isEnabledFor(level):
        return None
    found: logging.Handler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        for h in current.handlers:
            if found is not None:
                return None
            found = h
        if not current.propagate:
            break
        current = current.parent
    if type(found) is not LogHandler or level < found.level:
        return None
    filters = found.filters
    if len(filters) != 1 or type(filters[0]) is not TraceIdFilter:
        return None
    return found if type(found.formatter) in (TextFormatter, JsonFormatter) else None


def handler(fmt: str, stream: TextIO | None = None) -> LogHandler:
    """A stream handler (stderr by default) with the trace-id filter and the chosen format."""
    return LogHandler(fmt, stream)


def configure_logging(level: str, fmt: str = "text", stream: TextIO | None = None) -> None:
    """The process's logging: one handler on the root logger. Records do not look up the thread, process
    and multiprocessing names (neither format shows them; a record per request is cheaper without)."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(fmt, stream))
    root.setLevel(level.upper())
