"""Benchmark throughput at several GPU counts, as people paste it when "more GPUs are not faster".

Threads about poor scaling rarely carry a step breakdown; they carry the benchmark's output for one
GPU or node and for more:
- tf_cnn_benchmarks: its header (`Dataset:     imagenet (synthetic)`, `Batch size:  64 global` /
  `32 per device`, `Devices:     ['/gpu:0', '/gpu:1']`, `Variables:   horovod`), the command line
  (`--batch_size`, `--num_gpus`, `--data_dir`, `mpirun -np`), the step lines `10	images/sec: 204.8 +/- 0.1
  (jitter = 0.6)	9.228` and `total images/sec: 204.75`. A single process prints the throughput of all its
  devices; under Horovod every rank prints its own line (so a step number repeats once per rank);
- Horovod's synthetic benchmarks: `Batch size: 32`, `Number of GPUs: 4`, `Img/sec per GPU: 108.2 +-1.2`
  and `Total img/sec on 4 GPU(s): 432.8 +-4.9`.
- MXNet's Speedometer: `INFO:root:Epoch[0] Batch [49]\tSpeed: 213.70 samples/sec\taccuracy=...` (`Batch [20-40]`
  in later versions; once per metric, so the same line may repeat), the GPUs from the command line
  (`--gpus 0,1,2,3`), the arguments dump (`Namespace(batch_size=64, ..., gpus='0', ...)`) or
  `Start training with [gpu(0), gpu(1)]`. The Module API
  splits the iterator's batch over the GPUs: in example/image-classification's fit.py scripts `--batch-size` is
  the total, while the Gluon `image_classification.py` takes it per device. Synthetic input: `--benchmark 1` or
  the `dummy` dataset.

`points_of` turns one file's signals into runs, each a point (GPUs, images/sec per GPU, per-GPU batch,
synthetic data or not); `worst_scaling` sets the points against the run on the fewest GPUs.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass

from diagnosers.findings import Quote
from diagnosers.parsers.signals import Signal, pattern

STEP_RATE = "perf.bench-step-rate"
TOTAL_RATE = "perf.bench-total-rate"
GPUS_TOTAL_RATE = "perf.bench-gpus-total-rate"
BENCH_SETTING = "perf.bench-setting"
BENCH_COMMAND = "perf.bench-command"

_NUMBER = r"\d+(?:\.\d+)?"

PATTERNS = (
    pattern(
        STEP_RATE,
        ["images/sec: "],
        rf"^\s*(?P<step>\d+)\s+images/sec: (?P<rate>{_NUMBER}) \+/- ",
        ["10\timages/sec: 204.8 +/- 0.1 (jitter = 0.6)\t9.228", "1\timages/sec: 47.9 +/- 0.0 (jitter = 0.0)\t9.066"],
    ),
    pattern(
        STEP_RATE,
        ["Speed: "],
        rf"Epoch\[(?P<epoch>\d+)\]\s*Batch\s*\[(?:\d+-)?(?P<step>\d+)\]\s+Speed: (?P<rate>{_NUMBER}) samples/sec",
        [
            "INFO:root:Epoch[0] Batch [49]\tSpeed: 213.701739 samples/sec\taccuracy=1.000000",
            "INFO:root:Epoch[0] Batch [20-40]\tSpeed: 992.78 samples/sec\taccuracy=0.466797",
            "2016-01-13 13:57:45,069 Node[0] Epoch[0] Batch [5]      Speed: 129.84 samples/sec   Train-accuracy=0.1",
        ],
    ),
    pattern(
        TOTAL_RATE,
        ["total images/sec: "],
        rf"^\s*total images/sec: (?P<rate>{_NUMBER})\s*$",
        ["total images/sec: 204.75"],
    ),
    pattern(
        GPUS_TOTAL_RATE,
        ["Total img/sec on "],
        rf"Total img/sec on (?P<gpus>\d+) GPU\(s\): (?P<rate>{_NUMBER})",
        ["Total img/sec on 4 GPU(s): 432.8 +-4.9"],
    ),
    pattern(
        BENCH_SETTING,
        ["Batch size:", " per device", "Devices:", "Dataset:", "Variables:", "Number of GPUs:", "Num GPUs:"],
        r"^\s*(?:Batch size:\s+(?P<global_batch>\d+) global|Batch size: (?P<batch>\d+)\s*$"
        rf"|(?P<per_device>{_NUMBER}) per device\s*$|Devices:\s+\[(?P<devices>[^\]]*)\]"
        r"|Dataset:\s+(?P<dataset>\w+)(?P<synthetic> \(synthetic\))?\s*$|Variables:\s+(?P<variables>\w+)\s*$"
        r"|(?:Number of GPUs|Num GPUs):\s+(?P<num_gpus>\d+)\s*$)",
        [
            "Batch size:  64 global",
            "             32 per device",
            "Devices:     ['horovod/gpu:0', 'horovod/gpu:1']",
            "Dataset:     imagenet (synthetic)",
            "Variables:   horovod",
            "Batch size: 32",
            "Number of GPUs: 4",
        ],
    ),
    pattern(
        BENCH_COMMAND,
        ["tf_cnn_benchmarks.py", "synthetic_benchmark.py"],
        r"^(?!.*\bFile \")(?P<command>.*\b(?:tf_cnn_benchmarks|\w*synthetic_benchmark)\.py(?:\s.*)?)$",
        [
            "mpirun -np 1 -H localhost:1 python tf_cnn_benchmarks.py --model resnet101 --batch_size 64 "
            "--variable_update horovod",
        ],
    ),
    pattern(
        BENCH_COMMAND,
        ["--gpus"],
        r"^(?!.*\bFile \")(?P<command>.*\bpython\d?(?:\.\d+)?\s+\S*\.py\b.*\s--gpus[ =]\S+.*)$",
        ["python train_mnist.py --network mlp --gpus 0,1", "python image_classification.py --gpus 0,1 --batch-size 32"],
    ),
    pattern(
        BENCH_SETTING,
        ["Namespace(", "Start training with ["],
        r"(?P<namespace>\bNamespace\(.*\bgpus=.*)|Start training with \[(?P<contexts>(?:gpu\(\d+\)(?:, )?)+)\]",
        [
            "INFO:root:start with arguments Namespace(batch_size=64, disp_batches=100, gpus='0', kv_store='device')",
            "INFO:root:Start training with [gpu(4), gpu(5), gpu(6), gpu(7)]",
        ],
    ),
)

_LAUNCH_PROCESSES = re.compile(r"(?:^|\s)(?:-np|-n|--np)[ =](\d+)\b")
_BATCH_ARG = re.compile(r"--batch[_-]size[ =](\d+)\b")
_NUM_GPUS_ARG = re.compile(r"--num_gpus[ =](\d+)\b")
_GPUS_ARG = re.compile(r"--gpus[ =]['\"]?([\d,]+)")
# example/image-classification's fit.py scripts: the Module splits their --batch-size over the GPUs.
_TOTAL_BATCH_SCRIPTS = re.compile(r"\btrain_(?:imagenet|cifar10|mnist)\.py\b")
_PER_DEVICE_BATCH_SCRIPTS = re.compile(r"\bimage_classification\.py\b")
_MXNET_SYNTHETIC_ARG = re.compile(r"--benchmark[ =]1\b|--dataset[ =]['\"]?dummy\b")
_NAMESPACE_BATCH = re.compile(r"\bbatch_size=(\d+)\b")
_NAMESPACE_GPU_IDS = re.compile(r"\bgpus='([\d,\s]+)'")
_NAMESPACE_GPU_COUNT = re.compile(r"\bgpus=(\d+)\b")
_NAMESPACE_SYNTHETIC = re.compile(r"\bbenchmark=(?:1|True)\b|\bdataset='dummy'")


@dataclass(frozen=True, slots=True)
class Point:
    """One run: its GPUs, images/sec per GPU, per-GPU batch and whether its data was synthetic (None: unstated)."""

    gpus: int
    per_gpu: float
    batch: float | None
    synthetic: bool | None
    quote: Quote


@dataclass(slots=True)
class _Settings:
    """What the header or command line in force says about the run that follows."""

    batch: float | None = None
    # A batch split over the GPUs (MXNet's Module); the per-GPU batch once the GPUs are known.
    total_batch: float | None = None
    devices: int | None = None
    horovod: bool = False
    processes: int | None = None
    synthetic: bool | None = None


@dataclass(slots=True)
class _Run:
    settings: _Settings
    steps: list[Signal]
    totals: list[Signal]


def points_of(signals: list[Signal]) -> list[Point]:
    """One file's benchmark signals, in line order, as the runs they show."""
    settings = _Settings()
    runs: list[_Run] = []
    current: _Run | None = None
    for signal in signals:
        if signal.kind == GPUS_TOTAL_RATE:
            gpus = int(signal.get("gpus"))
            runs.append(_Run(_Settings(settings.batch, None, gpus, False, None, True), [], [signal]))
            continue
        if signal.kind in (BENCH_COMMAND, BENCH_SETTING):
            if current is not None and (current.steps or current.totals):
                current = None
            settings = _settings_after(settings, signal)
            continue
        if current is not None and _repeats_a_metric_line(signal, current):
            continue
        if current is None or (signal.kind == STEP_RATE and current.steps and _step(signal) < _step(current.steps[-1])):
            current = _Run(_copy(settings), [], [])
            runs.append(current)
        (current.steps if signal.kind == STEP_RATE else current.totals).append(signal)
        current.settings = _copy(settings)
    return [point for point in map(_point, runs) if point is not None]


def _settings_after(settings: _Settings, signal: Signal) -> _Settings:
    if signal.kind == BENCH_COMMAND:
        # A new invocation: nothing of the previous one's header holds.
        command = signal.get("command")
        if "--gpus" in command:
            return _mxnet_command_settings(command)
        batch = _BATCH_ARG.search(command)
        gpus = _NUM_GPUS_ARG.search(command)
        processes = _LAUNCH_PROCESSES.search(command.split("python")[0])
        return _Settings(
            batch=float(batch.group(1)) if batch else None,
            total_batch=None,
            devices=int(gpus.group(1)) if gpus else None,
            horovod="horovod" in command or "synthetic_benchmark" in command,
            processes=int(processes.group(1)) if processes else None,
            synthetic="--data_dir" not in command,
        )
    if signal.get("namespace"):
        return _mxnet_namespace_settings(settings, signal.get("namespace"))
    found = _copy(settings)
    if signal.get("contexts"):
        found.devices = signal.get("contexts").count("gpu(")
    if signal.get("per_device") or signal.get("batch"):
        found.batch = float(signal.get("per_device") or signal.get("batch"))
    if signal.get("devices"):
        names = [name for name in signal.get("devices").split(",") if name.strip()]
        found.devices = len(names)
        found.horovod = found.horovod or any("horovod" in name for name in names)
    if signal.get("num_gpus"):
        found.devices = int(signal.get("num_gpus"))
    if signal.get("variables"):
        found.horovod = signal.get("variables") == "horovod"
    if signal.get("dataset"):
        found.synthetic = bool(signal.get("synthetic"))
    return found


def _mxnet_command_settings(command: str) -> _Settings:
    """An MXNet script's command line: `--gpus` lists GPU ids, except that the Gluon script once took a count, so
    a single value there says nothing."""
    batch = _BATCH_ARG.search(command)
    gpus = _GPUS_ARG.search(command)
    total = _TOTAL_BATCH_SCRIPTS.search(command) is not None
    per_device = _PER_DEVICE_BATCH_SCRIPTS.search(command) is not None
    ids = [one for one in gpus.group(1).split(",") if one] if gpus else []
    devices = len(ids) if ids and (total or len(ids) > 1) else None
    size = float(batch.group(1)) if batch else None
    return _Settings(
        batch=size if per_device else None,
        total_batch=size if total else None,
        devices=devices,
        synthetic=True if _MXNET_SYNTHETIC_ARG.search(command) else None,
    )


def _mxnet_namespace_settings(settings: _Settings, namespace: str) -> _Settings:
    """The arguments an MXNet script prints: a quoted `gpus` lists ids, a bare number counts GPUs; fit.py's
    `disp_batches` says the batch is the total over the GPUs, else the command line (if any) has said which."""
    found = _copy(settings)
    ids = _NAMESPACE_GPU_IDS.search(namespace)
    count = _NAMESPACE_GPU_COUNT.search(namespace)
    if ids:
        found.devices = len([one for one in ids.group(1).split(",") if one.strip()])
    elif count:
        found.devices = int(count.group(1))
    batch = _NAMESPACE_BATCH.search(namespace)
    if batch and "disp_batches=" in namespace:
        found.batch, found.total_batch = None, float(batch.group(1))
    elif batch and found.batch is not None:
        found.batch = float(batch.group(1))
    elif batch and found.total_batch is not None:
        found.total_batch = float(batch.group(1))
    if _NAMESPACE_SYNTHETIC.search(namespace):
        found.synthetic = True
    return found


def _copy(settings: _Settings) -> _Settings:
    return _Settings(
        settings.batch, settings.total_batch, settings.devices, settings.horovod, settings.processes, settings.synthetic
    )


def _repeats_a_metric_line(signal: Signal, run: _Run) -> bool:
    """MXNet's Speedometer prints its line once per metric (accuracy, top-k): one batch, not one more process."""
    if not signal.get("epoch"):
        return False
    return any(_step(one) == _step(signal) and one.get("rate") == signal.get("rate") for one in run.steps)


def _step(signal: Signal) -> tuple[int, int]:
    """MXNet numbers its batches from 0 in every epoch."""
    return int(signal.get("epoch", "0")), int(signal.get("step"))


def _point(run: _Run) -> Point | None:
    """A run's throughput per GPU: the last step's cumulative rate, else the run's total line(s).

    Under Horovod each rank prints its own rate (one line per rank and step); a single process prints the
    rate of all its local devices."""
    settings = run.settings
    if run.steps:
        last = max(_step(signal) for signal in run.steps)
        at_last = [signal for signal in run.steps if _step(signal) == last]
        lines_per_step = max(Counter(_step(signal) for signal in run.steps).values())
    else:
        at_last = run.totals
        lines_per_step = len(run.totals)
    rate = statistics.median(float(signal.get("rate")) for signal in at_last)
    quote = at_last[len(at_last) // 2].quote
    if run.totals and not run.steps and run.totals[0].kind == GPUS_TOTAL_RATE:
        return Point(settings.devices or 1, rate / (settings.devices or 1), settings.batch, True, quote)
    if settings.horovod:
        gpus = max(lines_per_step, settings.processes or 0, settings.devices or 0)
        return Point(gpus, rate, settings.batch, settings.synthetic, quote)
    if settings.devices is None:
        return None
    batch = settings.batch
    if batch is None and settings.total_batch is not None:
        batch = settings.total_batch / settings.devices
    return Point(settings.devices * lines_per_step, rate / settings.devices, batch, settings.synthetic, quote)


@dataclass(frozen=True, slots=True)
class Scaling:
    """The run on the fewest GPUs and the one that keeps the least of its throughput per GPU."""

    base: Point
    scaled: Point

    @property
    def efficiency(self) -> float:
        return self.scaled.per_gpu / self.base.per_gpu

    @property
    def synthetic(self) -> bool:
        """Both runs read no data (synthetic input): what is lost went to communication."""
        return bool(self.base.synthetic and self.scaled.synthetic)

    @property
    def batch(self) -> float | None:
        return self.scaled.batch if self.scaled.batch is not None else self.base.batch


def worst_scaling(points: list[Point]) -> Scaling | None:
    """The least efficient run on more GPUs than the smallest run, at the same per-GPU batch where both state it."""
    if not points:
        return None
    base = min(points, key=lambda point: (point.gpus, -point.per_gpu))
    comparable = [
        point
        for point in points
        if point.gpus > base.gpus and (point.batch is None or base.batch is None or point.batch == base.batch)
    ]
    if not comparable or base.per_gpu <= 0:
        return None
    return Scaling(base, min(comparable, key=lambda point: point.per_gpu))
