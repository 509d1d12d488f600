"""`/train` and `/model` read their text with the CLI's own argument definitions: one grammar.

The text is split with shlex (never evaluated), parsed by argparse with the CLI's options, and held to
the verbs Slack offers. Who acts is the Slack user: `--as` and `--group` are the CLI's stand-ins and
are refused here. Mistakes raise BadRequest with the usage line, for an ephemeral reply.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from actions.errors import BadRequest
from bot.commands.jobs import parse_job_words

TRAIN_VERBS = ("launch", "sweep", "scale", "status", "logs", "cancel", "diagnose", "compare", "jobs", "help")
MODEL_VERBS = ("promote", "approve", "reject", "requests", "history", "rollback", "help")
# Slash-command text is at most a few thousand characters in Slack; anything past this is not a command.
MAX_TEXT = 4000
HELP_WORDS = ("", "help", "-h", "--help")
# Options of the CLI that Slack refuses, and why.
CLI_ONLY = {
    "--as": "in Slack you act as yourself; drop --as",
    "--group": "in Slack you act as yourself; drop --group",
    "--manifest": "a manifest is a file on your machine: run `trainbot launch --manifest FILE` in a terminal",
    "--backend": "Slack launches on the bot's backend (TRAINBOT_BACKEND); drop --backend",
    "--chart": "in Slack the chart is posted with the result; drop --chart",
    "-o": "in Slack the answer is a message; drop -o",
    "--output": "in Slack the answer is a message; drop --output",
}
CLI_ONLY_OPTIONS = re.compile(
    r"\[(-h|--as \S+|--group \S+|--manifest \S+|--backend \{[^}]*\}|--chart \S+|-o \{[^}]*\})\] ?"
)


class SlackParser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting: the bot answers in Slack."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # `--a bob` must not pass for `--as bob`: only whole option names.
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def error(self, message: str) -> NoReturn:
        raise BadRequest(f"{self.prog}: {message}\nusage: {_slack_usage(self)}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise BadRequest(message or f"see {self.prog.split()[0]} help")


@dataclass(frozen=True)
class Slash:
    """What a slash command brought: its text, who typed it, and where."""

    text: str
    user: str
    channel: str


@dataclass(frozen=True)
class Command:
    """A slash command's words, parsed: `verb` is one Slack offers, `args` what argparse made of the rest."""

    verb: str
    args: argparse.Namespace


@dataclass(frozen=True)
class Grammar:
    name: str  # "/train"
    verbs: tuple[str, ...]
    parser: SlackParser

    def parse(self, text: str) -> Command:
        if len(text) > MAX_TEXT:
            raise BadRequest(f"{self.name}: the text is {len(text)} characters; at most {MAX_TEXT} are read")
        try:
            words = shlex.split(text)
        except ValueError as error:
            raise BadRequest(f"{self.name}: {error} (close the quote)") from None
        if not words or words[0] in HELP_WORDS:
            return Command("help", argparse.Namespace())
        if words[0] not in self.verbs:
            raise BadRequest(f"{self.name} {words[0]}: unknown; {self.name} takes {', '.join(self.verbs)}")
        for word in words:
            if (refused := CLI_ONLY.get(_option(word))) is not None:
                raise BadRequest(f"{self.name}: {refused}")
        return Command(words[0], parse_job_words(self.parser, words))

    def usage(self) -> list[tuple[str, str]]:
        """(verb usage, what it does) for each verb Slack offers, from the parser's own help."""
        verbs = _verbs(self.parser)
        summaries = {choice.dest: choice.help or "" for choice in verbs._choices_actions}
        return [
            (_slack_usage(verbs.choices[verb]), summaries.get(verb, "")) for verb in self.verbs if verb in verbs.choices
        ]


def grammar(name: str, verbs: Sequence[str], *adders: Callable[[argparse._SubParsersAction], None]) -> Grammar:  # type: ignore[type-arg]
    parser = SlackParser(prog=name, add_help=False)
    commands = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for add in adders:
        add(commands)
    return Grammar(name, tuple(verbs), parser)


def _option(word: str) -> str:
    """The option a word names, as argparse reads it: `--as=bob` names --as, `-ojson` names -o, and a word with a
    space names none (argparse takes it as a value)."""
    if " " in word:
        return ""
    if word.startswith("-") and not word.startswith("--"):
        return word[:2]
    return word.split("=", 1)[0]


def _slack_usage(parser: argparse.ArgumentParser) -> str:
    """The usage line without what Slack does not take (help, acting as someone, output formats)."""
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    return CLI_ONLY_OPTIONS.sub("", usage).strip()


def _verbs(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
