"""`/model` in Slack: the CLI's promotion verbs, answered as Block Kit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.blocks import Message, render
from bot.model_commands import add_model_actions, event_line, request_line
from bot.slack_grammar import MODEL_VERBS, Command, grammar
from bot.slack_train import not_in_slack_yet

if TYPE_CHECKING:
    from actions.promotions import Promotions

MODEL = grammar("/model", MODEL_VERBS, add_model_actions)
LINES_SHOWN = 40


def answer_model(text: str, user: str, promotions: Promotions) -> Message:
    command = MODEL.parse(text)
    if command.verb == "help":
        return render("help", "/model: promote model versions through approvals", command="/model",
                      cli="model ", verbs=MODEL.usage(), templates=[])  # fmt: skip
    if command.verb == "requests":
        return model_requests(command, promotions)
    if command.verb == "history":
        return model_history(command, promotions)
    return not_in_slack_yet("/model", command.verb, f"trainbot model {command.verb}")


def model_requests(command: Command, promotions: Promotions) -> Message:
    found = promotions.requests(open_only=command.args.open, model=command.args.model)
    lines = [request_line(request) for request in found[:LINES_SHOWN]]
    return render("lines", f"{len(found)} promotion requests", title="Promotion requests", lines=lines,
                  empty="No promotion requests.", more=len(found) - len(lines))  # fmt: skip


def model_history(command: Command, promotions: Promotions) -> Message:
    trail = promotions.history(command.args.name)
    lines = [event_line(event) for event in trail[-LINES_SHOWN:]]
    return render("lines", f"history of {command.args.name}", title=f"History of {command.args.name}",
                  lines=lines, empty="No promotions yet.", more=len(trail) - len(lines))  # fmt: skip
