"""`trainbot console`: Slack in a terminal, for one machine. The real Bolt app, served on loopback, gets
requests signed as Slack signs them; its Web API calls go to the local Slack (bot/console/local_slack.py), and the
console prints them (bot/console/view.py). Everything behind the bot is the real thing: Ray, MLflow and
the state store of the settings.

Lines: `/train ...` and `/model ...` as in Slack; `click N` presses button N; `as NAME` switches who is
typing, `--as NAME LINE` types one line as NAME; `wait TEXT [SECONDS]` waits until the bot says TEXT;
`help`; `quit`. After a modal opens, the next line is what is typed into it, unless it is one of these commands:
then the modal closes and the command runs. People are shown by name (@bob); Slack sees their user ids.
"""

from __future__ import annotations

import re
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.patch_stdout import patch_stdout

from actions.errors import BadRequest
from actions.people import People
from actions.settings import Settings
from bot.console.local_slack import (
    Call,
    LocalSlack,
    button_click_body,
    local_slack,
    post_signed,
    slash_command_body,
    view_submission_body,
)
from bot.console.logs import logging_to
from bot.console.view import ConsoleView, plain_text
from bot.http.server import serving_locally
from bot.render.blocks import SLACK_USER
from bot.services import Services
from bot.web.app import start_everything

CHANNEL = "C0CONSOLE"
BOT_TOKEN = "xoxb-console"
# How long the bot must be quiet before the next line is read, and the longest a line waits for an answer.
QUIET_S = 1.0
ANSWER_S = 30.0
WAIT_S = 900.0
HELP = (
    "Type /train help or /model help. `click N` presses button N; `as NAME` switches who is typing "
    "(`--as NAME LINE` for one line); `wait TEXT [SECONDS]` waits until the bot says TEXT; `quit` leaves."
)
CONSOLE_USERS = ("alice", "bob", "carol")
# A line that is one of the console's commands, which never answers an open modal.
COMMAND_LINE = re.compile(r"/|--as |(?:click|wait) \S|as \S+$|(?:quit|exit|help)$")
# With no promotion config, the console names approvers so that promoting works out of the box.
CONSOLE_PROMOTION = {
    "targets": {
        "staging": {"approvers": ["bob"]},
        "production": {"approvers": ["bob", "carol"], "approvals": 2},
    }
}


def user_id(name: str) -> str:
    """A Slack-like user id for a console name ("bob" -> UBOB); a Slack id stays as it is."""
    if SLACK_USER.fullmatch(name):
        return name
    letters = re.sub(r"[^A-Z0-9]", "", name.upper())[:20]
    if len(letters) < 2:
        raise BadRequest(f"{name!r}: give a name of letters and digits, e.g. bob")
    return f"U{letters}"


def console_settings(settings: Settings, slack: LocalSlack) -> Settings:
    """The settings, pointed at the local Slack; launching allowed in the console's channel and approvers
    named when the config says nothing of them."""
    commands = dict(settings.slack_commands)
    for verb in ("launch", "sweep"):
        commands.setdefault(verb, {"channels": [CHANNEL]})
    return Settings(
        **{
            **settings.model_dump(),
            "slack_bot_token": BOT_TOKEN,
            "slack_signing_secret": secrets.token_hex(16),
            "slack_api_url": slack.api_url,
            "slack_commands": commands,
            "promotion": settings.promotion or CONSOLE_PROMOTION,
            "alerts_channel": settings.alerts_channel or CHANNEL,
        }
    )


@dataclass
class Console:
    slack: LocalSlack
    bot_url: str
    secret: str
    user: str
    out: TextIO
    files_dir: Path
    people: People
    view: ConsoleView = field(init=False)
    said: list[str] = field(default_factory=list)  # every line printed, for `wait`
    modal: dict[str, Any] | None = None
    modal_user: str = ""
    gave_up: bool = False  # a `wait` ran out of time: a script has failed
    sent_at: int = 0  # how much had been said when the last request went to the bot
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.view = ConsoleView(self.people)
        for name in (*CONSOLE_USERS, self.user):
            self._named(name)
        self.slack.listeners.append(self.show)

    def show(self, call: Call) -> None:
        if call.method == "views.open":  # the modal is the clicker's: they type into it next
            self.modal, self.modal_user = call.params.get("view"), self.user
        lines = self.view.lines(call)
        if call.method == "files.completeUploadExternal":
            lines = [self._saved(shared) for shared in call.answer.get("files", [])]
        self.print(*lines)

    def print(self, *lines: str, heard: bool = True) -> None:
        """Print lines; those `heard` (what the bot and the console said, not the echo) count for `wait`."""
        with self._lock:
            for line in lines:
                print(line, file=self.out, flush=True)
                if heard:
                    self.said.append(line)

    def line(self, text: str) -> bool:
        """Act on one typed line; False when the console should end."""
        text = text.strip()
        if text.startswith("#"):  # a comment, in a script
            return True
        if self.modal is not None and not COMMAND_LINE.match(text):
            self._submit_modal(text)
            return True
        if self.modal is not None:  # a command is never a modal's answer: the modal closes, the command runs
            self.print(f"(the {plain_text(self.modal.get('title'))} modal is closed; {text!r} runs as a command)")
            self.modal = None
        return self._command(text)

    def _command(self, text: str) -> bool:
        if not text:
            return True
        if text in ("quit", "exit"):
            return False
        if text == "help":
            self.print(HELP)
        elif text.startswith("--as "):
            _, name, rest = [*text.split(maxsplit=2), ""][:3]
            typed_by, self.user = self.user, self._named(name)
            try:
                return self.line(rest)
            finally:
                self.user = typed_by
        elif text.startswith("as "):
            self.user = self._named(text.removeprefix("as ").strip())
            self.print(f"(you are {self.user} now)")
        elif text.startswith("click "):
            self._click(text.removeprefix("click ").strip())
        elif text.startswith("wait "):
            return self._wait(text.removeprefix("wait "))
        elif text.startswith("/"):
            command, _, rest = text.partition(" ")
            self._send(slash_command_body(self.slack, command, rest, self._id(self.user), CHANNEL))
        else:
            self.print(f"(not a command: {text!r}) {HELP}")
        return True

    def _named(self, name: str) -> str:
        """`name` as who types next: Slack sees their user id (the config's, else one made up from the name);
        the bot records and shows their name."""
        if self.people.slack_id(name) == name and not SLACK_USER.fullmatch(name):
            self.people.add(name, user_id(name))
        return name

    def _id(self, name: str) -> str:
        """The Slack user id the console sends for `name` (one `_named` has seen)."""
        return self.people.slack_id(name)

    def _click(self, which: str) -> None:
        button = self.view.buttons.get(int(which)) if which.isdigit() else self._labelled(which)
        if button is None:
            self.print(f"(no button {which}; the numbers are in [brackets])")
            return
        self._send(button_click_body(self.slack, button.action_id, button.value, self._id(self.user), button.message))

    def _labelled(self, label: str) -> Any:
        """The latest button whose label is `label` (quotes allowed): scripts need not know numbers."""
        wanted = " ".join(shlex.split(label))
        found = [button for button in self.view.buttons.values() if button.label == wanted]
        return found[-1] if found else None

    def _submit_modal(self, text: str) -> None:
        modal, self.modal = self.modal or {}, None
        values = {
            block["block_id"]: {block["element"]["action_id"]: {"type": "plain_text_input", "value": text}}
            for block in modal.get("blocks", [])
            if block.get("type") == "input"
        }
        body = view_submission_body(modal.get("callback_id", ""), modal.get("private_metadata", ""), values,
                                    self._id(self.modal_user))  # fmt: skip
        if errors := self._send(body).get("errors"):
            self._refused(modal, errors)

    def _refused(self, modal: dict[str, Any], errors: dict[str, str]) -> None:
        """Slack shows each error under its field and keeps the modal open: so does the console."""
        labels = {block["block_id"]: plain_text(block.get("label")) for block in modal["blocks"] if "label" in block}
        self.print(
            *(f"│ {labels.get(field, field)}: {error}" for field, error in errors.items()),
            "│ (the modal is still open: type the answer on the next line, or a command to close it)",
        )
        self.modal = modal

    def _send(self, body: str) -> dict[str, Any]:
        """Send a request to the bot and wait for what it says; a modal's refusal (response_action: errors) is
        answered at once, in the acknowledgement: returned."""
        self.sent_at = len(self.said)
        before = len(self.slack.calls)
        answer = post_signed(self.bot_url, self.secret, body)
        if answer.status_code != 200:
            self.print(f"(the bot answered {answer.status_code}: {answer.text[:300]})")
            return {}
        acknowledged = answer.json() if answer.text and "json" in answer.headers.get("Content-Type", "") else {}
        if acknowledged.get("response_action") == "errors":
            return acknowledged
        self._settle(before)
        return {}

    def _settle(self, before: int) -> None:
        """Wait for the bot's answer, then until it has been quiet a moment (or ANSWER_S has passed)."""
        deadline = time.monotonic() + ANSWER_S
        seen, quiet_since = before, time.monotonic()
        while time.monotonic() < deadline:
            now = len(self.slack.calls)
            if now != seen:
                seen, quiet_since = now, time.monotonic()
            elif seen > before and time.monotonic() - quiet_since >= QUIET_S:
                return
            time.sleep(0.05)

    def _wait(self, words: str) -> bool:
        """Until a line the bot printed holds the words (the last command's lines count too)."""
        parts = shlex.split(words)
        seconds = float(parts.pop()) if len(parts) > 1 and _number(parts[-1]) else WAIT_S
        wanted = " ".join(parts)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(wanted in _unmarked(line) for line in self.said[self.sent_at :]):
                return True
            time.sleep(0.2)
        self.print(f"(gave up waiting for {wanted!r} after {seconds:g} s)")
        self.gave_up = True
        return True

    def _saved(self, shared: dict[str, Any]) -> str:
        self.files_dir.mkdir(parents=True, exist_ok=True)
        path = self.files_dir / Path(shared.get("name") or shared["id"]).name
        path.write_bytes(self.slack.file_bytes(shared["id"]))
        return f"    📎 {shared.get('title')}: {path} ({path.stat().st_size} bytes)"


def run_console(settings: Settings, user: str, lines: Iterable[str] | None, out: TextIO = sys.stdout) -> int:
    """The console until `quit` or the end of input; `lines` from a script (echoed), else typed at a prompt.
    A script's `wait` that gives up ends it with 1."""
    log_file = settings.private_data_dir() / "console.log"
    with logging_to(log_file, settings.log_level), local_slack() as slack:
        bot_settings = console_settings(settings, slack)
        services = Services(bot_settings)
        app, _ = start_everything(services)
        with serving_locally(app) as url:
            console = Console(slack, f"{url}/slack/events", bot_settings.slack_signing_secret.get_secret_value(),
                              user, out, bot_settings.data_dir / "console-files", services.people)  # fmt: skip
            console.print(
                f"trainbot console: you are {user} in {CHANNEL}. Slack is simulated here; Ray, MLflow and the "
                f"state in {bot_settings.data_dir} are real; the bot's log is {log_file}.",
                HELP,
            )
            return _converse(console, lines)


def _converse(console: Console, lines: Iterable[str] | None) -> int:
    """Act on each line until `quit` or the end; 1 when a script's `wait` gave up."""
    scripted = lines is not None
    for text in lines if scripted else _typed(console):
        if scripted:
            console.print(f"{console.user}> {text.rstrip()}", heard=False)
        try:
            going = console.line(text)
        except BadRequest as error:
            console.print(f"({error})")
            going = True
        if scripted and console.gave_up:
            return 1
        if not going:
            break
    return 0


def _unmarked(line: str) -> str:
    """A line without mrkdwn's bold and code marks, as `wait` compares it: "*Diagnosis* of" reads "Diagnosis of"."""
    return line.replace("*", "").replace("`", "")


def _typed(console: Console) -> Iterator[str]:
    """Lines typed at the prompt. On a terminal the prompt stays below what the bot says while one is being
    typed (prompt_toolkit redraws it); from a pipe, plain lines and plain output."""
    if not (sys.stdin.isatty() and console.out.isatty()):
        yield from _piped(console)
        return
    session: PromptSession[str] = PromptSession()
    with patch_stdout():
        console.out = sys.stdout  # the stand-in that prints above the prompt
        while True:
            try:
                yield session.prompt(f"{console.user}> ")
            except (EOFError, KeyboardInterrupt):
                return


def _piped(console: Console) -> Iterator[str]:
    while True:
        try:
            yield input(f"{console.user}> ")
        except EOFError:
            return


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def script_lines(script: Path) -> list[str]:
    try:
        return script.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise BadRequest(f"{script}: cannot read it as a text script ({error})") from None
