"""Each finding id fires on bundles in the real tools' formats, and stays quiet on near-misses."""

import importlib
import json
from pathlib import Path

import pytest

from diagnosers.bundle import load_bundle
from diagnosers.engine import FAILED, INSUFFICIENT_EVIDENCE, diagnose
from diagnosers.findings import FINDING_IDS, runbook_path
from diagnosers.parsers.logs import STEP_LINES_KEPT
from diagnosers.rules import RULE_BY_FINDING_ID, RULES
from tests.builders import scenarios

RAY = "(RayTrainWorker pid=4321, ip=10.0.1.7) "
REPO = Path(__file__).resolve().parents[3]


def events(*items: tuple[str, str, str]) -> str:
    return json.dumps(
        {
            "kind": "EventList",
            "items": [
                {"type": kind, "reason": reason, "message": message, "involvedObject": {"kind": "Pod", "name": "w-0"}}
                for kind, reason, message in items
            ],
        },
        indent=2,
    )


def pods(reason: str, where: str = "lastState", state: str = "terminated", exit_code: int = 137) -> str:
    status = {state: {"reason": reason, "exitCode": exit_code}}
    return json.dumps(
        {
            "kind": "List",
            "items": [
                {
                    "metadata": {"name": "job-raycluster-worker-gpu-x7k2p"},
                    "spec": {"nodeName": "gpu-node-4"},
                    "status": {"phase": "Running", "containerStatuses": [{"name": "ray-worker", where: status}]},
                }
            ],
        },
        indent=2,
    )


LOG_CASES = {
    "nccl-timeout": [
        {
            "logs/w3.log": "[E ProcessGroupNCCL.cpp:587] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806405 milliseconds before timing out."
        },
        {
            "logs/r0.log": "[rank0]:[F1013 04:11:52.1 ProcessGroupNCCL.cpp:1224] [PG 0 Rank 0] ProcessGroupNCCL's "
            "watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives."
        },
    ],
    "nccl-network-error": [
        {
            "logs/w1.log": RAY + "node-2:77:90 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer "
            "10.0.1.9<48830>"
        },
        {
            "logs/w1.log": "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "remote process "
            "exited or there was a network error, NCCL version 2.20.5\nncclRemoteError: A call failed possibly due "
            "to a network error or a remote process exiting prematurely."
        },
    ],
    "nccl-slow-transport": [
        {
            "logs/a.log": "node-a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.5<0>\n"
            "node-a:1:1 [0] NCCL INFO Using network Socket\n"
            "node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
            "logs/b.log": "node-b:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0",
        },
        {
            "logs/a.log": "node-a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n"
            "node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"
        },
        {
            "logs/a.log": "node-a:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "node-b:2:2 [0] NCCL INFO NET/Socket : Using [0]ens3:10.0.0.6<0>",
        },
        {
            "logs/a.log": "node-a:1:9 [2] NCCL INFO NET/IB : No device found.\n"
            "node-a:1:9 [2] NCCL INFO Using network Socket\n"
            "node-a:1:9 [2] NCCL INFO comm 0xafd6da0 rank 10 nRanks 16 nNodes 2 localRanks 8 localRank 2 MNNVL 0",
        },
    ],
    "gpu-oom": [
        {
            "logs/w.log": "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
            "capacity; 14.1 GiB already allocated; 3.19 MiB free; 14.4 GiB reserved in total by PyTorch)"
        },
    ],
    "host-oom": [
        {"k8s/pods.json": pods("OOMKilled")},
        {"logs/w.log": RAY + "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."},
        {"logs/dmesg.log": "[ 8811.012] Out of memory: Killed process 4242 (python) total-vm:80123456kB"},
    ],
    "gpu-not-detected": [
        {"logs/w.log": "RuntimeError: No CUDA GPUs are available"},
        {"logs/smi.log": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."},
    ],
    "insufficient-gpu": [
        {
            "k8s/events.json": events(
                (
                    "Warning",
                    "FailedScheduling",
                    "0/5 nodes are available: 3 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint.",
                )
            )
        },
        {"logs/status.log": "Demands:\n {'GPU': 8.0, 'CPU': 1.0}: 4+ pending tasks/actors"},
    ],
    "image-pull": [
        {"k8s/pods.json": pods("ImagePullBackOff", where="state", state="waiting")},
        {
            "logs/describe.txt": '  Warning  Failed  3m  kubelet  Failed to pull image "rayproject/ray:9.9": '
            "rpc error: code = NotFound desc = manifest unknown"
        },
    ],
    "rank-config": [
        {
            "logs/w.log": "ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
            "variable MASTER_ADDR expected, but not set"
        },
        {
            "logs/w.log": "h:1:1 [0] init.cc:729 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
            "device 1a000"
        },
    ],
    "xid-error": [
        {
            "logs/dmesg.log": "[Tue Nov 12 03:14:15 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen "
            "off the bus."
        },
    ],
    "dataloader-crash": [
        {
            "logs/w.log": "RuntimeError: DataLoader worker (pid 4012) is killed by signal: Bus error. It is possible "
            "that dataloader's workers are out of shared memory."
        },
    ],
    "worker-died": [
        {"logs/driver.log": "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."},
        {
            "logs/torchrun.log": "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
            "local_rank: 3 (pid: 812917) of binary: /usr/bin/python"
        },
    ],
    "mlflow-unreachable": [
        {
            "logs/w.log": "mlflow.exceptions.MlflowException: API request to http://mlflow:5000/api/2.0/mlflow/runs/"
            "create failed with exception HTTPConnectionPool(host='mlflow', port=5000): Max retries exceeded"
        },
        {"bundle.json": '{"sources": {"mlflow": "unreachable"}}', "logs/a.log": "hello"},
    ],
    "dashboard-unreachable": [
        {"logs/submit.log": "ConnectionError: Failed to connect to Ray at address: http://127.0.0.1:8265."},
        {"bundle.json": '{"sources": {"ray": "unreachable"}}', "logs/a.log": "hello"},
    ],
    "unrecognised-error": [
        {
            "bundle.json": '{"status": "FAILED"}',
            "logs/driver.log": "2024-06-11 09:14:02,118 FATAL train.py:212 -- checkpoint manifest is corrupt\n"
            'Traceback (most recent call last):\n  File "/workspace/train.py", line 212, in load_checkpoint\n'
            "    manifest = json.loads(body)\njson.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        },
        {"logs/launcher.log": "[FATAL] Unable to restore optimizer state\nJob 'raysubmit_Q2x7' exited with code 3"},
    ],
}

NEAR_MISSES = {
    "gpu-oom": {"logs/w.log": "Enabling activation checkpointing to avoid CUDA out of memory on long sequences"},
    "dashboard-unreachable": {"logs/d.log": "Started a local Ray instance. View the dashboard at 127.0.0.1:8265"},
    "nccl-slow-transport": {
        "logs/a.log": "node-a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
        "node-a:1:1 [0] NCCL INFO Using network IB\n"
        "node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
        "node-a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 0"
    },
    "rank-config": {"logs/w.log": "INFO:torch.distributed.elastic:[default] Rendezvous complete for workers."},
    "image-pull": {"k8s/events.json": events(("Normal", "Pulled", 'Successfully pulled image "ray:2.9" in 3s'))},
    "insufficient-gpu": {"logs/status.log": "Demands:\n (no resource demands)"},
    "mlflow-unreachable": {
        "logs/w.log": "mlflow.exceptions.RestException: RESOURCE_DOES_NOT_EXIST: Registered "
        "Model with name=foo not found"
    },
    "worker-died": {
        "logs/w.log": 'Traceback (most recent call last):\n  File "a.py", line 1, in f\nKeyError: 1\nretrying... ok'
    },
    "host-oom": {"logs/a.log": "RAY_memory_usage_threshold=0.95 RAY_memory_monitor_refresh_ms=250"},
    "xid-error": {"logs/w.log": "RuntimeError: CUDA error: an illegal memory access was encountered"},
}


def make(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "bundle"
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content + "\n")
    return root


CASES = [
    (finding_id, index, files) for finding_id, variants in LOG_CASES.items() for index, files in enumerate(variants)
]


@pytest.mark.parametrize(("finding_id", "index", "files"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_log_variant_fires_its_finding_with_verbatim_evidence(tmp_path, finding_id, index, files):
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    found = {one.id: one for one in diagnosis.findings}
    assert finding_id in found
    one = found[finding_id]
    assert one.evidence, "a finding quotes its evidence"
    for quote in one.evidence:
        if quote.source in files and not quote.source.endswith(".json"):
            assert files[quote.source].splitlines()[quote.line - 1] == quote.text
    assert one.runbook == f"playbooks/{finding_id}.md"


@pytest.mark.parametrize("finding_id", sorted(NEAR_MISSES))
def test_near_miss_does_not_fire(tmp_path, finding_id):
    diagnosis = diagnose(load_bundle(make(tmp_path, NEAR_MISSES[finding_id])))
    assert finding_id not in {one.id for one in diagnosis.findings}


def test_socket_lines_on_one_node_are_not_a_fall_back(tmp_path):
    files = {
        "logs/a.log": "node-a:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "node-a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
        "node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read"
    }
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    assert "nccl-slow-transport" not in {one.id for one in diagnosis.findings}


def test_an_nccl_system_error_blamed_on_this_host_is_quoted_not_called_a_network_fault(tmp_path):
    # pytorch#40273: NCCL 2.4 could not read its GPU's PCI path in /sys, then DDP raised `unhandled system error`.
    files = {
        "logs/a.log": "node-a:430:2237 [0] include/topo.h:27 NCCL WARN Could not find real path of "
        "/sys/class/pci_bus/0000:02/../../0000:02:00.0\n"
        "node-a:430:2237 [0] NCCL INFO init.cu:864 -> 2\n"
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272, unhandled system error\n"
    }
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    assert [one.id for one in diagnosis.findings] == ["unrecognised-error"]
    assert "unhandled system error" in diagnosis.findings[0].evidence[-1].text


def test_socket_network_on_a_communicator_of_one_node_is_not_slow(tmp_path):
    files = {
        "logs/a.log": "node-a:1:9 [2] NCCL INFO Using network Socket\n"
        "node-a:1:9 [2] NCCL INFO comm 0x55a7be570210 rank 2 nRanks 8 nNodes 1 localRanks 8 localRank 2 MNNVL 0"
    }
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    assert "nccl-slow-transport" not in {one.id for one in diagnosis.findings}


INTERFACE_ADVICE = {
    # NCCL cannot bind its own socket to an IPv6 link-local address
    "NCCL_SOCKET_IFNAME to the interface": "nd20-01:1:1 [0] NCCL INFO Bootstrap : Using "
    "ib0:fe80::ba59:9f03:fc:765c%ib0<0>\n"
    "nd20-01:1:1 [0] misc/socket.cc:379 NCCL WARN Call to bind failed : Cannot assign requested address\n",
    # Gloo's CPU group cannot connect its mesh: its interface is set apart from NCCL's
    "GLOO_SOCKET_IFNAME": "(RayWorkerWrapper pid=933, ip=10.0.0.5) [rank1]:[E528 08:52:46.164295950 "
    "ProcessGroupGloo.cpp:145] Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/"
    "pair.cc:144] no error\n",
}


@pytest.mark.parametrize("advice", sorted(INTERFACE_ADVICE))
def test_a_connection_the_host_cannot_make_points_at_the_interface_setting(tmp_path, advice):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/a.log": INTERFACE_ADVICE[advice]})))
    network = next(one for one in diagnosis.findings if one.id == "nccl-network-error")
    assert advice in network.detail


def test_primary_cause_comes_before_its_consequences(tmp_path):
    files = {
        "logs/w1.log": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.15 GiB of which 1.23 GiB is free.",
        "logs/w0.log": "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before "
        "timing out.\nray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    }
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    assert diagnosis.verdict == FAILED
    assert [one.id for one in diagnosis.findings][:3] == ["gpu-oom", "nccl-timeout", "worker-died"]
    assert "consequence of gpu-oom" in diagnosis.findings[1].detail


def test_a_job_that_succeeded_is_not_called_failed(tmp_path):
    files = {"bundle.json": '{"status": "SUCCEEDED"}', "logs/w.log": LOG_CASES["host-oom"][2]["logs/dmesg.log"]}
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    assert diagnosis.verdict == INSUFFICIENT_EVIDENCE
    assert diagnosis.findings[0].severity == "warning"


def build_metric_bundle(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    scenarios.EXAMPLE_METRICS[name](root)
    return root


@pytest.mark.parametrize(
    ("scenario", "verdict", "also"),
    [
        ("comm-bound-small-batch", "comm-bound", {"small-batch"}),
        ("io-bound-dcgm-only", "io-bound", set()),
        ("compute-bound", "compute-bound", set()),
        ("straggler-throttled-gpu", "comm-bound", {"straggler"}),
    ],
)
def test_metric_scenarios_give_their_verdict(tmp_path, scenario, verdict, also):
    diagnosis = diagnose(load_bundle(build_metric_bundle(tmp_path, scenario)))
    ids = {one.id for one in diagnosis.findings}
    assert diagnosis.verdict == verdict
    assert also <= ids


@pytest.mark.parametrize("host_label", ["Hostname", "hostname"])
@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        ({"DCGM_FI_DEV_GPU_UTIL": 97, "DCGM_FI_PROF_SM_ACTIVE": 0.2}, "comm-bound"),
        ({"DCGM_FI_DEV_GPU_UTIL": 97, "DCGM_FI_PROF_SM_ACTIVE": 0.9}, "compute-bound"),
        (
            {"DCGM_FI_DEV_GPU_UTIL": 96, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.01, "DCGM_FI_PROF_DRAM_ACTIVE": 0.03},
            "comm-bound",
        ),
        (
            {"DCGM_FI_DEV_GPU_UTIL": 96, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.45, "DCGM_FI_PROF_DRAM_ACTIVE": 0.5},
            "compute-bound",
        ),
        ({"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.3}, "io-bound"),
        ({"DCGM_FI_DEV_GPU_UTIL": 22}, "io-bound"),
    ],
)
def test_dcgm_only_with_default_or_opt_in_counters(tmp_path, host_label, values, verdict):
    scenarios.write_dcgm(tmp_path, scenarios.gpus(2, 4, **values), host_label=host_label)
    assert diagnose(load_bundle(tmp_path)).verdict == verdict


def test_ray_gpu_metrics_alone_are_enough(tmp_path):
    gpus = scenarios.gpus(2, 2, ray_node_gpus_utilization=18)
    scenarios.write_matrix(
        tmp_path,
        "ray_node_gpus_utilization",
        gpus,
        labels_of=lambda gpu: {"ip": f"10.0.0.{len(gpu.host)}{gpu.host[-1]}", "GpuIndex": str(gpu.index)},
    )
    assert diagnose(load_bundle(tmp_path)).verdict == "io-bound"


@pytest.mark.parametrize(
    ("data_s", "comm_s", "verdict"),
    [(0.4, 0.05, "io-bound"), (0.02, 0.45, "comm-bound"), (0.02, 0.05, "compute-bound")],
)
def test_steps_only(tmp_path, data_s, comm_s, verdict):
    scenarios.write_steps(tmp_path, ranks=4, steps=50, step_s=1.0, data_s=data_s, comm_s=comm_s)
    assert diagnose(load_bundle(tmp_path)).verdict == verdict


def test_steps_win_over_metrics_that_disagree(tmp_path):
    scenarios.write_steps(tmp_path, ranks=4, steps=50, step_s=1.0, data_s=0.45, comm_s=0.05)
    scenarios.write_dcgm(tmp_path, scenarios.gpus(1, 4, DCGM_FI_DEV_GPU_UTIL=97, DCGM_FI_PROF_SM_ACTIVE=0.9))
    assert diagnose(load_bundle(tmp_path)).verdict == "io-bound"


def test_large_batches_on_a_slow_network_are_comm_bound_but_not_small_batch(tmp_path):
    scenarios.write_steps(tmp_path, ranks=4, steps=50, step_s=2.0, data_s=0.02, comm_s=1.1, samples=256)
    ids = {one.id for one in diagnose(load_bundle(tmp_path)).findings}
    assert "comm-bound" in ids and "small-batch" not in ids


def test_even_ranks_are_not_stragglers(tmp_path):
    scenarios.write_steps(tmp_path, ranks=8, steps=50, step_s=0.9, data_s=0.02, comm_s=0.3)
    scenarios.write_dcgm(tmp_path, scenarios.gpus(1, 8, DCGM_FI_DEV_SM_CLOCK=1980, DCGM_FI_DEV_GPU_TEMP=64))
    assert "straggler" not in {one.id for one in diagnose(load_bundle(tmp_path)).findings}


@pytest.mark.parametrize(
    ("metric", "normal", "odd"), [("DCGM_FI_DEV_GPU_TEMP", 62, 84), ("DCGM_FI_DEV_SM_CLOCK", 1980, 1300)]
)
def test_one_gpu_apart_from_its_peers_is_a_straggler(tmp_path, metric, normal, odd):
    gpus = [scenarios.Gpu("node-0", index, {metric: odd if index == 2 else normal}) for index in range(8)]
    scenarios.write_dcgm(tmp_path, gpus, host_label="hostname")
    stragglers = [one for one in diagnose(load_bundle(tmp_path)).findings if one.id == "straggler"]
    assert stragglers and "node-0/gpu 2" in stragglers[0].title


def test_xid_from_the_dcgm_metric(tmp_path):
    gpus = [scenarios.Gpu("node-0", index, {"DCGM_FI_DEV_XID_ERRORS": 79 if index == 1 else 0}) for index in range(4)]
    scenarios.write_dcgm(tmp_path, gpus, noise=0.0)
    found = [one for one in diagnose(load_bundle(tmp_path)).findings if one.id == "xid-error"]
    assert found and "fallen off the bus" in found[0].detail


def test_every_finding_id_is_covered_by_a_bundle_here():
    covered = set(LOG_CASES) | {"comm-bound", "io-bound", "compute-bound", "straggler", "small-batch"}
    assert covered == set(FINDING_IDS)


@pytest.mark.parametrize("finding_id", FINDING_IDS)
def test_a_finding_id_leads_to_the_one_rule_module_that_emits_it_and_to_its_runbook(finding_id):
    [emitter] = [rule for rule in RULES if finding_id in rule.emits]
    assert RULE_BY_FINDING_ID[finding_id] is emitter
    assert finding_id in importlib.import_module(f"diagnosers.rules.{emitter.name}").EMITS
    assert (REPO / runbook_path(finding_id)).is_file()


def test_the_rule_index_holds_the_finding_ids_and_nothing_else():
    assert sorted(RULE_BY_FINDING_ID) == sorted(FINDING_IDS)


UNKNOWN_ERROR_LOG = (
    "step 40 loss=2.31\n"
    "2024-06-11 09:14:02,118 FATAL train.py:212 -- checkpoint manifest s3://ckpt/run-7/manifest.json is corrupt\n"
    "Traceback (most recent call last):\n"
    '  File "/workspace/train.py", line 388, in <module>\n'
    "    main()\n"
    '  File "/workspace/train.py", line 212, in load_checkpoint\n'
    "    manifest = json.loads(body)\n"
    "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
)


def unrecognised(tmp_path: Path, files: dict[str, str]):
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    return diagnosis, {one.id: one for one in diagnosis.findings}.get("unrecognised-error")


def test_a_failed_job_with_an_unknown_error_quotes_the_fatal_line_and_the_exception(tmp_path):
    diagnosis, found = unrecognised(
        tmp_path, {"bundle.json": '{"status": "FAILED"}', "logs/driver.log": UNKNOWN_ERROR_LOG}
    )
    assert found is not None and found.severity == "critical"
    assert diagnosis.verdict == FAILED
    assert [(quote.line, quote.text) for quote in found.evidence] == [
        (2, UNKNOWN_ERROR_LOG.splitlines()[1]),
        (6, '  File "/workspace/train.py", line 212, in load_checkpoint'),
        (8, "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"),
    ]
    assert {quote.source for quote in found.evidence} == {"logs/driver.log"}


def test_a_failed_job_with_only_a_python_exception_claims_no_dead_worker(tmp_path):
    files = {
        "bundle.json": '{"status": "FAILED"}',
        "logs/driver.log": 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
        "    main()\nKeyError: 'labels'\n",
    }
    diagnosis, found = unrecognised(tmp_path, files)
    assert [one.id for one in diagnosis.findings] == ["unrecognised-error"]
    assert found is not None and found.severity == "critical"


@pytest.mark.parametrize(("code", "meaning"), [("-9", "SIGKILL"), ("-11", "SIGSEGV"), ("-7", "SIGBUS")])
def test_a_child_killed_by_a_signal_is_a_dead_worker_named_by_its_signal(tmp_path, code, meaning):
    log = f"  rank      : 0 (local_rank: 0)\n  exitcode  : {code} (pid: 14750)\n"
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/torchrun.log": log})))
    died = next(one for one in diagnosis.findings if one.id == "worker-died")
    assert meaning in died.detail
    # SIGKILL with nothing else to explain it is read as the kernel's OOM killer first; the dead worker follows.
    assert diagnosis.findings[0].id == ("host-oom" if meaning == "SIGKILL" else "worker-died")


def test_the_sigterm_the_agent_sends_to_surviving_ranks_is_no_dead_worker(tmp_path):
    log = "  exitcode  : -15 (pid: 14751)\n"
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/torchrun.log": log})))
    assert [one.id for one in diagnosis.findings] == ["unrecognised-error"]


@pytest.mark.parametrize(("reason", "oom"), [("Error", False), ("Completed", False), ("OOMKilled", True), (None, True)])
def test_an_exit_code_137_under_a_reason_that_is_not_oomkilled_is_no_host_oom(tmp_path, reason, oom):
    reason_line = f"      Reason:       {reason}\n" if reason else ""
    describe = f"    State:          Running\n    Last State:     Terminated\n{reason_line}      Exit Code:    137\n"
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/describe.log": describe})))
    assert ("host-oom" in {one.id for one in diagnosis.findings}) == oom


def test_a_non_zero_exit_alone_makes_it_critical(tmp_path):
    _, found = unrecognised(tmp_path, {"logs/run.log": "[FATAL] bad vocabulary\nexitcode  : 2 (pid: 4711)"})
    assert found is not None and found.severity == "critical"


def test_a_failed_status_with_nothing_in_the_logs_quotes_bundle_json(tmp_path):
    _, found = unrecognised(tmp_path, {"bundle.json": '{\n  "status": "FAILED"\n}', "logs/a.log": "hello"})
    assert found is not None and [(q.source, q.line) for q in found.evidence] == [("bundle.json", 2)]


@pytest.mark.parametrize("status", ['{"status": "SUCCEEDED"}', '{"status": "RUNNING"}', "{}"])
def test_a_traceback_the_run_survived_is_a_warning(tmp_path, status):
    log = 'Traceback (most recent call last):\n  File "a.py", line 1, in f\nKeyError: 1\nretrying... ok'
    diagnosis, found = unrecognised(tmp_path, {"bundle.json": status, "logs/w.log": log})
    assert found is not None and found.severity == "warning"
    assert diagnosis.verdict != FAILED


@pytest.mark.parametrize(
    ("status", "cause", "files"),
    [
        ("FAILED", "gpu-oom", LOG_CASES["gpu-oom"][0]),
        # A warning cause in a run that goes on: the fallback rule alone would not give way to it.
        ("RUNNING", "mlflow-unreachable", LOG_CASES["mlflow-unreachable"][0]),
    ],
)
def test_a_recognised_cause_leaves_no_unrecognised_error(tmp_path, status, cause, files):
    bundle = {"bundle.json": f'{{"status": "{status}"}}', "logs/driver.log": UNKNOWN_ERROR_LOG, **files}
    diagnosis, found = unrecognised(tmp_path, bundle)
    assert found is None
    assert diagnosis.findings[0].id == cause


def test_a_healthy_bundle_has_no_unrecognised_error(tmp_path):
    files = {"bundle.json": '{"status": "SUCCEEDED"}', "logs/w.log": "step 1 loss=2.3\nnon-fatal: retried 1 read"}
    diagnosis, found = unrecognised(tmp_path, files)
    assert found is None and diagnosis.findings == []


RAY_PREFIXED_FRAMES = (
    '(pid=runtime_env, ip=10.0.0.7)   File "/opt/ray/_private/runtime_env/plugin.py", line 260, in create\n'
    "(pid=runtime_env, ip=10.0.0.7)     plugin.modify_context(uris, runtime_env, context, logger)\n"
    "(pid=4711, ip=10.0.0.8) step 12 loss=2.1\n"
    '(pid=runtime_env, ip=10.0.0.7)   File "/opt/ray/_private/runtime_env/pip.py", line 542, in modify_context\n'
    "(pid=runtime_env, ip=10.0.0.7)     raise ValueError(\n"
    "(pid=runtime_env, ip=10.0.0.7) ValueError: Local directory /tmp/ray/pip/4950 does not exist on the cluster.\n"
)


def test_an_exception_line_without_its_traceback_header_is_an_unrecognised_error(tmp_path):
    log = "epoch 3 step 100\ntorch.distributed.DistBackendError: NCCL communicator was aborted on rank 3.\n"
    _, found = unrecognised(tmp_path, {"logs/w.log": log})
    assert found is not None and found.severity == "warning"
    assert [quote.line for quote in found.evidence] == [2]
    assert "DistBackendError: NCCL communicator was aborted" in found.detail


def test_a_headerless_exception_keeps_the_frames_its_process_printed_above_it(tmp_path):
    _, found = unrecognised(tmp_path, {"logs/job.log": RAY_PREFIXED_FRAMES})
    assert found is not None
    assert [quote.line for quote in found.evidence] == [4, 6]
    assert "ValueError: Local directory" in found.detail and "pip.py:542 in modify_context" in found.detail


@pytest.mark.parametrize(
    "line",
    [
        "INFO: ValueError handled, retrying",
        "2024-05-01 10:00:00,000 - trainer - WARNING - ValueError: bad sample 17, skipped",
        "Error: 0 warnings",
        "    ValueError: if the learning rate is negative.",
        "Raises:",
    ],
)
def test_a_line_that_names_an_exception_it_survived_or_documents_is_no_error(tmp_path, line):
    diagnosis, found = unrecognised(tmp_path, {"logs/w.log": f"step 1 loss=2.3\n{line}\nstep 2 loss=2.2\n"})
    assert found is None and diagnosis.findings == []


def test_a_failed_ray_job_quotes_the_status_message_that_says_why(tmp_path):
    log = (
        "Tailing logs until the job exits (disable with --no-wait):\n"
        "---------------------------------------\n"
        "Job 'raysubmit_fufX4B3GcxYVxBdW' failed\n"
        "---------------------------------------\n"
        "\n"
        "Status message: runtime_env setup failed: Failed to set up runtime environment.\n"
    )
    _, found = unrecognised(tmp_path, {"logs/submit.log": log})
    assert found is not None and found.severity == "critical"
    assert [quote.line for quote in found.evidence] == [3, 6]
    assert "runtime_env setup failed" in found.detail


def test_a_status_message_without_a_failed_job_is_not_quoted(tmp_path):
    log = "Status message: Job finished successfully.\nexitcode  : 2 (pid: 4711)\n"
    _, found = unrecognised(tmp_path, {"logs/submit.log": log})
    assert found is not None and [quote.line for quote in found.evidence] == [2]


WATCHDOG_FRAMES = (
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1554e8b12f86 in libc10.so)\n"
    "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
    "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in libtorch_cuda.so)\n"
    "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x1554e9e16333 in libtorch_cuda.so)\n"
    "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x1554e9e1871c in libtorch_cuda.so)\n"
)


def test_the_watchdog_checktimeout_frames_alone_are_an_nccl_timeout_at_lower_confidence(tmp_path):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/slurm.out": WATCHDOG_FRAMES})))
    assert diagnosis.findings and diagnosis.findings[0].id == "nccl-timeout"
    assert diagnosis.findings[0].confidence < 0.85
    assert [quote.line for quote in diagnosis.findings[0].evidence] == [2]


def test_a_cuda_error_rethrown_by_the_watchdog_is_no_nccl_timeout(tmp_path):
    # The watchdog rethrows CUDA errors through the same handler frames (pytorch#126544): no checkTimeout frame.
    frames = "\n".join(line for line in WATCHDOG_FRAMES.splitlines() if "checkTimeout" not in line)
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/slurm.out": frames})))
    assert "nccl-timeout" not in {one.id for one in diagnosis.findings}


def test_a_sigkilled_process_is_a_guess_at_host_oom_only_when_nothing_else_explains(tmp_path):
    killed = "training...\nKilled\n"
    alone = diagnose(load_bundle(make(tmp_path / "alone", {"logs/train.log": killed})))
    assert alone.findings[0].id == "host-oom" and alone.findings[0].fallback
    with_cause = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n" + killed
    explained = diagnose(load_bundle(make(tmp_path / "explained", {"logs/train.log": with_cause})))
    assert [one.id for one in explained.findings] == ["xid-error"]


@pytest.mark.parametrize(
    "killed",
    [
        "已杀死",
        "Getötet",
        "[1]    16261 killed     python3 -m llama.convert_llama --model_size 65B",
        "Error: llama runner process has terminated: signal: killed",
    ],
)
def test_a_shells_or_runtimes_sigkill_report_in_its_own_words_is_a_guess_at_host_oom_not_a_worker(tmp_path, killed):
    # A shell names no worker: the process it lost may be the whole job.
    findings = diagnose(load_bundle(make(tmp_path, {"logs/train.log": f"step 10 loss=1.2\n{killed}\n"}))).findings
    assert [one.id for one in findings] == ["host-oom"]


@pytest.mark.parametrize(
    "refused",
    [
        "RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you "
        "tried to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)",
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.58 GiB for an array with shape (480000, 1000) "
        "and data type float64",
        "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc",
        "OSError: [Errno 12] Cannot allocate memory",
    ],
)
def test_host_memory_an_allocator_refused_is_host_oom_and_no_guess(tmp_path, refused):
    findings = diagnose(load_bundle(make(tmp_path, {"logs/train.log": f"step 10 loss=1.2\n{refused}\n"}))).findings
    assert findings[0].id == "host-oom" and not findings[0].fallback


@pytest.mark.parametrize(
    "not_the_host",
    [
        # The memlock limit, InfiniBand's, and torch's shared memory for DataLoader workers.
        "node1:12:34 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        "RuntimeError: unable to mmap 1048576 bytes from file </torch_2362_1823389071_0>: Cannot allocate memory (12)",
    ],
)
def test_cannot_allocate_memory_from_infiniband_or_shared_memory_is_no_host_oom(tmp_path, not_the_host):
    findings = diagnose(load_bundle(make(tmp_path, {"logs/train.log": not_the_host + "\n"}))).findings
    assert "host-oom" not in {one.id for one in findings}


def test_a_tune_run_waiting_for_resources_the_cluster_lacks_is_insufficient_gpu(tmp_path):
    log = (
        "2024-01-01 10:00:00,000\tWARNING insufficient_resources_manager.py:163 -- Ignore this message if the cluster "
        "is autoscaling. No trial is running and no new trial has been started within the last 60 seconds. This could "
        "be due to the cluster not having enough resources available. You asked for 8.0 CPUs and 4.0 GPUs per trial, "
        "but the cluster only has 4.0 CPUs and 0 GPUs available. Stop the tuning job and adjust the resources "
        "requested per trial (possibly via `resources_per_trial` or via `num_workers` for rllib) and/or add more "
        "resources to your Ray runtime.\n"
    )
    findings = diagnose(load_bundle(make(tmp_path, {"logs/driver.log": log}))).findings
    assert findings[0].id == "insufficient-gpu" and "8.0 CPUs and 4.0 GPUs per trial" in findings[0].detail


def test_a_gpu_index_the_rank_cannot_see_is_a_misconfigured_process_group(tmp_path):
    log = "[rank4]: RuntimeError: CUDA error: invalid device ordinal\n"
    findings = diagnose(load_bundle(make(tmp_path, {"logs/train.log": log}))).findings
    assert findings[0].id == "rank-config" and "GPU index" in findings[0].detail


def test_a_word_killed_inside_other_text_is_no_sigkill(tmp_path):
    log = "Killed 3 idle workers to free slots\nKilled process group cleanly\nstep 10 loss=1.2\n"
    assert not diagnose(load_bundle(make(tmp_path, {"logs/train.log": log}))).findings


def test_an_oom_the_trainer_caught_and_skipped_is_not_a_gpu_oom(tmp_path):
    skipped = (
        "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.75 GiB "
        "total capacity; 11.71 GiB already allocated; 584.94 MiB free; 2.38 GiB cached);\n Skipping batch\n"
    )
    found = diagnose(load_bundle(make(tmp_path, {"logs/train.log": skipped}))).findings
    assert "gpu-oom" not in {one.id for one in found}


def test_the_xid_that_caused_a_later_one_is_named_with_its_meaning(tmp_path):
    log = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n"
    findings = diagnose(load_bundle(make(tmp_path, {"logs/kern.log": log}))).findings
    found = [one for one in findings if one.id == "xid-error"]
    assert found and "XID 149: NVLink error" in found[0].detail and "Cordon and drain" in found[0].detail


# The loader stalls every few batches: the snapshot column mostly reads 0.001, the running means say 90% waiting.
IMAGENET_STALLING = "\n".join(
    f"Epoch: [0][{index}/5005]\tTime {now_s} ({avg_s})\tData {data_now_s} ({data_avg_s})\tLoss 5.6 (6.3)"
    for index, now_s, avg_s, data_now_s, data_avg_s in [
        (1760, "1.599", "2.648", "1.296", "2.388"),
        (1770, "0.238", "2.654", "0.001", "2.393"),
        (1780, "0.222", "2.652", "0.001", "2.391"),
        (1790, "2.700", "2.649", "2.383", "2.389"),
        (1800, "0.297", "2.654", "0.001", "2.393"),
    ]
)
MMCV_WARMUP_THEN_BUSY = "\n".join(
    f"2021-08-17 17:00:{second:02d},073 - mmcls - INFO - Epoch [1][{index}/5005]\tlr: 1.000e-01, eta: 5 days, "
    f"time: {step_s}, data_time: {data_s}, memory: 3086, loss: 6.2"
    for second, index, step_s, data_s in [
        (10, 100, "6.430", "5.762"),
        (20, 200, "0.196", "0.008"),
        (30, 300, "0.158", "0.023"),
        (40, 400, "0.165", "0.005"),
    ]
)


def test_training_log_running_means_show_the_wait_the_snapshots_hide(tmp_path):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/train.log": IMAGENET_STALLING})))
    assert diagnosis.verdict == "io-bound"
    assert "90% of the step time" in diagnosis.findings[0].detail


def test_training_log_loader_start_up_is_not_an_input_bottleneck(tmp_path):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/train.log": MMCV_WARMUP_THEN_BUSY})))
    assert diagnosis.verdict == "compute-bound"


def test_training_log_without_wait_defers_to_dcgm_that_sees_collectives(tmp_path):
    root = make(tmp_path, {"logs/train.log": MMCV_WARMUP_THEN_BUSY})
    idle_pipes = {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.01, "DCGM_FI_PROF_DRAM_ACTIVE": 0.03}
    scenarios.write_dcgm(root, scenarios.gpus(2, 4, DCGM_FI_DEV_GPU_UTIL=96, **idle_pipes))
    assert diagnose(load_bundle(root)).verdict == "comm-bound"


# dcgm-exporter's default counters (etc/default-counters.csv): no SM_ACTIVE, no per-link NVLink bytes.
DEFAULT_COUNTERS_STEADY = {
    "DCGM_FI_DEV_SM_CLOCK": 1980,
    "DCGM_FI_DEV_GPU_TEMP": 61,
    "DCGM_FI_DEV_POWER_USAGE": 310,
    "DCGM_FI_DEV_FB_USED": 61000,
    "DCGM_FI_DEV_GPU_UTIL": 98,
}


@pytest.mark.parametrize(
    ("activity", "verdict"),
    [
        # NCCL kernels spinning: the graphics engine is busy, the tensor pipes and DRAM are not.
        (
            {
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.95,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.01,
                "DCGM_FI_PROF_DRAM_ACTIVE": 0.04,
                "DCGM_FI_DEV_MEM_COPY_UTIL": 3,
            },
            "comm-bound",
        ),
        (
            {
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.93,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.42,
                "DCGM_FI_PROF_DRAM_ACTIVE": 0.35,
                "DCGM_FI_DEV_MEM_COPY_UTIL": 38,
            },
            "compute-bound",
        ),
        # GPU_UTIL is sampled: short kernels between waits read 98% while the engine is active a third of the time.
        ({"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.35, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.12}, "io-bound"),
    ],
)
def test_dcgm_default_counter_set(tmp_path, activity, verdict):
    scenarios.write_dcgm(tmp_path, scenarios.gpus(2, 4, **DEFAULT_COUNTERS_STEADY, **activity))
    assert diagnose(load_bundle(tmp_path)).verdict == verdict


def test_gpu_util_alone_does_not_claim_the_busy_gpus_do_math(tmp_path):
    scenarios.write_dcgm(tmp_path, scenarios.gpus(1, 4, **DEFAULT_COUNTERS_STEADY))
    found = diagnose(load_bundle(tmp_path)).findings[0]
    assert found.id == "compute-bound" and "cannot tell computation from collectives" in found.detail


def test_a_long_training_log_keeps_its_failure_and_bounds_its_timing_lines(tmp_path):
    timing = "\n".join(
        f"2021-08-17 17:00:00,073 - mmcls - INFO - Epoch [1][{index}/50000]\tlr: 1.000e-01, eta: 5 days, "
        f"time: 0.170, data_time: 0.004, memory: 3086, loss: 6.2"
        for index in range(10, 150_010, 10)
    )
    failure = LOG_CASES["nccl-timeout"][0]["logs/w3.log"]
    evidence = load_bundle(make(tmp_path, {"logs/train.log": f"{timing}\n{failure}"}))
    assert "logs/train.log" not in evidence.sources
    assert len(evidence.signals["step.timing"]) == 2 * STEP_LINES_KEPT
    assert {"nccl-timeout", "compute-bound"} <= {one.id for one in diagnose(evidence).findings}


HOROVOD_STALL = (
    "[2021-02-02 21:19:07.345988: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be "
    "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 "
    "seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of "
    "ranks is submitting tensors, which will cause deadlock. "
)


def test_a_horovod_stall_the_run_got_over_is_no_timeout(tmp_path):
    files = {
        "logs/rank0.log": f"{HOROVOD_STALL}\nStalled ranks:\n1: [HorovodAllreduce_grads_0]\n"
        "110\timages/sec: 204.8 +/- 0.1 (jitter = 0.6)\t9.228"
    }
    diagnosis = diagnose(load_bundle(make(tmp_path, files)))
    assert "nccl-timeout" not in {one.id for one in diagnosis.findings}


def test_a_horovod_stall_that_shuts_the_job_down_is_a_critical_timeout(tmp_path):
    files = {
        "logs/rank0.log": f"{HOROVOD_STALL}\nStalled ranks:\n1!: [HorovodAllreduce_grads_0]\n"
        'One or more rank (marked by "!") is stalled for longer than 600 seconds. Will shutdown.\n'
        "110\timages/sec: 204.8 +/- 0.1 (jitter = 0.6)\t9.228"
    }
    found = {one.id: one for one in diagnose(load_bundle(make(tmp_path, files))).findings}
    assert found["nccl-timeout"].severity == "critical"
    assert any("Will shutdown" in quote.text for quote in found["nccl-timeout"].evidence)


def test_a_horovod_stall_names_the_missing_ranks(tmp_path):
    files = {
        "logs/rank0.log": f"WARNING: {HOROVOD_STALL}\nStalled ops:\nHorovodAllreduce_grads_0 [missing ranks: 3, 5]"
    }
    found = {one.id: one for one in diagnose(load_bundle(make(tmp_path, files))).findings}
    assert "ranks 3, 5 never submitted it" in found["nccl-timeout"].detail


def test_memory_limit_reached_at_some_point_only_firms_up_a_sigkill(tmp_path):
    touched = "slurmstepd: error: Exceeded step memory limit at some point."
    alone = diagnose(load_bundle(make(tmp_path / "alone", {"logs/slurm.out": touched})))
    assert "host-oom" not in {one.id for one in alone.findings}
    killed = diagnose(load_bundle(make(tmp_path / "killed", {"logs/slurm.out": f"Killed\n{touched}"})))
    host_oom = next(one for one in killed.findings if one.id == "host-oom")
    assert host_oom.confidence == 0.7
    assert any(quote.text == touched for quote in host_oom.evidence)


def test_any_exception_from_jax_distributed_initialize_is_a_rendezvous_failure(tmp_path):
    files = {
        "logs/train.log": "Traceback (most recent call last):\n"
        '  File "/app/train.py", line 9, in <module>\n'
        "    jax.distributed.initialize()\n"
        '  File "/usr/lib/python3.11/site-packages/jax/_src/distributed.py", line 196, in initialize\n'
        "    global_state.initialize(coordinator_address, num_processes, process_id,\n"
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Unexpected reply from the service"
    }
    found = {one.id: one for one in diagnose(load_bundle(make(tmp_path, files))).findings}
    assert found["rank-config"].evidence[0].line == 6
    assert "coordination service" in found["rank-config"].detail


def test_an_ib_setting_with_no_ib_device_on_sockets_is_a_fall_back_even_on_one_host(tmp_path):
    files = {
        "logs/a.log": "node-a:1:1 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
        "node-a:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "node-a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>"
    }
    found = {one.id: one for one in diagnose(load_bundle(make(tmp_path, files))).findings}
    assert found["nccl-slow-transport"].confidence == 0.65


def test_a_network_plugin_that_failed_to_start_is_no_lost_connection(tmp_path):
    files = {
        "logs/a.log": "algo-1:7:8 [5] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI aws-ofi-nccl initialization "
        "failed\nalgo-1:7:8 [5] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
        "algo-1:7:8 [5] NCCL INFO Using network Socket"
    }
    ids = [one.id for one in diagnose(load_bundle(make(tmp_path, files))).findings]
    assert ids == ["nccl-slow-transport"]


@pytest.mark.parametrize(
    ("log", "meaning"),
    [
        (
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4120 RUNNING AT node01\n"
            "=   EXIT CODE: 9\n",
            "SIGKILL",
        ),
        ("=   RANK 3 PID 4120 RUNNING AT node01\n=   KILLED BY SIGNAL: 9 (Killed)\n", "SIGKILL"),
        ("mpirun noticed that process rank 3 with PID 123 on node node01 exited on signal 9 (Killed).\n", "SIGKILL"),
        ("srun: error: gpu-node-07: task 3: Killed\n", "SIGKILL"),
        ("YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)\n", "SIGSEGV"),
    ],
)
def test_an_mpi_launchers_report_of_a_signalled_rank_names_its_signal(tmp_path, log, meaning):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/mpirun.log": log})))
    died = next(one for one in diagnosis.findings if one.id == "worker-died")
    assert meaning in died.detail
    # As for torchrun's -9: SIGKILL alone is first a guess at the OOM killer.
    assert diagnosis.findings[0].id == ("host-oom" if meaning == "SIGKILL" else "worker-died")


def test_hydras_exit_code_that_is_no_signal_number_is_only_a_failed_exit(tmp_path):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/mpirun.log": "=   EXIT CODE: 1\n"})))
    assert [one.id for one in diagnosis.findings] == ["unrecognised-error"]


@pytest.mark.parametrize(
    ("line", "severity"),
    [
        # a retry: the store may still answer
        (
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [master-0]:29500 (errno: 111 - "
            "Connection refused).",
            "warning",
        ),
        (
            "[E socket.cpp:793] [c10d] The client socket has timed out after 600s while trying to connect to "
            "(master-0, 29500).",
            "critical",
        ),
    ],
)
def test_c10d_connect_failures_are_rank_config_and_a_retry_only_a_warning(tmp_path, line, severity):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/train.log": line})))
    assert diagnosis.findings[0].id == "rank-config" and diagnosis.findings[0].severity == severity


def test_the_ipv6_attempt_c10d_makes_on_localhost_is_no_rank_config(tmp_path):
    line = (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 97 - "
        "Address family not supported by protocol)."
    )
    assert not diagnose(load_bundle(make(tmp_path, {"logs/train.log": line}))).findings


NGC_BANNER = "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available."


@pytest.mark.parametrize(
    ("after", "severity"),
    [
        ("Epoch 1/10 loss=0.41\n", "warning"),
        ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n', "critical"),
    ],
)
def test_the_ngc_driver_banner_is_a_cause_only_when_the_job_failed_after_it(tmp_path, after, severity):
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/pod.log": NGC_BANNER + "\n" + after})))
    found = next(one for one in diagnosis.findings if one.id == "gpu-not-detected")
    assert found.severity == severity


def test_a_placement_group_that_fits_nowhere_says_which_resource(tmp_path):
    line = (
        "The actor is not schedulable: Tasks or actors with resource shapes [{bundle_group_0_d02a: 0.001}] failed to "
        "schedule because there are not enough resources for the tasks or actors on the whole cluster."
    )
    found = diagnose(load_bundle(make(tmp_path, {"logs/train.log": line}))).findings[0]
    assert found.id == "insufficient-gpu" and "bundle_group_0_d02a" in found.detail
    assert found.title == "Not enough resources to schedule"


@pytest.mark.parametrize(("last", "reported"), [("success!", False), ("step 12 loss=2.1", True)])
def test_a_worker_death_warning_in_a_run_that_says_it_succeeded_is_no_failure(tmp_path, last, reported):
    log = (
        "2020-04-13 15:35:00,032 WARNING worker.py:1072 -- A worker died or was killed while executing task "
        f"ffffffffffffffff45b95b1c0100.\n{last}\n"
    )
    diagnosis = diagnose(load_bundle(make(tmp_path, {"logs/train.log": log})))
    assert ("worker-died" in {one.id for one in diagnosis.findings}) == reported
