"""Log lines: readable in a terminal (default) or one JSON object per line (`--log-format json`).

Both carry the trace and span ids of the span active where the record was made, when there is one:

    2026-11-22 14:03:05,120 INFO chain.node block 12 ... trace_id=4bf92f35... span_id=00f067aa...
    {"time": "2026-11-22T14:03:05.120Z", "level": "INFO", "logger": "chain.node", "message": "...",
     "trace_id": "4bf92f35...", "span_id": "00f067aa..."}

`configure_logging` replaces the root logger's handlers with one stderr handler; the ready line the
node and the gateway print on stdout stays as it is.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

from opentelemetry import trace

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


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


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace_id = getattr(record, "trace_id", "")
        if trace_id:
            doc["trace_id"] = trace_id
            doc["span_id"] = getattr(record, "span_id", "")
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def handler(fmt: str, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler (stderr by default) with the trace-id filter and the chosen format."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    out = logging.StreamHandler(stream or sys.stderr)
    out.addFilter(TraceIdFilter())
    out.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return out


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
