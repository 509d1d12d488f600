"""Run every source against one deadline and write the bundle, whatever each source managed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, UNREACHABLE, BundleWriter, error_status
from diagnosers.collect.deadline import Deadline, DeadlineExceeded
from diagnosers.collect.target import CollectConfig, Target

# A source writes its files and its own status(es); raising is recorded as its error.
Source = Callable[[Target, CollectConfig, BundleWriter, Deadline], None]


class SourceUnavailable(Exception):
    """The service could not be reached or refused; the message is the bundle.json status."""


def collect(
    target: Target, config: CollectConfig, folder: Path, sources: dict[str, Source], absent: tuple[str, ...] = ()
) -> Path:
    """Run `sources` (name -> function) in parallel; the bundle folder is complete at the deadline.

    `absent` names sources the job's backend does not have (Kubernetes for a local job): recorded as
    not-configured, so the diagnosis does not list them as missing evidence.
    """
    writer = BundleWriter(folder)
    for name in absent:
        writer.source(name, NOT_CONFIGURED)
    deadline = Deadline(config.deadline_s)
    threads = [
        threading.Thread(target=_run, args=(name, source, target, config, writer, deadline), daemon=True)
        for name, source in sources.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=deadline.remaining())
    for name, thread in zip(sources, threads, strict=True):
        if thread.is_alive():
            writer.source(name, f"{UNREACHABLE}: no answer within the {config.deadline_s:g} s deadline")
    return writer.finish(target.meta())


def _run(
    name: str, source: Source, target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline
) -> None:
    try:
        source(target, config, writer, deadline)
    except SourceUnavailable as error:
        writer.source(name, str(error))
    except DeadlineExceeded:
        writer.source(name, f"{UNREACHABLE}: no answer within the {config.deadline_s:g} s deadline")
    # One broken source must not lose the evidence the others gathered.
    except Exception as error:
        writer.source(name, error_status(f"{type(error).__name__}: {error}"))
