"""Stream a log and yield only the lines that contain one of a set of literals.

Logs of a 64-rank job run to hundreds of megabytes of NCCL and training chatter in which a
handful of lines matter. Parsing every line in Python is far too slow for that, so a
multi-literal matcher (Hyperscan, at GB/s) picks the candidate lines out of large blocks and
only those reach the regex parsers. Where Hyperscan is not installed the same literals are
found with one `re` alternation: the same answers, only slower.

Memory stays bounded whatever the input: a block, a look-ahead for context lines and one
over-long line's worth of carry, even for a multi-gigabyte log with no newline at all.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

BLOCK_BYTES = 1 << 20
# Context after a hit (a traceback's frames) must fit in what is kept past the split point.
LOOKAHEAD_BYTES = 64 << 10
# Lines longer than this are quoted as a window around the match.
MAX_LINE_BYTES = 4 << 10
MAX_CONTEXT_LINES = 120
# Runs of repeated lines remembered per log (see _Runs), and the longest.
MAX_RUNS = 1024
MAX_RUN_BYTES = 64 << 10
# Runs this long are looked for in each block before the needles are, so their lines are never matched at all;
# at most this many of them.
LONG_RUN_BYTES = 1 << 10
MAX_LONG_RUNS = 16
# A log that turns binary part way (a core dump appended, a disk image renamed .log) is stopped there rather
# than scanned for gigabytes: NUL bytes are looked for in this much of each block, which costs nothing.
BINARY_SAMPLE_BYTES = 64 << 10
BINARY_NUL_SHARE = 0.01
NEWLINE = ord("\n")


@dataclass(frozen=True, slots=True)
class Needle:
    """A literal that makes a line worth parsing, and how many of the lines after it matter too (at most
    MAX_CONTEXT_LINES)."""

    literal: bytes
    caseless: bool = False
    context_lines: int = 0


@dataclass(slots=True)
class Hit:
    """A candidate line: its 1-based number, its text, which needles it holds, what follows it."""

    line: int
    text: str
    needles: set[int]
    after: list[str]
    truncated: bool = False
    # The line's exact bytes, for `passed_over`; empty for a line longer than MAX_LINE_BYTES.
    raw: bytes = b""


class Matcher(Protocol):
    def find(self, data: memoryview) -> list[tuple[int, int]]:
        """(start offset, needle index) of every needle occurrence in data."""
        ...


class RegexMatcher:
    """One `re` alternation: the portable fallback."""

    def __init__(self, needles: Sequence[Needle]) -> None:
        parts = []
        for index, needle in enumerate(needles):
            literal = re.escape(needle.literal)
            body = b"(?i:" + literal + b")" if needle.caseless else literal
            parts.append(b"(?P<n" + str(index).encode() + b">" + body + b")")
        # A lookahead consumes nothing, so a needle inside another (`Error:` in `DistStoreError: `) is found too.
        self._pattern = re.compile(b"(?=" + b"|".join(parts) + b")")

    def find(self, data: memoryview) -> list[tuple[int, int]]:
        found = []
        for match in self._pattern.finditer(data):
            group = match.lastgroup
            if group is not None:
                found.append((match.start(), int(group[1:])))
        return found


class HyperscanMatcher:
    """Hyperscan's literal compiler: every needle in one pass at memory speed."""

    def __init__(self, needles: Sequence[Needle]) -> None:
        import hyperscan  # noqa: PLC0415 - optional: absent on platforms without a wheel

        self._lengths = [len(needle.literal) for needle in needles]
        self._database = _cached_database(hyperscan, needles) or _compiled_database(hyperscan, needles)

    def find(self, data: memoryview) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        lengths = self._lengths

        def on_match(index: int, _start: int, end: int, _flags: int, _context: object) -> None:
            found.append((end - lengths[index], index))

        self._database.scan(data, match_event_handler=on_match)
        found.sort()
        return found


def _compiled_database(hyperscan: Any, needles: Sequence[Needle]) -> Any:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        expressions=[needle.literal for needle in needles],
        ids=list(range(len(needles))),
        elements=len(needles),
        flags=[hyperscan.HS_FLAG_CASELESS if needle.caseless else 0 for needle in needles],
        literal=True,
    )
    _store(hyperscan, needles, database)
    return database


def _cached_database(hyperscan: Any, needles: Sequence[Needle]) -> Any | None:
    """The database compiled for these needles by an earlier run: compiling takes 40 ms, a third of a small
    diagnosis; loading takes 0.1 ms. Anything unreadable is compiled again."""
    try:
        database = hyperscan.loadb(_cache_path(hyperscan, needles).read_bytes(), hyperscan.HS_MODE_BLOCK)
        database.scratch = hyperscan.Scratch(database)
    except (OSError, hyperscan.error):
        return None
    return database


def _store(hyperscan: Any, needles: Sequence[Needle], database: Any) -> None:
    path = _cache_path(hyperscan, needles)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, spool = tempfile.mkstemp(dir=path.parent, prefix=".needles-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(hyperscan.dumpb(database))
            Path(spool).replace(path)
        except OSError:
            Path(spool).unlink(missing_ok=True)
            raise
    except OSError:  # a read-only home: compile every time
        return


def _cache_path(hyperscan: Any, needles: Sequence[Needle]) -> Path:
    key = hashlib.sha256(repr((hyperscan.__version__, [(n.literal, n.caseless) for n in needles])).encode())
    root = (
        os.environ.get("TRAINBOT_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainbot"
    )
    return Path(root) / f"needles-{key.hexdigest()[:32]}.hsdb"


def build_matcher(needles: Sequence[Needle]) -> Matcher:
    try:
        return HyperscanMatcher(needles)
    except ImportError:
        return RegexMatcher(needles)


# Counts the newlines in [start, end) of the log being scanned by reading it again: given where the log can be
# read twice (a file on disk), so the bytes after a log's last candidate line need never be counted.
Recount = Callable[[int, int], int]


class LogScanner:
    """Yields each line of a stream that holds a needle, in file order, one Hit per line.

    The block buffer is allocated once and reused for every log of a bundle: a bundle of
    10,000 tiny logs must not pay for 10,000 fresh multi-megabyte buffers.
    """

    def __init__(
        self, needles: Sequence[Needle], matcher: Matcher | None = None, block_bytes: int = BLOCK_BYTES
    ) -> None:
        if block_bytes <= LOOKAHEAD_BYTES + MAX_LINE_BYTES:
            raise ValueError("a block must be larger than the look-ahead and one long line")
        self._needles = tuple(needles)
        self._matcher = matcher or build_matcher(self._needles)
        self._block = block_bytes
        self._buffer = bytearray(block_bytes + LOOKAHEAD_BYTES + MAX_LINE_BYTES)

    def scan(
        self,
        stream: BinaryIO,
        on_long_line: Callable[[int], None] | None = None,
        on_binary: Callable[[int], None] | None = None,
        passed_over: Container[bytes] = frozenset(),
        recount: Recount | None = None,
    ) -> Iterator[Hit]:
        """Hits in file order. With on_binary, a block of binary content ends the scan: on_binary(its line).

        A line whose exact bytes are in `passed_over` gives no Hit; the caller may add to it as it goes. With
        `recount`, newlines are counted only up to the last Hit: blocks after it are never counted.
        """
        buffer = self._buffer
        view = memoryview(buffer)
        lines = _LineCounter(buffer, recount)
        runs = _Runs(buffer)
        carry = 0
        reported_long = False
        while True:
            got = _fill(stream, view, carry, self._block)
            end = carry + got
            at_eof = got < self._block
            if on_binary and _binary(buffer, carry, end):
                on_binary(lines.at(0))
                return
            split, inside_a_line = (end, False) if at_eof else _split_point(buffer, end)
            if on_long_line and not reported_long and inside_a_line:
                reported_long = True
                on_long_line(lines.at(split))
            yield from self._hits_in_block(view[:end], split, lines, passed_over, runs)
            if at_eof:
                return
            lines.leave(split)
            carry = end - split
            buffer[:carry] = bytes(view[split:end])

    def _hits_in_block(
        self, data: memoryview, split: int, lines: _LineCounter, passed_over: Container[bytes], runs: _Runs
    ) -> Iterator[Hit]:
        buffer = self._buffer
        needles = self._needles
        end = len(data)
        current: Hit | None = None
        line_end = -1
        for start, index in self._matches(data, runs.recurring(end)):
            if start >= split:
                break
            if start < line_end:
                # Another needle in the line just seen, or in lines passed over.
                if current is not None:
                    current.needles.add(index)
                    # The line's first needle may want fewer lines after it than a later one on the same line.
                    if needles[index].context_lines > len(current.after):
                        current.after = _lines_after(buffer, line_end, end, needles[index].context_lines)
                continue
            if current is not None:
                yield current
                current = None
            line_start = buffer.rfind(b"\n", 0, start) + 1
            line_end = buffer.find(b"\n", start, end)
            line_end = end if line_end < 0 else line_end
            raw = bytes(data[line_start:line_end]) if line_end - line_start <= MAX_LINE_BYTES else b""
            if raw and raw in passed_over:
                line_end = runs.pass_over(raw, line_start, line_end, end)
                continue
            runs.close()
            text, truncated = _line_text(buffer, line_start, line_end, start)
            after = _lines_after(buffer, line_end, end, needles[index].context_lines)
            current = Hit(lines.at(line_start), text, {index}, after, truncated, raw)
        runs.close()
        if current is not None:
            yield current

    def _matches(self, data: memoryview, skipped: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Needle occurrences in data, in order, outside the skipped ranges (which hold whole lines)."""
        if not skipped:
            return self._matcher.find(data)
        found: list[tuple[int, int]] = []
        start = 0
        for skip_from, skip_to in [*skipped, (len(data), len(data))]:
            if skip_from > start:
                found += [(at + start, index) for at, index in self._matcher.find(data[start:skip_from])]
            start = skip_to
        return found


class _Runs:
    """Runs of consecutive passed-over lines, remembered by their first line, so that where one recurs byte for
    byte its lines are passed over at once instead of one by one: a communicator initialised again prints the
    same 64 channel lines every time. Bounded: runs of at most MAX_RUN_BYTES, at most MAX_RUNS of them.

    Long runs are also looked for in each block before its needles are (a search for a long string skips most of
    the bytes), so that the needles in them never reach Python at all.
    """

    def __init__(self, buffer: bytearray) -> None:
        self._buffer = buffer
        self._known: dict[bytes, bytes] = {}
        # Long runs by their first line and its newline: the first line is found (a long string is slow to look
        # for: every search studies it first), then the run is compared.
        self._long: dict[bytes, bytes] = {}
        self._first = b""
        self._start = self._end = -1
        self._lines = 0

    def pass_over(self, raw: bytes, line_start: int, line_end: int, end: int) -> int:
        """Passes over the line at line_start, and the run it starts where that recurs; returns where the
        passed-over bytes end."""
        known = self._known.get(raw)
        if known is not None and self._whole_lines_at(known, line_start, end):
            self.close()
            return line_start + len(known)
        if not self._lines or line_start != self._end + 1 or line_end - self._start > MAX_RUN_BYTES:
            self.close()
            self._first, self._start, self._lines = raw, line_start, 0
        self._end = line_end
        self._lines += 1
        return line_end

    def close(self) -> None:
        """The current run ends (a line that is not passed over, or the end of a block)."""
        if self._lines > 1 and (self._first in self._known or len(self._known) < MAX_RUNS):
            run = self._known[self._first] = bytes(self._buffer[self._start : self._end])
            if len(run) >= LONG_RUN_BYTES and (self._first + b"\n" in self._long or len(self._long) < MAX_LONG_RUNS):
                self._long[self._first + b"\n"] = run
        self._start = self._end = -1
        self._lines = 0

    def _whole_lines_at(self, run: bytes, line_start: int, end: int) -> bool:
        """Whether the run is at line_start in the buffer and ends where a line does (its last line not just the
        start of a longer one)."""
        stop = line_start + len(run)
        return stop < end and self._buffer[stop] == NEWLINE and self._buffer.startswith(run, line_start)

    def recurring(self, end: int) -> list[tuple[int, int]]:
        """Where long runs recur in the buffer before `end` as whole lines: [start, stop) in order, not overlapping."""
        buffer = self._buffer
        found = []
        for first, run in self._long.items():
            at = buffer.find(first, 0, end)
            while at >= 0:
                whole_lines = (at == 0 or buffer[at - 1] == NEWLINE) and self._whole_lines_at(run, at, end)
                if whole_lines:
                    found.append((at, at + len(run)))
                at = buffer.find(first, at + len(run) if whole_lines else at + 1, end)
        found.sort()
        apart: list[tuple[int, int]] = []
        for start, stop in found:
            if not apart or start >= apart[-1][1]:
                apart.append((start, stop))
        return apart


class _LineCounter:
    """Line numbers of the buffer's positions, counting newlines only as far as a caller asks.

    Positions are asked for in file order. Where the log can be read twice (`recount`), bytes that leave the
    buffer uncounted are counted from the log only if a later line is asked for; otherwise they are counted
    as they leave.
    """

    def __init__(self, buffer: bytearray, recount: Recount | None) -> None:
        self._buffer = buffer
        self._recount = recount
        self._buffer_offset = 0  # the log's offset of the buffer's first byte
        self._counted_to = 0  # the log's offset up to which newlines are counted
        self._line = 1  # the line at _counted_to

    def at(self, position: int) -> int:
        """The 1-based line of the buffer's byte at `position`."""
        if self._counted_to < self._buffer_offset and self._recount is not None:
            self._line += self._recount(self._counted_to, self._buffer_offset)
            self._counted_to = self._buffer_offset
        counted = self._counted_to - self._buffer_offset
        if position >= counted:
            self._line += self._buffer.count(b"\n", counted, position)
        else:
            self._line -= self._buffer.count(b"\n", position, counted)
        self._counted_to = self._buffer_offset + position
        return self._line

    def leave(self, split: int) -> None:
        """The buffer's bytes before `split` leave it; what follows moves to its start."""
        if self._recount is None:
            self.at(split)
        self._buffer_offset += split


def _fill(stream: BinaryIO, view: memoryview, offset: int, size: int) -> int:
    """Read up to size bytes at offset; short only at end of stream."""
    total = 0
    while total < size:
        got = stream.readinto(view[offset + total : offset + size])
        if not got:
            break
        total += got
    return total


def _binary(buffer: bytearray, start: int, end: int) -> bool:
    sample_end = min(end, start + BINARY_SAMPLE_BYTES)
    return buffer.count(b"\x00", start, sample_end) > (sample_end - start) * BINARY_NUL_SHARE


def _split_point(buffer: bytearray, end: int) -> tuple[int, bool]:
    """Where this block's reporting stops: after the last newline that leaves a look-ahead; and whether
    that is inside an over-long line.

    When the last line before the look-ahead is longer than MAX_LINE_BYTES the block splits
    inside it, so a log of one endless line still streams in bounded memory.
    """
    limit = end - LOOKAHEAD_BYTES
    newline = buffer.rfind(b"\n", max(0, limit - MAX_LINE_BYTES), limit)
    return (newline + 1, False) if newline >= 0 else (limit, True)


def _line_text(buffer: bytearray, start: int, end: int, match: int) -> tuple[str, bool]:
    truncated = end - start > MAX_LINE_BYTES
    if truncated:
        start = max(start, match - MAX_LINE_BYTES // 2)
        end = min(end, start + MAX_LINE_BYTES)
    return _decode(buffer[start:end]), truncated


def _lines_after(buffer: bytearray, line_end: int, end: int, count: int) -> list[str]:
    """Up to `count` lines after the one ending at line_end, within the look-ahead; found one at a time, since a
    wrapped message wants two of them and should not pay for splitting the whole look-ahead."""
    stop = min(end, line_end + 1 + LOOKAHEAD_BYTES)
    lines: list[str] = []
    start = line_end + 1
    while len(lines) < min(count, MAX_CONTEXT_LINES) and start < stop:
        newline = buffer.find(b"\n", start, stop)
        newline = stop if newline < 0 else newline
        lines.append(_decode(buffer[start : min(newline, start + MAX_LINE_BYTES)]))
        start = newline + 1
    return lines


def _decode(raw: bytes | bytearray) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")
