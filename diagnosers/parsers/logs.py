"""Turn a text log into signals and Python exceptions with one streaming pass."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import BinaryIO

from diagnosers.findings import MAX_QUOTES_PER_FINDING, Quote
from diagnosers.logscan import MAX_CONTEXT_LINES, Hit, LogScanner, Needle, Recount
from diagnosers.parsers import failures
from diagnosers.parsers.frameworks import horovod, jax_dist, mlflow_log, mpi_launch, ray_log, torch_dist
from diagnosers.parsers.platform import cuda, k8s_text, kernel, nccl
from diagnosers.parsers.prefixes import split_prefix
from diagnosers.parsers.signals import LinePattern, Signal, common_attrs
from diagnosers.parsers.timings import phase_tables, step_lines, throughput
from diagnosers.parsers.tracebacks import HEADER, PythonException, parse_traceback

LINE_PATTERNS: tuple[LinePattern, ...] = (
    *nccl.PATTERNS,
    *torch_dist.PATTERNS,
    *horovod.PATTERNS,
    *jax_dist.PATTERNS,
    *mpi_launch.PATTERNS,
    *cuda.PATTERNS,
    *ray_log.PATTERNS,
    *kernel.PATTERNS,
    *k8s_text.PATTERNS,
    *mlflow_log.PATTERNS,
    *failures.PATTERNS,
    *phase_tables.PATTERNS,
    *step_lines.PATTERNS,
    *throughput.PATTERNS,
)

# Times an identical line is parsed before the rest of its repeats are passed over: enough to fill a finding's quotes.
REPEATS_KEPT = MAX_QUOTES_PER_FINDING


# A training loop prints a timing line every few steps, a long run hundreds of thousands: they neither count
# towards the matched-line limit (a failure after them must still be read) nor are all kept; the first and
# the last this many say where the time goes.
STEP_LINES_KEPT = 2_000
# How many lines after a candidate line a wrapped message may continue on: a terminal 80 columns wide breaks a
# 240-character message in three.
WRAPPED_LINES = 2
_SENTENCE_END = re.compile(r"[.:;!?)\]}>\"']\s*$")
# A line that begins a record of its own rather than continuing the one above: a timestamp, a glog or bracketed
# header, a log level, an exception or a traceback.
_RECORD_START = re.compile(
    r"\d{4}[-/]\d\d[-/]\d\d|[IWEF]\d{4} |\[|(?:DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL|FATAL)\b"
    r"|Traceback \(|(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning)\b"
)


@dataclass(slots=True)
class ParsedLog:
    signals: list[Signal] = field(default_factory=list)
    exceptions: list[PythonException] = field(default_factory=list)
    # Distinct lines that held a needle (repeats keep no text of their own); the first one not parsed when
    # `max_hits` stopped the parse.
    hits: int = 0
    stopped_at: int = 0
    # The line from which the log turned out to be binary, where it did; the scan stopped there.
    binary_at: int = 0
    step_lines: int = 0
    latest_step_lines: deque[Signal] = field(default_factory=lambda: deque(maxlen=STEP_LINES_KEPT))


class LogParser:
    """All line patterns behind one set of needles; build once, parse many logs."""

    def __init__(self, patterns: tuple[LinePattern, ...] = LINE_PATTERNS) -> None:
        self._patterns = patterns
        needle_index: dict[tuple[str, bool], int] = {}
        self._owners: list[list[int]] = []
        for pattern_index, line_pattern in enumerate(patterns):
            for literal in line_pattern.needles:
                key = (literal, line_pattern.caseless)
                if key not in needle_index:
                    needle_index[key] = len(self._owners)
                    self._owners.append([])
                owners = self._owners[needle_index[key]]
                if pattern_index not in owners:
                    owners.append(pattern_index)
        # A pattern whose message may wrap needs the lines after its candidate line; only its needles pay for them.
        needles = [
            Needle(literal.encode(), caseless, WRAPPED_LINES if any(patterns[owner].wraps for owner in owners) else 0)
            for (literal, caseless), owners in zip(needle_index, self._owners, strict=True)
        ]
        self._traceback_needle = len(needles)
        needles.append(Needle(HEADER.encode(), context_lines=MAX_CONTEXT_LINES))
        self._owners.append([])
        self._scanner = LogScanner(needles)
        step_kinds = {step_lines.STEP_TIMING, step_lines.PROFILER_ROW, throughput.STEP_RATE}
        self._step_needles = frozenset(
            index
            for index, owners in enumerate(self._owners)
            if owners and all(patterns[owner].kind in step_kinds for owner in owners)
        )

    def parse(
        self,
        source: str,
        stream: BinaryIO,
        on_long_line: Callable[[int], None] | None = None,
        into: ParsedLog | None = None,
        max_hits: int | None = None,
        recount: Recount | None = None,
    ) -> ParsedLog:
        """Parse a log; with `into`, results land there as they come, so a read error keeps them. The parse stops
        after `max_hits` matched lines, and where the log turns binary. `recount` lets the scanner count lines
        only as far as the last matched line (see LogScanner.scan).

        A line seen REPEATS_KEPT times already is passed over: it would give the same signals again, and no finding
        quotes more than that many lines, so the 10,000th identical NCCL channel line changes nothing (a traceback
        header is never passed over: the lines after it differ). Until then a repeat gets its first time's signals
        at its own line, without matching it again. Neither repeats nor passed-over lines count in `max_hits`, which
        bounds the text kept: they keep none of their own.
        """
        parsed = into if into is not None else ParsedLog()
        seen: dict[bytes, list[Signal]] = {}
        times_seen: dict[bytes, int] = {}
        passed_over: set[bytes] = set()

        def on_binary(line: int) -> None:
            parsed.binary_at = line

        # The first line of a message that a terminal broke over the next lines, and its last line: a match on those
        # lines quotes the line the message began on.
        head: Quote | None = None
        head_end = 0
        head_kinds: set[str] = set()
        try:
            for hit in self._scanner.scan(stream, on_long_line, on_binary, passed_over, recount):
                if hit.needles <= self._step_needles:
                    self._keep_step_lines(parsed, self._match(source, hit.line, hit.text, self._candidates(hit)))
                    continue
                if hit.raw in seen:
                    parsed.signals.extend(_at_line(seen[hit.raw], hit.line))
                    times_seen[hit.raw] = times = times_seen[hit.raw] + 1
                    if times >= REPEATS_KEPT:
                        passed_over.add(hit.raw)
                    continue
                if max_hits is not None and parsed.hits >= max_hits:
                    parsed.stopped_at = hit.line
                    break
                parsed.hits += 1
                if self._traceback_needle in hit.needles:
                    exception = parse_traceback(source, hit.line, hit.text, hit.after)
                    if exception is not None:
                        parsed.exceptions.append(exception)
                tool_text = split_prefix(hit.text)[0]
                following = _Following(hit.after)
                matched = list(self._matches(source, hit.line, hit.text, tool_text, self._candidates(hit), following))
                signals = [signal for _, signal in matched]
                wrapped = any(line_pattern.wraps for line_pattern, _ in matched)
                continues_a_message = head is not None and head.line < hit.line <= head_end
                if continues_a_message:
                    # A kind the head line already gave is the same message read again from its tail.
                    signals = [replace(signal, quote=head) for signal in signals if signal.kind not in head_kinds]
                elif wrapped:
                    head = Quote(source, hit.line, hit.text)
                    head_end = hit.line + _continued_lines(tool_text, following)
                    head_kinds = {signal.kind for signal in signals}
                parsed.signals.extend(signals)
                # A repeat reuses these signals at its own line: only where they read this line alone.
                if hit.raw and self._traceback_needle not in hit.needles and not (wrapped or continues_a_message):
                    seen[hit.raw] = signals
                    times_seen[hit.raw] = 1
        finally:
            parsed.exceptions[:] = failures.with_exceptions_without_header(parsed.signals, parsed.exceptions)
            parsed.signals.extend(parsed.latest_step_lines)
            parsed.latest_step_lines.clear()
        return parsed

    def _candidates(self, hit: Hit) -> list[int]:
        return sorted({owner for needle in hit.needles for owner in self._owners[needle]})

    @staticmethod
    def _keep_step_lines(parsed: ParsedLog, signals: Iterator[Signal]) -> None:
        for signal in signals:
            parsed.step_lines += 1
            if parsed.step_lines <= STEP_LINES_KEPT:
                parsed.signals.append(signal)
            else:
                parsed.latest_step_lines.append(signal)

    def parse_text(self, source: str, line: int, text: str) -> list[Signal]:
        """Signals in one line that did not come from a log file (a JSON string field)."""
        lowered = text.lower()
        candidates = [
            index
            for index, line_pattern in enumerate(self._patterns)
            if any(
                (needle.lower() in lowered) if line_pattern.caseless else (needle in text)
                for needle in line_pattern.needles
            )
        ]
        return list(self._match(source, line, text, candidates))

    def _match(self, source: str, line: int, text: str, candidates: list[int]) -> Iterator[Signal]:
        matches = self._matches(source, line, text, split_prefix(text)[0], candidates, _Following(()))
        return (signal for _, signal in matches)

    def _matches(
        self, source: str, line: int, text: str, tool_text: str, candidates: list[int], following: _Following
    ) -> Iterator[tuple[LinePattern, Signal]]:
        """Patterns see the tool's own text (`tool_text`, behind any launcher's prefix), one message at a time where
        a paste ran several NCCL lines together; the quote keeps the whole line. A pattern whose message wraps and
        does not match the line alone is tried on it joined with the lines following it."""
        for message in nccl.pasted_messages(tool_text):
            shared: dict[str, str] | None = None
            for index in candidates:
                line_pattern = self._patterns[index]
                attrs = line_pattern.match(message)
                if attrs is None and line_pattern.wraps and following.lines:
                    attrs = _match_wrapped(line_pattern, message, following)
                if attrs is None:
                    continue
                if shared is None:
                    shared = common_attrs(text, message)
                yield line_pattern, Signal(line_pattern.kind, Quote(source, line, text), {**shared, **attrs})


class _Following:
    """The lines after a candidate line that a wrapped message may continue on, each split from its launcher's
    prefix once however many patterns try them."""

    def __init__(self, after: Sequence[str]) -> None:
        self.lines = after[:WRAPPED_LINES]

    @cached_property
    def split(self) -> list[tuple[str, int]]:
        return [split_prefix(line) for line in self.lines]


def _continued_lines(first: str, following: _Following) -> int:
    """How many following lines the message of a wrapping pattern (`first`, the tool's text) continues on: one cut
    mid-sentence goes on over lines that start no record of their own (no prefix, indent, log level, exception or
    traceback of their own)."""
    if _SENTENCE_END.search(first):
        return 0
    count = 0
    for line, (_, prefix_end) in zip(following.lines, following.split, strict=True):
        if not line.strip() or line[0].isspace() or prefix_end or _RECORD_START.match(line):
            break
        count += 1
        if _SENTENCE_END.search(line):
            break
    return count


def _match_wrapped(line_pattern: LinePattern, first: str, following: _Following) -> dict[str, str] | None:
    """The pattern on a message broken over the following lines, rejoined as cut (a fixed-width terminal splits
    inside a word) or with a space (a re-wrap at a word boundary drops it). A blank line ends the message, and the
    match must begin in the first line: that is the line quoted."""
    continuations = []
    for line, (tool_text, _) in zip(following.lines, following.split, strict=True):
        if not line.strip():
            break
        continuations.append(tool_text)
    for separator in ("", " "):
        joined = first
        for continuation in continuations:
            joined += separator + continuation
            attrs = line_pattern.match(joined, starts_before=len(first))
            if attrs is not None:
                return attrs
    return None


def _at_line(signals: list[Signal], line: int) -> Iterator[Signal]:
    # Built directly: dataclasses.replace costs ten times as much, and a log of restarts re-places thousands of these.
    for signal in signals:
        yield Signal(signal.kind, Quote(signal.quote.source, line, signal.quote.text), signal.attrs)
