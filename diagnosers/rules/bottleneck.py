"""Is a run compute-, comm- or IO-bound?

Reads: step-phase timings (data_s and comm_s shares of step_s), which measure the answer
directly; without them, the timing lines training loops print (the data wait against the step,
collectives not split out); and GPU metrics (utilisation, SM activity, tensor and DRAM activity),
which corroborate it or, without either, decide it with less confidence. Emits nothing when
none is in the bundle: the engine then says the evidence is insufficient.
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import COMM_BOUND, COMPUTE_BOUND, IO_BOUND, Finding, Quote, Severity
from diagnosers.parsers.timings.throughput import Scaling
from diagnosers.rules.common import finding
from diagnosers.rules.hardware import Hardware, hardware
from diagnosers.rules.measures import (
    DRAM_ACTIVE,
    GR_ENGINE_ACTIVE,
    SM_ACTIVE,
    TENSOR_ACTIVE,
    GpuReading,
    StepPhases,
    benchmark_scaling,
    logged_step_phases,
    reading,
    step_phases,
    utilisation,
)

EMITS = (COMPUTE_BOUND, COMM_BOUND, IO_BOUND)

# Step phases. The PyTorch profiler's TensorBoard plugin already recommends DataLoader tuning when
# loading takes 5% of a step; we name a bottleneck only when a phase takes a quarter (data) or
# 30% (collectives, which HTA's comm/compute overlap analysis counts as exposed when not hidden
# behind compute) of the whole step, so the verdict names what dominates, not what could be tuned.
DATA_SHARE_BOUND = 0.25
COMM_SHARE_BOUND = 0.30

# GPU activity. NVIDIA's DCGM profiling guidance: SM activity of 0.8 or more is needed for
# effective use and below 0.5 likely indicates ineffective use. GPU_UTIL only says a kernel was
# running (NCCL kernels count), so busy GPU_UTIL with low SM activity is the comm-bound shape.
SM_ACTIVE_BUSY = 0.8
SM_ACTIVE_LOW = 0.5
UTIL_BUSY = 0.8
UTIL_LOW = 0.5
# Without SM activity: a GPU doing math keeps its tensor pipes or DRAM busy; a GPU that is
# "utilised" while both stay near idle is spinning in communication or tiny kernels.
TENSOR_ACTIVE_IDLE = 0.05
DRAM_ACTIVE_IDLE = 0.10

# Busy by GPU_UTIL alone says a kernel ran, not which: a guess, below any measured verdict.
UTIL_ONLY_COMPUTE_CONFIDENCE = 0.45

# Metrics that agree with the step timings add this much confidence.
AGREEMENT_BONUS = 0.05

# Training-log lines give the data wait but fold collectives into the rest of the step, so the rest is
# called computation with less confidence than measured phases (less still when the wait is not negligible),
# and never against GPU metrics that say the kernels are collectives or that the GPUs sit idle.
LOGGED_DATA_NEGLIGIBLE = 0.10
LOGGED_COMPUTE_CONFIDENCE = 0.55
LOGGED_COMPUTE_CONFIDENCE_SOME_WAIT = 0.45

# Benchmark throughput at several GPU counts: data-parallel image benchmarks keep 90% or more of their
# per-GPU throughput on a sound fabric (Horovod's and tf_cnn_benchmarks' published scaling); under 70% a
# third of every step is lost, and with synthetic input (no data loading) only the collectives can lose it.
SCALING_EFFICIENCY_LOSS = 0.7
SCALING_CONFIDENCE = 0.75


def check(evidence: Evidence) -> list[Finding]:
    ran_on = hardware(evidence)
    phases = step_phases(evidence)
    metric_view = _metric_verdict(evidence, ran_on)
    if phases is not None:
        return _from_steps(phases, metric_view, ran_on)
    logged = logged_step_phases(evidence)
    if logged is not None:
        return _from_logged_steps(logged, metric_view, ran_on)
    scaling = benchmark_scaling(evidence)
    if scaling is not None and scaling.synthetic and scaling.efficiency < SCALING_EFFICIENCY_LOSS:
        return [_from_scaling(scaling)]
    if metric_view is not None:
        return [metric_view]
    return []


def _from_steps(phases: StepPhases, metric_view: Finding | None, ran_on: Hardware) -> list[Finding]:
    quotes = phases.representative()
    shares = (
        f"data {phases.data_share:.0%}, collectives {phases.comm_share:.0%}, compute {phases.compute_share:.0%} "
        f"of {phases.mean_step_s * 1000:.0f} ms steps"
    )
    found: list[Finding] = []
    if phases.data_share >= DATA_SHARE_BOUND:
        found.append(
            finding(
                IO_BOUND,
                Severity.WARNING,
                min(0.9, 0.55 + phases.data_share),
                f"Input-bound: the {ran_on.units} wait for data",
                f"Waiting for the next batch takes {phases.data_share:.0%} of each step ({shares}). Raise "
                "DataLoader num_workers and prefetch_factor, enable pin_memory, move decoding/augmentation "
                "off the training loop, or stage data on local disk.",
                quotes=quotes,
            )
        )
    if phases.comm_share >= COMM_SHARE_BOUND:
        found.append(
            finding(
                COMM_BOUND,
                Severity.WARNING,
                min(0.9, 0.55 + phases.comm_share),
                "Communication-bound: collectives dominate",
                f"Ranks spend {phases.comm_share:.0%} of each step blocked in collectives ({shares}). Check the "
                f"{ran_on.collectives} transport, overlap communication with backward (DDP buckets, FSDP prefetch), "
                f"use fewer, larger all-reduces, or a larger batch per {ran_on.unit}.",
                quotes=quotes,
            )
        )
    if not found:
        found.append(
            compute_bound(
                ran_on, 0.5 + phases.compute_share * 0.4, f"Step time is dominated by computation ({shares})", quotes
            )
        )
    if metric_view is not None:
        for one in found:
            if one.id == metric_view.id:
                one.confidence = min(1.0, round(one.confidence + AGREEMENT_BONUS, 2))
                one.evidence = [*one.evidence, *metric_view.evidence][: len(one.evidence) + 2]
    return found


def _from_logged_steps(phases: StepPhases, metric_view: Finding | None, ran_on: Hardware) -> list[Finding]:
    """The training loop's own timing lines: the data wait is measured, the rest is not split further."""
    share = f"{phases.data_share:.0%} of the step time the training loop logged"
    if phases.data_share >= DATA_SHARE_BOUND:
        found = finding(
            IO_BOUND,
            Severity.WARNING,
            min(0.85, 0.5 + phases.data_share),
            f"Input-bound: the {ran_on.units} wait for data",
            f"Waiting for the next batch takes {share}: the data pipeline, not the model, sets the pace. Raise "
            "DataLoader num_workers and prefetch_factor, enable pin_memory and persistent_workers, move decoding "
            "and augmentation off the training loop (DALI, pre-resized images), or stage the data on local disk.",
            quotes=_most_waiting(phases),
        )
    elif metric_view is None or metric_view.id == COMPUTE_BOUND:
        negligible = phases.data_share < LOGGED_DATA_NEGLIGIBLE
        found = compute_bound(
            ran_on,
            LOGGED_COMPUTE_CONFIDENCE if negligible else LOGGED_COMPUTE_CONFIDENCE_SOME_WAIT,
            f"Waiting for data takes only {share}; the rest is forward, backward and the optimizer step (these "
            "lines do not separate gradient all-reduce, which GPU metrics or step timings would)",
            phases.representative(),
        )
    elif metric_view.id == COMM_BOUND:
        return [metric_view]
    else:
        return []
    if metric_view is not None and metric_view.id == found.id:
        found.confidence = min(1.0, round(found.confidence + AGREEMENT_BONUS, 2))
        found.evidence = [*found.evidence, *metric_view.evidence][: len(found.evidence) + 2]
    return [found]


def _from_scaling(scaling: Scaling) -> Finding:
    """Synthetic-input benchmark runs on more GPUs keep too little of the per-GPU throughput of the smallest run."""
    base, scaled = scaling.base, scaling.scaled
    detail = (
        f"On {scaled.gpus} GPUs each GPU processes {scaled.per_gpu:.1f} images/sec against {base.per_gpu:.1f} on "
        f"{base.gpus} GPU{'s' if base.gpus > 1 else ''}: {scaling.efficiency:.0%} scaling efficiency. The input is "
        "synthetic, so no data loading is involved: the lost time is spent in gradient communication. Check the "
        "NCCL transport between the GPUs and nodes (NCCL_DEBUG=INFO: IB/RoCE or sockets), the network bandwidth, "
        "and overlap (Horovod tensor fusion, DDP buckets); a larger per-GPU batch amortises each all-reduce."
    )
    return finding(
        COMM_BOUND,
        Severity.WARNING,
        SCALING_CONFIDENCE,
        "Communication-bound: throughput per GPU collapses as GPUs are added",
        detail,
        quotes=[scaled.quote, base.quote],
    )


def _most_waiting(phases: StepPhases, limit: int = 3) -> list[Quote]:
    """The lines that waited longest for data, in log order: what a person checks first."""
    records = [record for records in phases.per_rank.values() for record in records]
    picked = sorted(records, key=lambda record: record.data_s, reverse=True)[:limit]
    return [record.quote for record in sorted(picked, key=lambda record: (record.quote.source, record.quote.line))]


def _metric_verdict(evidence: Evidence, ran_on: Hardware) -> Finding | None:
    util = _busy_share(evidence)
    if util is None:
        return None
    sm = reading(evidence, SM_ACTIVE)
    tensor = reading(evidence, TENSOR_ACTIVE)
    dram = reading(evidence, DRAM_ACTIVE)
    quotes = util.quote_extremes()
    busy = f"GPUs busy {util.mean:.0%} of the time ({util.metric})"
    if util.mean < UTIL_BUSY:
        confidence = 0.65 if util.mean < UTIL_LOW else 0.5
        return finding(
            IO_BOUND,
            Severity.WARNING,
            confidence,
            "GPUs idle: likely waiting for input",
            f"{busy}: the rest of the time no kernel runs, which usually means the input pipeline or the "
            "host cannot keep up. Add step timings (workloads' instrumentation) to confirm; raise DataLoader "
            "workers and prefetching.",
            quotes=quotes,
        )
    if sm is not None:
        return _by_sm_activity(util, sm, busy, quotes, ran_on)
    return _by_pipes(util, tensor, dram, busy, quotes, ran_on)


def _busy_share(evidence: Evidence) -> GpuReading | None:
    """The share of time a kernel ran: the graphics engine's activity where dcgm-exporter's default set gives it.

    GPU_UTIL is sampled (any kernel in the sample period counts the whole period), so a GPU that runs short
    kernels between waits reads near 100%; GR_ENGINE_ACTIVE is the time actually active.
    """
    return reading(evidence, GR_ENGINE_ACTIVE) or utilisation(evidence)


def _by_sm_activity(util: GpuReading, sm: GpuReading, busy: str, quotes: list[Quote], ran_on: Hardware) -> Finding:
    quotes = [*quotes, *sm.quote_extremes()]
    if sm.mean < SM_ACTIVE_LOW:
        return finding(
            COMM_BOUND,
            Severity.WARNING,
            0.7,
            "Busy GPUs doing little math: likely communication-bound",
            f"{busy}, but SM activity is only {sm.mean:.2f}: kernels run on few SMs, the signature of NCCL "
            "collectives (or very small kernels). Check the NCCL transport and the per-GPU batch size.",
            quotes=quotes,
        )
    confidence = 0.75 if sm.mean >= SM_ACTIVE_BUSY else 0.55
    return compute_bound(
        ran_on, confidence, f"{busy} with SM activity {sm.mean:.2f}: the GPUs are doing the work", quotes
    )


def _by_pipes(
    util: GpuReading,
    tensor: GpuReading | None,
    dram: GpuReading | None,
    busy: str,
    quotes: list[Quote],
    ran_on: Hardware,
) -> Finding:
    if tensor is not None and dram is not None and tensor.mean < TENSOR_ACTIVE_IDLE and dram.mean < DRAM_ACTIVE_IDLE:
        return finding(
            COMM_BOUND,
            Severity.WARNING,
            0.55,
            "Busy GPUs doing little math: likely communication-bound",
            f"{busy}, yet tensor pipes ({tensor.mean:.2f}) and DRAM ({dram.mean:.2f}) are nearly idle: the "
            "running kernels are mostly NCCL collectives or tiny ops. Enable DCGM_FI_PROF_SM_ACTIVE to confirm.",
            quotes=[*quotes, *tensor.quote_extremes(), *dram.quote_extremes()],
        )
    extra = [*(tensor.quote_extremes() if tensor else []), *(dram.quote_extremes() if dram else [])]
    if not extra:
        return finding(
            COMPUTE_BOUND,
            Severity.INFO,
            UTIL_ONLY_COMPUTE_CONFIDENCE,
            "Busy GPUs: probably compute-bound",
            f"{busy}. A running NCCL kernel counts as busy too, so without DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and "
            "DCGM_FI_PROF_DRAM_ACTIVE (in dcgm-exporter's default counters on datacenter GPUs) this cannot tell "
            "computation from collectives; step timings would.",
            quotes=quotes,
        )
    return compute_bound(ran_on, 0.6, f"{busy} and doing math", [*quotes, *extra])


def compute_bound(ran_on: Hardware, confidence: float, measured: str, quotes: list[Quote]) -> Finding:
    """The compute-bound finding: what was measured, then the title and advice for what the job ran on."""
    if ran_on.device == "cpu":
        title = "Compute-bound on CPU: the processors are the bottleneck"
        workers = {None: "CPU workers", 1: "1 CPU worker"}.get(ran_on.ranks, f"{ran_on.ranks} CPU workers")
        advice = (
            f"It ran on {workers} and no GPU. Speed-ups: give each worker more CPUs (Ray sets "
            "OMP_NUM_THREADS to the CPUs a worker reserved, 1 by default; or torch.set_num_threads), a batch large "
            "enough to keep them busy, a smaller model, or a GPU if one is available (launch with --gpus 1)."
        )
    else:
        title = "Compute-bound: the GPUs are the bottleneck"
        advice = (
            "Speed-ups come from the model side: mixed precision, channels_last, fused kernels, torch.compile, "
            "or more GPUs."
        )
    return finding(COMPUTE_BOUND, Severity.INFO, confidence, title, f"{measured}. {advice}", quotes=quotes)
