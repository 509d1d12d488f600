"""The console's logging: the terminal is the chat, so the bot's log and every library's (MLflow, SQLAlchemy,
alembic, Ray, Python's warnings) go to one file in the data directory."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def logging_to(log_file: Path, level: str) -> Iterator[None]:
    """While the block runs, every log record, every warning and whatever a library writes to stderr goes to
    `log_file` and nowhere else."""
    logging.basicConfig(filename=log_file, level=level, format=FORMAT, force=True)
    logging.captureWarnings(True)
    # A library that set up its own handler on the terminal (MLflow does, when it is imported) loses it; the
    # file has its lines. One set up later writes to stderr, which is the file while the console runs.
    for logger in list(logging.root.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger) and any(map(_on_a_stream, logger.handlers)):
            logger.handlers = [handler for handler in logger.handlers if not _on_a_stream(handler)]
            logger.propagate = True
    with log_file.open("a", encoding="utf-8", buffering=1) as stream, redirect_stderr(stream):
        yield


def _on_a_stream(handler: logging.Handler) -> bool:
    """A handler that writes to a stream (stderr, as MLflow's does) rather than to a file."""
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
