"""`trainbot launch | sweep | jobs | status | logs | cancel | compare | watch`: parse, call actions, render."""

from __future__ import annotations

import argparse
import getpass
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from actions.errors import BadRequest
from actions.jobs.backends import BACKEND_NAMES
from actions.settings import Settings, load_settings
from bot.commands.verbs import Verb, add_verbs
from bot.render.progress import ProgressLine, collection_text, progress_line, wants_progress
from bot.services import Services

if TYPE_CHECKING:
    from actions.evidence.collecting import CollectionProgress
    from actions.jobs.requests import LaunchRequest
    from actions.jobs.service import Jobs

# Manifests are small YAML; a bigger file is a mistake, refused before it is read whole.
MAX_MANIFEST_BYTES = 1 << 20
WAIT_POLL_S = 2.0
DEFAULT_BACKEND = Settings.model_fields["backend"].default
# The most jobs a listing and the most lines a log tail asks for: more is a mistake, refused before any store.
MAX_LIMIT = 1000
MAX_TAIL_LINES = 100_000
# ASCII digits only: int() also reads other scripts' digits (Arabic-Indic, fullwidth): no number here.
WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,9}")


def add_job_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The job verbs of JOB_VERBS (at the end of this module) as subcommands."""
    add_verbs(commands, JOB_VERBS)


def _launch_arguments(launch: argparse.ArgumentParser) -> None:
    launch.add_argument("words", nargs="*", metavar="TEMPLATE [key=value ...]", help="template and parameters")
    launch.add_argument("--manifest", type=Path, help="your own RayJob YAML (multi-document allowed)")
    launch.add_argument("--workers", type=whole_number(), help="Ray Train workers (default: the template's)")
    launch.add_argument("--gpus", type=whole_number(), help="GPUs per worker (default: the template's)")
    _submission(launch)
    launch.set_defaults(kind="train")


def _sweep_arguments(sweep: argparse.ArgumentParser) -> None:
    sweep.add_argument("words", nargs="+", metavar="TEMPLATE [key=SPACE ...]", help="e.g. lr=loguniform(1e-4,1e-2)")
    sweep.add_argument("--trials", type=whole_number(), required=True, help="number of trials")
    sweep.add_argument("--metric", help="metric to optimize (default: the template's)")
    sweep.add_argument("--mode", choices=("min", "max"), help="minimize or maximize --metric")
    sweep.add_argument("--scheduler", choices=("asha", "none"), default="none", help="asha stops poor trials early")
    sweep.add_argument("--workers", type=whole_number(), help="Ray workers of the KubeRay cluster the sweep runs on")
    _submission(sweep)
    sweep.set_defaults(kind="sweep")


def _jobs_arguments(jobs: argparse.ArgumentParser) -> None:
    jobs.add_argument("--active", action="store_true", help="only jobs not yet finished")
    jobs.add_argument("--requester", help="only jobs launched by this person")
    jobs.add_argument(
        "--limit", type=whole_number(1, MAX_LIMIT), default=50, help=f"at most this many (1 to {MAX_LIMIT})"
    )
    add_output_option(jobs, names=True)


def _status_arguments(status: argparse.ArgumentParser) -> None:
    status.add_argument("job", metavar="JOB", help="job name or a unique prefix of it")
    status.add_argument("--wait", action="store_true", help="wait until the job ends; exit 1 unless it succeeded")
    add_output_option(status)


def _logs_arguments(logs: argparse.ArgumentParser) -> None:
    logs.add_argument("job", metavar="JOB")
    logs.add_argument("--tail", type=whole_number(0, MAX_TAIL_LINES), metavar="N", help="only the last N lines")


def _cancel_arguments(cancel: argparse.ArgumentParser) -> None:
    cancel.add_argument("job", metavar="JOB")
    cancel.add_argument("--suspend", action="store_true", help="KubeRay: suspend the RayJob instead of deleting it")
    add_output_option(cancel)


def _compare_arguments(compare: argparse.ArgumentParser) -> None:
    compare.epilog = (
        "A run: a job's name or its first letters; SWEEP/TRIAL names one trial of a sweep (its first letters)."
    )
    compare.add_argument("run_a", metavar="JOB_A", help="the first run (A)")
    compare.add_argument("run_b", metavar="JOB_B", help="the second run (B), set against A")
    compare.add_argument("--chart", type=Path, metavar="PATH", help="write the step-time chart (PNG) here")
    add_output_option(compare)


def _collect_arguments(collect: argparse.ArgumentParser) -> None:
    collect.add_argument("job", metavar="JOB", help="job name or prefix, RayJob name or Ray submission id")
    collect.add_argument(
        "-o", "--output", type=Path, required=True, metavar="FILE", help="bundle.tar.gz (or a folder name)"
    )


def _watch_arguments(watch: argparse.ArgumentParser) -> None:
    watch.add_argument("--backend", choices=BACKEND_NAMES)
    watch.add_argument("--timeout", type=float, metavar="SECONDS", help="stop after this long (default: never)")
    watch.add_argument("-o", "--output", choices=("text", "json"), default="text", help="json: one object a line")


def whole_number(least: int = 0, most: int = 10**9 - 1) -> Callable[[str], int]:
    """An argparse type: a whole number of ASCII digits from `least` to `most`, else argparse's one-line error."""

    def parse(text: str) -> int:
        if not WHOLE_NUMBER.fullmatch(text) or not least <= int(text) <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from {least} to {most}")
        return int(text)

    return parse


def parse_job_words(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse `argv`; key=value words may come after options too (`sweep T --trials 10 lr=...`)."""
    args, extra = parser.parse_known_args(argv)
    if extra and (not hasattr(args, "words") or any(word.startswith("-") for word in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.words += extra
    return args


def _submission(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKEND_NAMES, help=f"default: TRAINBOT_BACKEND ({DEFAULT_BACKEND})")
    parser.add_argument("--dry-run", action="store_true", help="print what would be submitted; submit nothing")
    parser.add_argument("--as", dest="requester", default=None, help="who is asking (default: your user name)")
    add_output_option(parser, names=True)


def add_output_option(parser: argparse.ArgumentParser, names: bool = False) -> None:
    # `-o name` prints only job names, for scripts: JOB=$(trainbot launch tiny-transformer -o name)
    choices = ("text", "json", "yaml", "name") if names else ("text", "json", "yaml")
    parser.add_argument("-o", "--output", choices=choices, default="text")


def _settings() -> Settings:
    return load_settings()


def jobs_service(settings: Settings) -> Jobs:
    return Services(settings).jobs


def launch_request(args: argparse.Namespace, requester: str) -> LaunchRequest:
    """The typed request that parsed `launch` or `sweep` words make (a manifest file is read here)."""
    from actions.jobs.requests import LaunchRequest, ManifestText, SweepOptions  # noqa: PLC0415

    manifest_path: Path | None = getattr(args, "manifest", None)
    sweep = None
    if args.kind == "sweep":
        sweep = SweepOptions(trials=args.trials, metric=args.metric, mode=args.mode, scheduler=args.scheduler)
    words = tuple(args.words)
    return LaunchRequest(
        template=None if manifest_path or not words else words[0],
        params=words if manifest_path else words[1:],
        requester=requester,
        backend=args.backend,
        workers=args.workers,
        gpus_per_worker=getattr(args, "gpus", None),
        manifest=ManifestText(_read_manifest(manifest_path), str(manifest_path)) if manifest_path else None,
        sweep=sweep,
    )


def _submit(args: argparse.Namespace) -> int:
    from actions.jobs.planning import dry_run, plan_job  # noqa: PLC0415

    settings = _settings()
    services = Services(settings)
    request = launch_request(args, args.requester or getpass.getuser())
    if args.dry_run:  # no state store, no cluster: only what would be sent
        planned = dry_run(settings, request, services.people)
        if args.output == "name":
            print(planned.launch.name)
        else:
            print_document(planned.document, args.output, text=None)
        return 0
    launch, backend = plan_job(settings, request, services.people), request.backend_name(settings.backend)
    # A first launch on the local backend starts its Ray head: seconds with nothing else to see.
    with progress_line(wants_progress(args.output), f"submitting {launch.name} to {backend}"):
        record = services.jobs.launch(launch, backend)
    if args.output == "name":
        print(record.name)
        return 0
    print_document(
        record.to_dict(),
        args.output,
        text=f"launched {record.name} on {record.backend} ({record.state})\n"
        f"  follow it: trainbot status {record.name} · trainbot logs {record.name} · trainbot cancel {record.name}",
    )
    return 0


def _jobs(args: argparse.Namespace) -> int:
    from bot.render.job_view import jobs_table  # noqa: PLC0415

    records = jobs_service(_settings()).list(limit=args.limit, requester=args.requester, active=args.active)
    if args.output == "name":
        print("\n".join(record.name for record in records))
    else:
        print_document([record.to_dict() for record in records], args.output, text=jobs_table(records))
    return 0


def _status(args: argparse.Namespace) -> int:
    from actions.jobs.job import JobState  # noqa: PLC0415
    from bot.render.job_view import status_text  # noqa: PLC0415

    settings = _settings()
    jobs = jobs_service(settings)
    found = jobs.status_history(args.job)
    with progress_line(args.wait and wants_progress(args.output), f"{found.status.name}: waiting") as line:
        while args.wait and not found.status.state.terminal:
            status = found.status
            trials = sweep_standing(settings, jobs, status.name) if line.drawing else ""
            line.show(f"{status.name}: {status.state}{trials}", since=status.start_time)
            time.sleep(WAIT_POLL_S)
            found = jobs.status_history(status.name)
    print_document(found.to_dict(), args.output, text=status_text(found.status, found.history))
    return 1 if args.wait and found.status.state != JobState.SUCCEEDED else 0


def sweep_standing(settings: Settings, jobs: Jobs, name: str) -> str:
    """For a sweep trainbot launched, " · 3/10 trials done, 2 running, best ..." from MLflow; else ""."""
    from actions.errors import ActionError  # noqa: PLC0415
    from actions.jobs.planning import sweep_experiment  # noqa: PLC0415
    from actions.jobs.sweep_progress import sweep_progress  # noqa: PLC0415 - MLflow loads only for a sweep
    from actions.promotions.registry import MlflowHttp  # noqa: PLC0415
    from bot.render.job_view import sweep_summary  # noqa: PLC0415

    record = jobs.recorded(name)
    if record is None or record.kind != "sweep":
        return ""
    MlflowHttp.of(settings).apply()  # a silent MLflow server must not stall the wait
    trials = int(record.params.get("trials", 0))
    try:
        progress = sweep_progress(settings.tracking_uri(), sweep_experiment(record.template), name, trials)
    except ActionError:
        return ""  # the trials are extra: the wait goes on with the job's state
    return f" · {sweep_summary(progress, trials)}" if progress.runs else " · waiting for its first trial"


def _logs(args: argparse.Namespace) -> int:
    from bot.render.ansi import without_ansi  # noqa: PLC0415

    text = jobs_service(_settings()).logs(args.job, args.tail)
    if not sys.stdout.isatty():  # Ray's colours are for a terminal; in a file or a pipe they are noise
        text = without_ansi(text)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from bot.render.job_view import cancellation_text  # noqa: PLC0415

    cancellation = jobs_service(_settings()).cancel(args.job, suspend=args.suspend)
    print_document(cancellation.to_dict(), args.output, text=cancellation_text(cancellation))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from actions.evidence.comparing import compare_runs  # noqa: PLC0415 - the rules load on first use
    from bot.render.charts import comparison_chart  # noqa: PLC0415
    from bot.render.comparison_view import comparison_text  # noqa: PLC0415

    chart: Path | None = args.chart
    if chart is not None and (chart.is_dir() or not chart.parent.is_dir()):
        raise BadRequest(f"--chart {chart}: give a file name in a folder that exists")
    settings = _settings()
    comparison = compare_runs(settings, jobs_service(settings), args.run_a, args.run_b)
    if chart is not None:
        runs = [(run.name, run.steps) for run in (comparison.a, comparison.b)]
        try:
            chart.write_bytes(comparison_chart(runs))
        except OSError as error:
            raise BadRequest(f"--chart {chart}: cannot write it ({error.strerror})") from None
    print_document(comparison.to_dict(), args.output, text=comparison_text(comparison))
    return 0


def _watch(args: argparse.Namespace) -> int:
    for transition in jobs_service(_settings()).watch(args.backend, args.timeout):
        if args.output == "json":  # one JSON object a line, so a pipe can read each as it comes
            print(json.dumps(transition.to_dict(), ensure_ascii=False), flush=True)
        else:
            previous = transition.previous or "new"
            print(f"{transition.job}: {previous} -> {transition.current}", flush=True)
    return 0


def _collect_live(job: str, folder: Path) -> Path:
    """The job's evidence, collected from its live sources into `folder`; on a terminal, the sources as each ends."""
    from actions.evidence.collecting import collect_job  # noqa: PLC0415

    settings = _settings()
    with progress_line(wants_progress(), f"collecting {job}") as line:
        return collect_job(settings, jobs_service(settings), job, folder, collection_progress(line))


def collection_progress(line: ProgressLine) -> CollectionProgress | None:
    """What tells `line` how a collection goes; None when the line draws nothing."""
    if not line.drawing:
        return None
    return lambda standing: line.show(collection_text(standing))


def _collect(args: argparse.Namespace) -> int:
    from diagnosers.collect.bundle_writer import archive  # noqa: PLC0415

    out: Path = args.output
    if out.exists():
        raise BadRequest(f"{out} exists already; give a new file name")
    if out.name.endswith((".tar.gz", ".tgz")):
        with tempfile.TemporaryDirectory(prefix="trainbot-bundle-") as scratch:
            bundle = _collect_live(args.job, Path(scratch) / out.name.removesuffix(".gz").removesuffix(".tar"))
            sources = _sources_of(bundle)
            archive(bundle, out)
    else:
        sources = _sources_of(_collect_live(args.job, out))
    print(f"{out}: " + ", ".join(f"{name} {status}" for name, status in sources.items()))
    return 0


def _sources_of(bundle: Path) -> dict[str, str]:
    return json.loads((bundle / "bundle.json").read_text(encoding="utf-8")).get("sources", {})


def _read_manifest(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise BadRequest(f"{path}: larger than {MAX_MANIFEST_BYTES >> 10} KiB; is this a RayJob manifest?")
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadRequest(f"{path}: cannot read it ({error.strerror})") from None
    except UnicodeDecodeError:
        raise BadRequest(f"{path}: not a UTF-8 text file; give a RayJob YAML manifest") from None


def print_document(document: Any, output: str, text: str | None) -> None:
    """As JSON, YAML, or the text form; with no text form (a manifest), text means YAML."""
    if output == "json":
        print(json.dumps(document, indent=2, ensure_ascii=False))
    elif output == "yaml" or text is None:
        print(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), end="")
    else:
        print(text)


# The job verbs, in the order `trainbot --help` and `/train help` list them.
JOB_VERBS = (
    Verb("launch", "launch a job from a template or a RayJob manifest", _launch_arguments, _submit),
    Verb("sweep", "a Ray Tune sweep over a template, tracked in MLflow", _sweep_arguments, _submit),
    Verb("jobs", "jobs trainbot launched, newest first", _jobs_arguments, _jobs),
    Verb("status", "a job's state now, and its history", _status_arguments, _status),
    Verb("logs", "a job's driver log", _logs_arguments, _logs),
    Verb("cancel", "stop a job", _cancel_arguments, _cancel),
    Verb(
        "compare",
        "two runs (jobs, or SWEEP/TRIAL) side by side: parameters, pace, step phases, verdicts",
        _compare_arguments,
        _compare,
    ),
    Verb("collect", "collect a job's evidence bundle from the live sources", _collect_arguments, _collect),
    Verb("watch", "print each state change of trainbot's jobs as it happens", _watch_arguments, _watch),
)
