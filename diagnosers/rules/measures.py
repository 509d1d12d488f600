"""Where the time goes: GPU activity from DCGM or Ray metrics, step phases from steps/ or from log lines.

Shared by the bottleneck, straggler and small-batch rules. dcgm-exporter's default counters
include GPU_UTIL, GR_ENGINE_ACTIVE, PIPE_TENSOR_ACTIVE and DRAM_ACTIVE, while SM_ACTIVE and
NVLink bytes are opt-in: every reading here falls back to what the bundle has.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from diagnosers.evidence import Evidence, Series, StepRecord
from diagnosers.findings import Quote
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.timings import phase_tables, throughput
from diagnosers.parsers.timings.step_lines import DATALOADER_ACTIONS, EPOCH_ACTION, PROFILER_ROW, STEP_TIMING

# Utilisation in percent (0-100) or as a ratio (0-1), most direct first.
UTILISATION_METRICS: tuple[tuple[str, float], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", 100.0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1.0),
    ("ray_node_gpus_utilization", 100.0),
)
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
# A bitmask of NVML clock event reasons (DCGM 3.x renamed THROTTLE to EVENT); exporters publish either name.
CLOCK_EVENT_REASONS = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
# nvmlClocksEventReason bits that slow a working GPU: HW slowdown, SW thermal, HW thermal, HW power brake.
SLOWDOWN_REASON_BITS = 0x08 | 0x20 | 0x40 | 0x80

# Every metric a rule reads through Evidence.metric (with gpu_health's XID): an exporter's other metrics in a bundle
# are never decoded (see load_bundle's `metrics`).
METRICS_READ: frozenset[str] = frozenset(
    {
        *(metric for metric, _ in UTILISATION_METRICS),
        GR_ENGINE_ACTIVE,
        SM_ACTIVE,
        TENSOR_ACTIVE,
        DRAM_ACTIVE,
        SM_CLOCK,
        GPU_TEMP,
        POWER_USAGE,
        *CLOCK_EVENT_REASONS,
    }
)

# Running means are printed to 3 or 4 decimals: differencing them may dip this far below zero.
ROUNDING_S = 0.05
# The first tenth of a run is start-up (data loader warm-up, NCCL init, compilation): left out.
WARMUP_SHARE = 0.1

_HOST_LABELS = ("Hostname", "hostname", "instance", "node", "kubernetes_node", "ip", "pod")
_GPU_LABELS = ("gpu", "GpuIndex", "device", "minor_number", "UUID")


def steady(values: list[float]) -> list[float]:
    skip = int(len(values) * WARMUP_SHARE)
    return values[skip:] or values


def gpu_key(series: Series) -> str:
    """A GPU's name from whichever labels the exporter set: 'node-3/gpu 5'."""
    host = next((series.labels[label] for label in _HOST_LABELS if series.labels.get(label)), "")
    gpu = next((series.labels[label] for label in _GPU_LABELS if series.labels.get(label)), "")
    return f"{host}/gpu {gpu}" if host and gpu else host or f"gpu {gpu}" if gpu else series.labels.get("UUID", "gpu")


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One metric averaged over the steady part of the run, per GPU and over all GPUs."""

    metric: str
    per_gpu: dict[str, float]
    series: dict[str, Series]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_gpu.values())

    def quote_extremes(self, unit: str = "") -> list[Quote]:
        """The lowest and highest GPU, quoted with their means."""
        ordered = sorted(self.per_gpu, key=self.per_gpu.__getitem__)
        picks = dict.fromkeys([ordered[0], ordered[-1]])
        return [self.series[key].quote(f"mean {self.per_gpu[key]:.2f}{unit} over the run") for key in picks]


def reading(evidence: Evidence, metric: str, scale: float = 1.0) -> GpuReading | None:
    return _per_gpu(*evidence.metric(metric), lambda values: statistics.fmean(values) / scale)


def slowdown_share(evidence: Evidence) -> GpuReading | None:
    """Per GPU, the share of samples whose clock event reasons include a hardware or thermal slowdown."""
    return _per_gpu(
        *evidence.metric(*CLOCK_EVENT_REASONS),
        lambda values: sum(1 for value in values if int(value) & SLOWDOWN_REASON_BITS) / len(values),
    )


def _per_gpu(metric: str, found: list[Series], summary: Callable[[list[float]], float]) -> GpuReading | None:
    """Each GPU's steady-state samples summarised to one value."""
    if not found:
        return None
    per_gpu: dict[str, float] = {}
    by_key: dict[str, Series] = {}
    for series in found:
        key = gpu_key(series)
        per_gpu[key] = summary(steady(series.values))
        by_key[key] = series
    return GpuReading(metric, per_gpu, by_key)


def utilisation(evidence: Evidence) -> GpuReading | None:
    """GPU busy share (0-1) from the most direct utilisation metric the bundle has."""
    for metric, scale in UTILISATION_METRICS:
        found = reading(evidence, metric, scale)
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class StepPhases:
    """Steady-state step phases summed over ranks: the shares of step time spent where."""

    step_s: float
    data_s: float
    comm_s: float
    steps: int
    per_rank: dict[int, list[StepRecord]]

    @property
    def data_share(self) -> float:
        return self.data_s / self.step_s if self.step_s else 0.0

    @property
    def comm_share(self) -> float:
        return self.comm_s / self.step_s if self.step_s else 0.0

    @property
    def compute_share(self) -> float:
        return max(0.0, 1.0 - self.data_share - self.comm_share)

    @property
    def mean_step_s(self) -> float:
        return self.step_s / self.steps if self.steps else 0.0

    def median_samples(self) -> float | None:
        samples = [record.samples for records in self.per_rank.values() for record in records if record.samples]
        return statistics.median(samples) if samples else None

    def representative(self, limit: int = 3) -> list[Quote]:
        """The median step of a few ranks, quoted as written."""
        quotes = []
        for rank in sorted(self.per_rank)[:limit]:
            records = sorted(self.per_rank[rank], key=lambda record: record.step_s)
            quotes.append(records[len(records) // 2].quote)
        return quotes


def step_phases(evidence: Evidence) -> StepPhases | None:
    return step_phases_of(evidence.steps or logged_step_records(evidence))


def step_phases_of(steps: dict[int, list[StepRecord]]) -> StepPhases | None:
    """The steady phases of step records (rank -> records, in any order); None when there are none."""
    per_rank = {
        rank: steady(sorted(records, key=lambda record: record.step)) for rank, records in steps.items() if records
    }
    return _summed(per_rank)


def _summed(per_rank: dict[int, list[StepRecord]]) -> StepPhases | None:
    if not per_rank:
        return None
    records = [record for rank_records in per_rank.values() for record in rank_records]
    return StepPhases(
        step_s=sum(record.step_s for record in records),
        data_s=sum(min(record.data_s, record.step_s) for record in records),
        comm_s=sum(min(record.comm_s, record.step_s) for record in records),
        steps=len(records),
        per_rank=per_rank,
    )


# Timer lines printed one after another (Megatron's `(min, max)` block) belong to one report.
TIMER_BLOCK_GAP = 2


def logged_step_records(evidence: Evidence) -> dict[int, list[StepRecord]]:
    """Step records read from the breakdowns that training tools print (diagnosers.parsers.timings.phase_tables)."""
    samples = per_gpu_batch(evidence)
    records: dict[int, list[StepRecord]] = defaultdict(list)
    by_source = signals_by_source(
        evidence,
        phase_tables.PHASE_BREAKDOWN,
        phase_tables.PHASE_TIMER,
        phase_tables.ITERATION_TIME,
        phase_tables.PROFILER_NCCL_ROW,
        phase_tables.PROFILER_CUDA_TOTAL,
    )
    for signals in by_source.values():
        for rank, record in [*_breakdown_records(signals, samples), *_torch_profiler_records(signals)]:
            records[rank].append(record)
    return records


def per_gpu_batch(evidence: Evidence) -> float | None:
    """The per-GPU (micro-)batch a config or argument dump states, when it states one."""
    found = [float(signal.get("samples")) for signal in evidence.of(phase_tables.PER_GPU_BATCH)]
    return min(found) if found else None


def _breakdown_records(signals: list[Signal], samples: float | None) -> list[tuple[int, StepRecord]]:
    """DeepSpeed and Megatron breakdowns of one file, each weighed against its iteration's elapsed time."""
    reports = _timer_reports(signals)
    breakdowns = [s for s in signals if s.kind == phase_tables.PHASE_BREAKDOWN]
    parsed = [(signal.quote, phase_tables.fields_of(signal.get("fields")), _rank(signal)) for signal in breakdowns]
    # A step prints its engine line and, with gradient accumulation, one per micro-step: keep the whole steps.
    if any(_whole_step(fields) for _, fields, _ in parsed):
        parsed = [one for one in parsed if not phase_tables.is_microstep(one[1])]
    elapsed = [(s.quote.line, float(s.get("ms"))) for s in signals if s.kind == phase_tables.ITERATION_TIME]
    found: list[tuple[int, StepRecord]] = []
    # ZeRO prints its optimizer all-gather on a line of its own, before the engine line of the same step.
    carried_comm_ms = 0.0
    for quote, fields, rank in sorted([*parsed, *reports], key=lambda one: one[0].line):
        if phase_tables.is_optimizer_only(fields):
            carried_comm_ms += sum(v for name, v in fields.items() if "allgather" in name)
            continue
        phases = phase_tables.phases_of(fields)
        if phases is None:
            continue
        comm_ms = phases.comm_ms + carried_comm_ms
        carried_comm_ms = 0.0
        step_ms = _iteration_ms(elapsed, quote.line) or phases.step_ms
        if not step_ms:
            continue
        step_ms = max(step_ms, comm_ms + phases.data_ms)
        record = StepRecord(len(found), step_ms / 1000, phases.data_ms / 1000, comm_ms / 1000, samples, quote)
        found.append((rank, record))
    return found


def _whole_step(fields: dict[str, float]) -> bool:
    return not phase_tables.is_microstep(fields) and not phase_tables.is_optimizer_only(fields)


def _timer_reports(signals: list[Signal]) -> list[tuple[Quote, dict[str, float], int]]:
    """Megatron's `name ....: (min, max)` lines grouped into reports, each timer at its slowest rank's time,
    quoted at its largest collective."""
    reports: list[list[Signal]] = []
    for signal in (s for s in signals if s.kind == phase_tables.PHASE_TIMER):
        if reports and signal.quote.line - reports[-1][-1].quote.line <= TIMER_BLOCK_GAP:
            reports[-1].append(signal)
        else:
            reports.append([signal])
    found = []
    for report in reports:
        fields = {signal.get("name"): float(signal.get("max")) for signal in report}
        collectives = [s for s in report if phase_tables.phases_of({s.get("name"): 1.0}) is not None]
        quoted = max(collectives or report, key=lambda signal: float(signal.get("max")))
        found.append((quoted.quote, fields, 0))
    return found


def _iteration_ms(elapsed: list[tuple[int, float]], line: int) -> float | None:
    """Megatron prints an iteration's timers after its `elapsed time per iteration` line."""
    before = [ms for at, ms in elapsed if at < line]
    if before:
        return before[-1]
    after = [ms for at, ms in elapsed if at > line]
    return after[0] if after else None


def _torch_profiler_records(signals: list[Signal]) -> list[tuple[int, StepRecord]]:
    """A profiler table's NCCL kernels as one record: their Self CUDA share of the profiled CUDA time."""
    shares: dict[str, tuple[float, Quote]] = {}
    for signal in (s for s in signals if s.kind == phase_tables.PROFILER_NCCL_ROW):
        share = phase_tables.self_cuda_share(signal.get("columns"))
        if share is not None:
            shares.setdefault(signal.get("name"), (share, signal.quote))
    if not shares:
        return []
    totals = [s for s in signals if s.kind == phase_tables.PROFILER_CUDA_TOTAL]
    total_s = phase_tables.seconds(totals[0].get("total"), totals[0].get("unit")) if totals else 1.0
    comm_share = min(1.0, sum(share for share, _ in shares.values()))
    quote = max(shares.values(), key=lambda one: one[0])[1]
    return [(0, StepRecord(0, total_s, 0.0, comm_share * total_s, None, quote))]


def _rank(signal: Signal) -> int:
    rank = signal.get("rank")
    return int(rank) if rank.isdigit() else 0


def logged_step_phases(evidence: Evidence) -> StepPhases | None:
    """Step phases from the timing lines training loops print (parsers.timings.step_lines): data wait against step time.

    Each log (and each rank within one) is a stream of its own. Where a line prints the epoch's running means,
    two lines give the exact means between them, so the first batch's worker start-up drops out; otherwise a
    first line that covers the epoch's first logging window is left out for the same reason.
    """
    streams: dict[tuple[str, str], list[Signal]] = {}
    for signal in evidence.of(STEP_TIMING):
        streams.setdefault((signal.quote.source, signal.get("rank")), []).append(signal)
    per_rank = {
        number: records
        for number, records in enumerate(
            [_stream_records(signals) for signals in streams.values()] + _lightning_profiler_records(evidence)
        )
        if records
    }
    return _summed(per_rank)


def _stream_records(signals: list[Signal]) -> list[StepRecord]:
    between = _between_running_means(signals)
    if between:
        return between
    kept = [signal for signal in signals if signal.get("index") != "0" and _step_s(signal) > 0]
    if _opens_the_epoch(kept):
        kept = kept[1:]
    return [
        StepRecord(number, _step_s(signal), float(signal.get("data_s")), 0.0, None, signal.quote)
        for number, signal in enumerate(kept)
    ]


def _opens_the_epoch(signals: list[Signal]) -> bool:
    """Whether the first line covers the epoch's first logging window, which holds the loader workers' start-up:
    its batch index is no larger than the step to the next line (`[50/7330]` then `[100/7330]`)."""
    if len(signals) < 2 or not (signals[0].get("index") and signals[1].get("index")):
        return False
    first, second = int(signals[0].get("index")), int(signals[1].get("index"))
    return 0 < first <= second - first


def _step_s(signal: Signal) -> float:
    if signal.get("compute_s"):
        return float(signal.get("compute_s")) + float(signal.get("data_s"))
    return float(signal.get("step_s"))


def _between_running_means(signals: list[Signal]) -> list[StepRecord]:
    """Per-step means between consecutive lines of one epoch, from the running means and batch indices.

    Older loops print the 0-based index of the batch just done, newer ones the count done; of the two readings,
    the one that agrees better with the batches' own times is taken. Means that do not difference into
    non-negative times (a meter never reset between epochs) are not running means of the epoch: no records.
    """
    if not all(signal.get("index") and signal.get("step_avg") and signal.get("data_avg") for signal in signals):
        return []
    readings = [_differenced(signals, done_offset) for done_offset in (0, 1)]
    best = min(readings, key=lambda records: sum(gap for _, gap in records))
    if not best or any(record.step_s <= 0 or record.data_s < -ROUNDING_S for record, _ in best):
        return []
    for record, _ in best:
        record.data_s = max(0.0, record.data_s)
    return [record for record, _ in best]


def _differenced(signals: list[Signal], done_offset: int) -> list[tuple[StepRecord, float]]:
    """(record, distance from the later line's own batch time) for each pair of lines of one epoch."""
    found = []
    for before, after in pairwise(signals):
        first, last = int(before.get("index")) + done_offset, int(after.get("index")) + done_offset
        if last <= first:
            continue
        step_s = (float(after.get("step_avg")) * last - float(before.get("step_avg")) * first) / (last - first)
        data_s = (float(after.get("data_avg")) * last - float(before.get("data_avg")) * first) / (last - first)
        gap = abs(step_s - float(after.get("step_s"))) + abs(data_s - float(after.get("data_s")))
        found.append((StepRecord(last, step_s, data_s, 0.0, None, after.quote), gap))
    return found


def _lightning_profiler_records(evidence: Evidence) -> list[list[StepRecord]]:
    """Lightning's SimpleProfiler: the dataloader's total time against the training epochs', one record a report."""
    found = []
    for rows in signals_by_source(evidence, PROFILER_ROW).values():
        epoch = [row for row in rows if row.get("action").endswith(EPOCH_ACTION)]
        loading = [row for row in rows if row.get("action").endswith(DATALOADER_ACTIONS)]
        if epoch and loading:
            epoch_s = float(epoch[0].get("total_s"))
            data_s = sum(float(row.get("total_s")) for row in loading)
            if epoch_s > 0:
                found.append([StepRecord(0, epoch_s, data_s, 0.0, None, loading[0].quote)])
    return found


def benchmark_scaling(evidence: Evidence) -> throughput.Scaling | None:
    """Benchmark throughput pasted for several GPU counts (parsers.timings.throughput), one paste per file."""
    by_source = signals_by_source(
        evidence,
        throughput.STEP_RATE,
        throughput.TOTAL_RATE,
        throughput.GPUS_TOTAL_RATE,
        throughput.BENCH_SETTING,
        throughput.BENCH_COMMAND,
    )
    return throughput.worst_scaling(
        [point for signals in by_source.values() for point in throughput.points_of(signals)]
    )


def signals_by_source(evidence: Evidence, *kinds: str) -> dict[str, list[Signal]]:
    """Signals of these kinds grouped by the file they came from (a pasted report reads within one file)."""
    by_source: dict[str, list[Signal]] = defaultdict(list)
    for signal in evidence.of(*kinds):
        by_source[signal.quote.source].append(signal)
    return by_source
