"""Step breakdowns, profiler tables, straggler reports and throttled GPUs as training tools print them."""

from pathlib import Path

import pytest

from diagnosers.bundle import load_bundle
from diagnosers.engine import diagnose
from diagnosers.parsers.timings.phase_tables import detector_extremes, fields_of, phases_of
from tests.builders import scenarios


def findings_of(tmp_path: Path, log: str) -> dict[str, object]:
    path = tmp_path / "logs" / "train.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(log)
    return {one.id: one for one in diagnose(load_bundle(tmp_path)).findings}


@pytest.mark.parametrize(
    ("line", "step_ms", "comm_ms"),
    [
        (
            "time (ms) | forward: 435.67 | backward: 744.11 | backward_inner: 513.92 | backward_allreduce: 230.11 "
            "| step: 0.98",
            1180.76,
            230.11,
        ),
        (
            "time (ms) | forward-compute: 58.16 | backward-compute: 42.66 | backward-params-all-reduce: 21.43 | "
            "backward-embedding-all-reduce: 0.03 | backward-reduce-model-grads: 21.52 | optimizer: 57.5 | "
            "batch-generator: 5.24",
            185.08,
            21.52,
        ),
        (
            "rank=0 time (ms) | train_batch: 87510.72 | batch_input: 78.66 | forward: 2844.74 | pipe_send_output: "
            "5377.75 | comms: 74766.41 | pipe_recv_grad: 10826.45 | reduce_grads: 29651.29 | step: 29300.81",
            87510.72,
            74766.41,
        ),
    ],
)
def test_breakdown_fields_give_step_and_collective_time(line, step_ms, comm_ms):
    phases = phases_of(fields_of(line))
    assert phases is not None
    assert phases.step_ms == pytest.approx(step_ms)
    assert phases.comm_ms == pytest.approx(comm_ms)


def test_a_breakdown_without_a_collective_says_nothing():
    assert phases_of(fields_of("time (ms) | forward: 207.71 | backward: 3509.10 | optimizer: 38738.77")) is None


MEGATRON_BLOCK = """\
 iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): {elapsed} |
(min, max) time across ranks (ms):
    forward-backward ...............................: (1805.21, 1806.02)
    forward-compute ................................: (640.11, 702.53)
    backward-compute ...............................: (1010.40, 1090.87)
    batch-generator ................................: (2.15, 3.02)
    all-grads-sync .................................: ({sync}, {sync})
    optimizer ......................................: (40.22, 40.70)
"""


@pytest.mark.parametrize(("sync", "comm_bound"), [("1290.50", True), ("45.10", False)])
def test_megatron_min_max_timers_weigh_the_gradient_sync(tmp_path, sync, comm_bound):
    found = findings_of(tmp_path, MEGATRON_BLOCK.format(elapsed="1850.3", sync=sync))
    assert ("comm-bound" in found) == comm_bound
    if comm_bound:
        assert any("all-grads-sync" in quote.text for quote in found["comm-bound"].evidence)


SEPARATOR = "  ".join(["-" * 55, *["-" * 12] * 10])
COLUMNS = ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA", "Self CUDA %")
HEADER = "  ".join(
    ["Name".rjust(55), *(name.rjust(12) for name in (*COLUMNS, "CUDA total", "CUDA time avg", "# of Calls"))]
)
PROFILER_TABLE = "\n".join(
    [
        SEPARATOR,
        HEADER,
        SEPARATOR,
        "{first}",
        "{second}",
        SEPARATOR,
        "Self CPU time total: 2.104s",
        "Self CUDA time total: 1.325s",
        "",
    ]
)
NCCL_ROW = (
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)         0.00%       0.000us         0.00%       "
    "0.000us       0.000us     {ms}ms        {pct}%     {ms}ms       2.031ms           400"
)
GEMM_ROW = (
    "                    sm80_xmma_gemm_f16f16_f16f32_f32_nn_n         0.00%       0.000us         0.00%       "
    "0.000us       0.000us     {ms}ms        {pct}%     {ms}ms     101.200us          1000"
)


@pytest.mark.parametrize(("nccl_pct", "verdict"), [("61.32", "comm-bound"), ("8.10", "compute-bound")])
def test_profiler_table_where_nccl_kernels_dominate_is_comm_bound(tmp_path, nccl_pct, verdict):
    gemm_pct = f"{100 - float(nccl_pct) - 5:.2f}"
    table = PROFILER_TABLE.format(
        first=NCCL_ROW.format(ms="812.345", pct=nccl_pct), second=GEMM_ROW.format(ms="402.123", pct=gemm_pct)
    )
    diagnosis = diagnose(load_bundle(_log(tmp_path, table)))
    assert diagnosis.verdict == verdict


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "logs" / "profile.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return tmp_path


def test_one_micro_sample_per_gpu_behind_a_dominant_all_reduce_is_small_batch(tmp_path):
    log = "\n".join(
        [
            "[2023-06-01 10:00:00,123] [INFO] [config.py:964:print]   train_micro_batch_size_per_gpu  1",
            *[
                f"[2023-06-01 10:01:0{i},000] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | "
                f"forward: 21.{i}0 | backward: 160.4{i} | backward_inner: 30.12 | backward_allreduce: 130.2{i} | "
                "step: 8.01"
                for i in range(6)
            ],
        ]
    )
    found = findings_of(tmp_path, log)
    assert "small-batch" in found and "comm-bound" in found
    assert "1 samples per GPU" in found["small-batch"].detail


DETECTOR = (
    "[2024-03-14 23:0{i}:56] | MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: {rtt}ms/5 | MnPwr/Rnk: 601796W/8 | "
    "MxPwr/Rnk: 683801W/18 | MnTmp/Rnk: 52C/0 | MxTmp/Rnk: 65C/21 | MnUtl/Rnk: 97%/8 | MxUtl/Rnk: 100%/6 | "
    "MnClk/Rnk: {clk}MHz/5 | MxClk/Rnk: 1980MHz/0 | MnDRtt/Rnk: 14.27ms/23 | MxDRtt/Rnk: 34.65ms/3 | "
    "MnEtpt/Rnk: 296.02TF/0 | MxEtpt/Rnk: 297.32TF/8"
)


def test_detector_fields_read_their_ranks():
    extremes = detector_extremes(DETECTOR.format(i=0, rtt="4530.1", clk="1410"))
    assert extremes["Rtt"].high_rank == 5 and extremes["Clk"].low == 1410


@pytest.mark.parametrize(
    ("rtt", "clk", "straggler"), [("4890.20", "1950", True), ("3468.20", "1350", True), ("3468.20", "1950", False)]
)
def test_megatron_straggler_detector_names_the_slow_rank(tmp_path, rtt, clk, straggler):
    found = findings_of(tmp_path, "\n".join(DETECTOR.format(i=i, rtt=rtt, clk=clk) for i in range(4)))
    assert ("straggler" in found) == straggler
    if straggler:
        assert "Rank 5" in found["straggler"].title


SMI_Q = """\
GPU 00000000:3B:00.0
    Clocks Event Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : {power_cap}
        HW Slowdown                       : {hw}
            HW Thermal Slowdown           : {hw}
            HW Power Brake Slowdown       : Not Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Not Active
        Display Clock Setting             : Not Active
"""


@pytest.mark.parametrize(
    ("power_cap", "hw", "straggler"), [("Active", "Not Active", False), ("Not Active", "Active", True)]
)
def test_nvidia_smi_hardware_slowdown_is_a_throttled_gpu(tmp_path, power_cap, hw, straggler):
    found = findings_of(tmp_path, SMI_Q.format(power_cap=power_cap, hw=hw))
    assert ("straggler" in found) == straggler
    if straggler:
        assert "00000000:3B:00.0" in found["straggler"].title


@pytest.mark.parametrize(
    ("metric", "normal", "odd"),
    [("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 0, 0x48), ("DCGM_FI_DEV_POWER_USAGE", 640, 290)],
)
def test_default_dcgm_counters_name_a_throttled_gpu(tmp_path, metric, normal, odd):
    gpus = [scenarios.Gpu("node-0", index, {metric: odd if index == 5 else normal}) for index in range(8)]
    scenarios.write_dcgm(tmp_path, gpus, host_label="Hostname", noise=0.0)
    stragglers = [one for one in diagnose(load_bundle(tmp_path)).findings if one.id == "straggler"]
    assert stragglers and "node-0/gpu 5" in stragglers[0].title


@pytest.mark.parametrize(("score", "straggler"), [("0.41", True), ("0.95", False)])
def test_nvrx_scores_under_the_threshold_name_the_rank(tmp_path, score, straggler):
    log = (
        "megatron.bridge.NVRxStragglerDetection: GPU relative performance:\n"
        f"  Rank=0 Node=node-a Score=1.00\n  Rank=1 Node=node-b Score={score}\n"
    )
    found = findings_of(tmp_path, log)
    assert ("straggler" in found) == straggler
    if straggler:
        assert "Rank 1" in found["straggler"].title
