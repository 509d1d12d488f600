"""Diagnose a job: collect its evidence from the live sources into a bundle and run the rules on it.

The one way the CLI (`trainbot diagnose JOB`), Slack (`/train diagnose`, the "Diagnose" button, a failed
job's thread) and alert threads diagnose a job; Slack keeps the bundle on the shelf so that "Show evidence"
can diagnose it again.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from actions.evidence.bundle_shelf import BundleShelf
from actions.evidence.collecting import CollectionProgress, collect_job

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actions.jobs.service import Jobs
    from actions.settings import Settings
    from diagnosers.engine import Diagnosis
    from diagnosers.findings import Finding


@dataclass(frozen=True)
class KeptBundle:
    """A bundle on the shelf: the key a "Show evidence" click names, and its folder."""

    key: str
    folder: Path


@dataclass(frozen=True)
class JobDiagnosis:
    """A job's diagnosis and, when a shelf was given, the bundle it was made from, kept there."""

    job: str
    diagnosis: Diagnosis
    kept: KeptBundle | None = None


def diagnose_job(
    settings: Settings,
    jobs: Jobs,
    job: str,
    shelf: BundleShelf | None = None,
    progress: CollectionProgress | None = None,
    beyond: Sequence[Finding] = (),
) -> JobDiagnosis:
    """Collect `job`'s evidence and diagnose it. Without a shelf the bundle is gone once diagnosed; `progress`
    hears how the collection goes (collect_job); `beyond` are findings made from more than the job's evidence
    (diagnosers.engine.diagnose)."""
    from diagnosers.engine import diagnose_path  # noqa: PLC0415 - the rules load on the first diagnosis

    limits = settings.bundle_limits()
    with tempfile.TemporaryDirectory(prefix="trainbot-bundle-") as scratch:
        collected = collect_job(settings, jobs, job, Path(scratch) / job.replace("/", "_"), progress)
        if shelf is None:
            return JobDiagnosis(job, diagnose_path(collected, limits, beyond))
        key = shelf.keep(collected, job)
    kept = shelf.find(key)
    assert kept is not None  # kept a moment ago, by this process
    return JobDiagnosis(job, diagnose_path(kept, limits, beyond), KeptBundle(key, kept))


def diagnose_kept(settings: Settings, shelf: BundleShelf, key: str) -> Diagnosis | None:
    """The diagnosis of the bundle kept under `key` on `shelf`, made again; None when it is gone."""
    from diagnosers.engine import diagnose_path  # noqa: PLC0415

    folder = shelf.find(key)
    return None if folder is None else diagnose_path(folder, settings.bundle_limits())
