"""JSON files of a bundle: Kubernetes objects, Ray dashboard answers, Prometheus, step timings.

Kubernetes and Ray report failures as strings (an event's reason and message, a container's
waiting reason, a job's message with its last log lines); those strings go through the same
line patterns as the logs, quoted at their line in the JSON file.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Generic, TypeVar

import msgspec

from diagnosers.evidence import BundleMeta, Evidence, Series, StepRecord
from diagnosers.findings import Quote
from diagnosers.parsers.logs import LogParser
from diagnosers.parsers.signals import Signal


class BadInput(ValueError):
    """A file of the bundle that cannot be read as what its name says it is."""


# Status strings run through the line patterns from one JSON file: a file of a million events has said it all
# long before, and each costs a pass over the patterns.
MAX_JSON_TEXTS = 20_000
# A quote shows at most this much either side of the value: minified JSON is one line of megabytes.
QUOTE_WINDOW = 2048
# Values never found in the file (escaped otherwise) each cost a search of it; after this many, none is searched.
MAX_MISSES = 32


class JsonLocator:
    """Finds the line of a JSON file where a string value is written, to quote it verbatim."""

    def __init__(self, raw: str) -> None:
        self._raw = raw
        self._cursor = 0
        self._cursor_line = 1
        self._misses = 0
        self.texts_left = MAX_JSON_TEXTS

    def locate(self, value: str) -> tuple[int, str]:
        self.texts_left -= 1
        if self._misses >= MAX_MISSES:
            return 1, value
        needle = json.dumps(value)[1:-1]
        position = self._raw.find(needle, self._cursor)
        if position < 0:
            position = self._raw.find(needle)
            if position < 0:
                self._misses += 1
                return 1, value
            self._cursor, self._cursor_line = 0, 1
        self._cursor_line += self._raw.count("\n", self._cursor, position)
        self._cursor = position
        return self._cursor_line, self._line_around(position, len(needle))

    def _line_around(self, position: int, length: int) -> str:
        low = max(0, position - QUOTE_WINDOW)
        newline = self._raw.rfind("\n", low, position)
        start = newline + 1 if newline >= 0 else low
        high = min(len(self._raw), position + length + QUOTE_WINDOW)
        newline = self._raw.find("\n", position, high)
        return self._raw[start : newline if newline >= 0 else high].strip()


def load_json(raw: bytes, source: str) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadInput(f"not JSON ({_first_line(error)})") from None
    except RecursionError:
        raise BadInput("JSON nested too deeply") from None


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:120]


def _items(document: Any, source: str) -> list[Any]:
    """A Kubernetes List's items, or a bare JSON list."""
    if isinstance(document, dict) and isinstance(document.get("items"), list):
        return document["items"]
    if isinstance(document, list):
        return document
    raise BadInput(f"expected a list or an object with 'items' in {source}")


def _text_signals(
    evidence: Evidence, parser: LogParser, locator: JsonLocator, source: str, reason: str, message: str
) -> None:
    """Run the line patterns over a reason and each line of its message, quoting each at its JSON line."""
    for part in [reason, *message.splitlines()]:
        if not part.strip():
            continue
        if locator.texts_left <= 0:
            raise BadInput(f"stopped after {MAX_JSON_TEXTS} status messages, the limit for one JSON file")
        line, quoted = locator.locate(part)
        for signal in parser.parse_text(source, line, part):
            evidence.add_signals([Signal(signal.kind, Quote(source, line, quoted), signal.attrs)])


def read_events(evidence: Evidence, parser: LogParser, raw: bytes, source: str) -> None:
    locator = JsonLocator(raw.decode("utf-8", "replace"))
    items = [event for event in _items(load_json(raw, source), source) if isinstance(event, dict)]
    # A pod that failed scheduling and was then scheduled (the autoscaler added a node) is not stuck.
    scheduled = {_dig(event, "involvedObject", "name") for event in items if event.get("reason") == "Scheduled"}
    for event in items:
        reason = str(event.get("reason") or "")
        if reason == "FailedScheduling" and _dig(event, "involvedObject", "name") in scheduled:
            continue
        message = str(event.get("message") or event.get("note") or "")
        _text_signals(evidence, parser, locator, source, reason, message)


def read_pods(evidence: Evidence, parser: LogParser, raw: bytes, source: str) -> None:
    locator = JsonLocator(raw.decode("utf-8", "replace"))
    for pod in _items(load_json(raw, source), source):
        if not isinstance(pod, dict):
            continue
        node = _dig(pod, "spec", "nodeName")
        if node:
            evidence.nodes.add(str(node))
        for reason, message in _pod_reasons(pod):
            _text_signals(evidence, parser, locator, source, reason, message)


def _pod_reasons(pod: dict[str, Any]) -> Iterator[tuple[str, str]]:
    status = pod.get("status") or {}
    if status.get("reason"):
        yield str(status["reason"]), str(status.get("message") or "")
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("status") == "False" and condition.get("message"):
            yield str(condition.get("reason") or ""), str(condition["message"])
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            if not isinstance(container, dict):
                continue
            for state_key in ("state", "lastState"):
                for state in (container.get(state_key) or {}).values():
                    if isinstance(state, dict) and state.get("reason"):
                        yield str(state["reason"]), str(state.get("message") or "")


def _dig(document: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def read_custom_resource(evidence: Evidence, parser: LogParser, raw: bytes, source: str) -> None:
    """A RayJob or RayCluster: its status words and message."""
    document = load_json(raw, source)
    status = _dig(document, "status")
    if not isinstance(status, dict):
        return
    job_status = status.get("jobStatus")
    if job_status and not evidence.meta.status:
        evidence.meta.status = str(job_status)
    locator = JsonLocator(raw.decode("utf-8", "replace"))
    for key in ("message", "reason"):
        if status.get(key):
            _text_signals(evidence, parser, locator, source, "", str(status[key]))


def read_ray_jobs(evidence: Evidence, parser: LogParser, raw: bytes, source: str) -> None:
    """Ray dashboard GET /api/jobs/: a job's message carries the tail of its driver log."""
    document = load_json(raw, source)
    jobs = document if isinstance(document, list) else [document]
    locator = JsonLocator(raw.decode("utf-8", "replace"))
    for job in jobs:
        if not isinstance(job, dict):
            continue
        if job.get("status") and not evidence.meta.status:
            evidence.meta.status = str(job["status"])
        if job.get("message"):
            _text_signals(evidence, parser, locator, source, "", str(job["message"]))


def read_ray_tasks(evidence: Evidence, parser: LogParser, raw: bytes, source: str) -> None:
    """Ray state API GET /api/v0/tasks (or `ray list tasks --format json`, a bare list): a failed task's
    error_message is Ray's own account of it (a memory kill, a dead worker), where a KubeRay job has no
    raylet log to read it from."""
    document = load_json(raw, source)
    tasks = document if isinstance(document, list) else _dig(document, "data", "result", "result")
    if not isinstance(tasks, list):
        raise BadInput("expected the state API's {data: {result: {result: [tasks]}}} or a list of tasks")
    locator = JsonLocator(raw.decode("utf-8", "replace"))
    for task in tasks:
        if isinstance(task, dict) and task.get("error_message"):
            _text_signals(evidence, parser, locator, source, "", str(task["error_message"]))


def check_ray_nodes(evidence: Evidence, parser: LogParser, raw: bytes, source: str) -> None:
    """Ray dashboard GET /nodes?view=summary. No rule reads node summaries yet; the file is checked so that
    a damaged one is named rather than passed over."""
    if not isinstance(_dig(load_json(raw, source), "data", "summary"), list):
        raise BadInput("expected the dashboard's {data: {summary: [nodes]}}")


def read_meta(raw: bytes, source: str) -> tuple[BundleMeta, dict[str, str]]:
    document = load_json(raw, source)
    if not isinstance(document, dict):
        raise BadInput("expected a JSON object")
    meta = BundleMeta(
        job=str(document.get("job") or document.get("name") or ""),
        namespace=str(document.get("namespace") or ""),
        backend=str(document.get("backend") or ""),
        status=str(document.get("status") or ""),
        world_size=_int_or_none(document.get("world_size")),
        gpus_per_worker=_int_or_none(document.get("gpus_per_worker")),
        start=str(document.get("start") or ""),
        end=str(document.get("end") or ""),
        steps_from=str(document.get("steps_from") or ""),
    )
    if meta.status:
        meta.status_quote = Quote(source, *JsonLocator(raw.decode("utf-8", "replace")).locate(meta.status))
    sources = document.get("sources")
    statuses = {str(key): str(value) for key, value in sources.items()} if isinstance(sources, dict) else {}
    return meta, statuses


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


SampleValue = TypeVar("SampleValue", float, str)


class _PromSeries(msgspec.Struct, Generic[SampleValue]):
    metric: dict[str, str] = {}
    values: list[tuple[float, SampleValue]] = []


class _PromData(msgspec.Struct, Generic[SampleValue]):
    resultType: str
    result: list[_PromSeries[SampleValue]]


class _PromMatrix(msgspec.Struct, Generic[SampleValue]):
    data: _PromData[SampleValue]
    status: str = "success"


# Sample values read as numbers straight from their strings ("97" -> 97.0): no string object per sample, a third
# faster on a 64-GPU bundle. Prometheus's "+Inf"/"-Inf" fail it, and fall to the decoder of strings.
_MATRIX_OF_NUMBERS = msgspec.json.Decoder(_PromMatrix[float], strict=False)
_MATRIX = msgspec.json.Decoder(_PromMatrix[str])


def read_prometheus(evidence: Evidence, raw: bytes, source: str, default_metric: str) -> None:
    """One query_range (matrix) or query (vector) response."""
    matrix = None
    # The fast paths decode the usual matrix straight into typed structs.
    for decoder in (_MATRIX_OF_NUMBERS, _MATRIX):
        try:
            matrix = decoder.decode(raw)
            break
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue
    if matrix is not None and matrix.status == "success" and matrix.data.resultType == "matrix":
        lines = _series_lines(raw, len(matrix.data.result))
        for index, item in enumerate(matrix.data.result):
            _add_series(evidence, item.metric, item.values, default_metric, source, lines[index])
        return
    _read_prometheus_document(evidence, raw, source, default_metric)


def _add_series(
    evidence: Evidence, labels: dict[str, str], samples: list[Any], default_metric: str, source: str, line: int
) -> None:
    metric = labels.get("__name__") or default_metric
    times, values = _samples(samples)
    evidence.series[metric].append(Series(metric, labels, values, source, line, times))


def _read_prometheus_document(evidence: Evidence, raw: bytes, source: str, default_metric: str) -> None:
    """Any other shape: a vector, an error answer, or something that is not Prometheus at all."""
    document = load_json(raw, source)
    if not isinstance(document, dict) or document.get("status", "success") != "success":
        error = document.get("error") if isinstance(document, dict) else None
        raise BadInput(f"Prometheus answered an error: {error}" if error else "not a Prometheus API response")
    data = document.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise BadInput("no data.result in the Prometheus response")
    result_type = data.get("resultType")
    if result_type not in ("matrix", "vector"):
        raise BadInput(f"unsupported Prometheus resultType {result_type!r} (expected matrix or vector)")
    lines = _series_lines(raw, len(data["result"]))
    for index, item in enumerate(data["result"]):
        if not isinstance(item, dict):
            continue
        labels = {str(key): str(value) for key, value in (item.get("metric") or {}).items()}
        samples = item.get("values") if result_type == "matrix" else [item.get("value")]
        _add_series(
            evidence, labels, samples if isinstance(samples, list) else [], default_metric, source, lines[index]
        )


def _samples(samples: list[Any]) -> tuple[array[float], list[float]]:
    """Sample times and values as floats; NaN, infinities and malformed samples are dropped, with their times."""
    try:
        # The common case in C: 6 h of 15 s samples for 64 GPUs is over a million values.
        values = list(map(float, [sample[1] for sample in samples]))
        if all(map(math.isfinite, values)):
            return array("d", [sample[0] for sample in samples]), values
    except (TypeError, ValueError, IndexError, KeyError):
        pass
    kept = [pair for pair in map(_sample, samples) if pair is not None]
    return array("d", [at for at, _ in kept]), [value for _, value in kept]


def _sample(sample: Any) -> tuple[float, float] | None:
    try:
        at, value = float(sample[0]), float(sample[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return (at, value) if math.isfinite(value) else None


def _series_lines(raw: bytes, count: int) -> list[int]:
    """Line of each series' "metric" key, so evidence points into the file."""
    lines, position, line = [], 0, 1
    for _ in range(count):
        found = raw.find(b'"metric"', position)
        if found < 0:
            # No more keys to find: the rest share the last line (a search each would be quadratic).
            return lines + [line] * (count - len(lines))
        line += raw.count(b"\n", position, found)
        lines.append(line)
        position = found + 1
    return lines


# A step record is a short line; a longer one is not a step record, and is skipped without being held whole.
MAX_STEP_LINE_BYTES = 64 << 10
# More lines than this that are not step records: the file is something else, and reading it on is waste.
MAX_BAD_STEP_LINES = 10_000


class _StepLine(msgspec.Struct):
    rank: int
    step: int
    step_s: float
    data_s: float | None = None
    comm_s: float | None = None
    samples: float | None = None
    # Not in BUNDLE.md's fields: workloads' StepTimer adds it. Any JSON, so an odd value loses no timings.
    device: Any = ""


# Lax, as json.loads was: "3" is a rank and "0.5" a time; unknown fields ("time") are skipped unparsed.
_STEP_LINE = msgspec.json.Decoder(_StepLine, strict=False)


@dataclass(slots=True)
class StepsRead:
    kept: int = 0
    bad: int = 0
    # The line at which reading stopped early, and why.
    stopped_at: int = 0
    why: str = ""


def read_steps(evidence: Evidence, stream: BinaryIO, source: str, max_records: int) -> StepsRead:
    """Step-phase JSON Lines, streamed a line at a time; at most `max_records` are kept."""
    read = StepsRead()
    for number, line in enumerate(_lines(stream), start=1):
        if not line.strip():
            continue
        record = _step_record(line, source, number)
        if record is None:
            read.bad += 1
            if read.bad >= MAX_BAD_STEP_LINES:
                read.stopped_at, read.why = number, f"{MAX_BAD_STEP_LINES} lines are not step records"
                break
            continue
        if read.kept >= max_records:
            read.stopped_at, read.why = number, f"kept {max_records} step records, the limit"
            break
        rank, step_record = record
        evidence.steps[rank].append(step_record)
        read.kept += 1
    return read


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines up to MAX_STEP_LINE_BYTES; a longer line is read through in pieces and given as one bad line."""
    while line := stream.readline(MAX_STEP_LINE_BYTES):
        if len(line) < MAX_STEP_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        while (rest := stream.readline(MAX_STEP_LINE_BYTES)) and not rest.endswith(b"\n"):
            pass
        yield b"{}"


def _step_record(line: bytes, source: str, number: int) -> tuple[int, StepRecord] | None:
    try:
        fields = _STEP_LINE.decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    data_s, comm_s = fields.data_s or 0.0, fields.comm_s or 0.0
    if not all(math.isfinite(value) and value >= 0 for value in (fields.step_s, data_s, comm_s)):
        return None
    quote = Quote(source, number, line.rstrip(b"\r\n").decode("utf-8", "replace"))
    device = fields.device if isinstance(fields.device, str) else ""
    return fields.rank, StepRecord(fields.step, fields.step_s, data_s, comm_s, fields.samples, quote, device)
