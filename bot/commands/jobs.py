"""`trainbot launch | sweep | jobs | status | logs | cancel | watch`: parse, call actions, render."""

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
from actions.settings import Settings, load_settings
from bot.services import Services

if TYPE_CHECKING:
    from actions.jobs.job import Launch
    from actions.jobs.service import Jobs

# Manifests are small YAML; a bigger file is a mistake, refused before it is read whole.
MAX_MANIFEST_BYTES = 1 << 20
WAIT_POLL_S = 2.0
# The most jobs a listing and the most lines a log tail asks for: more is a mistake, refused before any store.
MAX_LIMIT = 1000
MAX_TAIL_LINES = 100_000
# ASCII digits only: int() also reads other scripts' digits (Arabic-Indic, fullwidth): no number here.
WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,9}")


def add_job_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    launch = commands.add_parser("launch", help="launch a job from a template or a RayJob manifest")
    launch.add_argument("words", nargs="*", metavar="TEMPLATE [key=value ...]", help="template and parameters")
    launch.add_argument("--manifest", type=Path, help="your own RayJob YAML (multi-document allowed)")
    _sizing(launch)
    _submission(launch)
    launch.set_defaults(handler=_submit, kind="train")

    sweep = commands.add_parser("sweep", help="a Ray Tune sweep over a template, tracked in MLflow")
    sweep.add_argument("words", nargs="+", metavar="TEMPLATE [key=SPACE ...]", help="e.g. lr=loguniform(1e-4,1e-2)")
    sweep.add_argument("--trials", type=whole_number(), required=True, help="number of trials")
    sweep.add_argument("--metric", help="metric to optimize (default: the template's)")
    sweep.add_argument("--mode", choices=("min", "max"), help="minimize or maximize --metric")
    sweep.add_argument("--scheduler", choices=("asha", "none"), default="none", help="asha stops poor trials early")
    sweep.add_argument("--workers", type=whole_number(), help="Ray workers of the KubeRay cluster the sweep runs on")
    _submission(sweep)
    sweep.set_defaults(handler=_submit, kind="sweep")

    jobs = commands.add_parser("jobs", help="jobs trainbot launched, newest first")
    jobs.add_argument("--active", action="store_true", help="only jobs not yet finished")
    jobs.add_argument("--requester", help="only jobs launched by this person")
    jobs.add_argument(
        "--limit", type=whole_number(1, MAX_LIMIT), default=50, help=f"at most this many (1 to {MAX_LIMIT})"
    )
    add_output_option(jobs, names=True)
    jobs.set_defaults(handler=_jobs)

    status = commands.add_parser("status", help="a job's state now, and its history")
    status.add_argument("job", metavar="JOB", help="job name or a unique prefix of it")
    status.add_argument("--wait", action="store_true", help="wait until the job ends; exit 1 unless it succeeded")
    add_output_option(status)
    status.set_defaults(handler=_status)

    logs = commands.add_parser("logs", help="a job's driver log")
    logs.add_argument("job", metavar="JOB")
    logs.add_argument("--tail", type=whole_number(0, MAX_TAIL_LINES), metavar="N", help="only the last N lines")
    logs.set_defaults(handler=_logs)

    cancel = commands.add_parser("cancel", help="stop a job")
    cancel.add_argument("job", metavar="JOB")
    cancel.add_argument("--suspend", action="store_true", help="KubeRay: suspend the RayJob instead of deleting it")
    add_output_option(cancel)
    cancel.set_defaults(handler=_cancel)

    collect = commands.add_parser("collect", help="collect a job's evidence bundle from the live sources")
    collect.add_argument("job", metavar="JOB", help="job name or prefix, RayJob name or Ray submission id")
    collect.add_argument(
        "-o", "--output", type=Path, required=True, metavar="FILE", help="bundle.tar.gz (or a folder name)"
    )
    collect.set_defaults(handler=_collect)

    watch = commands.add_parser("watch", help="print each state change of trainbot's jobs as it happens")
    watch.add_argument("--backend", choices=("local", "kuberay"))
    watch.add_argument("--timeout", type=float, metavar="SECONDS", help="stop after this long (default: never)")
    watch.add_argument("-o", "--output", choices=("text", "json"), default="text", help="json: one object a line")
    watch.set_defaults(handler=_watch)


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


def _sizing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=whole_number(), help="Ray Train workers (default: the template's)")
    parser.add_argument("--gpus", type=whole_number(), help="GPUs per worker (default: the template's)")


def _submission(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("local", "kuberay"), help="default: TRAINBOT_BACKEND (local)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be submitted; submit nothing")
    parser.add_argument("--as", dest="requester", default=None, help="who is asking (default: your user name)")
    add_output_option(parser, names=True)


def add_output_option(parser: argparse.ArgumentParser, names: bool = False) -> None:
    # `-o name` prints only job names, for scripts: JOB=$(trainbot launch tiny-transformer -o name)
    choices = ("text", "json", "yaml", "name") if names else ("text", "json", "yaml")
    parser.add_argument("-o", "--output", choices=choices, default="text")


def _settings() -> Settings:
    return load_settings()


def _jobs_service(settings: Settings) -> Jobs:
    return Services(settings).jobs


def plan_job(settings: Settings, args: argparse.Namespace, requester: str) -> Launch:
    """The launch or sweep that the parsed words ask for: the CLI's and Slack's alike."""
    from actions.jobs.planning import SweepOptions, plan_launch, plan_manifest_launch, plan_sweep  # noqa: PLC0415

    if args.kind == "sweep":
        options = SweepOptions(trials=args.trials, metric=args.metric, mode=args.mode, scheduler=args.scheduler)
        return plan_sweep(
            settings, args.words[0], args.words[1:], options,
            requester=requester, backend=args.backend or settings.backend, workers=args.workers,
        )  # fmt: skip
    if args.manifest:
        if args.backend == "local":
            raise BadRequest("a RayJob manifest runs on KubeRay; drop --backend local")
        args.backend = "kuberay"
        return plan_manifest_launch(
            _read_manifest(args.manifest), str(args.manifest), args.words,
            requester=requester, workers=args.workers, gpus_per_worker=args.gpus,
        )  # fmt: skip
    if not args.words or "=" in args.words[0]:
        raise BadRequest("name a template first: trainbot launch TEMPLATE [key=value ...] (or --manifest FILE)")
    return plan_launch(
        settings, args.words[0], args.words[1:],
        requester=requester, workers=args.workers, gpus_per_worker=args.gpus,
    )  # fmt: skip


def _submit(args: argparse.Namespace) -> int:
    settings = _settings()
    return _submit_or_print(settings, plan_job(settings, args, args.requester or getpass.getuser()), args)


def _submit_or_print(settings: Settings, plan: Launch, args: argparse.Namespace) -> int:
    if args.dry_run:  # no state store, no cluster: only what would be sent
        from actions.jobs.service import backend_named  # noqa: PLC0415

        rendered = backend_named(settings, args.backend).render(plan)
        if args.output == "name":
            print(plan.name)
        else:
            print_document(rendered, args.output, text=None)
        return 0
    record = _jobs_service(settings).launch(plan, args.backend)
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

    records = _jobs_service(_settings()).list(limit=args.limit, requester=args.requester, active=args.active)
    if args.output == "name":
        print("\n".join(record.name for record in records))
    else:
        print_document([record.to_dict() for record in records], args.output, text=jobs_table(records))
    return 0


def _status(args: argparse.Namespace) -> int:
    from actions.jobs.job import JobState  # noqa: PLC0415
    from bot.render.job_view import status_text  # noqa: PLC0415

    jobs = _jobs_service(_settings())
    status = jobs.status(args.job)
    while args.wait and not status.state.terminal:
        time.sleep(WAIT_POLL_S)
        status = jobs.status(status.name)
    history = jobs.store.history(status.name) if jobs.store.known(status.name) else []
    document = {**status.to_dict(), "history": [event.to_dict() for event in history]}
    print_document(document, args.output, text=status_text(status, history))
    return 1 if args.wait and status.state != JobState.SUCCEEDED else 0


def _logs(args: argparse.Namespace) -> int:
    text = _jobs_service(_settings()).logs(args.job, args.tail)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    status = _jobs_service(_settings()).cancel(args.job, suspend=args.suspend)
    action = "suspend" if args.suspend else "stop"
    print_document(status.to_dict(), args.output, text=f"{status.name}: {status.state} ({action} requested)")
    return 0


def _watch(args: argparse.Namespace) -> int:
    from actions.jobs.watcher import watch  # noqa: PLC0415

    jobs = _jobs_service(_settings())
    for transition in watch(jobs.backend(args.backend), jobs.store, timeout_s=args.timeout):
        if args.output == "json":  # one JSON object a line, so a pipe can read each as it comes
            print(json.dumps(transition.to_dict(), ensure_ascii=False), flush=True)
        else:
            previous = transition.previous or "new"
            print(f"{transition.job}: {previous} -> {transition.current}", flush=True)
    return 0


def collect_live(job: str, folder: Path) -> Path:
    """The job's evidence, collected from its live sources into `folder`."""
    from actions.evidence.collecting import collect_job  # noqa: PLC0415

    settings = _settings()
    return collect_job(settings, _jobs_service(settings), job, folder)


def _collect(args: argparse.Namespace) -> int:
    from diagnosers.collect.bundle_writer import archive  # noqa: PLC0415

    out: Path = args.output
    if out.exists():
        raise BadRequest(f"{out} exists already; give a new file name")
    if out.name.endswith((".tar.gz", ".tgz")):
        with tempfile.TemporaryDirectory(prefix="trainbot-bundle-") as scratch:
            bundle = collect_live(args.job, Path(scratch) / out.name.removesuffix(".gz").removesuffix(".tar"))
            sources = _sources_of(bundle)
            archive(bundle, out)
    else:
        sources = _sources_of(collect_live(args.job, out))
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
