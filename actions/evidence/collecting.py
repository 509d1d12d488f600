"""From a job name to an evidence bundle: find the job, say where its evidence is, run the collectors.

The job may be one trainbot launched (by name or unique prefix), a RayJob name, or a Ray submission id.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from actions.jobs.backends import KUBERAY, LOCAL
from actions.jobs.backends.local_head import HEAD_HOST, find_head, temp_dir
from actions.jobs.job import JobStatus
from actions.jobs.service import Jobs
from actions.settings import Settings
from diagnosers.collect.bundle_writer import BundleWriter
from diagnosers.collect.collector import Source, collect
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.target import CollectConfig, Target


@dataclass(frozen=True)
class SourcesCollected:
    """Where a collection stands: the sources that have finished (whatever they found) and those still at work."""

    job: str
    done: tuple[str, ...]
    waiting: tuple[str, ...]


CollectionProgress = Callable[[SourcesCollected], None]


def collect_job(
    settings: Settings, jobs: Jobs, job: str, folder: Path, progress: CollectionProgress | None = None
) -> Path:
    """Collect what the live sources know about `job` into `folder` (a bundle) and return it; `progress` hears
    which sources are done, once before the first starts and as each one ends (from the source's thread)."""
    status, backend = jobs.locate_status(job)
    record = jobs.store.get(status.name) if jobs.store.known(status.name) else None
    world = (record.workers, record.gpus_per_worker) if record else (None, None)
    if backend == KUBERAY:
        from actions.jobs.backends.kuberay import KubeRayBackend  # noqa: PLC0415 - the Kubernetes client loads only here

        kuberay = jobs.backend(KUBERAY)
        client = kuberay.api_client() if isinstance(kuberay, KubeRayBackend) else None
        target, config, sources = _kuberay(settings, status, world, client)
        return collect(target, config, folder, reporting(status.name, sources, progress))
    target, config, sources = _local(settings, status, world)
    return collect(target, config, folder, reporting(status.name, sources, progress), absent=("k8s",))


def reporting(job: str, sources: dict[str, Source], progress: CollectionProgress | None) -> dict[str, Source]:
    """`sources`, each telling `progress` when it ends; as they are with no `progress`."""
    if progress is None:
        return sources
    done: list[str] = []
    lock = threading.Lock()

    def standing() -> SourcesCollected:
        with lock:
            return SourcesCollected(job, tuple(done), tuple(name for name in sources if name not in done))

    def reported(name: str, source: Source) -> Source:
        def run(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
            try:
                source(target, config, writer, deadline)
            finally:
                with lock:
                    done.append(name)
                progress(standing())

        return run

    progress(standing())
    return {name: reported(name, source) for name, source in sources.items()}


def collect_config(settings: Settings, kube_client: object = None) -> CollectConfig:
    return CollectConfig(
        prometheus_url=settings.prometheus_url,
        prometheus_token=settings.prometheus_token.get_secret_value(),
        prometheus_verify=settings.prometheus_verify,
        metrics=settings.prometheus_metrics,
        pod_label=settings.prometheus_pod_label,
        host_label=settings.prometheus_host_label,
        dashboard_token=settings.ray_dashboard_token.get_secret_value(),
        request_timeout_s=settings.collect_request_timeout_s,
        deadline_s=settings.collect_deadline_s,
        log_max_bytes=settings.collect_log_max_mb << 20,
        kube_client=kube_client,
    )


def _local(
    settings: Settings, status: JobStatus, world: tuple[int | None, int | None]
) -> tuple[Target, CollectConfig, dict[str, Source]]:
    from diagnosers.collect.local_logs import collect_local_logs  # noqa: PLC0415 - only the sources used
    from diagnosers.collect.prometheus import collect_prometheus  # noqa: PLC0415
    from diagnosers.collect.ray_dashboard import collect_dashboard  # noqa: PLC0415
    from diagnosers.collect.steps import collect_steps  # noqa: PLC0415

    target = Target(
        job=status.name,
        backend=LOCAL,
        status=status.state.value,
        submission_id=status.submission_id or status.name,
        start=status.start_time,
        end=status.end_time,
        world_size=world[0],
        gpus_per_worker=world[1],
        # DCGM series name the host; Ray's node metrics carry the machine's outward IP, even for this
        # loopback head.
        hosts=(socket.gethostname(), HEAD_HOST, outward_ip()),
        # Only this data directory's head (or the one set explicitly): another head on the recorded port
        # knows nothing of this job, or worse, another job of the same name.
        dashboard_url=find_head(settings) or "",
        session_dir=str(temp_dir(settings) / "session_latest"),
        run_dir=str(settings.runs_dir() / status.name),
    )
    sources: dict[str, Source] = {
        "ray": collect_dashboard,
        "logs": collect_local_logs,
        "prometheus": collect_prometheus,
        "steps": collect_steps,
    }
    return target, collect_config(settings), sources


def _kuberay(
    settings: Settings, status: JobStatus, world: tuple[int | None, int | None], kube_client: object
) -> tuple[Target, CollectConfig, dict[str, Source]]:
    from diagnosers.collect.kubernetes import collect_kubernetes  # noqa: PLC0415
    from diagnosers.collect.prometheus import collect_prometheus  # noqa: PLC0415
    from diagnosers.collect.ray_dashboard import collect_dashboard  # noqa: PLC0415

    namespace, _, name = status.name.rpartition("/")
    target = Target(
        job=name,
        backend=KUBERAY,
        namespace=namespace or settings.namespace,
        status=status.state.value,
        submission_id=status.submission_id,
        start=status.start_time,
        end=status.end_time,
        world_size=world[0],
        gpus_per_worker=world[1],
        rayjob=name,
        raycluster=status.cluster_name,
        pod_regex=f"{re.escape(status.cluster_name)}-.*" if status.cluster_name else "",
        dashboard_url=settings.ray_dashboard_url or _with_scheme(status.dashboard_url),
    )
    sources: dict[str, Source] = {
        "k8s": collect_kubernetes,
        "ray": collect_dashboard,
        "prometheus": collect_prometheus,
    }
    return target, collect_config(settings, kube_client), sources


def outward_ip() -> str:
    """The address this machine would use to reach another (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere
            return probe.getsockname()[0]
        except OSError:
            return HEAD_HOST


def _with_scheme(url: str) -> str:
    """KubeRay's status.dashboardURL is `host:port`, without a scheme."""
    return url if not url or "://" in url else f"http://{url}"
