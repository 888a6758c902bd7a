"""Deferred entry points: the one sanctioned way for a command-line entry to load a module only when the
command that needs it runs.

Start-up matters (`chainctl --help` answers in a bare interpreter's time, `chain-node` reaches SERVING
sooner, a spawned verify worker re-imports only the light entry module): so each program's entry module
(``node.cli.main`` with ``node.cli.commands``, ``node.server.main``, ``gateway.main``) imports only the
standard library and its own argument parser, and names the module that does the work as
``lazy(module, function)``; the heavy module imports its dependencies at its top like any other module.
Ruff's PLC0415 (no function-level imports) stays on everywhere; `importlib` here is the single place an
import is deferred (besides the two per-file exceptions in pyproject.toml, tracing exporters and
``--version``'s metadata). tests/test_startup_imports.py fails when a help screen imports a heavy module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class lazy:
    """A function named by module and attribute, imported when first called."""

    module: str
    function: str

    def resolve(self) -> Callable[..., Any]:
        handler: Callable[..., Any] = getattr(importlib.import_module(self.module), self.function)
        return handler

    def __call__(self, *args: Any) -> Any:
        return self.resolve()(*args)
