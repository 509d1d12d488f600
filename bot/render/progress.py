"""What a command that waits is doing, on the terminal: one line on stderr, redrawn in place (rich), with a
spinner and the time it has taken. Only on a terminal: piped, redirected, or with machine-readable output,
nothing is drawn, and stdout is never touched. The line is cleared when the command ends."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.spinner import Spinner

    from actions.evidence.collecting import SourcesCollected

REDRAWS_PER_S = 4


class ProgressLine:
    """The line: what is happening now, and for how long. With no console, it draws nothing."""

    def __init__(self, console: Console | None, text: str) -> None:
        self.console = console
        self._lock = threading.Lock()  # collection reports from one thread per source
        self._text = text
        self._since = datetime.now(UTC)
        self._spinner: Spinner | None = None
        if console is not None:
            from rich.spinner import Spinner  # noqa: PLC0415 - rich loads only for a terminal

            self._spinner = Spinner("dots", style="cyan")

    @property
    def drawing(self) -> bool:
        """Whether anything is drawn: what only the line needs is worth fetching only then."""
        return self.console is not None

    def show(self, text: str, since: datetime | None = None) -> None:
        """Say `text`, timed from `since` (a job's start, say; by default when the line began)."""
        with self._lock:
            self._text = text
            if since is not None:
                self._since = since

    def __rich__(self) -> RenderableType:
        from rich.text import Text  # noqa: PLC0415

        with self._lock:
            text, since = self._text, self._since
        assert self._spinner is not None  # drawn only when there is a console
        self._spinner.update(text=Text.assemble(text, ("  " + elapsed(datetime.now(UTC) - since), "dim")))
        return self._spinner


def elapsed(span: timedelta) -> str:
    """A timedelta as a person reads it: 42s, 3m05s, 1h02m."""
    seconds = max(0, int(span.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def collection_text(standing: SourcesCollected) -> str:
    """`collecting JOB: ray, logs done; waiting for prometheus, steps`."""
    done = f"{', '.join(standing.done)} done" if standing.done else "starting"
    waiting = f"; waiting for {', '.join(standing.waiting)}" if standing.waiting else ""
    return f"collecting {standing.job}: {done}{waiting}"


def wants_progress(output: str = "text") -> bool:
    """Whether to draw progress: stderr is a terminal and the output is for a person, not JSON or YAML."""
    return output == "text" and sys.stderr.isatty()


@contextmanager
def progress_line(wanted: bool, text: str, console: Console | None = None) -> Iterator[ProgressLine]:
    """A progress line on stderr (or on `console`) saying `text` until told more, while the block runs, if
    `wanted`; else one that draws nothing."""
    if not wanted:
        yield ProgressLine(None, text)
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.live import Live  # noqa: PLC0415

    line = ProgressLine(console or Console(stderr=True), text)
    with Live(line, console=line.console, transient=True, refresh_per_second=REDRAWS_PER_S):
        yield line
