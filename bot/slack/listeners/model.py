"""`/model` in Slack: the CLI's promotion verbs. A new request (promote, rollback) is posted in the
channel for its approvers; decisions edit that post."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.commands.grammar import MODEL_VERBS, Command, Slash, grammar
from bot.commands.models import add_model_actions, event_line, request_line
from bot.render.blocks import Message, code, mention, render

if TYPE_CHECKING:
    from bot.slack.listeners.promotions import PromotionDesk

MODEL = grammar("/model", MODEL_VERBS, add_model_actions)
LINES_SHOWN = 40


def answer_model(slash: Slash, desk: PromotionDesk, authorize: Callable[[str, Slash], None]) -> Message:
    command = MODEL.parse(slash.text)
    authorize(command.verb, slash)
    args, promotions = command.args, desk.promotions
    if command.verb == "help":
        return render("help", "/model: promote model versions through approvals", command="/model",
                      cli="model ", verbs=MODEL.usage(), templates=[])  # fmt: skip
    if command.verb == "requests":
        return model_requests(command, desk)
    if command.verb == "history":
        return model_history(command, desk)
    actor = desk.actor(slash.user)
    if command.verb == "promote":
        return desk.ask(slash.channel, promotions.request(actor, args.name, args.version, args.target))
    if command.verb == "rollback":
        return desk.ask(slash.channel, promotions.rollback(actor, args.name, args.target))
    if command.verb == "approve":
        request = promotions.approve(actor, args.request)
    else:  # reject: the grammar allows no other verb
        request = promotions.reject(actor, args.request, args.reason)
    desk.refresh(request)
    line = request_line(request, _person(desk), code)
    return render("lines", f"{request.id}: {request.state.value}", title="", lines=[line], empty="", more=0)


def model_requests(command: Command, desk: PromotionDesk) -> Message:
    found = desk.promotions.requests(open_only=command.args.open, model=command.args.model)
    lines = [request_line(request, _person(desk), code) for request in found[:LINES_SHOWN]]
    return render("lines", f"{len(found)} promotion requests", title="Promotion requests", lines=lines,
                  empty="No promotion requests.", more=len(found) - len(lines))  # fmt: skip


def model_history(command: Command, desk: PromotionDesk) -> Message:
    trail = desk.promotions.history(command.args.name)
    lines = [event_line(event, _person(desk), code) for event in trail[-LINES_SHOWN:]]
    return render("lines", f"history of {command.args.name}", title=f"History of {command.args.name}",
                  lines=lines, empty="No promotions yet.", more=len(trail) - len(lines))  # fmt: skip


def _person(desk: PromotionDesk) -> Callable[[str], str]:
    """A person as Slack shows them: their mention (Slack renders the name), or their name as text."""
    return lambda who: mention(desk.slack_id(who))
