"""What launchers and log shippers put before a tool's own line, found once so every pattern sees the tool's text.

A line of a multi-process job rarely reaches the bundle as the tool wrote it: mpirun tags it `[1,3]<stderr>:`,
pdsh `node-3: `, torchrun `[rank3]:` or `[default0]:`, Ray `(RayTrainWorker pid=1234, ip=10.0.0.1) ` (and may
end it with ` [repeated 15x across cluster]`), `kubectl logs --timestamps` an RFC3339 time, a CloudWatch or
SageMaker export a `| timestamp |` or tab-separated time column, docker compose `trainer-1  | ` (and
schedulers alike, `1469.worker.1  | `), `srun --label` ` 3: `, journald `Nov 22 10:42:17 host python[123]: `;
often two or three of them nest. Patterns match the text after them; quotes keep the whole line.

A paste into an issue adds markdown of its own: `> ` quote markers before the line, `**bold**` or `` `code` `` around
the message; they are stripped as one more layer, and the closing marker with them.

Each layer is recognised only in the shapes these tools print, so the tool's own text is never eaten: a
`[E ProcessGroupNCCL.cpp:607]` header, a Python list `[1, 2]`, `RuntimeError: ...`, `urllib3.exceptions...: `,
`nvidia-container-cli: ...` and `libcuda.so.1: ...` all stay.
"""

from __future__ import annotations

import re

_ISO_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_EPOCH_MS = r"\d{13}"
_SYSLOG_TIME = r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_IP = r"\d{1,3}(?:\.\d{1,3}){3}"
_HOST = r"[\w.:-]+"
# A pdsh host: an IP, `localhost`, or a lower-case name with a digit. Upper case would take an exception's
# type (`urllib3.exceptions.MaxRetryError: `); a shared library (`libcuda.so.1: `) is the loader's own text.
_PDSH_HOST = rf"(?:{_IP}|localhost|(?=[a-z0-9.-]*\d)(?![a-z0-9.-]*\.so\b)[a-z0-9][a-z0-9.-]*)"
# A Ray actor's name may nest one level of calls: `MapWorker(MapBatches(<lambda>))`.
_RAY_ACTOR = r"[^()\s,]+(?:\((?:[^()]|\([^()]*\))*\))?"
_JOURNALD_SOURCE = r"[\w.-]+ [\w.@/-]+\[\d+\]: "

# (name, regex, whether it names the process the line came from). Timestamps and log levels name nothing:
# every line of one process has its own.
_LAYERS: tuple[tuple[str, str, bool], ...] = (
    ("mpirun", r"\[\d+(?:,\d+)?\]<std(?:out|err)>: ?", True),
    ("torchrun", r"\[[A-Za-z_]+\d+\]: ?", True),
    ("ray", rf"\((?:{_RAY_ACTOR}(?:, ?| ))?(?:rank=\d+,? )?(?:pid=[\w-]+(?:, ?ip={_HOST})?|ip={_HOST})\) ?", True),
    ("kubectl_prefix", r"\[pod/[^\]\s]+\] ", True),
    ("journald_time", rf"(?:{_SYSLOG_TIME}|{_ISO_TIME}) (?={_JOURNALD_SOURCE})", False),
    ("journald", rf"(?<=[\dZ] ){_JOURNALD_SOURCE}", True),
    ("bracketed_time", rf"\[{_ISO_TIME}\] ", False),
    # vLLM's logger, inside Ray actors of RL trainers: `ERROR 08-05 14:13:44 [multiproc_executor.py:487] `.
    ("vllm_logging", rf"{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.]+:\d+\] ", False),
    ("python_logging", rf"(?:{_ISO_TIME}|\d\d/\d\d/\d{{4}} \d\d:\d\d:\d\d) - (?:[\w.]+ - )?{_LEVEL} - ", False),
    ("table_time", rf"\| *(?:{_ISO_TIME}|{_EPOCH_MS}) *\| *", False),
    ("tab_time", rf"(?:{_ISO_TIME}|{_EPOCH_MS})\t", False),
    ("kubectl_time", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ", False),
    # Compose names a container `service-1` (v2) or `service_1` (v1), and schedulers that print like it
    # `1469.worker.1`: the index keeps a table's first column (`run_training_epoch  |  91.6 |`) from reading as a
    # container.
    ("compose", r"[A-Za-z0-9][\w.-]*[-_.]\d+ +\| ", True),
    ("srun_label", r" *\d+: ", True),
    ("pdsh", rf"{_PDSH_HOST}: ", True),
    # Ray colours its prefix; a paste often loses the escape character and keeps `[36m`, syslog writes it `#033`.
    # Not the `[m` of a bracketed tag such as a log shipper's `[mlflow] `.
    ("ansi", r"(?:\x1b|#033)?\[[\d;]*m(?![\w-]*\]) ?", False),
    # A markdown quote (`> `, nested `> > `); `>>> ` is Python's prompt and keeps its text.
    ("markdown_quote", r"> ", False),
)
_PREFIX = re.compile("(?:" + "|".join(regex for _, regex, _ in _LAYERS) + ")+")
_LAYER = re.compile("|".join(f"(?P<{name}>{regex})" for name, regex, _ in _LAYERS))
_NAMES_PROCESS = {name for name, _, names_process in _LAYERS if names_process}
# Bold or inline code around the whole message, with no marker of its kind inside it.
_MARKDOWN_WRAP = re.compile(r"\*\*(?P<bold>(?:(?!\*\*).)+)\*\*\s*$|`(?P<code>[^`]+)`\s*$")
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\](?: \(Ray deduplicates logs[^)]*\))?\s*$")


def split_prefix(line: str) -> tuple[str, int]:
    """The tool's own text in the line and where it starts; the line itself when nothing precedes it."""
    found = _PREFIX.match(line)
    start = found.end() if found else 0
    end = len(line)
    repeated = line.find(" [repeated ", start)
    if repeated >= 0 and (suffix := _RAY_REPEATED.search(line, repeated)):
        end = suffix.start()
    elif start and line[0] == "|" and line.rstrip().endswith("|"):
        end = len(line.rstrip("| "))
    elif line.startswith(("**", "`"), start) and (wrapped := _MARKDOWN_WRAP.match(line, start)):
        group = "bold" if wrapped.group("bold") is not None else "code"
        start, end = wrapped.span(group)
    if start == 0 and end == len(line):
        return line, 0
    return line[start:end], start


def process_key(line: str, offset: int) -> str:
    """The layers of the line's prefix that name its process (rank, host, worker pid), without the times."""
    parts: list[str] = []
    position = 0
    while position < offset:
        layer = _LAYER.match(line, position, offset)
        if layer is None or layer.end() == position:
            break
        if layer.lastgroup in _NAMES_PROCESS:
            parts.append(layer.group().strip())
        position = layer.end()
    return " ".join(parts)
