"""One rank or GPU clearly apart from its peers, holding every collective back.

Reads: per-rank step phases (after HTA's straggler analysis: the rank that arrives last at each
collective waits least, so its comm time is far below everyone else's, and its compute is
longest) and per-GPU DCGM series (SM clock, temperature, utilisation) for a GPU unlike the rest.
Needs at least three ranks or GPUs, so there are peers to compare with.
"""

from __future__ import annotations

import statistics

from diagnosers.evidence import Evidence
from diagnosers.findings import STRAGGLER, Finding, Quote, Severity
from diagnosers.rules.common import finding
from diagnosers.rules.measures import GPU_TEMP, SM_CLOCK, StepPhases, reading, step_phases, utilisation

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


def check(evidence: Evidence) -> list[Finding]:
    phases = step_phases(evidence)
    found = _from_steps(phases) if phases is not None else None
    return [found] if found is not None else _from_metrics(evidence)


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
        (reading(evidence, GPU_TEMP), _hot, "it runs at {value:.0f} °C against {median:.0f} °C"),
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


def _hot(value: float, median: float) -> bool:
    return value >= median + TEMP_ABOVE_PEERS_C


def _apart(value: float, median: float) -> bool:
    return abs(value - median) >= UTIL_APART
