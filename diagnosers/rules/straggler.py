"""One rank or GPU clearly apart from its peers, holding every collective back.

Reads: per-rank step phases (after HTA's straggler analysis: the rank that arrives last at each
collective waits least, so its comm time is far below everyone else's, and its compute is
longest); Megatron's straggler detector lines (the slowest and fastest rank of each interval) and
nvidia-resiliency-ext's per-rank performance scores;
`nvidia-smi -q` clock event reasons (a GPU slowed by hardware or heat); and per-GPU DCGM series
from the default counter set (SM clock, temperature, power, clock event reasons, utilisation) for a
GPU unlike the rest. Comparisons need at least three ranks or GPUs, so there are peers.
"""

from __future__ import annotations

import statistics
from collections import Counter

from diagnosers.evidence import Evidence
from diagnosers.findings import STRAGGLER, Finding, Quote, Severity
from diagnosers.parsers.timings import phase_tables
from diagnosers.rules.common import finding
from diagnosers.rules.measures import (
    GPU_TEMP,
    POWER_USAGE,
    SM_CLOCK,
    StepPhases,
    reading,
    slowdown_share,
    step_phases,
    utilisation,
)

EMITS = (STRAGGLER,)

MIN_PEERS = 3
# A rank whose collective wait is under half its peers' median, while the peers wait for at
# least a tenth of the step, is the one they wait for (HTA's comm-time-per-rank view).
WAIT_RATIO = 0.5
MIN_PEER_WAIT_SHARE = 0.10
# Compute a quarter longer than the peers' median: slow enough to stall every collective.
COMPUTE_RATIO = 1.25
# SM clock 15% under the peers' median: thermal or power throttling (DCGM clock-event guidance).
CLOCK_DROP = 0.15
# Ten degrees hotter than the peers: a cooling problem on that GPU or node.
TEMP_ABOVE_PEERS_C = 10.0
# Busy share a quarter away from the peers' median.
UTIL_APART = 0.25
# Power draw under two thirds of the peers' while they work: a power-braked or clock-capped GPU.
POWER_DROP = 1 / 3
# Megatron's detector: the slowest rank's round trip a quarter over the fastest's, or the lowest
# throughput or clock this far under the highest (its own README shows healthy spreads of 1-9%).
DETECTOR_RTT_RATIO = 1.25
DETECTOR_THROUGHPUT_DROP = 0.2
# nvidia-resiliency-ext's identify_stragglers() default: a rank scoring under 0.7 of the best.
NVRX_SCORE_THRESHOLD = 0.7
# A GPU in a hardware or thermal slowdown for a tenth of the samples is throttled, not blipping.
SLOWDOWN_SHARE = 0.1


def check(evidence: Evidence) -> list[Finding]:
    phases = step_phases(evidence)
    found = _from_steps(phases) if phases is not None else None
    found = found or _from_detector(evidence) or _from_nvrx_scores(evidence) or _from_clock_events(evidence)
    return [found] if found is not None else _from_metrics(evidence)


def _from_detector(evidence: Evidence) -> Finding | None:
    """Megatron's straggler detector: flag the rank that is slowest (round trip), or lowest in throughput
    or clock, in most of the intervals that show a spread."""
    reports = evidence.of(phase_tables.STRAGGLER_REPORT)
    flagged: Counter[int] = Counter()
    quotes: dict[int, list[Quote]] = {}
    reasons: dict[int, str] = {}
    for report in reports:
        extremes = phase_tables.detector_extremes(report.get("fields"))
        spread = _detector_spread(extremes)
        if spread is not None:
            rank, reason = spread
            flagged[rank] += 1
            quotes.setdefault(rank, []).append(report.quote)
            reasons.setdefault(rank, reason)
    if not flagged or sum(flagged.values()) * 2 < len(reports):
        return None
    rank, count = flagged.most_common(1)[0]
    detail = (
        f"Megatron's straggler detector names rank {rank} in {count} of {len(reports)} report(s): {reasons[rank]}. "
        "Every other rank waits for it at each collective. Check that rank's GPU and node (nvidia-smi -q -d "
        "PERFORMANCE,TEMPERATURE for clock event reasons) and drain it if it persists."
    )
    return finding(STRAGGLER, Severity.WARNING, 0.8, f"Rank {rank} holds the others back", detail, quotes=quotes[rank])


def _from_nvrx_scores(evidence: Evidence) -> Finding | None:
    """nvidia-resiliency-ext's straggler report: a rank whose performance score falls under the threshold."""
    low = [s for s in evidence.of(phase_tables.NVRX_SCORE) if float(s.get("score")) < NVRX_SCORE_THRESHOLD]
    if not low:
        return None
    worst = min(low, key=lambda signal: float(signal.get("score")))
    rank, node = worst.get("rank"), worst.get("node")
    detail = (
        f"nvidia-resiliency-ext scores rank {rank} on node {node} at {float(worst.get('score')):.2f} of the best "
        f"rank (stragglers are under {NVRX_SCORE_THRESHOLD}): every other rank waits for it at each collective. "
        "Check that node's GPUs (clock event reasons, temperature, power) and drain it if it persists."
    )
    return finding(STRAGGLER, Severity.WARNING, 0.8, f"Rank {rank} holds the others back", detail, signals=low)


def _detector_spread(extremes: dict[str, phase_tables.Extremes]) -> tuple[int, str] | None:
    rtt = extremes.get("Rtt")
    if rtt is not None and rtt.low > 0 and rtt.high >= DETECTOR_RTT_RATIO * rtt.low:
        return rtt.high_rank, f"its round trip takes {rtt.high:g} ms against {rtt.low:g} ms on the fastest rank"
    for metric, what in (("Etpt", "estimated throughput"), ("Clk", "SM clock")):
        found = extremes.get(metric)
        if found is not None and found.high > 0 and found.low <= (1 - DETECTOR_THROUGHPUT_DROP) * found.high:
            return found.low_rank, f"its {what} is {found.low:g} against {found.high:g} on the best rank"
    return None


def _from_clock_events(evidence: Evidence) -> Finding | None:
    """`nvidia-smi -q`: a clock event reason that slows the GPU below what it is asked to run at."""
    active = evidence.of(phase_tables.CLOCK_SLOWDOWN)
    if not active:
        return None
    bus_ids = evidence.of(phase_tables.GPU_BUS_ID)
    named = []
    for signal in active:
        at = (signal.quote.source, signal.quote.line)
        before = [bus for bus in bus_ids if (bus.quote.source, bus.quote.line) < at]
        named.append(before[-1].get("bus") if before else "")
    gpus = sorted({name for name in named if name}) or ["a GPU"]
    reasons = sorted({signal.get("reason") for signal in active})
    detail = (
        f"nvidia-smi reports {', '.join(reasons)} active on {', '.join(gpus)}: the GPU runs below its clocks "
        "(HW Slowdown halves them or worse), so in a distributed job every collective waits for it. Check "
        "cooling, power supply and the GPU's health (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER), and drain "
        "the node if it persists."
    )
    title = f"GPU {gpus[0]} is throttled" if len(gpus) == 1 else f"{len(gpus)} GPUs are throttled"
    return finding(STRAGGLER, Severity.WARNING, 0.7, title, detail, signals=active)


def _from_steps(phases: StepPhases) -> Finding | None:
    if len(phases.per_rank) < MIN_PEERS:
        return None
    comm = {rank: statistics.fmean(r.comm_s for r in records) for rank, records in phases.per_rank.items()}
    compute = {rank: statistics.fmean(r.compute_s for r in records) for rank, records in phases.per_rank.items()}
    step = statistics.fmean(r.step_s for records in phases.per_rank.values() for r in records)
    least_wait = min(comm, key=comm.__getitem__)
    peers_wait = statistics.median(value for rank, value in comm.items() if rank != least_wait)
    slowest = max(compute, key=compute.__getitem__)
    peers_compute = statistics.median(value for rank, value in compute.items() if rank != slowest)
    waits_less = peers_wait >= MIN_PEER_WAIT_SHARE * step and comm[least_wait] <= WAIT_RATIO * peers_wait
    computes_more = peers_compute > 0 and compute[slowest] >= COMPUTE_RATIO * peers_compute
    if not waits_less and not computes_more:
        return None
    rank = least_wait if waits_less else slowest
    records = sorted(phases.per_rank[rank], key=lambda record: record.step_s)
    detail = (
        f"Rank {rank} is the straggler: it waits {comm[rank] * 1000:.0f} ms per step in collectives while its "
        f"peers wait {peers_wait * 1000:.0f} ms, and computes for {compute[rank] * 1000:.0f} ms against "
        f"{peers_compute * 1000:.0f} ms. Every other rank idles until it arrives. Check that rank's node "
        "(throttling, a noisy neighbour, a slower GPU) and whether its data shard is larger."
    )
    quotes = [records[len(records) // 2].quote, *phases.representative(2)]
    return finding(STRAGGLER, Severity.WARNING, 0.8, f"Rank {rank} holds the others back", detail, quotes=quotes)


def _from_metrics(evidence: Evidence) -> list[Finding]:
    checks = (
        (reading(evidence, SM_CLOCK), _low_clock, "its SM clock is {value:.0f} MHz against {median:.0f} MHz"),
        (slowdown_share(evidence), _slowed, "it is in a hardware or thermal slowdown {value:.0%} of the time"),
        (reading(evidence, GPU_TEMP), _hot, "it runs at {value:.0f} °C against {median:.0f} °C"),
        (reading(evidence, POWER_USAGE), _low_power, "it draws {value:.0f} W against {median:.0f} W"),
        (utilisation(evidence), _apart, "it is busy {value:.0%} of the time against {median:.0%}"),
    )
    for gpu_reading, is_apart, phrase in checks:
        if gpu_reading is None or len(gpu_reading.per_gpu) < MIN_PEERS:
            continue
        for key, value in sorted(gpu_reading.per_gpu.items()):
            median = statistics.median(v for k, v in gpu_reading.per_gpu.items() if k != key)
            if is_apart(value, median):
                quote: Quote = gpu_reading.series[key].quote(f"mean {value:.2f} over the run")
                detail = (
                    f"GPU {key} is apart from its peers: {phrase.format(value=value, median=median)}. A throttled "
                    "or sick GPU makes every collective wait for it. Check nvidia-smi -q -d "
                    "PERFORMANCE,TEMPERATURE on that node and drain it if it persists."
                )
                peers = [
                    gpu_reading.series[k].quote(f"mean {v:.2f} over the run")
                    for k, v in sorted(gpu_reading.per_gpu.items())
                    if k != key
                ][:2]
                return [
                    finding(
                        STRAGGLER,
                        Severity.WARNING,
                        0.7,
                        f"GPU {key} is slower than its peers",
                        detail,
                        quotes=[quote, *peers],
                    )
                ]
    return []


def _low_clock(value: float, median: float) -> bool:
    return value <= (1 - CLOCK_DROP) * median


def _slowed(value: float, median: float) -> bool:
    return value >= SLOWDOWN_SHARE and median < SLOWDOWN_SHARE


def _low_power(value: float, median: float) -> bool:
    return value <= (1 - POWER_DROP) * median


def _hot(value: float, median: float) -> bool:
    return value >= median + TEMP_ABOVE_PEERS_C


def _apart(value: float, median: float) -> bool:
    return abs(value - median) >= UTIL_APART
