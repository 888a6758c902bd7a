"""bench_rest's instruction count (`--instructions`): the bare app runs as its own command (so valgrind can
run it) and answers as the in-process bare app does, and a real callgrind run's output is read back as a
count. Nothing here times anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aiohttp

from bench.bench_rest import callgrind, counted, gets
from tests.fixtures.nodeproc import ROOT


async def test_the_bare_command_answers_each_path_with_its_body_and_stops_at_stdin_s_end(tmp_path: Path):
    bodies = {"0xaa": b'{"owner":"0xaa"}', "0xbb": b'{"owner":"0xbb"}'}
    (tmp_path / "bodies.json").write_text(json.dumps({k: v.hex() for k, v in bodies.items()}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_rest", "--serve-bare", str(tmp_path / "bodies.json")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        port = json.loads(proc.stdout.readline())["http_port"]
        async with aiohttp.ClientSession() as s:
            for owner, body in bodies.items():
                async with s.get(f"http://127.0.0.1:{port}/v1/accounts/{owner}") as r:
                    assert r.status == 200 and await r.read() == body
            async with s.get(f"http://127.0.0.1:{port}/v1/accounts/0xcc") as r:
                assert r.status == 404
        await gets(port, [f"/v1/accounts/{owner}" for owner in bodies], 40)  # the counted load's client
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()


def test_a_callgrind_count_is_read_back(tmp_path: Path):
    out = tmp_path / "run.callgrind"
    # counting on from the start here (the bench turns it on with callgrind_control once warmed up)
    cmd = [*callgrind(out), "--instr-atstart=yes", sys.executable, "-S", "-c", "sum(range(100000))"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    assert counted(out) > 1_000_000  # the interpreter's start and the loop: millions of instructions
