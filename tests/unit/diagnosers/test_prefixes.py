"""Launcher and log-shipper prefixes: found once, before any pattern; the tool's own text never eaten."""

from __future__ import annotations

import io

import pytest

from diagnosers.parsers.logs import LogParser
from diagnosers.parsers.platform import cuda, nccl
from diagnosers.parsers.prefixes import process_key, split_prefix
from diagnosers.parsers.tracebacks import parse_traceback

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.mark.parametrize(
    "prefix",
    [
        "[1,3]<stderr>:",
        "[1,3]<stdout>:",
        "[0]<stderr>:",
        "node-3: ",
        "ip-10-0-0-1.ec2.internal: ",
        "10.0.0.3: ",
        "localhost: ",
        "[rank3]:",
        "[rank3]: ",
        "[default0]:",
        "[default0]:[rank0]: ",
        "(RayTrainWorker pid=1234, ip=10.0.0.1) ",
        "(pid=1234, ip=10.0.0.1) ",
        "(pid=1234) ",
        "(TrainTrainable pid=8123) ",
        "(MapWorker(MapBatches(<lambda>)) pid=123, ip=10.0.0.2) ",
        "(raylet, ip=10.0.0.2) ",
        "\x1b[36m(RayTrainWorker pid=1234, ip=10.0.0.1)\x1b[0m ",
        "[36m(RayTrainWorker pid=1234, ip=10.0.0.1)[0m ",
        # rsyslog writes the escape character as `#033`.
        "#033[2m#033[36m(RayTrainWorker pid=1234, ip=10.0.0.1)#033[0m ",
        "2024-11-22T10:42:17.123456789Z ",
        "2024-11-22T10:42:17.123456789+01:00 ",
        "1700000000000\t",
        "2023-11-22T10:42:17.123+01:00\t",
        "trainer-1  | ",
        "trainer_1      | ",
        "1469.worker.1  | ",
        "1469.worker.1  | [2019-06-04T16:49:20Z] ",
        " 3: ",
        "12: ",
        "Nov 22 10:42:17 gpu-07 python[123]: ",
        "2024-11-22T10:42:17+0000 gpu-07 python3[123]: ",
        "2024-11-22 10:42:17,123 - INFO - ",
        "2024-11-22 10:42:17,123 - trainer - ERROR - ",
        "[pod/train-worker-0/ray-worker] ",
        "[2025-05-10 00:18:21] ",
        "(WorkerDict pid=1230, ip=train-job-worker-0) ",
        "(VllmWorker rank=3 pid=4665) ERROR 08-05 14:13:44 [multiproc_executor.py:487] ",
        "(VllmWorkerProcess pid=1252) ERROR 12-25 01:10:28 multiproc_worker_utils.py:229] ",
        "(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=285, ip=192.168.1.12) ",
        # Two or three nested.
        "2024-11-22T10:42:17.123456789Z [rank0]:",
        "1700000000000\t[1,0]<stderr>:",
        "node-2: [default1]:[rank9]: ",
        "trainer-1  | 2024-11-22T10:42:17.1Z (RayTrainWorker pid=7, ip=10.0.0.9) ",
        " 3: [rank3]:",
    ],
)
def test_prefix_is_stripped_and_its_end_given(prefix: str) -> None:
    assert split_prefix(prefix + OOM) == (OOM, len(prefix))


def test_cloudwatch_table_row_loses_both_columns_borders() -> None:
    line = f"| 2023-11-22T10:42:17.123+00:00 | [1,0]<stderr>:{OOM} |"
    assert split_prefix(line) == (OOM, line.index(OOM))
    assert split_prefix(f"|   1700000000000 | {OOM}   |")[0] == OOM


def test_ray_repeated_suffix_is_dropped_with_its_hint() -> None:
    prefix = "(RayTrainWorker pid=1234, ip=10.0.0.1) "
    assert split_prefix(f"{prefix}{OOM} [repeated 15x across cluster]") == (OOM, len(prefix))
    hint = (
        " [repeated 7x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
        "deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
        "#log-deduplication for more options.)"
    )
    assert split_prefix(f"{prefix}{OOM}{hint}") == (OOM, len(prefix))
    assert split_prefix(OOM + " [repeated 2x across cluster]") == (OOM, 0)


@pytest.mark.parametrize(
    "line",
    [
        "[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout",
        "[E1122 10:42:17.123 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception",
        "[1, 2]: not a prefix",
        "[Rank 0] Watchdog caught collective operation timeout",
        "(1, 2) a tuple",
        "(pid 1234) exited",
        "RuntimeError: CUDA error: out of memory",
        "urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='mlflow', port=5000)",
        "nvidia-container-cli: initialization error: nvml error: driver not loaded",
        "libcuda.so.1: cannot open shared object file: No such file or directory",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970",
        '  File "/app/train.py", line 12, in <module>',
        "node-1:1234:5678 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "srun: error: node-1: task 3: Out Of Memory",
        "Nov 22 10:42:17 gpu-07 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "2024-11-22 10:42:17,123 INFO worker.py:1724 -- Connected to Ray cluster.",
        "Epoch 3: 100%|██████████| 50/50 [00:10<00:00]",
        "|  0 | model | Linear | 1.2 K",
        "run_training_epoch |  91.657                |  1                    |  91.657               |",
        "[mlflow] [2023-02-25 20:37:00] [2023-02-25 20:37:00 +0000] [18] [CRITICAL] WORKER TIMEOUT (pid:361)",
        "Total |  - |  1397 |  99.734 |  100 % ",
        ">>> import torch",
        "**kwargs are passed to the model",
        "```",
        "```python",
        "`a` and `b` differ",
        "**a** and **b** differ",
        "2 ** 10 = 1024",
    ],
)
def test_the_tools_own_text_is_not_eaten(line: str) -> None:
    assert split_prefix(line) == (line, 0)


@pytest.mark.parametrize(
    ("line", "start"),
    [
        (f"**{OOM}**", 2),
        (f"> {OOM}", 2),
        (f"> > **{OOM}**  ", 6),
        (f"`{OOM}`", 1),
        (f"[rank3]: **{OOM}**", 11),
    ],
)
def test_markdown_around_a_pasted_message_is_stripped(line: str, start: int) -> None:
    assert split_prefix(line) == (OOM, start)


def test_process_key_names_the_process_without_its_times() -> None:
    first = "2024-11-22T10:42:17.1Z [rank1]: x"
    later = "2024-11-22T10:42:19.9Z [rank1]: y"
    assert process_key(first, split_prefix(first)[1]) == process_key(later, split_prefix(later)[1]) == "[rank1]:"
    syslog = "Nov 22 10:42:17 gpu-07 python[123]: x"
    assert process_key(syslog, split_prefix(syslog)[1]) == "gpu-07 python[123]:"
    assert process_key("plain", 0) == ""


def _signals(text: str) -> list:
    return LogParser().parse("logs/x.log", io.BytesIO(text.encode())).signals


def test_anchored_patterns_match_behind_a_prefix_and_quote_the_whole_line() -> None:
    lines = [
        "(RayTrainWorker pid=77, ip=10.0.0.5) No devices were found",
        "[1,2]<stdout>:gpu-node-4:311:311 [0] NCCL INFO Using network IB [repeated 3x across cluster]",
    ]
    signals = _signals("\n".join(lines) + "\n")
    by_kind = {signal.kind: signal for signal in signals}
    assert by_kind[cuda.NO_DEVICE].quote.text == lines[0]
    network = by_kind[nccl.NETWORK]
    assert network.quote.text == lines[1]
    assert network.get("network") == "IB"
    assert network.get("host") == "gpu-node-4"
    assert network.get("rank") == "2"


def test_json_string_fields_are_stripped_too() -> None:
    text = "2024-11-22T10:42:17.1Z No devices were found"
    signals = LogParser().parse_text("k8s/events.json", 3, text)
    assert [signal.quote.text for signal in signals] == [text]


def test_traceback_skips_the_lines_of_other_ranks_interleaved_with_its_frames() -> None:
    header = "[rank0]: Traceback (most recent call last):"
    after = [
        '[rank0]:   File "/app/train.py", line 40, in <module>',
        "[rank1]: Traceback (most recent call last):",
        "[rank0]:     main()",
        '[rank1]:   File "/app/train.py", line 40, in <module>',
        "W1122 10:42:17.1 torch/distributed/elastic/multiprocessing/api.py:858] Sending process 12 closing signal",
        '[rank0]:   File "/app/train.py", line 31, in main',
        "[rank0]:     loss.backward()",
        "[rank1]:     main()",
        f"[rank0]: {OOM}",
    ]
    exception = parse_traceback("logs/x.log", 10, header, after)
    assert exception is not None
    assert exception.type == "torch.OutOfMemoryError"
    assert [(frame.function, frame.code) for frame in exception.frames] == [
        ("<module>", "main()"),
        ("main", "loss.backward()"),
    ]
    assert exception.quote.text == after[-1]
    assert exception.quote.line == 19


def test_traceback_behind_changing_timestamps_and_mpirun_tags() -> None:
    header = "2024-11-22T10:42:17.100Z [1,0]<stderr>:Traceback (most recent call last):"
    after = [
        '2024-11-22T10:42:17.101Z [1,0]<stderr>:  File "/app/train.py", line 7, in <module>',
        "2024-11-22T10:42:17.101Z [1,1]<stderr>:Traceback (most recent call last):",
        "2024-11-22T10:42:17.102Z [1,0]<stderr>:    step()",
        "2024-11-22T10:42:17.103Z [1,0]<stderr>:RuntimeError: NCCL error: unhandled system error",
    ]
    exception = parse_traceback("logs/x.log", 1, header, after)
    assert exception is not None
    assert (exception.type, exception.message) == ("RuntimeError", "NCCL error: unhandled system error")
    assert exception.frames[0].code == "step()"
