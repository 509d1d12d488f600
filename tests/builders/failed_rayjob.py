"""A failed RayJob as the Kubernetes API stand-in (tests/standins/kube_standin.py) serves it: the objects it is made of
(the RayJob, its RayCluster, pods, container logs and events), and collecting a job's evidence from the stand-in."""

from pathlib import Path

import kubernetes

from diagnosers.collect.collector import collect
from diagnosers.collect.kubernetes import collect_kubernetes
from diagnosers.collect.target import CollectConfig, Target
from tests.standins.kube_standin import EVENTS, PODS, RAYCLUSTERS, RAYJOBS, ServedStandin

NAMESPACE = "default"
JOB = "llm-ft-a1b2c3"
CLUSTER = f"{JOB}-raycluster-x7k2p"
HEAD, WORKER, PENDING = f"{CLUSTER}-head-9qz4d", f"{CLUSTER}-gpu-worker-b2m8r", f"{CLUSTER}-gpu-worker-t5n1c"
OOM_TRACEBACK = """Traceback (most recent call last):
  File "/app/train.py", line 88, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB \
of which 1.02 GiB is free.
"""


def config_for(client: kubernetes.client.ApiClient | None, **changes: object) -> CollectConfig:
    """How to collect through `client`, with short timeouts; `changes` override them."""
    return CollectConfig(**{"kube_client": client, "request_timeout_s": 2.0, "deadline_s": 10.0} | changes)


def target(job: str = JOB, namespace: str = NAMESPACE, raycluster: str = "") -> Target:
    """What to collect: the KubeRay job `job` (the failed one by default)."""
    return Target(job=job, backend="kuberay", namespace=namespace, rayjob=job, raycluster=raycluster)


def pod(name: str, phase: str, containers: dict[str, dict], labels: dict[str, str] | None = None) -> dict:
    """A pod with one status per container: {"name": {"state": ..., "restartCount": n}}."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {"ray.io/cluster": CLUSTER}},
        "spec": {"containers": [{"name": container, "image": "rayproject/ray:2.60.0-gpu"} for container in containers]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": container, **status} for container, status in containers.items()],
        },
    }


def event(name: str, kind: str, about: str, reason: str, message: str, kind_type: str = "Warning") -> dict:
    """An event about the `kind` object named `about`."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "involvedObject": {"kind": kind, "name": about, "namespace": NAMESPACE},
        "reason": reason,
        "message": message,
        "type": kind_type,
    }


def rayjob(name: str, status: dict, namespace: str = NAMESPACE) -> dict:
    """A RayJob with the `status` KubeRay's operator wrote."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"entrypoint": "python train.py"},
        "status": status,
    }


def raycluster(name: str, namespace: str = NAMESPACE) -> dict:
    """A RayCluster, as its name alone."""
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name, "namespace": namespace}}


RUNNING = {"state": {"running": {"startedAt": "2026-05-01T10:00:00Z"}}, "restartCount": 0}
RESTARTED = {
    "state": {"running": {"startedAt": "2026-05-01T10:20:00Z"}},
    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
    "restartCount": 1,
}
WAITING = {"state": {"waiting": {"reason": "ContainerCreating"}}, "restartCount": 0}
UNSCHEDULED = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available."


def a_failed_job(standin: ServedStandin) -> None:
    """A RayJob whose restarted worker ran out of GPU memory and whose second worker cannot be scheduled."""
    standin.put(
        RAYJOBS, rayjob(JOB, {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "rayClusterName": CLUSTER})
    )
    standin.put(RAYCLUSTERS, raycluster(CLUSTER))
    standin.put(PODS, pod(HEAD, "Running", {"ray-head": RUNNING}))
    standin.put(PODS, pod(WORKER, "Running", {"ray-worker": RESTARTED, "log-sidecar": RUNNING}))
    standin.put(PODS, pod(PENDING, "Pending", {"ray-worker": WAITING}))
    standin.put(PODS, pod("someone-else-abcde", "Running", {"main": RUNNING}, labels={"app": "other"}))
    standin.set_log(HEAD, "ray-head", "Ray runtime started.\n")
    standin.set_log(WORKER, "ray-worker", "restarted, waiting for the job\n")
    standin.set_log(WORKER, "ray-worker", "epoch 1\n" + OOM_TRACEBACK, previous=True)
    standin.set_log(WORKER, "log-sidecar", "shipping logs\n")
    standin.put(EVENTS, event("e1", "Pod", PENDING, "FailedScheduling", UNSCHEDULED))
    standin.put(EVENTS, event("e2", "Pod", "someone-else-abcde", "BackOff", "Back-off restarting failed container"))
    # A worker KubeRay replaced: the pod is gone, its event is still about this job.
    standin.put(EVENTS, event("e3", "Pod", f"{CLUSTER}-gpu-worker-gone1", "Killing", "Stopping container", "Normal"))


def collected(standin: ServedStandin, folder: Path, **changes: object) -> Path:
    """The failed job's evidence, collected from `standin` into `folder` (`changes`: see config_for)."""
    config = config_for(standin.api_client(), **changes)
    return collect(target(), config, folder, {"k8s": collect_kubernetes})
