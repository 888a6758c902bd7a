"""Log lines: text by default, JSON with --log-format json; trace and span ids while a span is active."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from node.observability.logs import TEXT_FORMAT, Every, TextFormatter, configure_logging, handler, sole_handler
from node.server.config import parse_config
from tests.fixtures.nodeproc import NodeProcess


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


def _record(name: str, level: int, message: str, created: float) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, message, (), None)
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0  # as LogRecord computes it
    return record


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_line_without_a_record_is_what_the_record_would_have_been(fmt: str):
    """`write_line` writes, byte for byte, what handling a record of the same fields writes: inside and
    outside a span, across second and millisecond boundaries and before 1970, with `%` and non-ASCII text in
    the message."""
    by_record, by_line = io.StringIO(), io.StringIO()
    record_side, line_side = handler(fmt, by_record), handler(fmt, by_line)
    start = time.time()
    tracer = TracerProvider().get_tracer("test")
    messages = ['127.0.0.1 [x] "GET /v1/a?q=%20 HTTP/1.1" 200 5 "-" "probe/1.0 (é)"', "100% done", ""]
    before_1970 = -start - 86400.75  # a negative time: its milliseconds print as `%03d` prints them
    for n, offset in enumerate((0.0, 0.0004, 0.5, 0.999, 1.0, 1.001, 59.9994, 3600.25, -86400.75, before_1970)):
        message = messages[n % len(messages)]
        for level in (logging.INFO, logging.WARNING):
            record_side.handle(_record("aiohttp.access", level, message, start + offset))
            line_side.write_line("aiohttp.access", level, message, created=start + offset)
            with tracer.start_as_current_span("work"):
                record_side.handle(_record("chain.test", level, message, start + offset))
                line_side.write_line("chain.test", level, message, created=start + offset)
    assert by_line.getvalue() == by_record.getvalue()
    assert by_line.getvalue().count("\n") == 40 and "trace_id" in by_line.getvalue()


def test_lines_of_a_loop_turn_are_written_together_and_in_order():
    out = io.StringIO()
    h = handler("text", out)
    log = logging.getLogger("chain.test.order")
    log.propagate, log.level = False, logging.INFO
    log.addHandler(h)
    writes: list[str] = []
    real_write = out.write

    def write(text: str) -> int:
        writes.append(text)
        return real_write(text)

    out.write = write  # type: ignore[method-assign]

    async def turn() -> None:
        h.write_line("a", logging.INFO, "one")
        h.write_line("a", logging.INFO, "two")
        assert out.getvalue() == ""  # held until the turn ends
        await asyncio.sleep(0)
        assert len(writes) == 1 and [line.split(" ", 3)[3] for line in out.getvalue().splitlines()] == [
            "a one",
            "a two",
        ]
        h.write_line("a", logging.INFO, "three")
        log.warning("a record")  # writes what is held first
        h.write_line("a", logging.INFO, "four")
        h.flush()  # so does a flush (and close, at exit)

    try:
        asyncio.run(turn())
    finally:
        log.removeHandler(h)
    assert [line.split(" ", 3)[3] for line in out.getvalue().splitlines()] == [
        "a one",
        "a two",
        "a three",
        "chain.test.order a record",
        "a four",
    ]
    h.write_line("a", logging.INFO, "five")  # no loop on this thread: written at once
    assert out.getvalue().endswith(" INFO a five\n")


def test_sole_handler_only_when_nothing_else_would_see_the_record(root_handlers: None):
    """A line may skip its record only when the record would reach the one handler configure_logging
    installed and nothing else; every other set-up answers None (make a record)."""
    configure_logging("info", "text", io.StringIO())
    log = logging.getLogger("chain.test.sole")
    (installed,) = logging.getLogger().handlers
    assert sole_handler(log, logging.INFO) is installed
    assert sole_handler(log, logging.DEBUG) is None  # below the root's level: no record at all
    other = logging.StreamHandler(io.StringIO())
    for undo, change in (
        (lambda: logging.getLogger().removeHandler(other), lambda: logging.getLogger().addHandler(other)),
        (lambda: log.removeHandler(other), lambda: log.addHandler(other)),
        (lambda: log.removeFilter(_deny), lambda: log.addFilter(_deny)),
        (lambda: installed.setLevel(logging.NOTSET), lambda: installed.setLevel(logging.WARNING)),
        (lambda: installed.removeFilter(_deny), lambda: installed.addFilter(_deny)),
        (lambda: installed.setFormatter(TextFormatter()), lambda: installed.setFormatter(logging.Formatter())),
        (lambda: setattr(log, "propagate", True), lambda: setattr(log, "propagate", False)),
        (lambda: setattr(log, "disabled", False), lambda: setattr(log, "disabled", True)),
        (lambda: logging.disable(logging.NOTSET), lambda: logging.disable(logging.INFO)),
    ):
        change()
        try:
            assert sole_handler(log, logging.INFO) is None
        finally:
            undo()
        assert sole_handler(log, logging.INFO) is installed


def _deny(record: logging.LogRecord) -> bool:
    return False


class _FullDisk(io.StringIO):
    """A stream whose writes fail as a full disk's do (the first `failures` of them)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def write(self, text: str) -> int:
        if self.failures:
            self.failures -= 1
            raise OSError(28, "No space left on device")
        return super().write(text)


def test_a_failed_write_of_held_lines_is_reported_not_raised(capsys: pytest.CaptureFixture[str]):
    """As StreamHandler.emit: a write that fails goes to handleError (a report on stderr) and the caller
    goes on; the next turn's lines are written once the stream takes writes again."""
    out = _FullDisk(failures=1)
    h = handler("text", out)

    async def turns() -> None:
        h.write_line("a", logging.INFO, "lost")
        await asyncio.sleep(0)  # the turn's write fails: reported, not raised into the loop
        h.write_line("a", logging.INFO, "kept")
        await asyncio.sleep(0)

    asyncio.run(turns())
    assert "No space left on device" in capsys.readouterr().err
    assert [line.split(" ", 3)[3] for line in out.getvalue().splitlines()] == ["a kept"]
    out.failures = 1
    h.write_line("a", logging.INFO, "no loop")  # written at once, and failing the same way
    assert "No space left on device" in capsys.readouterr().err


def test_a_lasting_condition_is_said_first_then_once_per_period_and_at_once_after_a_reset():
    now = [1.0]  # a clock that starts near zero: the first line is still due (no "last line at 0" assumed)
    line = Every(5.0, clock=lambda: now[0])
    said = []
    for t in (1.0, 2.0, 5.9, 6.0, 6.5, 10.9, 11.0):
        now[0] = t
        said.append(line.due())
    assert said == [True, False, False, True, False, False, True]  # due again once the last is 5 s old
    now[0] = 12.0
    assert not line.due()
    line.reset()  # the condition ended; when it comes back it is news
    assert line.due()
    assert not line.due()
