"""Python tracebacks: the exception type, its message and the frames that led to it.

Launchers prefix every line of a worker's output (Ray `(RayTrainWorker pid=..., ip=...)`, torchrun `[rank3]:`,
mpirun `[1,3]<stderr>:`, see prefixes.py), and the lines of other ranks interleave with a traceback's frames:
only the lines whose prefix names the same process as the `Traceback` line's are read. Text glued before the
header that no launcher wrote (a progress bar without its newline) is stripped from the lines after it too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from diagnosers.findings import Quote
from diagnosers.parsers.prefixes import process_key, split_prefix

HEADER = "Traceback (most recent call last):"
FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\([\w.]+\))?)(?::\s?(?P<message>.*))?$")


@dataclass(frozen=True, slots=True)
class Frame:
    file: str
    line: int
    function: str
    code: str
    # The frame's `File "...", line N` line in the log, quoted where it was read.
    quote: Quote | None = None


@dataclass(frozen=True, slots=True)
class PythonException:
    type: str
    message: str
    frames: tuple[Frame, ...]
    quote: Quote

    @property
    def last_frame(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def short_type(self) -> str:
        """`torch.OutOfMemoryError` -> `OutOfMemoryError`, `RayTaskError(ValueError)` -> `ValueError`."""
        inner = re.search(r"\(([\w.]+)\)$", self.type)
        return (inner.group(1) if inner else self.type).rsplit(".", 1)[-1]

    def ran_through(self, word: str) -> bool:
        return any(word in frame.function or word in frame.code for frame in self.frames)


def parse_traceback(source: str, header_line: int, header_text: str, after: Sequence[str]) -> PythonException | None:
    """Read the traceback whose header is at header_line; None when it is cut off before its exception."""
    header_tool_text, header_start = split_prefix(header_text)
    process = process_key(header_text, header_start)
    glued = header_tool_text[: header_tool_text.find(HEADER)]
    frames: list[Frame] = []
    for offset, raw in enumerate(after, start=1):
        text, start = split_prefix(raw)
        if process_key(raw, start) != process:
            continue
        if glued and text.startswith(glued):
            text = text[len(glued) :]
        if not text.strip():
            continue
        frame = FRAME.match(text)
        if frame:
            quote = Quote(source, header_line + offset, raw)
            frames.append(Frame(frame["file"], int(frame["line"]), frame["func"], "", quote))
            continue
        if text[0].isspace():
            if frames and not frames[-1].code:
                frames[-1] = replace(frames[-1], code=text.strip())
            continue
        exception = _EXCEPTION.match(text.rstrip())
        if exception is None:
            return None
        quote = Quote(source, header_line + offset, raw)
        return PythonException(exception["type"], exception["message"] or "", tuple(frames), quote)
    return None
