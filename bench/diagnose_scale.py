"""Scale benchmark for `trainbot diagnose`: two 64-rank bundles against plain grep.

Generates (or reuses) two bundles, each with ~512 MB of NCCL_DEBUG logs, 6 hours of DCGM
metrics and one PyTorch watchdog timeout buried in rank 41:

- realistic: NCCL INFO init lines, then collective chatter and training output;
- restarts: the same, but the communicator is initialised again every few steps (as after
  elastic restarts), so about a third of all lines are `Channel ... via NET/Socket` lines,
  each one a candidate line for the parsers.

For each it times `grep -c` over the logs and `trainbot diagnose BUNDLE --json` over the
bundle, interleaved, and checks that the diagnosis points at the exact line of the timeout
and that every log was read whole.

    python bench/diagnose_scale.py [--workdir DIR] [--size-mb 512] [--repeat 3] [--bundles realistic,restarts]

Exit status 0 only when, for every bundle, the timeout is found, the ratio of the medians
trainbot/grep is within its goal (--max-ratio 1.5 realistic, --max-ratio-restarts 4) and the
peak RSS of trainbot's process tree <= --max-rss-mb.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

try:
    import psutil
except ImportError:  # reported by main(), so that --help works without it
    psutil = None

# Bump when the generated bundle changes, so stale work dirs are regenerated.
GENERATOR_VERSION = 1
STAMP_NAME = "diagnose_scale.stamp.json"

HOSTS = 8
GPUS_PER_HOST = 8
WORLD_SIZE = HOSTS * GPUS_PER_HOST
TIMEOUT_RANK = 41
TIMEOUT_AT = 0.7  # fraction of the rank's log before the watchdog line
BASELINE_PATTERNS = ("NCCL WARN", "Watchdog caught", "Traceback")

JOB_END = datetime(2024, 11, 22, 10, 52, 30, tzinfo=UTC)
JOB_START = JOB_END - timedelta(hours=6)
SCRAPE_S = 15
SAMPLES = 6 * 3600 // SCRAPE_S

# One DDP step: a first small bucket, full 25 MiB fp32 buckets, a ragged last one.
BUCKET_COUNTS = (262144, *([6553600] * 21), 1835008)
POOL_BLOCKS = 48  # distinct step blocks per rank: ~1100 distinct COLL lines each
# The pathological bundle: a communicator initialised again every REINIT_EVERY steps, each time printing a send
# and a receive channel line for each of REINIT_CHANNELS ring channels and for each of REINIT_PEERS peers (an
# all-to-all's point-to-point channels): over a third of all lines.
REINIT_EVERY = 8
REINIT_CHANNELS = 32
REINIT_PEERS = 32
SAMPLE_EVERY_S = 0.01
MIB = 1 << 20


# --------------------------------------------------------------------------- logs


@dataclass(frozen=True)
class Rank:
    rank: int
    rng: random.Random

    @property
    def host(self) -> int:
        return self.rank // GPUS_PER_HOST

    @property
    def gpu(self) -> int:
        return self.rank % GPUS_PER_HOST

    @property
    def pid(self) -> int:
        return 2100 + 37 * self.rank

    @property
    def ip(self) -> str:
        return f"10.0.1.{10 + self.host}"

    @property
    def nccl(self) -> str:
        return f"host-{self.host}:{self.pid}:{self.pid + 56} [{self.gpu}] NCCL INFO "

    @property
    def worker(self) -> str:
        return f"(RayTrainWorker pid={self.pid}, ip={self.ip}) "


def _hex_addr(rng: random.Random, prefix: str) -> str:
    """A plausible 48-bit user-space pointer, 16-byte aligned like malloc's."""
    return f"0x{prefix}{rng.getrandbits(40) & ~0xF:010x}"


def _channel_lines(r: Rank) -> list[str]:
    nxt, prv = (r.rank + 1) % WORLD_SIZE, (r.rank - 1) % WORLD_SIZE
    lines = []
    for ch in range(16):
        if r.gpu == GPUS_PER_HOST - 1:
            via = f"[send] via NET/IB/{ch % 8}/GDRDMA"
            lines.append(f"Channel {ch:02d}/0 : {r.rank}[{r.gpu}] -> {nxt}[0] {via}")
        else:
            peer = f"{nxt}[{r.gpu + 1}]"
            lines.append(f"Channel {ch:02d}/0 : {r.rank}[{r.gpu}] -> {peer} via P2P/IPC")
        if r.gpu == 0:
            via = f"[receive] via NET/IB/{ch % 8}/GDRDMA"
            lines.append(f"Channel {ch:02d}/0 : {prv}[7] -> {r.rank}[0] {via}")
    return lines


def _init_lines(r: Rank, comm: str) -> list[str]:
    hcas = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(8))
    ident = f"comm {comm} rank {r.rank} nranks {WORLD_SIZE} cudaDev {r.gpu} nvmlDev {r.gpu}"
    ident += f" busId {0x1B + 0x20 * r.gpu:x}000 commId 0x9c3b2f7a5e1d4c2b"
    parent = (r.rank - 1) if r.gpu else -1
    child = (r.rank + 1) if r.gpu < GPUS_PER_HOST - 1 else -1
    trees = " ".join(f"[{t}] {child}/-1/-1->{r.rank}->{parent}" for t in range(4))
    nccl = [
        "cudaDriverVersion 12040",
        f"Bootstrap : Using eth0:{r.ip}<0>",
        "NET/Plugin: No plugin found (libnccl-net.so)",
        "NET/Plugin: Using internal network plugin.",
        "NCCL version 2.21.5+cuda12.4",
        f"NET/IB : Using {hcas} [RO]; OOB eth0:{r.ip}<0>",
        "Using non-device net plugin version 0",
        "Using network IB",
        f"{ident} - Init START",
        f"Setting affinity for GPU {r.gpu} to ffffffff,00000000,ffffffff",
        f"comm {comm} rank {r.rank} nRanks {WORLD_SIZE} nNodes {HOSTS} localRanks "
        f"{GPUS_PER_HOST} localRank {r.gpu} MNNVL 0",
        f"Trees {trees}",
        "P2P Chunksize set to 524288",
        *_channel_lines(r),
        "Connected all rings",
        "Connected all trees",
        "threadThresholds 8/8/64 | 512/8/64 | 512 | 512",
        "32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer",
        f"{ident} - Init COMPLETE",
        f"Init timings: rank {r.rank} nranks {WORLD_SIZE} total 2.41 (kernels 0.18, "
        "bootstrap 1.62, allgathers 0.03, topo 0.35, graphs 0.02, connections 0.19, rest 0.02)",
    ]
    setup = f"Setting up process group for: env:// [rank={r.rank}, world_size={WORLD_SIZE}]"
    return [r.worker + setup] + [r.nccl + line for line in nccl]


def _step_blocks(r: Rank, comm: str) -> list[str]:
    """Pre-built collective chatter for one step; only opCount differs between blocks,
    as in real DDP logs where the bucket buffers are allocated once."""
    stream = _hex_addr(r.rng, "55")
    buffers = [_hex_addr(r.rng, "7f") for _ in BUCKET_COUNTS]
    tails = [
        f"sendbuff {buf} recvbuff {buf} count {count} datatype 7 op 0 root 0 comm {comm} "
        f"[nranks={WORLD_SIZE}] stream {stream}\n"
        for buf, count in zip(buffers, BUCKET_COUNTS, strict=True)
    ]
    blocks = []
    for _ in range(POOL_BLOCKS):
        op = r.rng.randrange(0x100, 0xFFFFF)
        lines = [f"{r.nccl}AllReduce: opCount {op + i:x} {tail}" for i, tail in enumerate(tails)]
        blocks.append("".join(lines))
    return blocks


def _train_line(r: Rank, step: int) -> str:
    loss = 1.8 + 1.2 * math.exp(-step / 3000) + r.rng.gauss(0, 0.03)
    tokens = r.rng.gauss(182000, 1500)
    progress = f"epoch {step // 500} step {step} loss {loss:.4f}"
    return f"{r.worker}{progress} lr 3.0e-04 tokens/s {tokens:.1f}\n"


def _watchdog_line(r: Rank, seq: int) -> str:
    at = JOB_END - timedelta(minutes=10, seconds=13, microseconds=876544)
    stamp = at.strftime("%m%d %H:%M:%S.%f")
    return (
        f"[rank{r.rank}]:[E{stamp} {r.pid} ProcessGroupNCCL.cpp:616] [Rank {r.rank}] "
        f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) "
        "ran for 600043 milliseconds before timing out.\n"
    )


def _reinit_lines(r: Rank) -> str:
    """A communicator initialised again over sockets: a new comm address in its init lines, and the same
    channel lines as every time before (same host, pid and thread), as after an elastic restart."""
    comm = _hex_addr(r.rng, "55")
    nxt, prv = (r.rank + 1) % WORLD_SIZE, (r.rank - 1) % WORLD_SIZE
    channels = []
    for ch in range(REINIT_CHANNELS):
        via = f"via NET/Socket/{ch % 2}"
        channels.append(f"Channel {ch:02d}/0 : {r.rank}[{r.gpu}] -> {nxt}[{nxt % GPUS_PER_HOST}] [send] {via}")
        channels.append(f"Channel {ch:02d}/0 : {prv}[{prv % GPUS_PER_HOST}] -> {r.rank}[{r.gpu}] [receive] {via}")
    for step in range(1, REINIT_PEERS + 1):
        peer, ch, via = (r.rank + step) % WORLD_SIZE, step % 4, f"via NET/Socket/{step % 2}/Shared"
        channels.append(f"Channel {ch:02d}/1 : {r.rank}[{r.gpu}] -> {peer}[{peer % GPUS_PER_HOST}] [send] {via}")
        channels.append(f"Channel {ch:02d}/1 : {peer}[{peer % GPUS_PER_HOST}] -> {r.rank}[{r.gpu}] [receive] {via}")
    init = [line for line in _init_lines(r, comm) if " via " not in line]
    init = [line.replace("Using network IB", "Using network Socket") for line in init]
    return "".join(line + "\n" for line in [*init[:-3], *(r.nccl + line for line in channels), *init[-3:]])


def _write_rank_log(path: Path, rank: int, target_bytes: int, reinit_every: int) -> int | None:
    """Writes one rank's log; returns the 1-based line of the watchdog timeout, if any. With reinit_every,
    the communicator is initialised again after every that many steps."""
    r = Rank(rank, random.Random(f"rank-{rank}"))
    comm = _hex_addr(r.rng, "55")
    parts = [line + "\n" for line in _init_lines(r, comm)]
    size, lines = sum(map(len, parts)), len(parts)
    blocks = _step_blocks(r, comm)
    bury_at = TIMEOUT_AT * target_bytes if rank == TIMEOUT_RANK else math.inf
    watchdog_line, step = None, 0
    while size < target_bytes:
        if size >= bury_at and watchdog_line is None:
            parts.append(_watchdog_line(r, seq=step * len(BUCKET_COUNTS) + 1))
            size += len(parts[-1])
            lines += 1
            watchdog_line = lines
        step += 1
        chunk = r.rng.choice(blocks) + _train_line(r, step)
        if reinit_every and step % reinit_every == 0:
            chunk += _reinit_lines(r)
        parts.append(chunk)
        size += len(chunk)
        lines += chunk.count("\n")
    path.write_text("".join(parts), encoding="ascii")
    return watchdog_line


def _write_logs(bundle: Path, size_mb: int, reinit_every: int) -> tuple[str, int]:
    logs = bundle / "logs"
    logs.mkdir(parents=True)
    found = None
    for rank in range(WORLD_SIZE):
        name = f"rank-{rank:02d}.log"
        line = _write_rank_log(logs / name, rank, size_mb * MIB // WORLD_SIZE, reinit_every)
        if line is not None:
            found = (f"logs/{name}", line)
    if found is None:
        raise RuntimeError(f"--size-mb {size_mb} is too small to bury the timeout")
    return found


# --------------------------------------------------------------------- prometheus


@dataclass(frozen=True)
class Gauge:
    mean: float
    sd: float
    lo: float
    hi: float
    decimals: int


FB_TOTAL_MIB = 81559
FB_RESERVED_MIB = 480
GAUGES = {
    "DCGM_FI_DEV_GPU_UTIL": Gauge(97, 2, 0, 100, 0),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": Gauge(0.93, 0.02, 0, 1, 6),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": Gauge(0.56, 0.03, 0, 1, 6),
    "DCGM_FI_PROF_DRAM_ACTIVE": Gauge(0.44, 0.03, 0, 1, 6),
    "DCGM_FI_PROF_PCIE_TX_BYTES": Gauge(2.4e8, 3e7, 0, 6.4e10, 0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": Gauge(3.9e8, 4e7, 0, 6.4e10, 0),
    "DCGM_FI_DEV_SM_CLOCK": Gauge(1965, 12, 1410, 1980, 0),
    "DCGM_FI_DEV_GPU_TEMP": Gauge(62, 2, 30, 90, 0),
    "DCGM_FI_DEV_POWER_USAGE": Gauge(640, 20, 60, 700, 3),
    "DCGM_FI_DEV_XID_ERRORS": Gauge(0, 0, 0, 0, 0),
    "DCGM_FI_DEV_FB_USED": Gauge(71230, 40, 0, FB_TOTAL_MIB - FB_RESERVED_MIB, 0),
}


def _gauge_samples(name: str, gpu: int) -> list[float]:
    """A mean-reverting walk, so samples drift like real counters instead of white noise."""
    g = GAUGES[name]
    rng = random.Random(f"{name}/{gpu}")
    x, out = g.mean, []
    for _ in range(SAMPLES):
        x = g.mean + 0.8 * (x - g.mean) + rng.gauss(0, g.sd * 0.6)
        out.append(round(min(max(x, g.lo), g.hi), g.decimals))
    return out


def _samples(name: str, gpu: int) -> list[float]:
    if name == "DCGM_FI_DEV_FB_FREE":
        used = _gauge_samples("DCGM_FI_DEV_FB_USED", gpu)
        return [FB_TOTAL_MIB - FB_RESERVED_MIB - u for u in used]
    return _gauge_samples(name, gpu)


def _prom_value(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def _labels(name: str, gpu: int) -> dict[str, str]:
    host, local = divmod(gpu, GPUS_PER_HOST)
    return {
        "__name__": name,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "Hostname": f"host-{host}",
        "UUID": f"GPU-{uuid.UUID(int=random.Random(gpu).getrandbits(128))}",
        "container": "ray-worker",
        "gpu": str(local),
        "modelName": "NVIDIA H100 80GB HBM3",
        "namespace": "ml",
        "pod": f"scale-64-raycluster-worker-gpu-{host}",
    }


def _write_prometheus(bundle: Path) -> None:
    prom = bundle / "prometheus"
    prom.mkdir(parents=True)
    start = int(JOB_START.timestamp())
    stamps = range(start, start + SAMPLES * SCRAPE_S, SCRAPE_S)
    for name in [*GAUGES, "DCGM_FI_DEV_FB_FREE"]:
        result = [
            {
                "metric": _labels(name, gpu),
                "values": [[t, _prom_value(v)] for t, v in zip(stamps, _samples(name, gpu), strict=True)],
            }
            for gpu in range(WORLD_SIZE)
        ]
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        (prom / f"{name}.json").write_text(json.dumps(body, separators=(",", ":")))


# ------------------------------------------------------------------------- bundle


def _rfc3339(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_bundle_json(bundle: Path) -> None:
    meta = {
        "job": "scale-64",
        "namespace": "ml",
        "backend": "kuberay",
        "start": _rfc3339(JOB_START),
        "end": _rfc3339(JOB_END),
        "status": "FAILED",
        "world_size": WORLD_SIZE,
        "gpus_per_worker": GPUS_PER_HOST,
        "sources": {
            "logs": "ok",
            "prometheus": "ok",
            "k8s": "not-configured",
            "ray": "not-configured",
        },
    }
    (bundle / "bundle.json").write_text(json.dumps(meta, indent=2) + "\n")


@dataclass(frozen=True)
class Bundle:
    path: Path
    timeout_source: str
    timeout_line: int

    def log_files(self) -> list[Path]:
        return sorted((self.path / "logs").glob("*.log"))

    def log_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.log_files())


@dataclass(frozen=True)
class Kind:
    """Which bundle: its folder and stamp under the work dir, how often communicators re-initialise, its goal."""

    name: str
    folder: str
    reinit_every: int
    max_ratio_option: str


REALISTIC = Kind("realistic", "bundle", 0, "max_ratio")
RESTARTS = Kind("restarts", "bundle-restarts", REINIT_EVERY, "max_ratio_restarts")
KINDS = (REALISTIC, RESTARTS)


def prepare_bundle(workdir: Path, size_mb: int, kind: Kind = REALISTIC) -> tuple[Bundle, float | None]:
    """Returns the bundle and its generation time, or None for the time when reused."""
    params = {"version": GENERATOR_VERSION, "size_mb": size_mb}
    if kind.reinit_every:
        params |= {"reinit_every": kind.reinit_every, "channels": REINIT_CHANNELS, "peers": REINIT_PEERS}
    stamp = workdir / (STAMP_NAME if kind is REALISTIC else f"diagnose_scale.{kind.name}.stamp.json")
    path = workdir / kind.folder
    if stamp.exists():
        recorded = json.loads(stamp.read_text())
        if recorded["params"] == params and path.is_dir():
            return Bundle(path, recorded["source"], recorded["line"]), None
        stamp.unlink()
    if path.exists():
        shutil.rmtree(path)
    began = time.perf_counter()
    source, line = _write_logs(path, size_mb, kind.reinit_every)
    _write_prometheus(path)
    _write_bundle_json(path)
    elapsed = time.perf_counter() - began
    # Written last: an interrupted generation leaves no stamp and is redone.
    stamp.write_text(json.dumps({"params": params, "source": source, "line": line}) + "\n")
    return Bundle(path, source, line), elapsed


# -------------------------------------------------------------------- measurement


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_rss: int
    returncode: int
    stdout: bytes
    stderr: bytes


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of a process and all its descendants, summed."""
    try:
        members = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # exited between listing and sampling
    return total


class PeakRss(threading.Thread):
    """Samples a process tree's RSS in the background and keeps the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = tree_rss(self.proc)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_EVERY_S):
            self.peak = max(self.peak, tree_rss(self.proc))

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.peak


def run_sampled(cmd: list[str]) -> Run:
    """Runs cmd, timing it and sampling its process tree's RSS while it runs."""
    # Files rather than pipes: nobody reads a pipe while the main thread waits.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        # Safe to attach by pid: the child can't be reaped, nor its pid reused, before wait().
        sampler = PeakRss(proc.pid)
        sampler.start()
        returncode = proc.wait()
        seconds = time.perf_counter() - began
        peak = sampler.stop()
        out.seek(0)
        err.seek(0)
        return Run(seconds, peak, returncode, out.read(), err.read())


def run_grep(files: list[Path]) -> tuple[float, int]:
    """Times the baseline; returns its seconds and the total match count."""
    cmd = ["grep", "-c"]
    for pattern in BASELINE_PATTERNS:
        cmd += ["-e", pattern]
    began = time.perf_counter()
    done = subprocess.run([*cmd, *map(str, files)], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode > 1:
        sys.exit(f"diagnose_scale: grep failed: {done.stderr.strip()}")
    counts = [line.rsplit(":", 1)[-1] for line in done.stdout.splitlines()]
    return seconds, sum(map(int, counts))


def check_diagnosis(run: Run, bundle: Bundle) -> str | None:
    """Returns why the diagnosis misses the buried timeout or any log's end, or None when it finds it."""
    if run.returncode != 0:
        tail = run.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"trainbot exited {run.returncode}: {' '.join(tail)}"
    try:
        diagnosis = json.loads(run.stdout)
    except json.JSONDecodeError as err:
        return f"trainbot printed invalid JSON: {err}"
    # A log cut short would be read faster than a whole one: the figures are only worth it for the whole bundle.
    cut = sorted(
        name for name, note in diagnosis.get("sources", {}).items() if name.startswith("logs/") and note != "ok"
    )
    if cut:
        return f"{len(cut)} log(s) not read whole, e.g. {cut[0]}: {diagnosis['sources'][cut[0]]}"
    findings = [f for f in diagnosis.get("findings", []) if f.get("id") == "nccl-timeout"]
    if not findings:
        return "no nccl-timeout finding"
    want = (bundle.timeout_source, bundle.timeout_line)
    for finding in findings:
        if any((e.get("source"), e.get("line")) == want for e in finding.get("evidence", [])):
            return None
    return "its nccl-timeout evidence cites other lines"


@dataclass(frozen=True)
class Measurement:
    greps: list[float]
    trainbots: list[float]
    peak_rss: int
    problem: str | None

    @property
    def ratio(self) -> float:
        return statistics.median(self.trainbots) / statistics.median(self.greps)


def measure(bundle: Bundle, trainbot: Path, repeat: int) -> Measurement:
    files = bundle.log_files()
    cmd = [str(trainbot), "diagnose", str(bundle.path), "--json"]
    # Warm-ups: both read the bundle once so the timed runs all hit the page cache.
    _, matches = run_grep(files)
    if matches != 1:
        sys.exit(f"diagnose_scale: baseline grep matched {matches} lines, expected 1")
    runs = [run_sampled(cmd)]
    greps = []
    for _ in range(repeat):
        greps.append(run_grep(files)[0])
        runs.append(run_sampled(cmd))
    problems = [p for p in (check_diagnosis(r, bundle) for r in runs) if p]
    return Measurement(
        greps=greps,
        trainbots=[r.seconds for r in runs[1:]],
        peak_rss=max(r.peak_rss for r in runs),
        problem=problems[0] if problems else None,
    )


# -------------------------------------------------------------------------- report


def _median_and_spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def report(kind: Kind, bundle: Bundle, m: Measurement, max_ratio: float, max_rss_mb: float) -> list[str]:
    """Prints one bundle's figures; returns the goals it missed."""
    rss_mb = m.peak_rss / MIB
    found = m.problem is None
    where = f"{bundle.timeout_source}:{bundle.timeout_line}"
    rows = [
        ("log bytes", f"{bundle.log_bytes():,}"),
        ("grep median", _median_and_spread(m.greps)),
        ("trainbot median", _median_and_spread(m.trainbots)),
        ("ratio trainbot/grep", f"{m.ratio:.2f} (goal <= {max_ratio:g})"),
        ("peak RSS (tree)", f"{rss_mb:.0f} MB"),
        ("found", f"yes ({where})" if found else f"no, expected {where}: {m.problem}"),
    ]
    print(f"[{kind.name}] {bundle.path}")
    for label, value in rows:
        print(f"  {label:<20} {value}")
    print(
        f"RESULT bundle={kind.name} grep_s={statistics.median(m.greps):.3f} "
        f"trainbot_s={statistics.median(m.trainbots):.3f} ratio={m.ratio:.2f} rss_mb={rss_mb:.0f} "
        f"found={'yes' if found else 'no'}",
        flush=True,
    )
    missed = []
    if not found:
        missed.append(f"{kind.name}: timeout not found ({m.problem})")
    if m.ratio > max_ratio:
        missed.append(f"{kind.name}: ratio {m.ratio:.2f} > {max_ratio:g}")
    if rss_mb > max_rss_mb:
        missed.append(f"{kind.name}: peak RSS {rss_mb:.0f} MB > {max_rss_mb:.0f} MB")
    return missed


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where the bundles go (WORKDIR/bundle and WORKDIR/bundle-restarts, reused when generated with the "
        "same parameters, replaced otherwise); default: a new temporary directory",
    )
    parser.add_argument(
        "--size-mb", type=int, default=512, help="total size of each bundle's logs in MiB (default 512)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command (default 3)")
    parser.add_argument(
        "--bundles",
        default=",".join(kind.name for kind in KINDS),
        help="which bundles to measure, comma-separated (default: realistic,restarts)",
    )
    parser.add_argument("--keep", action="store_true", help="do not delete the temporary work directory")
    parser.add_argument(
        "--trainbot",
        type=Path,
        default=Path(sys.executable).parent / "trainbot",
        help="trainbot executable (default: next to this Python)",
    )
    parser.add_argument(
        "--max-ratio", type=float, default=1.5, help="bound on trainbot/grep, realistic bundle (default 1.5)"
    )
    parser.add_argument(
        "--max-ratio-restarts", type=float, default=4.0, help="bound on trainbot/grep, restarts bundle (default 4)"
    )
    parser.add_argument("--max-rss-mb", type=float, default=500.0, help="bound on peak RSS in MiB (default 500)")
    args = parser.parse_args()
    if args.size_mb < 1 or args.repeat < 1:
        parser.error("--size-mb and --repeat must be at least 1")
    by_name = {kind.name: kind for kind in KINDS}
    unknown = [name for name in args.bundles.split(",") if name not in by_name]
    if unknown:
        parser.error(f"unknown bundle {', '.join(unknown)}; choose from {', '.join(by_name)}")
    args.kinds = [by_name[name] for name in dict.fromkeys(args.bundles.split(","))]
    return args


def main() -> int:
    args = parse_args()
    if psutil is None:
        sys.exit("diagnose_scale: psutil is required (pip install psutil, or the project's dev extra)")
    if not (args.trainbot.is_file() and os.access(args.trainbot, os.X_OK)):
        sys.exit(f"diagnose_scale: no trainbot executable at {args.trainbot} (use --trainbot PATH)")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="diagnose-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        missed = []
        for kind in args.kinds:
            bundle, generated_s = prepare_bundle(workdir, args.size_mb, kind)
            how = "reused" if generated_s is None else f"generated in {generated_s:.1f} s"
            print(f"bundle {bundle.path} ({how})", flush=True)
            measurement = measure(bundle, args.trainbot, args.repeat)
            missed += report(kind, bundle, measurement, getattr(args, kind.max_ratio_option), args.max_rss_mb)
        if missed:
            print("FAIL: " + "; ".join(missed), file=sys.stderr)
            return 1
        return 0
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
