"""`trainbot scale TEMPLATE [k=v ...] --workers 1,2,4`: a scaling study, point after point (or all at once with
`--parallel`), printed as a table."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import TYPE_CHECKING

from actions.errors import BadRequest
from actions.jobs.backends import BACKEND_NAMES
from bot.commands.jobs import DEFAULT_BACKEND, add_output_option, print_document, whole_number
from bot.commands.verbs import Verb, add_verbs
from bot.render.progress import progress_line, wants_progress

if TYPE_CHECKING:
    from actions.jobs.job import JobStatus
    from actions.jobs.scaling import ScaleRequest


def add_scale_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_verbs(commands, SCALE_VERBS)


def sizes(text: str) -> tuple[int, ...]:
    """An argparse type: worker counts, comma-separated (1,2,4)."""
    parse = whole_number(1, 10_000)
    try:
        return tuple(parse(word.strip()) for word in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: give worker counts separated by commas, e.g. 1,2,4") from None


def _scale_arguments(scale: argparse.ArgumentParser) -> None:
    scale.epilog = (
        "Each size runs --steps measured steps after a warm-up (the first tenth of its steps), one after another "
        "(with --parallel all at once, competing); a point that fails ends the study with what was measured."
    )
    scale.add_argument("words", nargs="+", metavar="TEMPLATE [key=value ...]", help="template and parameters")
    scale.add_argument("--workers", type=sizes, required=True, metavar="N,N,...", help="the sizes, e.g. 1,2,4")
    scale.add_argument("--gpus", type=whole_number(), help="GPUs per worker (default: the template's)")
    scale.add_argument(
        "--batch",
        choices=("per-worker", "global"),
        default="per-worker",
        help="per-worker keeps each worker's batch (weak scaling); global divides the batch over the workers",
    )
    scale.add_argument("--steps", type=whole_number(1), default=40, help="measured steps a point (default 40)")
    scale.add_argument(
        "--parallel",
        action="store_true",
        help="launch every size at once (they compete; the local head must hold them all), not one after another",
    )
    scale.add_argument("--chart", type=Path, metavar="PATH", help="write the throughput and efficiency chart here")
    scale.add_argument("--backend", choices=BACKEND_NAMES, help=f"default: TRAINBOT_BACKEND ({DEFAULT_BACKEND})")
    scale.add_argument("--as", dest="requester", default=None, help="who is asking (default: your user name)")
    add_output_option(scale)


def scale_request(args: argparse.Namespace, requester: str) -> ScaleRequest:
    """The study the parsed words ask for (the CLI's and /train scale's: one grammar)."""
    from actions.jobs.scaling import ScaleRequest  # noqa: PLC0415

    return ScaleRequest(
        template=args.words[0],
        params=tuple(args.words[1:]),
        requester=requester,
        sizes=args.workers,
        gpus_per_worker=args.gpus,
        batch_mode=args.batch,
        steps=args.steps,
        backend=args.backend,
        parallel=args.parallel,
    )


def _scale(args: argparse.Namespace) -> int:
    from actions.evidence.studying import explain_study  # noqa: PLC0415 - the rules load on first use
    from actions.jobs.scaling import plan_study, run_study  # noqa: PLC0415
    from actions.settings import load_settings  # noqa: PLC0415
    from bot.render.charts import scale_chart  # noqa: PLC0415
    from bot.render.scale_view import study_text  # noqa: PLC0415
    from bot.services import Services  # noqa: PLC0415

    chart: Path | None = args.chart
    if chart is not None and (chart.is_dir() or not chart.parent.is_dir()):
        raise BadRequest(f"--chart {chart}: give a file name in a folder that exists")
    services = Services(load_settings())
    request = scale_request(args, args.requester or getpass.getuser())
    plan = plan_study(services.settings, request, services.people)
    with progress_line(wants_progress(args.output), f"{plan.id}: starting") as line:

        def show(index: int, points: int, status: JobStatus) -> None:
            line.show(
                f"{plan.id}: point {index + 1} of {points}, {status.name} {status.state}", since=status.start_time
            )

        result = run_study(services.settings, services.jobs, services.studies, plan, show)
        line.show(f"{plan.id}: diagnosing the point where the curve bends")
        explained = explain_study(services.settings, services.jobs, result)
    if chart is not None:
        try:
            chart.write_bytes(scale_chart(result.table, result.study.parallel))
        except OSError as error:
            raise BadRequest(f"--chart {chart}: cannot write it ({error.strerror})") from None
    document = {**result.to_dict(), "diagnosis": explained.to_dict() if explained else None}
    print_document(document, args.output, text=study_text(result, explained))
    return 0 if result.study.status.value == "succeeded" else 1


SCALE_VERBS = (
    Verb("scale", "a scaling study: a template at several sizes, its speedup and efficiency", _scale_arguments, _scale),
)
