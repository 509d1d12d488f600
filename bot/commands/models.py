"""`trainbot model promote | rollback | approve | reject | cancel | requests | history`: parse, call actions, render.

The acting user comes from `--as USER` (the bot passes the Slack user and the user groups it found).
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.commands.jobs import add_output_option, print_document
from bot.services import Services

if TYPE_CHECKING:
    from actions.promotions.service import Promotions
    from actions.promotions.store import PromotionEvent, PromotionRequest

# How a line shows a person, or the text around them.
Shown = Callable[[str], str]


def add_model_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    model = commands.add_parser("model", help="promote model versions through approvals (MLflow aliases)")
    add_model_actions(model.add_subparsers(dest="model_command", required=True, metavar="ACTION"))


def add_model_actions(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The model verbs, for `trainbot model` and Slack's `/model` alike."""
    promote = actions.add_parser("promote", help="ask to point TARGET (an alias) at VERSION")
    promote.add_argument("name", metavar="NAME", help="registered model name")
    promote.add_argument("version", metavar="VERSION", type=_version)
    promote.add_argument("target", metavar="TARGET", help="staging, production, or an alias in the config")
    _acting(promote)
    promote.set_defaults(handler=_promote)

    rollback = actions.add_parser("rollback", help="ask to point TARGET back at the version it named before")
    rollback.add_argument("name", metavar="NAME", help="registered model name")
    rollback.add_argument("target", metavar="TARGET")
    _acting(rollback)
    rollback.set_defaults(handler=_rollback)

    _on_request(actions, "approve", "approve a request; the last approval moves the alias", _approve)
    reject = _on_request(actions, "reject", "reject a request, saying why", _reject)
    reject.add_argument("--reason", required=True, help="why (kept in the audit trail)")
    _on_request(actions, "cancel", "withdraw your own request", _cancel)

    listing = actions.add_parser("requests", help="promotion requests, newest first")
    listing.add_argument("--open", action="store_true", help="only those still open")
    listing.add_argument("--model", metavar="NAME", help="only this model's")
    add_output_option(listing)
    listing.set_defaults(handler=_requests)

    webhook = actions.add_parser("webhook", help="have the MLflow server send its registry events to trainbot")
    webhook.add_argument(
        "url", metavar="URL", help="trainbot serve's address, e.g. http://trainbot:8080/webhooks/mlflow"
    )
    webhook.set_defaults(handler=_webhook)

    history = actions.add_parser("history", help="a model's audit trail: every request and what became of it")
    history.add_argument("name", metavar="NAME")
    add_output_option(history)
    history.set_defaults(handler=_history)


def _on_request(
    actions: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    summary: str,
    handler: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A subcommand that acts on one request by its id."""
    parser = actions.add_parser(name, help=summary)
    parser.add_argument("request", metavar="REQUEST", help="the request id (pr-...)")
    _acting(parser)
    parser.set_defaults(handler=handler)
    return parser


def _acting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--as", dest="user", default=None, help="who acts (default: your user name)")
    parser.add_argument(
        "--group", dest="groups", action="append", default=[], metavar="GROUP", help="a user group they are in"
    )
    add_output_option(parser)


def _version(text: str) -> int:
    # isdigit() alone also takes other scripts' digits, which int() reads; a version is ASCII.
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a model version number (1, 2, ...)")
    return int(text)


def promotions_service() -> Promotions:
    """The promotions of the configured store and registry (bot/services.py builds them)."""
    from actions.settings import load_settings  # noqa: PLC0415

    return Services(load_settings()).promotions


def _actor(args: argparse.Namespace):  # noqa: ANN202 - the import is deferred on purpose
    from actions.promotions.policy import Actor  # noqa: PLC0415

    return Actor(args.user or getpass.getuser(), frozenset(args.groups))


def _promote(args: argparse.Namespace) -> int:
    request = promotions_service().request(_actor(args), args.name, args.version, args.target)
    _show(request, args.output)
    return 0


def _rollback(args: argparse.Namespace) -> int:
    _show(promotions_service().rollback(_actor(args), args.name, args.target), args.output)
    return 0


def _approve(args: argparse.Namespace) -> int:
    """Exit 1 when the alias move this approval made failed (the request's line says why)."""
    from actions.promotions.store import PromotionState  # noqa: PLC0415

    request = promotions_service().approve(_actor(args), args.request)
    _show(request, args.output)
    return 1 if request.state == PromotionState.FAILED else 0


def _reject(args: argparse.Namespace) -> int:
    _show(promotions_service().reject(_actor(args), args.request, args.reason), args.output)
    return 0


def _cancel(args: argparse.Namespace) -> int:
    _show(promotions_service().cancel(_actor(args), args.request), args.output)
    return 0


def _requests(args: argparse.Namespace) -> int:
    found = promotions_service().requests(open_only=args.open, model=args.model)
    text = "\n".join(request_line(request) for request in found) or "no promotion requests"
    print_document([request.to_dict() for request in found], args.output, text)
    return 0


def _history(args: argparse.Namespace) -> int:
    trail = promotions_service().history(args.name)
    text = "\n".join(event_line(event) for event in trail) or f"no promotions of {args.name} yet"
    print_document([event.to_dict() for event in trail], args.output, text)
    return 0


def _webhook(args: argparse.Namespace) -> int:
    done = promotions_service().register_webhook(args.url)
    print(f"{done} MLflow webhook 'trainbot' -> {args.url}")
    return 0


def _show(request: PromotionRequest, output: str) -> None:
    print_document(request.to_dict(), output, request_line(request))


def request_line(request: PromotionRequest, person: Shown = str, text: Shown = str) -> str:
    """A request on one line; `person` shows each person and `text` the rest (in Slack: mentions, and code)."""
    given = f"{len(request.approvals)}/{request.approvals_needed} approvals"
    who = f" by {', '.join(map(person, request.approvals))}" if request.approvals else ""
    why = f": {request.reason}" if request.reason else ""
    kind = f" ({request.kind})" if request.kind != "promote" else ""
    head = f"{request.id}  {request.model} v{request.version} -> {request.target}{kind}  {request.state.value}{why}"
    return f"{text(head)}  ({given}{who}; asked by {person(request.requester)})"


def event_line(event: PromotionEvent, person: Shown = str, text: Shown = str) -> str:
    """An event of a model's audit trail on one line; `person` and `text` as for request_line."""
    detail = f"  {text(event.detail)}" if event.detail else ""
    version = f" v{event.version}" if event.version is not None else ""
    head = f"{event.at:%Y-%m-%d %H:%M:%S}  {event.request_id or '-'}  {event.target}{version}  {event.event}"
    return f"{text(head)} ({person(event.actor)}){detail}"
