"""Benchmark throughput pasted at several GPU counts: scaling efficiency, and what it may be blamed on."""

from pathlib import Path

import pytest

from diagnosers.bundle import load_bundle
from diagnosers.engine import diagnose

TF_CNN_HEADER = """\
TensorFlow:  1.10
Model:       resnet50
Dataset:     imagenet{dataset}
Mode:        training
SingleSess:  False
Batch size:  {global_batch} global
             {per_device}.0 per device
Num batches: 100
Devices:     {devices}
Data format: NCHW
Optimizer:   sgd
Variables:   {variables}
==========
Step\tImg/sec\ttotal_loss
"""


def tf_cnn_run(rates: list[float], devices: int, per_device: int, synthetic: bool, horovod: bool) -> str:
    """One tf_cnn_benchmarks run: under Horovod each of `devices` ranks prints its own line per step."""
    names = [f"'{'horovod/' if horovod else '/'}gpu:{index}'" for index in range(devices)]
    text = TF_CNN_HEADER.format(
        dataset=" (synthetic)" if synthetic else "",
        global_batch=per_device * devices,
        per_device=per_device,
        devices=f"[{', '.join(names)}]",
        variables="horovod" if horovod else "replicated",
    )
    for step, rate in zip((1, 10, 20), rates, strict=True):
        for rank in range(devices if horovod else 1):
            text += f"{step}\timages/sec: {rate + rank * 0.1:.1f} +/- 0.1 (jitter = 0.4)\t8.2{rank}\n"
    return text + "----------------------------------------------------------------\n"


def findings_of(tmp_path: Path, log: str) -> dict[str, object]:
    path = tmp_path / "logs" / "bench.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(log)
    return {one.id: one for one in diagnose(load_bundle(tmp_path)).findings}


@pytest.mark.parametrize("horovod", [True, False])
def test_synthetic_runs_losing_most_throughput_per_gpu_are_comm_bound(tmp_path, horovod):
    one = tf_cnn_run([205.3, 204.8, 204.8], 1, 64, synthetic=True, horovod=horovod)
    eight_rates = [95.0, 94.2, 94.1] if horovod else [760.0, 753.6, 752.8]
    eight = tf_cnn_run(eight_rates, 8, 64, synthetic=True, horovod=horovod)
    found = findings_of(tmp_path, one + eight)
    assert "comm-bound" in found and "small-batch" not in found
    assert "46% scaling efficiency" in found["comm-bound"].detail


def test_small_per_gpu_batch_behind_the_loss_is_named_first(tmp_path):
    one = tf_cnn_run([43.0, 42.9, 42.9], 1, 12, synthetic=True, horovod=True)
    four = tf_cnn_run([20.1, 19.8, 19.7], 4, 12, synthetic=True, horovod=True)
    findings = diagnose(load_bundle(_bundle(tmp_path, one + four))).findings
    assert [one.id for one in findings][:2] == ["small-batch", "comm-bound"]


def test_real_data_leaves_the_loss_unexplained(tmp_path):
    one = tf_cnn_run([205.3, 204.8, 204.8], 1, 64, synthetic=False, horovod=True)
    eight = tf_cnn_run([95.0, 94.2, 94.1], 8, 64, synthetic=False, horovod=True)
    found = findings_of(tmp_path, one + eight)
    assert not {"comm-bound", "small-batch", "io-bound"} & set(found)


def test_runs_that_keep_their_throughput_per_gpu_raise_nothing(tmp_path):
    one = tf_cnn_run([205.3, 204.8, 204.8], 1, 32, synthetic=True, horovod=True)
    eight = tf_cnn_run([190.0, 189.2, 189.1], 8, 32, synthetic=True, horovod=True)
    assert not {"comm-bound", "small-batch"} & set(findings_of(tmp_path, one + eight))


def test_different_per_gpu_batches_are_not_compared(tmp_path):
    one = tf_cnn_run([205.3, 204.8, 204.8], 1, 64, synthetic=True, horovod=True)
    eight = tf_cnn_run([95.0, 94.2, 94.1], 8, 32, synthetic=True, horovod=True)
    assert "comm-bound" not in findings_of(tmp_path, one + eight)


def test_runs_without_a_gpu_count_are_not_compared(tmp_path):
    lines = [f"{step}\timages/sec: {rate} +/- 0.1 (jitter = 0.4)\t8.2" for step, rate in ((1, 198.0), (10, 198.1))]
    lines += [f"{step}\timages/sec: {rate} +/- 0.1 (jitter = 0.4)\t8.2" for step, rate in ((1, 120.0), (10, 121.1))]
    assert "comm-bound" not in findings_of(tmp_path, "\n".join(lines) + "\n")


HOROVOD_SYNTHETIC = """\
Model: ResNet50
Batch size: {batch}
Number of GPUs: {gpus}
Running warmup...
Running benchmark...
Iter #0: {per_gpu} img/sec per GPU
Img/sec per GPU: {per_gpu} +-1.2
Total img/sec on {gpus} GPU(s): {total} +-4.9
"""


@pytest.mark.parametrize(
    ("per_gpu_at_16", "batch", "expected"),
    [(40.5, 64, {"comm-bound"}), (40.5, 32, {"comm-bound", "small-batch"}), (101.0, 32, set())],
)
def test_horovod_synthetic_benchmark_totals(tmp_path, per_gpu_at_16, batch, expected):
    runs = [(1, 108.2), (16, per_gpu_at_16)]
    log = "".join(
        "[1,0]<stdout>:" + line + "\n"
        for gpus, per_gpu in runs
        for line in HOROVOD_SYNTHETIC.format(batch=batch, gpus=gpus, per_gpu=per_gpu, total=per_gpu * gpus).splitlines()
    )
    assert {"comm-bound", "small-batch"} & set(findings_of(tmp_path, log)) == expected


def _bundle(tmp_path: Path, log: str) -> Path:
    path = tmp_path / "logs" / "bench.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(log)
    return tmp_path


def mxnet_run(command: str, rates: list[float], namespace: str = "", contexts: str = "", ranges: bool = False) -> str:
    """An MXNet image-classification run: the Speedometer prints its line once per metric (`[0-20]` in later
    versions)."""
    lines = [command]
    if namespace:
        lines.append(f"INFO:root:start with arguments Namespace({namespace})")
    if contexts:
        lines.append(f"INFO:root:Start training with [{contexts}]")
    for batch, rate in zip((20, 40, 60), rates, strict=True):
        for metric in ("accuracy=0.001953", "top_k_accuracy_5=0.005859"):
            batches = f"{batch - 20}-{batch}" if ranges else batch
            lines.append(f"INFO:root:Epoch[0] Batch [{batches}]\tSpeed: {rate:.2f} samples/sec\t{metric}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("batch_on_one", "expected"), [(32, {"comm-bound", "small-batch"}), (128, {"comm-bound"})])
def test_mxnet_fit_batch_is_split_over_the_gpus(tmp_path, batch_on_one, expected):
    command = "python train_imagenet.py --benchmark 1 --network resnet --gpus {gpus} --batch-size {batch}"
    one = mxnet_run(command.format(gpus="0", batch=batch_on_one), [210.1, 209.8, 210.3])
    four = mxnet_run(command.format(gpus="0,1,2,3", batch=batch_on_one * 4), [330.2, 331.0, 329.7])
    found = findings_of(tmp_path, one + four)
    assert {"comm-bound", "small-batch"} & set(found) == expected
    assert "On 4 GPUs each GPU processes 82.4 images/sec against 210.3 on 1 GPU" in found["comm-bound"].detail


@pytest.mark.parametrize("ranges", [False, True])
def test_mxnet_arguments_dump_and_contexts_state_the_run(tmp_path, ranges):
    namespace = "batch_size={batch}, benchmark=1, disp_batches=20, gpus='{gpus}', kv_store='device', network='resnet'"
    one = mxnet_run("", [210.1, 209.8, 210.3], namespace.format(batch=64, gpus="0"), "gpu(0)", ranges)
    two = mxnet_run("", [250.2, 251.0, 249.7], namespace.format(batch=128, gpus="0,1"), "gpu(0), gpu(1)", ranges)
    found = findings_of(tmp_path, one + two)
    assert "On 2 GPUs each GPU processes 124.8 images/sec" in found["comm-bound"].detail
    assert "small-batch" not in found


def test_gluon_batch_is_per_device_and_a_single_gpus_value_is_no_count(tmp_path):
    command = "python image_classification.py --model vgg16 --dataset dummy --gpus {gpus} --batch-size 16"
    single = mxnet_run(command.format(gpus="2"), [900.0, 905.0, 902.0])
    two = mxnet_run(command.format(gpus="0,1"), [410.0, 408.6, 402.5])
    four = mxnet_run(command.format(gpus="0,1,2,3"), [420.0, 418.3, 415.2])
    found = findings_of(tmp_path, single + two + four)
    assert "With 16 images per GPU, 4 GPUs keep 52% of the per-GPU throughput of 2" in found["small-batch"].detail


def test_mxnet_runs_reading_real_data_leave_the_loss_unexplained(tmp_path):
    command = "python train_mnist.py --network mlp --gpus {gpus} --batch-size {batch}"
    one = mxnet_run(command.format(gpus="0", batch=64), [81716.01, 80000.0, 81000.0])
    two = mxnet_run(command.format(gpus="0,1", batch=128), [189.20, 190.0, 188.0])
    assert not {"comm-bound", "small-batch"} & set(findings_of(tmp_path, one + two))
