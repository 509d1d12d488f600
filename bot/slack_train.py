"""`/train` in Slack: the CLI's job verbs, answered as Block Kit. Each answer calls one action and renders."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.blocks import Message, render
from bot.cli import add_diagnose_command
from bot.job_commands import add_job_commands
from bot.job_view import age
from bot.slack_grammar import TRAIN_VERBS, Command, Slash, grammar

if TYPE_CHECKING:
    from actions.operations import Jobs
    from actions.settings import Settings
    from actions.templates import Param

TRAIN = grammar("/train", TRAIN_VERBS, add_job_commands, add_diagnose_command)
JOBS_SHOWN = 20


def answer_train(slash: Slash, settings: Settings, jobs: Callable[[], Jobs]) -> Message:
    """`jobs` gives the one Jobs service the bot shares (its engine and backends are reused)."""
    command = TRAIN.parse(slash.text)
    if command.verb == "help":
        return train_help(settings)
    if command.verb == "jobs":
        return train_jobs(command, jobs())
    if command.verb == "status":
        return train_status(command, jobs())
    return not_in_slack_yet("/train", command.verb, f"trainbot {command.verb}")


def train_help(settings: Settings) -> Message:
    from actions.templates import load_templates  # noqa: PLC0415 - pydantic models load only when asked

    templates = [
        {
            "name": template.name,
            "description": template.description,
            "params": [(f"{name}={param.default}", _param_help(param)) for name, param in template.params.items()],
        }
        for template in load_templates(settings.templates).values()
        if not template.from_manifest
    ]
    return render("help", "/train: launch, sweep and follow training jobs", command="/train", cli="",
                  verbs=TRAIN.usage(), templates=templates)  # fmt: skip


def train_jobs(command: Command, jobs: Jobs) -> Message:
    args = command.args
    limit = min(args.limit, JOBS_SHOWN)
    records = jobs.list(limit=limit, requester=args.requester, active=args.active)
    jobs = [
        {"name": r.name, "state": str(r.state), "template": r.template, "backend": r.backend,
         "requester": r.requester, "age": age(r.created_at)}
        for r in records
    ]  # fmt: skip
    return render("jobs", f"{len(jobs)} jobs", jobs=jobs)


def train_status(command: Command, jobs: Jobs) -> Message:
    status = jobs.status(command.args.job)
    history = jobs.store.history(status.name) if jobs.store.known(status.name) else []
    details = [
        (key, value)
        for key, value in (
            ("Message", status.message),
            ("Reason", status.reason),
            ("Cluster", status.cluster_name),
            ("Dashboard", status.dashboard_url),
            ("Started", status.start_time.isoformat(timespec="seconds") if status.start_time else ""),
            ("Ended", status.end_time.isoformat(timespec="seconds") if status.end_time else ""),
        )
        if value
    ]
    lines = [f"{event.at:%H:%M:%S} {event.state} {event.message}".rstrip() for event in history]
    return render("status", f"{status.name}: {status.state}", status=status, details=details, history=lines)


def not_in_slack_yet(slash: str, verb: str, cli: str) -> Message:
    text = f"{slash} {verb} is not available in Slack yet; run `{cli} ...` in a terminal for now."
    return render("error", text, message=text)


def _param_help(param: Param) -> str:
    bounds = [f"{key} {_number(value)}" for key, value in (("min", param.min), ("max", param.max)) if value is not None]
    detail = ", ".join([param.type, *bounds] + ([" | ".join(param.choices)] if param.choices else []))
    return f"({detail}) {param.help}".strip()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
