"""Log lines: text by default, JSON with --log-format json; trace and span ids while a span is active."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from node.observability.logs import TEXT_FORMAT, TextFormatter, configure_logging, handler
from node.server.config import parse_config
from tests.fixtures.nodeproc import NodeProcess


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    flags = (logging.logThreads, logging.logProcesses, logging.logMultiprocessing)
    yield
    logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved:
        root.addHandler(h)
    root.setLevel(level)


def test_json_lines_carry_the_active_span(root_handlers: None):
    out = io.StringIO()
    configure_logging("info", "json", out)
    log = logging.getLogger("chain.test")
    tracer = TracerProvider().get_tracer("test")
    log.info("outside %d", 1)
    with tracer.start_as_current_span("work") as span:
        log.warning("inside %s", "a span")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    first, second, third = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["message"] == "outside 1" and first["level"] == "INFO" and first["logger"] == "chain.test"
    assert "trace_id" not in first and first["time"].endswith("Z")
    context = span.get_span_context()
    assert second["trace_id"] == trace.format_trace_id(context.trace_id)
    assert second["span_id"] == trace.format_span_id(context.span_id)
    assert second["message"] == "inside a span" and second["level"] == "WARNING"
    assert third["trace_id"] == second["trace_id"] and "ValueError: boom" in third["exception"]


def test_text_lines_are_readable_and_add_ids_in_a_span(root_handlers: None):
    out = io.StringIO()
    configure_logging("debug", "text", out)
    log = logging.getLogger("chain.test")
    log.debug("plain")
    with TracerProvider().get_tracer("test").start_as_current_span("work") as span:
        log.info("traced")
    plain, traced = out.getvalue().splitlines()
    assert plain.endswith(" DEBUG chain.test plain")
    trace_id = trace.format_trace_id(span.get_span_context().trace_id)
    assert " INFO chain.test traced trace_id=" + trace_id in traced


def test_text_time_stamps_equal_loggings_own(root_handlers: None):
    """The per-second cache of `asctime` writes what logging.Formatter writes, across second boundaries."""
    configure_logging("info", "text", io.StringIO())
    ours, theirs = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    start = time.time()
    for offset in (0.0, 0.0004, 0.5, 0.999, 1.0, 1.001, 59.9994, 3600.25, -86400.75, 0.5):
        record = logging.LogRecord("chain.test", logging.INFO, __file__, 1, "line %d", (7,), None)
        record.created = start + offset
        record.msecs = int((record.created - int(record.created)) * 1000) + 0.0
        assert ours.format(record) == theirs.format(record)
        assert ours.formatTime(record, "%H:%M") == theirs.formatTime(record, "%H:%M")


def test_bad_format_is_refused():
    with pytest.raises(ValueError, match="log format"):
        handler("xml")
    with pytest.raises(SystemExit):
        parse_config(["--log-format", "xml"], env={})
    assert parse_config([], env={"CHAIN_NODE_LOG_FORMAT": "json"}).log_format == "json"


def test_node_writes_json_logs(tmp_path: Path):
    node = NodeProcess(tmp_path / "node", "--log-format", "json", "--web-addr", "").start()
    node.stop()
    deadline = time.monotonic() + 5  # the reader thread may still hold the last lines
    while not any('"draining"' in line for line in node.stderr_lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    records = [json.loads(line) for line in node.stderr_lines if line.startswith("{")]
    assert any(r["logger"] == "chain.node" and r["message"] == "draining" for r in records), node.stderr_lines
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
