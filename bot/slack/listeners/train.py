"""`/train` in Slack: the CLI's job verbs, answered as Block Kit. Each answer calls one action and renders;
a launch or sweep opens the job's thread (bot/slack/job_threads.py), a scaling study the study's
(bot/slack/study_threads.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import yaml

from bot.commands.diagnose import add_chat_diagnose_command
from bot.commands.grammar import TRAIN_VERBS, Command, Slash, grammar
from bot.commands.jobs import add_job_commands, launch_request
from bot.commands.scale import add_scale_commands, scale_request
from bot.render.ansi import without_ansi
from bot.render.blocks import Message, clip, mrkdwn, notice, render
from bot.render.job_view import age, cancellation_text
from bot.slack.authorization import CANCEL_ANY

if TYPE_CHECKING:
    from actions.jobs.service import Jobs
    from actions.jobs.templates import Param
    from actions.people import People
    from actions.settings import Settings
    from bot.slack.job_threads import JobThreads
    from bot.slack.listeners.diagnose_job import JobDiagnoses
    from bot.slack.study_threads import StudyThreads

TRAIN = grammar("/train", TRAIN_VERBS, add_job_commands, add_scale_commands, add_chat_diagnose_command)
JOBS_SHOWN = 20
LOG_LINES = 40
# A log excerpt in one section: Slack's 3,000 characters less the fences.
LOG_CHARS = 2900


@dataclass(frozen=True)
class TrainDesk:
    """What /train answers with: the bot's one Jobs service and job threads (both made on first use), the
    studies' threads, the authorization check for a verb, and who is who (a Slack user id as the name a job
    records)."""

    settings: Settings
    jobs: Callable[[], Jobs]
    threads: Callable[[], JobThreads]
    diagnoses: JobDiagnoses
    authorize: Callable[[str, Slash], None]
    people: People
    studies: StudyThreads


def answer_train(slash: Slash, desk: TrainDesk) -> Message:
    """The answer of the verb's row in TRAIN_ANSWERS (at the end of this module); a verb with none gets the help."""
    command = TRAIN.parse(slash.text)
    desk.authorize(command.verb, slash)
    return TRAIN_ANSWERS.get(command.verb, train_help)(command, slash, desk)


def train_launch(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    """Submit, and open the job's thread in the channel; a dry run shows what would be submitted."""
    from actions.jobs.planning import dry_run, plan_job  # noqa: PLC0415

    settings = desk.settings
    request = launch_request(command.args, slash.user)
    if command.args.dry_run:
        planned = dry_run(settings, request, desk.people)
        name = planned.launch.name
        manifest = yaml.safe_dump(planned.document, sort_keys=False, allow_unicode=True)
        return render("code", f"{name}: dry run", title=f"Would submit {name}", code=clip(manifest, LOG_CHARS))
    plan = plan_job(settings, request, desk.people)
    if plan.kind == "sweep":
        from actions.jobs.sweep_progress import prepare_tracking  # noqa: PLC0415 - MLflow loads on first use

        prepare_tracking(settings.tracking_uri())
    record = desk.jobs().launch(plan, request.backend_name(settings.backend))
    desk.threads().open(slash.channel, record)
    return notice(f"Launched {record.name}; its thread in this channel follows it.")


def train_scale(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    """Plan the study (a mistake is answered here, before anything launches), then run it in its thread."""
    from actions.jobs.scaling import plan_study  # noqa: PLC0415

    plan = plan_study(desk.settings, scale_request(command.args, slash.user), desk.people)
    desk.studies.start(slash.channel, plan)
    sizes = ", ".join(str(launch.workers) for launch in plan.launches)
    return notice(
        f"Studying {plan.template.name} at {sizes} workers as {plan.id}; its thread in this channel follows it."
    )


def train_logs(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    tail = LOG_LINES if command.args.tail is None else command.args.tail
    # Slack shows a terminal's colour codes as they are: ESC[36m around every line Ray prefixes.
    lines = without_ansi(desk.jobs().logs(command.args.job, tail)).splitlines()
    shown: list[str] = []
    for line in reversed(lines):  # the newest lines that fit
        if sum(len(mrkdwn(kept)) + 1 for kept in shown) + len(mrkdwn(line)) > LOG_CHARS:
            break
        shown.insert(0, line)
    title = f"Last {len(shown)} lines of {command.args.job}'s log" + (
        f" (the whole log: trainbot logs {command.args.job})" if len(shown) < len(lines) else ""
    )
    return render("code", title, title=title, code="\n".join(shown) or "(no output yet)")


def train_cancel(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    """Stop a job; one trainbot did not launch (any RayJob the bot's service account reaches) needs cancel-any."""
    jobs = desk.jobs()
    if not jobs.launched(command.args.job):
        desk.authorize(CANCEL_ANY, slash)
    return notice(cancellation_text(jobs.cancel(command.args.job, suspend=command.args.suspend)))


def train_help(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    from actions.jobs.templates import load_templates  # noqa: PLC0415 - pydantic models load only when asked

    templates = [
        {
            "name": template.name,
            "description": template.description,
            "params": [(f"{name}={param.default}", _param_help(param)) for name, param in template.params.items()],
        }
        for template in load_templates(desk.settings.templates).values()
        if not template.from_manifest
    ]
    return render("help", "/train: launch, sweep and follow training jobs", command="/train", cli="",
                  verbs=TRAIN.usage(), templates=templates)  # fmt: skip


def train_jobs(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    args = command.args
    limit = min(args.limit, JOBS_SHOWN)
    records = desk.jobs().list(limit=limit, requester=args.requester, active=args.active)
    jobs = [
        {"name": r.name, "state": str(r.state), "template": r.template, "backend": r.backend,
         "requester": desk.people.slack_id(r.requester), "age": age(r.created_at)}
        for r in records
    ]  # fmt: skip
    return render("jobs", f"{len(jobs)} jobs", jobs=jobs)


def train_status(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    found = desk.jobs().status_history(command.args.job)
    status = found.status
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
    lines = [f"{event.at:%H:%M:%S} {event.state} {event.message}".rstrip() for event in found.history]
    return render("status", f"{status.name}: {status.state}", status=status, details=details, history=lines)


def _param_help(param: Param) -> str:
    bounds = [f"{key} {_number(value)}" for key, value in (("min", param.min), ("max", param.max)) if value is not None]
    detail = ", ".join([param.type, *bounds] + ([" | ".join(param.choices)] if param.choices else []))
    return f"({detail}) {param.help}".strip()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def train_diagnose(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    """Diagnose a job in its thread: the answer says where the diagnosis will be posted."""
    return desk.diagnoses.request(command.args.target, slash.channel, slash.user)


def train_compare(command: Command, slash: Slash, desk: TrainDesk) -> Message:
    """Post the two runs' comparison in the channel, the step-time chart under it; the answer says so."""
    from actions.evidence.comparing import compare_runs  # noqa: PLC0415 - the rules load on first use
    from bot.render.charts import comparison_chart  # noqa: PLC0415
    from bot.render.comparison_view import comparison_text  # noqa: PLC0415

    compared = compare_runs(desk.settings, desk.jobs(), command.args.run_a, command.args.run_b)
    a, b = compared.a.name, compared.b.name
    title = f"{a} (A) against {b} (B)"
    poster = desk.threads().poster
    posted = poster.post(
        slash.channel, render("code", title, title=title, code=clip(comparison_text(compared), LOG_CHARS))
    )
    chart = comparison_chart([(run.name, run.steps) for run in (compared.a, compared.b)])
    poster.upload(slash.channel, chart, filename=f"compare-{a}-{b}.png".replace("/", "_"), title=title, thread=posted)
    return notice(f"Compared {a} with {b}: posted in this channel, the step-time chart in its thread.")


# Each /train verb of the grammar (TRAIN_VERBS) and the function that answers it.
TRAIN_ANSWERS: dict[str, Callable[[Command, Slash, TrainDesk], Message]] = {
    "launch": train_launch,
    "sweep": train_launch,
    "scale": train_scale,
    "status": train_status,
    "logs": train_logs,
    "cancel": train_cancel,
    "diagnose": train_diagnose,
    "compare": train_compare,
    "jobs": train_jobs,
    "help": train_help,
}
