"""Command-line flags that are also environment variables, for every console command of the project.

    parser = argparse.ArgumentParser(...)            # flags as usual, each with a help text
    describe_env(parser, "CHAIN_NODE_", lists={"cors_origins"})   # help: "(default: X; env: NAME)"
    add_version(parser)                              # --version: "chain-node 0.1.0"
    env_defaults(parser, "CHAIN_NODE_", os.environ, lists={"cors_origins"})
    ns = parser.parse_args(argv)                     # a flag given on the command line wins

`--grpc-addr` is read from `CHAIN_NODE_GRPC_ADDR` (the prefix, then the flag's first spelling in upper
case, dashes to underscores). A repeatable flag named in `lists` takes a comma-separated list; an on/off
flag (`store_true` or `store_false`) takes 1/true/yes/on or 0/false/no/off: on is as if the flag were
given (`CHAIN_NODE_NO_X=1` does what `--no-x` does), off as if it were not. A value is converted and checked
as argparse would check the flag (its `type` and `choices`), and a bad one stops the command with a usage
error naming the variable, never a traceback.

`describe_env` appends the flag's built-in default and its variable to every flag's help, so `--help`
documents the environment too; it shows the default the program was built with, not one a variable set.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import PurePath
from typing import Any

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})
NOT_FROM_ENV = frozenset({"help", "version"})


def env_name(prefix: str, action: argparse.Action) -> str:
    return prefix + action.option_strings[0].lstrip("-").replace("-", "_").upper()


def env_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's flags that an environment variable can set (every option but --help and --version)."""
    return [a for a in parser._actions if a.option_strings and a.dest not in NOT_FROM_ENV]


def is_switch(action: argparse.Action) -> bool:
    """An on/off flag: `store_true` or `store_false` (it takes no value on the command line)."""
    return action.nargs == 0 and isinstance(action.const, bool)


def switch_given(action: argparse.Action) -> bool:
    """Whether a switch is on by default: its default is what giving it sets (`store_false` defaults to off)."""
    return bool(action.default == action.const)


def env_defaults(
    parser: argparse.ArgumentParser, prefix: str, env: Mapping[str, str], *, lists: Collection[str] = ()
) -> None:
    """Set the parser's defaults from the environment (see the module doc)."""
    defaults: dict[str, object] = {}
    for action in env_actions(parser):
        name = env_name(prefix, action)
        if name not in env:
            continue
        raw = env[name]
        if action.dest in lists:
            defaults[action.dest] = [v.strip() for v in raw.split(",") if v.strip()]
        elif is_switch(action):  # on: the flag's own value (`const`), as if it were given
            defaults[action.dest] = action.const if _switch(parser, name, raw) else not action.const
        else:
            defaults[action.dest] = _value(parser, action, name, raw)
    parser.set_defaults(**defaults)


def _switch(parser: argparse.ArgumentParser, name: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    parser.error(f"{name}={raw!r}: choose from 1, true, yes, on, 0, false, no, off")


def _value(parser: argparse.ArgumentParser, action: argparse.Action, name: str, raw: str) -> object:
    try:
        value = action.type(raw) if callable(action.type) else raw
    except (TypeError, ValueError) as err:
        parser.error(f"{name}={raw!r}: {err}")
    if action.choices is not None and value not in action.choices:
        parser.error(f"{name}={raw!r}: choose from {', '.join(map(str, action.choices))}")
    return value


def describe_env(
    parser: argparse.ArgumentParser,
    prefix: str,
    *,
    lists: Collection[str] = (),
    shown: Mapping[str, str] | None = None,
) -> None:
    """Append `(default: X; env: NAME)` to the help of every flag an environment variable can set.

    `shown` gives the text of a default the parser cannot hold itself (a repeatable flag whose default
    list is applied after parsing, a path derived from another flag). Run it when the parser is built,
    before `env_defaults`, so the help shows the built-in default. Also sets the help formatter (no line
    break inside a value) unless the parser has its own, and, unless it has one, an epilog that says what
    the variables do.
    """
    shown = shown or {}
    for action in env_actions(parser):
        default = shown.get(action.dest)
        if default is None:
            default = default_text(
                switch_given(action) if is_switch(action) else action.default, switch=is_switch(action)
            )
        kind = ", comma-separated" if action.dest in lists else ", 1 or 0" if is_switch(action) else ""
        note = f"(default: {default}; env: {env_name(prefix, action)}{kind})".replace("%", "%%")
        text = (action.help or "").strip()
        action.help = f"{text} {note}" if text else note
    if parser.formatter_class is argparse.HelpFormatter:  # a parser's own formatter is kept
        parser.formatter_class = HelpFormatter
    if parser.epilog is None:
        parser.epilog = (
            f"Every flag can also be set by the environment variable named in its help ({prefix}...); "
            "a flag given on the command line wins."
        )


def default_text(value: Any, *, switch: bool = False) -> str:
    """How `--help` shows a default: `none` for no value, `on`/`off` for a switch, else the value."""
    if switch:
        return "on" if value else "off"
    if value is None or value == "" or (isinstance(value, Sequence | frozenset | set) and not value):
        return "none"
    if isinstance(value, PurePath | str | int | float):
        return str(value)
    if isinstance(value, Sequence | frozenset | set):
        return ",".join(map(str, value))
    return str(value)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a line of help never breaks inside a word or at a hyphen (an address, a
    URL or a variable name stays whole, so it can be copied)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        )


def add_version(parser: argparse.ArgumentParser, distribution: str = "chain-node") -> None:
    """`--version`: print `PROG VERSION` (the installed package's version) and exit 0. The package
    metadata is read only when the flag is given, so a command's start-up does not pay for it."""
    parser.add_argument("--version", action=_Version, distribution=distribution, help="print the version and exit")


def package_version(distribution: str) -> str:
    from importlib import metadata  # only for --version

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, *, distribution: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.distribution = distribution

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {package_version(self.distribution)}")
        parser.exit()
