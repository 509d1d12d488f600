"""What to collect about (the job, its window, where its pods and dashboard are) and how (the config).

Both are plain values: the diagnosers import nothing of ours, so actions/ fills them from settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

# dcgm-exporter's default counters, then Ray's own node metrics for clusters without DCGM.
DCGM_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_RX_BYTES",
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_XID_ERRORS",
)
RAY_METRICS = (
    "ray_node_gpus_utilization",
    "ray_node_gram_used",
    "ray_node_cpu_utilization",
    "ray_node_mem_used",
    "ray_node_network_receive_speed",
    "ray_node_network_send_speed",
    "ray_node_disk_read_speed",
)


@dataclass(frozen=True)
class Target:
    """One job to collect about. `pod_regex`/`hosts` select its series and objects."""

    job: str
    backend: Literal["kuberay", "local"]
    namespace: str = ""
    status: str = ""
    submission_id: str = ""
    start: datetime | None = None
    end: datetime | None = None
    world_size: int | None = None
    gpus_per_worker: int | None = None
    # KubeRay: the RayJob and its RayCluster; their pods are named after the cluster.
    rayjob: str = ""
    raycluster: str = ""
    pod_regex: str = ""
    hosts: tuple[str, ...] = ()
    dashboard_url: str = ""
    # Local: the Ray session folder whose logs/ holds the driver and worker logs.
    session_dir: str = ""
    # The job's run folder (the reference trainer: <storage>/<job>): its ranks' steps/rank-N.jsonl are in it, or
    # for a sweep, in each trial's folder under it.
    run_dir: str = ""

    def meta(self) -> dict[str, Any]:
        """The bundle.json fields of BUNDLE.md (sources are added by the writer)."""
        return {
            "job": self.job,
            "namespace": self.namespace,
            "backend": self.backend,
            "status": self.status,
            "start": _rfc3339(self.start),
            "end": _rfc3339(self.end),
            "world_size": self.world_size,
            "gpus_per_worker": self.gpus_per_worker,
        }


@dataclass(frozen=True)
class CollectConfig:
    prometheus_url: str = ""
    prometheus_token: str = ""
    # True, False, or a CA bundle path (requests' `verify`).
    prometheus_verify: bool | str = True
    metrics: tuple[str, ...] = DCGM_METRICS
    fallback_metrics: tuple[str, ...] = RAY_METRICS
    # Label names that carry the pod and the host in the exporter's series.
    pod_label: str = "pod"
    host_label: str = "Hostname"
    max_points: int = 1000
    dashboard_token: str = ""
    request_timeout_s: float = 10.0
    deadline_s: float = 60.0
    log_max_bytes: int = 8 << 20
    # A kubernetes.client.ApiClient for the kuberay backend (None: no Kubernetes source).
    kube_client: Any = field(default=None, repr=False)


def _rfc3339(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment else ""
