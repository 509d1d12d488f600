"""Evidence: everything a bundle holds, loaded once, typed, for the rules to read.

Rules never touch files; they read this. Missing inputs are empty collections, and
`sources` says for each source (and each unreadable file) what happened to it.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from dataclasses import dataclass, field

from diagnosers.findings import Quote
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException

# Status words of BUNDLE.md, plus "missing" for a source the bundle simply does not have.
OK = "ok"
MISSING = "missing"

SOURCE_NAMES = ("logs", "k8s", "ray", "prometheus", "steps")

# Job states in which nothing has failed (Ray and KubeRay spell them in capitals).
NOT_FAILED_STATES = frozenset({"SUCCEEDED", "RUNNING", "COMPLETE", "COMPLETED"})


@dataclass(slots=True)
class BundleMeta:
    job: str = ""
    namespace: str = ""
    backend: str = ""
    status: str = ""
    # Where bundle.json says the status, for a finding that has nothing else to quote.
    status_quote: Quote | None = None
    world_size: int | None = None
    gpus_per_worker: int | None = None
    start: str = ""
    end: str = ""
    # Which run the steps/ timings are of, where the job had several (one trial of a sweep) and why that one.
    steps_from: str = ""

    @property
    def did_not_fail(self) -> bool:
        return self.status.upper() in NOT_FAILED_STATES


@dataclass(slots=True)
class Series:
    """One Prometheus series: a metric's samples for one label set (one GPU, usually)."""

    metric: str
    labels: dict[str, str]
    values: list[float]
    source: str
    line: int
    # Unix seconds of each value: the rules need only the values, charts draw them over time. Packed (8 bytes
    # a sample, not a float object's 32): a 6-hour, 64-GPU bundle has millions.
    times: array[float] = field(default_factory=lambda: array("d"))

    def quote(self, summary: str) -> Quote:
        shown = ", ".join(f'{key}="{value}"' for key, value in sorted(self.labels.items()) if key != "__name__")
        return Quote(self.source, self.line, f"{self.metric}{{{shown}}} {summary}")


@dataclass(slots=True)
class StepRecord:
    step: int
    step_s: float
    data_s: float
    comm_s: float
    samples: float | None
    quote: Quote
    # What the step ran on, where the record says (workloads' StepTimer: torch's device type, "cpu" or "cuda").
    device: str = ""

    @property
    def compute_s(self) -> float:
        return max(0.0, self.step_s - self.data_s - self.comm_s)


@dataclass(slots=True)
class Evidence:
    meta: BundleMeta = field(default_factory=BundleMeta)
    sources: dict[str, str] = field(default_factory=dict)
    signals: dict[str, list[Signal]] = field(default_factory=lambda: defaultdict(list))
    exceptions: list[PythonException] = field(default_factory=list)
    series: dict[str, list[Series]] = field(default_factory=lambda: defaultdict(list))
    steps: dict[int, list[StepRecord]] = field(default_factory=lambda: defaultdict(list))
    nodes: set[str] = field(default_factory=set)

    def of(self, *kinds: str) -> list[Signal]:
        """Signals of these kinds, in bundle order."""
        found = [signal for kind in kinds for signal in self.signals.get(kind, ())]
        return sorted(found, key=lambda signal: (signal.quote.source, signal.quote.line))

    def add_signals(self, signals: list[Signal]) -> None:
        for signal in signals:
            self.signals[signal.kind].append(signal)

    def metric(self, *names: str) -> tuple[str, list[Series]]:
        """The first of these metrics the bundle has, with its series."""
        for name in names:
            found = [series for series in self.series.get(name, ()) if series.values]
            if found:
                return name, found
        return "", []
