"""chainctl's argument parser and numeric argument types: a usage error is one line with its code, and a
number out of its range is a usage error when the command line is parsed, before anything runs.

Standard library only: node.cli.main and node.cli.commands (all ``chainctl --help`` loads) use it.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import NoReturn

USAGE_EXIT = 2
USAGE_REASON = "INVALID_ARGUMENT"  # node.errors.CliCode.INVALID_ARGUMENT
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
MAX_PAGE_SIZE = 200  # node.constants.MAX_PAGE_SIZE (tests/node/cli/test_cli_parser.py compares them)


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``error: INVALID_ARGUMENT: chainctl CMD: what; see ... --help``,
    exit 2. Subcommand parsers are of the same class (argparse makes them with ``type(parent)``)."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(USAGE_EXIT, f"error: {USAGE_REASON}: {self.prog}: {text}; see `{self.prog} --help`\n")


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a decimal integer in ``low..high``."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range {low}-{high}")
        return value

    parse.__name__ = f"integer {low}-{high}"
    return parse


def seconds(*, allow_zero: bool) -> Callable[[str], float]:
    """An argument type: a finite number of seconds, above zero (or zero too with ``allow_zero``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            bound = "0 or more" if allow_zero else "more than 0"
            raise argparse.ArgumentTypeError(f"{text} seconds: must be {bound}")
        return value

    parse.__name__ = "seconds"
    return parse


def unix_time(text: str) -> int:
    """An argument type: unix seconds (``0``: never), or ``+SECONDS`` from now; a uint64 either way."""
    relative = text.startswith("+")
    try:
        value = int(text.removeprefix("+"), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not unix seconds or +SECONDS") from None
    if relative:
        value += int(time.time())
    if not 0 <= value <= UINT64_MAX:
        raise argparse.ArgumentTypeError(f"{text} is out of range 0-{UINT64_MAX} (unix seconds)")
    return value


unix_time.__name__ = "unix seconds"
