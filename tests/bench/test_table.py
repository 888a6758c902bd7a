"""The table of goals of `make bench` (bench/table.py, bench/__main__.py): rows handed in by modules running
as subprocesses come back as one table with every goal, pass/fail against the goal, and "not measured"
for a goal nobody measured. Fake modules and fake figures: nothing here times anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench.table import GOALS, ROWS_ENV, Bound, Goal, Row, emit, read_rows, render
from bench.table import main as table_main

# The "measure" column of the goals as they were set (the GetAccount / GetProject row is two goals here).
ISSUE_ROWS = {
    "committed msgs/s ÷ one-core Ed25519 verify/s (`cryptography`)": ["ingest_ratio"],
    "node CPU per committed message, in Ed25519 verifies": ["cpu_per_message"],
    "GetAccount / GetProject QPS ÷ bare single-process grpc.aio echo": ["get_account_ratio", "get_project_ratio"],
    "GetOperationProof QPS ÷ the same echo": ["operation_proof_ratio"],
    "REST GET `/v1/accounts/{addr}` ÷ bare aiohttp serving the same JSON": ["rest_ratio"],
    "10,000 SSE clients on one gateway, block commit → client p99 (4-process load client, gateway-bound)": ["sse_p99"],
    "3 replicated nodes ÷ solo, committed msgs/s": ["replicated_ratio"],
    "chain-node start → SERVING, empty store, idle machine": ["start_serving"],
}
ISSUE_GOALS = {"≥ 0.75": "ingest_ratio", "≤ 2.0": "cpu_per_message", "≥ 0.35": "rest_ratio"}
# What TLS on every hop may cost, beside the first goals: each TLS figure ÷ the same node in plaintext.
TLS_GOALS = {"tls_ingest_ratio": "≥ 0.9", "tls_reads_ratio": "≥ 0.9"}
# Followers applying the leader's write sets: their CPU against the leader's, and what the etcd log holds.
WRITE_SET_GOALS = {"follower_cpu_ratio": "≤ 0.25", "log_bytes_per_message": "≤ 2048.0"}
# A client waiting for its commit under load: p99 at 50% of the saturated rate, in block intervals.
COMMIT_GOALS = {"commit_p99_solo": "≤ 3.0", "commit_p99_replicated": "≤ 3.0"}

FAKE = (
    Goal("fast", "a rate ÷ its baseline", 0.5, Bound.AT_LEAST, "", "bench.fake_a", "0.1"),
    Goal("slow", "a latency", 250.0, Bound.AT_MOST, "ms", "bench.fake_a", "400 ms"),
    Goal("absent", "a figure nobody measured", 1.0, Bound.AT_LEAST, "", "bench.fake_b", "(measure)"),
    Goal("absent_too", "a figure under a lighter load", 1.0, Bound.AT_LEAST, "", "bench.fake_a", "0.2"),
)


def table_lines(text: str) -> dict[str, list[str]]:
    """The rendered table's body, by measure: its cells."""
    out = {}
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[cells[0]] = cells
    return out


def test_rows_emitted_to_the_file_come_back_with_pass_fail_and_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows_file = tmp_path / "rows.jsonl"
    monkeypatch.setenv(ROWS_ENV, str(rows_file))
    emit(Row("fast", 0.9, "9 ÷ 10"), FAKE)
    emit(Row("absent_too", 0.1, smaller_load=True), FAKE)
    emit(Row("slow", 100.0, "first try"), FAKE)
    emit(Row("slow", 300.0, "second try"), FAKE)  # the later row for a key replaces the earlier
    rows = read_rows(rows_file)
    assert set(rows) == {"fast", "slow", "absent_too"}
    table = table_lines(render(rows, FAKE, {"bench.fake_b": "bench.fake_b is not merged yet"}))
    assert list(table) == [g.measure for g in FAKE]  # every goal, in order
    assert table["a rate ÷ its baseline"][1:4] == ["0.900", "≥ 0.5", "pass"]
    assert table["a latency"][1:4] == ["300 ms", "≤ 250 ms", "fail"]
    assert "second try" in table["a latency"][4]
    assert table["a figure nobody measured"][3] == "not measured"
    assert "not merged yet" in table["a figure nobody measured"][4]
    assert table["a figure under a lighter load"][3] == "fail (smaller load than the goal's)"


def test_emit_refuses_a_key_that_is_no_goal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ROWS_ENV, str(tmp_path / "rows.jsonl"))
    with pytest.raises(KeyError):
        emit(Row("no_such_goal", 1.0), FAKE)
    assert not (tmp_path / "rows.jsonl").exists()


def test_run_all_collects_rows_from_module_subprocesses_and_names_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "fakebench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("from bench.table import Row, emit\nemit(Row('start_serving', 1.5, 'fake figure'))\n")
    (pkg / "bad.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{Path(bench_main.__file__).parents[1]}")
    runs = [
        bench_main.Run("fakebench.good"),
        bench_main.Run("fakebench.bad"),
        bench_main.Run("fakebench.not_there"),
        bench_main.Run("fakebench.needy", needs=("no-such-load-generator",)),
    ]
    ran = tmp_path / "needy-ran"
    (pkg / "needy.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    rows_file = tmp_path / "rows.jsonl"
    missing = bench_main.run_all(runs, False, rows_file)
    assert missing == {
        "fakebench.bad": "fakebench.bad failed (exit 3)",
        "fakebench.not_there": "fakebench.not_there is not merged yet",
        "fakebench.needy": "fakebench.needy needs no-such-load-generator, not installed (`make bench` installs it)",
    }
    assert not ran.exists()  # skipped before it started, not failed minutes into the run
    table = table_lines(render(read_rows(rows_file), GOALS, missing))
    assert table["chain-node start → SERVING, empty store, idle machine"][1:4] == ["1.50 s", "≤ 2 s", "pass"]
    assert len(table) == len(GOALS)
    assert sum(cells[3] == "not measured" for cells in table.values()) == len(GOALS) - 1


def test_every_row_of_the_issue_table_is_a_registered_goal() -> None:
    keys = {g.key for g in GOALS}
    for measure, wanted in ISSUE_ROWS.items():
        assert set(wanted) <= keys, measure
    extra = [*TLS_GOALS, *COMMIT_GOALS, *WRITE_SET_GOALS]
    assert sorted([k for ks in ISSUE_ROWS.values() for k in ks] + extra) == sorted(keys)  # and no other
    others = {**TLS_GOALS, **COMMIT_GOALS, **WRITE_SET_GOALS}
    for target, key in [*ISSUE_GOALS.items(), *((t, k) for k, t in others.items())]:
        goal = next(g for g in GOALS if g.key == key)
        assert f"{goal.bound} {goal.goal}" == target


def test_every_goal_is_run_by_make_bench_and_emitted_by_its_module() -> None:
    run_modules = {r.module for r in bench_main.RUNS}
    root = Path(bench_main.__file__).parent
    for goal in GOALS:
        assert goal.module in run_modules, goal.key
        source = root / f"{goal.module.removeprefix('bench.')}.py"
        if source.exists():  # a module not merged yet prints "not measured"
            text = source.read_text()  # the row built with its key, or the key in a table the module emits from
            assert re.search(rf"Row\(\s*\"{goal.key}\"", text) or (
                f'"{goal.key}"' in text and re.search(r"emit\(Row\(", text)
            ), (goal.key, goal.module)


# The programs a bench module runs, how its source names them, and the Debian package `make bench` installs.
PROGRAMS = {
    "etcd": ("tests.fixtures.etcdproc", "etcd-server"),
    "h2load": ("h2load", "nghttp2-client"),
    "wrk": ('"wrk"', "wrk"),
}


def test_every_program_a_module_runs_is_a_need_that_make_bench_installs() -> None:
    """A fresh machine's `make bench` installs what each module runs, and `python -m bench` alone names it
    missing before the run instead of the module failing in it (etcd was once missing from both)."""
    root = Path(bench_main.__file__).parent
    makefile = (root.parent / "Makefile").read_text()
    packages = re.search(r"^BENCH_DEB_PACKAGES \?= (.*)$", makefile, re.MULTILINE)
    assert packages, "the Makefile names no BENCH_DEB_PACKAGES"
    for run in bench_main.RUNS:
        text = (root / f"{run.module.removeprefix('bench.')}.py").read_text()
        for program, (named, package) in PROGRAMS.items():
            if named in text:
                assert program in run.needs, (run.module, program)
                assert package in packages.group(1).split(), (program, package)
        for program in run.needs:  # and nothing it does not run (a module skipped for nothing)
            assert program in PROGRAMS and PROGRAMS[program][0] in text, (run.module, program)


def test_the_rows_file_prints_as_a_table_on_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text('{"key": "rest_ratio", "value": 0.2, "detail": "kept from a run"}\n')
    table_main([str(rows_file)])
    out = capsys.readouterr().out
    assert "kept from a run" in out
    assert out.count("not measured") == len(GOALS) - 1


def test_a_figure_never_prints_as_the_other_verdict() -> None:
    ratio, latency = FAKE[0], FAKE[1]
    assert ratio.format(0.61234) == "0.612" and latency.format(231.6) == "232 ms"  # the usual digits
    assert ratio.format(0.49968) == "0.4997" and not ratio.passes(0.49968)  # not "0.500", read as a pass
    assert ratio.format(0.5) == "0.500" and ratio.passes(0.5)
    assert latency.format(250.4) == "250.4 ms" and not latency.passes(250.4)  # not "250 ms"
    assert latency.format(249.6) == "250 ms" and latency.passes(249.6)  # "250" against "≤ 250" reads as the pass it is
