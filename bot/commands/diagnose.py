"""`trainbot diagnose JOB|PATH`: a job diagnosed live, or an evidence bundle read, and the diagnosis printed."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from actions.errors import BadRequest

if TYPE_CHECKING:
    from diagnosers.engine import Diagnosis
    from diagnosers.limits import Limits

# A trainbot job, a RayJob (optionally namespace/name) or a Ray submission id (raysubmit_XXXX).
JOB_NAME = re.compile(r"([a-z0-9][-a-z0-9]*/)?[A-Za-z0-9][-_A-Za-z0-9]*")
JOB_KINDS = "its name or a prefix, a RayJob name, or a Ray submission id"
BUNDLE_DOC = "docs/bundle.md in trainbot's source"


def add_diagnose_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The CLI's `diagnose`: a job, or a bundle on this machine."""
    diagnose = commands.add_parser(
        "diagnose",
        help="diagnose a job live, or an evidence bundle (folder or .tar.gz)",
        epilog=f"A bundle's layout and the diagnosis JSON: {BUNDLE_DOC}",
    )
    diagnose.add_argument("target", metavar="JOB|PATH", help=f"a job ({JOB_KINDS}) or a bundle's path")
    diagnose.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    diagnose.set_defaults(handler=_diagnose)


def add_chat_diagnose_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Chat's `diagnose`: a job only (a bundle is a file on someone's machine), the diagnosis posted in its thread."""
    diagnose = commands.add_parser("diagnose", help="diagnose a job live and post the diagnosis in its thread")
    diagnose.add_argument("target", metavar="JOB", help=f"a job: {JOB_KINDS}")


def _diagnose(args: argparse.Namespace) -> int:
    import gc  # noqa: PLC0415

    # One diagnosis and the process exits: the cycle collector would only walk, again and again, the millions of
    # objects that decoding metrics makes (10-15% of a big bundle's time), to find no cycle worth freeing.
    gc.disable()
    from bot.render.report import render_text  # noqa: PLC0415
    from diagnosers.bundle import NotABundle  # noqa: PLC0415
    from diagnosers.engine import diagnose_path  # noqa: PLC0415

    try:
        if is_bundle_path(args.target):
            diagnosis = diagnose_path(Path(args.target), _bundle_limits())
        else:
            diagnosis = _diagnose_live(args.target, show_progress=not args.json)
    except NotABundle as error:
        raise BadRequest(str(error)) from None
    if args.json:
        print(json.dumps(diagnosis.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(render_text(diagnosis))
    return 0


def _diagnose_live(job: str, show_progress: bool) -> Diagnosis:
    """The job's evidence collected and diagnosed; with `show_progress`, on a terminal, the sources as each ends."""
    from actions.evidence.diagnosing import diagnose_job  # noqa: PLC0415 - settings, store, backends
    from actions.settings import load_settings  # noqa: PLC0415
    from bot.commands.jobs import collection_progress, jobs_service  # noqa: PLC0415
    from bot.render.progress import progress_line, wants_progress  # noqa: PLC0415

    settings = load_settings()
    with progress_line(show_progress and wants_progress(), f"collecting {job}") as line:
        return diagnose_job(settings, jobs_service(settings), job, progress=collection_progress(line)).diagnosis


def _bundle_limits() -> Limits:
    """The settings' limits for reading a bundle. With no TRAINBOT_* variable set (nor TRAINBOT_CONFIG) every
    setting is its default, and these defaults are Limits()'s own: no need to load the settings, whose pydantic
    takes most of a diagnosis's start-up."""
    if not any(name.upper().startswith("TRAINBOT_") for name in os.environ):
        from diagnosers.limits import Limits  # noqa: PLC0415

        return Limits()
    from actions.settings import load_settings  # noqa: PLC0415

    return load_settings().bundle_limits()


def is_bundle_path(target: str) -> bool:
    """A path (existing, or written like one) rather than a job name: job names have no dots or slashes
    beyond KubeRay's `namespace/name`."""
    return Path(target).exists() or not JOB_NAME.fullmatch(target)
