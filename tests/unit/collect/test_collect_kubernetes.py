"""The Kubernetes source against the API stand-in (tests/standins/kube_standin.py) over real HTTP: what it saves, how
its logs are cut, what its status says when the cluster refuses or does not answer, and that the bundle it
writes is diagnosed as the job's failure."""

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import kmock
import kubernetes
import pytest

from actions.evidence.bundle_shelf import BundleShelf
from actions.evidence.collecting import collect_job
from actions.evidence.diagnosing import diagnose_job, diagnose_kept
from actions.jobs.backends.kuberay import KubeRayBackend
from actions.jobs.planning import training_launch
from actions.jobs.service import Jobs
from actions.jobs.templates import TINY_TRANSFORMER
from actions.settings import Settings
from diagnosers.collect.bundle_writer import BundleWriter
from diagnosers.collect.collector import SourceUnavailable, collect
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.kubernetes import collect_kubernetes
from diagnosers.collect.target import CollectConfig, Target
from diagnosers.engine import diagnose_path
from tests.builders.failed_rayjob import (
    CLUSTER,
    HEAD,
    JOB,
    NAMESPACE,
    OOM_TRACEBACK,
    PENDING,
    RUNNING,
    WORKER,
    a_failed_job,
    collected,
    config_for,
    event,
    pod,
    raycluster,
    rayjob,
    target,
)
from tests.paths import EXAMPLES
from tests.standins.kube_standin import EVENTS, PODS, RAYCLUSTERS, RAYJOBS, ServedStandin

FAILED_IMAGE_PULL = EXAMPLES / "failed-image-pull"
FAILED_GPU_OOM = EXAMPLES / "failed-gpu-oom"


@pytest.fixture
def standin() -> Iterator[ServedStandin]:
    with ServedStandin() as served:
        yield served


def sources(folder: Path) -> dict[str, str]:
    return json.loads((folder / "bundle.json").read_text())["sources"]


def test_a_failed_job_is_collected_and_diagnosed_from_its_files(standin, tmp_path):
    a_failed_job(standin)
    folder = collected(standin, tmp_path / "bundle")
    assert sources(folder) == {"k8s": "ok", "logs": "ok"}
    assert sorted(path.name for path in (folder / "k8s").iterdir()) == [
        "events.json",
        "pods.json",
        "raycluster.json",
        "rayjob.json",
    ]
    assert {path.name for path in (folder / "logs").iterdir()} == {
        f"{HEAD}.ray-head.log",
        f"{WORKER}.log-sidecar.log",
        f"{WORKER}.ray-worker.log",
        f"{WORKER}.ray-worker.previous.log",
    }
    assert (folder / "logs" / f"{WORKER}.ray-worker.previous.log").read_text().endswith(OOM_TRACEBACK)
    pods = json.loads((folder / "k8s" / "pods.json").read_text())
    assert (pods["kind"], [item["metadata"]["name"] for item in pods["items"]]) == ("PodList", [HEAD, WORKER, PENDING])
    events = json.loads((folder / "k8s" / "events.json").read_text())
    assert (events["kind"], [item["metadata"]["name"] for item in events["items"]]) == ("EventList", ["e1", "e3"])
    diagnosis = diagnose_path(folder)
    assert diagnosis.verdict == "failed"
    assert {"gpu-oom", "insufficient-gpu"} <= {finding.id for finding in diagnosis.findings}


def test_objects_are_saved_as_the_api_server_sent_them(standin, tmp_path):
    a_failed_job(standin)
    folder = collected(standin, tmp_path / "bundle")
    served = standin.rayjob(JOB)
    assert json.loads((folder / "k8s" / "rayjob.json").read_text()) == served
    (pod_list,) = [
        request
        for request in standin.api[kmock.action.LIST, PODS]
        if "ray.io/cluster" in request.params["labelSelector"]
    ]
    assert pod_list.params["labelSelector"] == f"ray.io/cluster={CLUSTER}"


def test_the_submitter_jobs_pods_are_collected_by_either_job_label(standin, tmp_path):
    a_failed_job(standin)
    submitter = pod(f"{JOB}-q8w2e", "Failed", {"ray-job-submitter": RUNNING}, labels={"job-name": JOB})
    standin.put(PODS, submitter)
    standin.set_log(submitter["metadata"]["name"], "ray-job-submitter", "submitting\n")
    folder = collected(standin, tmp_path / "bundle")
    names = [item["metadata"]["name"] for item in json.loads((folder / "k8s" / "pods.json").read_text())["items"]]
    assert names == [HEAD, WORKER, PENDING, f"{JOB}-q8w2e"]
    assert (folder / "logs" / f"{JOB}-q8w2e.ray-job-submitter.log").read_text() == "submitting\n"


def test_logs_are_cut_to_their_last_bytes_at_a_line_start(standin, tmp_path):
    a_failed_job(standin)
    lines = [f"step {number:05d} loss 0.{number:04d}\n" for number in range(20_000)]
    standin.set_log(HEAD, "ray-head", "".join(lines))
    folder = collected(standin, tmp_path / "bundle", log_max_bytes=1000)
    kept = (folder / "logs" / f"{HEAD}.ray-head.log").read_text()
    assert 1000 - len(lines[0]) < len(kept) <= 1000
    assert kept.endswith(lines[-1]) and kept.startswith("step ")


def test_events_are_read_in_pages(standin, tmp_path):
    a_failed_job(standin)
    for number in range(600):
        standin.put(EVENTS, event(f"noise-{number}", "Pod", "someone-else-abcde", "Pulled", "Pulled", "Normal"))
    folder = collected(standin, tmp_path / "bundle")
    events = json.loads((folder / "k8s" / "events.json").read_text())["items"]
    assert [item["metadata"]["name"] for item in events] == ["e1", "e3"]
    assert [request.params.get("continue") for request in standin.api[kmock.action.LIST, EVENTS]] == [None, "500"]


def test_forbidden_pods_are_named_and_the_rest_is_collected(standin, tmp_path):
    a_failed_job(standin)
    standin.call(standin.api.forbid, "list", PODS)
    folder = collected(standin, tmp_path / "bundle")
    assert sources(folder)["k8s"] == ("error: forbidden: trainbot's service account needs `list` on pods in default")
    assert sorted(path.name for path in (folder / "k8s").iterdir()) == ["events.json", "raycluster.json", "rayjob.json"]
    # Without the pods, events are still kept for their names as KubeRay writes them.
    assert [item["metadata"]["name"] for item in json.loads((folder / "k8s" / "events.json").read_text())["items"]] == [
        "e1",
        "e3",
    ]


def test_forbidden_logs_are_the_logs_status(standin, tmp_path):
    a_failed_job(standin)
    standin.call(standin.api.forbid, "get", PODS)  # pods/log is a get on pods in the stand-in
    folder = collected(standin, tmp_path / "bundle")
    assert sources(folder) == {
        "k8s": "ok",
        "logs": "error: forbidden: trainbot's service account needs `get` on pods/log in default",
    }
    assert not (folder / "logs").exists()


def test_a_missing_rayjob_is_named_and_its_pods_and_events_still_collected(standin, tmp_path):
    a_failed_job(standin)
    folder = collect(
        target(job="llm-ft-zzzzzz", raycluster=CLUSTER),
        config_for(standin.api_client()),
        tmp_path / "bundle",
        {"k8s": collect_kubernetes},
    )
    assert sources(folder)["k8s"] == "error: no RayJob llm-ft-zzzzzz in default"
    assert sorted(path.name for path in (folder / "k8s").iterdir()) == ["events.json", "pods.json", "raycluster.json"]


def test_a_missing_crd_is_named(standin, tmp_path):
    a_failed_job(standin)
    standin.call(standin.api.uninstall, RAYCLUSTERS)
    folder = collected(standin, tmp_path / "bundle")
    assert sources(folder)["k8s"] == "error: the API server does not serve rayclusters.ray.io (is its CRD installed?)"
    assert (folder / "k8s" / "pods.json").is_file()


def test_no_client_is_not_configured(tmp_path):
    folder = collect(target(), config_for(None), tmp_path / "bundle", {"k8s": collect_kubernetes})
    assert sources(folder) == {"k8s": "not-configured", "logs": "not-configured"}


def test_an_api_server_that_is_down_is_unreachable_at_once(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        host = f"http://127.0.0.1:{probe.getsockname()[1]}"
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=host))
    started = time.monotonic()
    with pytest.raises(SourceUnavailable, match=rf"^unreachable: {host}: .*Connection refused"):
        collect_kubernetes(target(), config_for(client), BundleWriter(tmp_path / "bundle"), Deadline(10))
    assert time.monotonic() - started < 5  # well inside the 10 s deadline: refused connections are not waited on


def test_a_hanging_api_server_is_bounded_by_the_request_timeout(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as hanging:  # accepts connections, never answers
        host = f"http://127.0.0.1:{hanging.getsockname()[1]}"
        client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=host))
        started = time.monotonic()
        folder = collect(
            target(), config_for(client, request_timeout_s=1.0), tmp_path / "bundle", {"k8s": collect_kubernetes}
        )
        elapsed = time.monotonic() - started
    assert sources(folder)["k8s"].startswith(f"unreachable: {host}: ")
    assert "timed out" in sources(folder)["k8s"]
    assert elapsed < 2 * 1.0  # one request timeout: the timed-out read is not retried


def ray_unreachable(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    """The Ray dashboard as the saved bundle recorded it: a cluster that never started has none."""
    raise SourceUnavailable("unreachable")


def test_the_failed_image_pull_example_is_diagnosed_the_same_when_collected(standin, tmp_path):
    saved = json.loads((FAILED_IMAGE_PULL / "k8s" / "events.json").read_text())
    namespace = json.loads((FAILED_IMAGE_PULL / "bundle.json").read_text())["namespace"]
    for item in saved["items"]:
        standin.put(EVENTS, item)
    job = "resnet-sweep-01"
    folder = collect(
        target(job=job, namespace=namespace, raycluster=f"{job}-raycluster"),
        config_for(standin.api_client()),
        tmp_path / "bundle",
        {"k8s": collect_kubernetes, "ray": ray_unreachable},
    )
    collected_events = json.loads((folder / "k8s" / "events.json").read_text())["items"]
    assert [item["metadata"]["name"] for item in collected_events] == [
        item["metadata"]["name"] for item in saved["items"]
    ]
    assert_same_diagnosis(folder, FAILED_IMAGE_PULL)


def assert_same_diagnosis(collected: Path, saved: Path) -> None:
    expected, got = diagnose_path(saved), diagnose_path(collected)
    assert (got.verdict, [finding.id for finding in got.findings]) == (
        expected.verdict,
        [finding.id for finding in expected.findings],
    )
    assert expected.verdict == "failed"


# The whole kuberay path of `trainbot diagnose JOB`: Jobs finds the RayJob, collect_job reads its status
# and runs the Kubernetes and dashboard sources against what that status names.


def closed_port_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def kuberay_jobs(standin: ServedStandin, tmp_path: Path, namespace: str = NAMESPACE) -> tuple[Settings, Jobs]:
    settings = Settings(data_dir=tmp_path / "data", backend="kuberay", namespace=namespace)
    return settings, Jobs(settings, backends={"kuberay": KubeRayBackend(settings, standin.api_client())})


def test_a_launched_job_that_ran_out_of_gpu_memory_is_collected_by_name(standin, tmp_path):
    settings, jobs = kuberay_jobs(standin, tmp_path)
    params = TINY_TRANSFORMER.parse_params([])
    record = jobs.launch(training_launch(TINY_TRANSFORMER, params, (2, 1), "alice"))
    cluster = f"{record.name}-raycluster-x7k2p"
    ray_job = {"submission_id": "raysubmit_1", "job_id": "02000000", "status": "FAILED", "message": "exit code 1"}
    dashboard = standin.serve_dashboard({"raysubmit_1": "Starting training with 2 workers\n"}, jobs=[ray_job])
    standin.set_status(
        record.name,
        {
            "jobStatus": "FAILED",
            "jobDeploymentStatus": "Failed",
            "reason": "AppFailed",
            "jobId": "raysubmit_1",
            "rayClusterName": cluster,
            "dashboardURL": dashboard,
            "startTime": "2026-11-20T09:12:00Z",
            "endTime": "2026-11-20T09:58:41Z",
        },
    )
    standin.put(RAYCLUSTERS, raycluster(cluster))
    labels = {"ray.io/cluster": cluster}
    standin.put(PODS, pod(f"{cluster}-head-9qz4d", "Running", {"ray-head": RUNNING}, labels))
    for rank in (0, 1):
        worker = f"{cluster}-gpu-worker-{rank}"
        standin.put(PODS, pod(worker, "Running", {"ray-worker": RUNNING}, labels))
        standin.set_log(worker, "ray-worker", (FAILED_GPU_OOM / "logs" / f"worker-{rank}.log").read_text())

    folder = collect_job(settings, jobs, record.name[:-2], tmp_path / "bundle")

    written = json.loads((folder / "bundle.json").read_text())
    assert written["sources"] == {"k8s": "ok", "ray": "ok", "logs": "ok", "prometheus": "not-configured"}
    assert (written["job"], written["backend"], written["status"]) == (record.name, "kuberay", "FAILED")
    assert (written["world_size"], written["gpus_per_worker"]) == (2, 1)
    assert json.loads((folder / "ray" / "jobs.json").read_text()) == [ray_job]
    assert_same_diagnosis(folder, FAILED_GPU_OOM)


def unlaunched_rayjob_stuck_pulling(standin: ServedStandin, tmp_path: Path) -> tuple[Settings, Jobs, str, str]:
    """A RayJob trainbot did not launch whose image cannot be pulled: (settings, jobs, its name, namespace)."""
    namespace = json.loads((FAILED_IMAGE_PULL / "bundle.json").read_text())["namespace"]
    standin.call(standin.api.namespaces.add, namespace)
    settings, jobs = kuberay_jobs(standin, tmp_path, namespace)
    job = "resnet-sweep-01"
    # The head never started, so the dashboard KubeRay names does not answer.
    status = {
        "jobDeploymentStatus": "Initializing",
        "rayClusterName": f"{job}-raycluster",
        "dashboardURL": closed_port_address(),
    }
    standin.put(RAYJOBS, rayjob(job, status, namespace))
    standin.put(RAYCLUSTERS, raycluster(f"{job}-raycluster", namespace))
    for item in json.loads((FAILED_IMAGE_PULL / "k8s" / "events.json").read_text())["items"]:
        standin.put(EVENTS, item)
    return settings, jobs, job, namespace


def test_a_rayjob_trainbot_did_not_launch_is_collected_by_its_name(standin, tmp_path):
    settings, jobs, job, namespace = unlaunched_rayjob_stuck_pulling(standin, tmp_path)

    folder = collect_job(settings, jobs, job, tmp_path / "bundle")

    written = json.loads((folder / "bundle.json").read_text())
    assert (written["job"], written["namespace"], written["status"]) == (job, namespace, "PENDING")
    assert written["sources"]["k8s"] == "ok"
    assert written["sources"]["ray"].startswith("unreachable: http://127.0.0.1:")
    assert_same_diagnosis(folder, FAILED_IMAGE_PULL)


def test_diagnose_job_keeps_the_bundle_only_on_a_shelf_and_a_kept_one_is_diagnosed_again(standin, tmp_path):
    settings, jobs, job, _ = unlaunched_rayjob_stuck_pulling(standin, tmp_path)
    expected = diagnose_path(FAILED_IMAGE_PULL)

    unkept = diagnose_job(settings, jobs, job)
    kept = diagnose_job(settings, jobs, job, BundleShelf.of(settings))

    for diagnosed in (unkept, kept):
        assert (diagnosed.job, diagnosed.diagnosis.verdict) == (job, expected.verdict)
        assert [found.id for found in diagnosed.diagnosis.findings] == [found.id for found in expected.findings]
    assert unkept.kept is None
    assert kept.kept is not None
    assert BundleShelf.of(settings).find(kept.kept.key) == kept.kept.folder
    again = diagnose_kept(settings, BundleShelf.of(settings), kept.kept.key)
    assert again is not None
    assert again.to_dict() == kept.diagnosis.to_dict()
    assert diagnose_kept(settings, BundleShelf.of(settings), "gone-0000") is None
