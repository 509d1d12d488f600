"""A command's verbs as a table: each row names a verb, says what it does, declares its arguments and the
function that runs it. The CLI and Slack read the same rows (bot/commands/grammar.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Verb:
    """One row: `trainbot NAME ...` runs `run` with what `arguments` parsed."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def add_verbs(commands: argparse._SubParsersAction, verbs: Iterable[Verb]) -> None:  # type: ignore[type-arg]
    """A subcommand for each row, in order; the parsed namespace's `handler` is the row's `run`."""
    for verb in verbs:
        parser = commands.add_parser(verb.name, help=verb.help)
        verb.arguments(parser)
        parser.set_defaults(handler=verb.run)
