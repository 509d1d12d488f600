"""Where a step's time goes, as training tools print it in their logs.

People rarely have steps/ timings to paste; they paste what their framework printed:
- DeepSpeed `wall_clock_breakdown`: `time (ms) | forward: … | backward: … | backward_allreduce: … | step: …`
  (and the `_microstep`, pipeline-engine `train_batch … comms …` and ZeRO `optimizer_allgather …` lines);
- Megatron-LM timers: the one-line `time (ms) | forward-compute: … | backward-params-all-reduce: …` of older
  releases, the `(min, max) time across ranks (ms)` block (`all-grads-sync …: (290.83, 291.57)`) of newer
  ones, next to `elapsed time per iteration (ms): …`;
- PyTorch profiler `key_averages().table()` rows of NCCL kernels (`ncclKernel_AllReduce…`, `ncclDevKernel_…`)
  and the table's `Self CUDA time total`;
- Megatron's straggler detector (`MnRtt/Rnk: 3202.59ms/8 | MxRtt/Rnk: …`), nvidia-resiliency-ext's
  performance scores (`Rank=0 Node=… Score=0.95`) and `nvidia-smi -q`'s clock event reasons
  (`HW Slowdown : Active`);
- the per-GPU batch from a config or argument dump (`train_micro_batch_size_per_gpu … 1`, Megatron's
  `micro_batch_size …… 1`, the Hugging Face Trainer's `Instantaneous batch size per device = 8`).

The patterns give one signal per line; `phases_of` reads a breakdown's named fields as step, collective and
data time, which diagnosers.rules.measures turns into the step records the rules read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnosers.parsers.signals import pattern

PHASE_BREAKDOWN = "perf.phase-breakdown"
PHASE_TIMER = "perf.phase-timer"
ITERATION_TIME = "perf.iteration-time"
PROFILER_NCCL_ROW = "perf.profiler-nccl-row"
PROFILER_CUDA_TOTAL = "perf.profiler-cuda-total"
STRAGGLER_REPORT = "perf.straggler-report"
NVRX_SCORE = "perf.nvrx-score"
GPU_BUS_ID = "gpu.smi-bus-id"
CLOCK_SLOWDOWN = "gpu.clock-slowdown"
PER_GPU_BATCH = "perf.per-gpu-batch"

_NUMBER = r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"

PATTERNS = (
    pattern(
        PHASE_BREAKDOWN,
        ["time (ms) |", "backward_allreduce"],
        # Some pastes keep only the fields: `forward: 294.88 | backward: 17065.34 | backward_allreduce: …`.
        r"(?:time \(ms\) \||\b(?=forward(?:_microstep)?: [\d.]+ \|.*\bbackward_allreduce))(?P<fields>.*\d.*)",
        [
            "[2021-10-08 20:03:15,649] [INFO] [logging.py:68:log_dist] [Rank 0] rank=0 time (ms) | forward: 435.67 "
            "| backward: 744.11 | backward_inner: 513.92 | backward_allreduce: 230.11 | step: 0.98",
            "time (ms) | forward-compute: 604.56 | backward-compute: 701.16 | backward-params-all-reduce: 2672.65 | "
            "backward-embedding-all-reduce: 0.13 | optimizer: 857.27",
            "forward: 294.88 | backward: 17065.34 | backward_inner: 15988.85 | backward_allreduce: 1076.32 | "
            "step: 2102.37",
        ],
    ),
    pattern(
        PHASE_TIMER,
        ["...: ("],
        rf"(?P<name>[a-z][\w-]*) \.{{3,}}: \((?P<min>{_NUMBER}), (?P<max>{_NUMBER})\)",
        ["    all-grads-sync .................................: (290.83, 291.57)"],
    ),
    pattern(
        ITERATION_TIME,
        ["elapsed time per iteration (ms):"],
        rf"elapsed time per iteration \(ms\): (?P<ms>{_NUMBER})",
        [
            " iteration       30/ 1000000 | consumed samples:          120 | elapsed time per iteration (ms): 123.4 "
            "| learning rate: 1.111E-07 | global batch size:     4 |",
        ],
    ),
    pattern(
        PROFILER_NCCL_ROW,
        ["ncclKernel_", "ncclDevKernel_"],
        r"^\s*(?P<name>nccl(?:Dev)?Kernel_\S+)(?P<columns>(?:\s+\S+){3,})\s*$",
        [
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)         0.00%       0.000us         0.00%       "
            "0.000us       0.000us     812.345ms        61.32%     812.345ms       2.031ms           400",
        ],
    ),
    pattern(
        PROFILER_CUDA_TOTAL,
        ["Self CUDA time total:", "Self Device time total:"],
        rf"Self (?:CUDA|Device) time total: (?P<total>{_NUMBER})(?P<unit>us|ms|s)\b",
        ["Self CUDA time total: 1.325s"],
    ),
    pattern(
        STRAGGLER_REPORT,
        ["MnRtt/Rnk:", "MnEtpt/Rnk:", "MnClk/Rnk:"],
        r"(?P<fields>(?:M[nx]\w+/Rnk: \S+(?: \| )?)+)",
        [
            " 0: INFO:megatron.core.utils:[2024-03-14 23:07:56] | MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: 3468.20ms/0 | "
            "MnPwr/Rnk: 601796W/8 | MxPwr/Rnk: 683801W/18 | MnTmp/Rnk: 52C/0 | MxTmp/Rnk: 65C/21 | MnUtl/Rnk: 97%/8 "
            "| MxUtl/Rnk: 100%/6 | MnClk/Rnk: 1950MHz/28 | MxClk/Rnk: 1980MHz/0 | MnDRtt/Rnk: 14.27ms/23 | "
            "MxDRtt/Rnk: 34.65ms/3 | MnEtpt/Rnk: 296.02TF/0 | MxEtpt/Rnk: 297.32TF/8",
        ],
    ),
    pattern(
        NVRX_SCORE,
        ["Score="],
        rf"\bRank=(?P<rank>\d+)\s+Node=(?P<node>\S+)\s+Score=(?P<score>{_NUMBER})",
        ["  Rank=0 Node=22ca9bdcfc9a Score=0.95"],
    ),
    pattern(
        GPU_BUS_ID,
        ["GPU 0000"],
        r"^\s*GPU (?P<bus>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$",
        ["GPU 00000000:3B:00.0"],
    ),
    pattern(
        CLOCK_SLOWDOWN,
        ["Slowdown"],
        r"(?P<reason>HW Slowdown|HW Thermal Slowdown|HW Power Brake Slowdown|SW Thermal Slowdown)\s*:\s*Active\b",
        ["        HW Slowdown                       : Active", "            HW Thermal Slowdown           : Active"],
    ),
    pattern(
        PER_GPU_BATCH,
        ["train_micro_batch_size_per_gpu", "micro_batch_size", "micro-batch-size", "batch size per device"],
        r"(?:train_micro_batch_size_per_gpu|micro[_-]batch[_-]size|batch size per device)[\"']?"
        r"(?:\s*[.=:]+\s*|\s+)(?P<samples>\d+)\b",
        [
            "[2023-06-01 10:00:00,123] [INFO] [config.py:964:print]   train_micro_batch_size_per_gpu  1",
            "  micro_batch_size ................................ 1",
            "[INFO|trainer.py:1016] 2021-10-08 20:03:14,332 >>   Instantaneous batch size per device = 8",
        ],
    ),
)


@dataclass(frozen=True, slots=True)
class Phases:
    """One breakdown's times in milliseconds; `step_ms` is None when the fields do not add up to a step."""

    step_ms: float | None
    comm_ms: float
    data_ms: float


_FIELD = re.compile(rf"([A-Za-z][\w/ -]*?)\s*:\s*({_NUMBER})")
# Timers that contain the collectives listed beside them: DeepSpeed's pipeline `comms`, Megatron's
# `backward-reduce-model-grads` (params + embedding + layernorm all-reduces) and `all-grads-sync`.
_COMM_UMBRELLAS = frozenset({"comms", "backward-reduce-model-grads", "all-grads-sync"})
# Gradient and parameter collectives, and pipeline sends and receives (a stage waits in them).
_COMM_NAME = re.compile(
    r"all-?reduce|allreduce|all-?gather|allgather|reduce-scatter|reduce_scatter|grads-sync|reduce_(?:tied_)?grads"
    r"|gather-model-params|^pipe_(?:send|recv)|^(?:forward|backward)-(?:send|recv)"
)
_DATA_NAMES = ("batch-generator", "batch generator", "batch_input", "data loader")
# What a step is made of when the tool prints no total: DeepSpeed's engine timers (backward holds the
# all-reduce; step the optimizer), and Megatron's (the gradient all-reduce outside backward-compute).
_DEEPSPEED_STEP = (("forward", "backward", "step"), ("forward_microstep", "backward_microstep", "step_microstep"))
_MEGATRON_COMPUTE = ("forward-compute", "backward-compute")


def fields_of(text: str) -> dict[str, float]:
    """`name: 1.5 | other: 2` as {name: value}; the first value of a name wins."""
    found: dict[str, float] = {}
    for name, value in _FIELD.findall(text):
        found.setdefault(name.strip(), float(value))
    return found


def phases_of(fields: dict[str, float]) -> Phases | None:
    """Step, collective and data time of one breakdown; None when it names no collective (nothing to weigh)."""
    leaves = [value for name, value in fields.items() if name not in _COMM_UMBRELLAS and _COMM_NAME.search(name)]
    umbrellas = [value for name, value in fields.items() if name in _COMM_UMBRELLAS]
    if not leaves and not umbrellas:
        return None
    comm = max(sum(leaves), *umbrellas) if umbrellas else sum(leaves)
    data = sum(fields.get(name, 0.0) for name in _DATA_NAMES)
    return Phases(_step_ms(fields, comm, data), comm, data)


def _step_ms(fields: dict[str, float], comm: float, data: float) -> float | None:
    if "train_batch" in fields:
        return fields["train_batch"]
    for names in _DEEPSPEED_STEP:
        if names[0] in fields and names[1] in fields:
            return sum(fields.get(name, 0.0) for name in names)
    if "forward-backward" in fields:
        return fields["forward-backward"] + fields.get("optimizer", 0.0)
    if all(name in fields for name in _MEGATRON_COMPUTE):
        return sum(fields[name] for name in _MEGATRON_COMPUTE) + comm + fields.get("optimizer", 0.0) + data
    return None


def is_optimizer_only(fields: dict[str, float]) -> bool:
    """DeepSpeed ZeRO's own line (`optimizer_allgather | optimizer_gradients | optimizer_step`): part of a step."""
    return bool(fields) and all(name.startswith("optimizer_") for name in fields)


def is_microstep(fields: dict[str, float]) -> bool:
    return any(name.endswith("_microstep") for name in fields)


_PERCENT = re.compile(rf"({_NUMBER})%")
# In key_averages().table() the percentages come as Self CPU %, CPU total %, Self CUDA %.
SELF_CUDA_PERCENT_INDEX = 2


def self_cuda_share(columns: str) -> float | None:
    """A profiler row's Self CUDA % as a share (0-1), or None when the row has no such column."""
    percents = _PERCENT.findall(columns)
    if len(percents) <= SELF_CUDA_PERCENT_INDEX:
        return None
    return float(percents[SELF_CUDA_PERCENT_INDEX]) / 100


_UNIT_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds(value: str, unit: str) -> float:
    return float(value) * _UNIT_SECONDS[unit]


_DETECTOR_FIELD = re.compile(rf"(M[nx])(\w+)/Rnk: ({_NUMBER})[A-Za-z%]*/(\d+)")


@dataclass(frozen=True, slots=True)
class Extremes:
    """One metric of Megatron's straggler detector: the lowest and highest value and their ranks."""

    low: float
    low_rank: int
    high: float
    high_rank: int


def detector_extremes(text: str) -> dict[str, Extremes]:
    """`MnRtt/Rnk: 3202.59ms/8 | MxRtt/Rnk: 3224.39ms/3` as {'Rtt': Extremes(3202.59, 8, 3224.39, 3)}."""
    low: dict[str, tuple[float, int]] = {}
    high: dict[str, tuple[float, int]] = {}
    for bound, metric, value, rank in _DETECTOR_FIELD.findall(text):
        (low if bound == "Mn" else high)[metric] = (float(value), int(rank))
    return {metric: Extremes(*low[metric], *high[metric]) for metric in low if metric in high}
