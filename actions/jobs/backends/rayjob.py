"""RayJob manifests for KubeRay 1.7 (ray.io/v1): built from a template, or a team's own RayJob with our fields set.

Pure functions, no I/O: the KubeRay backend sends what they return and the CLI's dry run prints it.
Entrypoints are only ever `Launch.entrypoint`, whose words shlex.join quoted.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from actions.errors import BadRequest
from actions.jobs.job import Launch
from actions.settings import Settings

API_VERSION = "ray.io/v1"
# Served by the KubeRay 1.7 CRD beside v1 with no conversion webhook and a subset of v1's fields, so
# the API server itself converts by rewriting apiVersion; loading does the same.
LEGACY_API_VERSION = "ray.io/v1alpha1"
KIND = "RayJob"
DEFAULT_SUBMISSION_MODE = "K8sJobMode"
GPU = "nvidia.com/gpu"
WORKER_GROUP = "workers"
MAX_MANIFEST_BYTES = 1 << 20
# YAML aliases can expand a small file into an enormous tree; nothing near this is a RayJob.
MAX_MANIFEST_VALUES = 100_000
# Set by the API server; a RayJob exported with `kubectl get -o yaml` carries them, and a stale
# ownerReference would have the new RayJob garbage-collected at once.
SERVER_SET_METADATA = (
    "generateName",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
)


def build_rayjob(launch: Launch, settings: Settings) -> dict[str, Any]:
    """A RayJob for a template launch: one head and one worker group of exactly `launch.workers` pods."""
    template = launch.template
    image = template.image or settings.image
    worker_resources = {"cpu": cpu_quantity(template.cpus_per_worker), "memory": template.memory_per_worker}
    worker_limits = worker_resources | ({GPU: str(launch.gpus_per_worker)} if launch.gpus_per_worker else {})
    head = {
        "name": "ray-head",
        "image": image,
        # KubeRay finds the dashboard by the port named "dashboard".
        "ports": [
            {"name": "gcs-server", "containerPort": 6379},
            {"name": "dashboard", "containerPort": 8265},
            {"name": "client", "containerPort": 10001},
        ],
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    worker = {
        "name": "ray-worker",
        "image": image,
        "resources": {"requests": worker_resources, "limits": worker_limits},
    }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": launch.name, "namespace": settings.namespace, "labels": launch.labels},
        "spec": {
            "entrypoint": launch.entrypoint,
            "runtimeEnvYAML": yaml.safe_dump(launch.runtime_env(), sort_keys=True),
            "submissionMode": DEFAULT_SUBMISSION_MODE,
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "rayClusterSpec": {
                # rayStartParams may be left out since KubeRay 1.1; older CRDs require it.
                "headGroupSpec": {"rayStartParams": {}, "template": _pod_template(launch, head)},
                "workerGroupSpecs": [
                    {
                        "groupName": WORKER_GROUP,
                        "replicas": launch.workers,
                        "minReplicas": launch.workers,
                        "maxReplicas": launch.workers,
                        "rayStartParams": {},
                        "template": _pod_template(launch, worker),
                    }
                ],
            },
        },
    }


def _pod_template(launch: Launch, container: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": launch.labels}, "spec": {"containers": [container]}}


def cpu_quantity(cpus: float) -> str:
    """A Kubernetes CPU quantity: whole cores as `2`, fractions in millicores as `1500m`."""
    return str(int(cpus)) if cpus == int(cpus) else f"{round(cpus * 1000)}m"


def load_manifest(text: str, source: str) -> dict[str, Any]:
    """The one RayJob (ray.io/v1) in a YAML file that may hold other documents, as a plain JSON-like dict.

    Other documents (a ConfigMap the RayJob mounts, say) are ignored: they must exist in the cluster.
    """
    size = len(text.encode("utf-8"))
    if size > MAX_MANIFEST_BYTES:
        raise BadRequest(
            f"{source}: {size:,} bytes is more than the {MAX_MANIFEST_BYTES >> 10} KiB a RayJob manifest may have; "
            "give a file with the RayJob alone"
        )
    documents = _documents(text, source)
    rayjobs = [document for document in documents if isinstance(document, dict) and document.get("kind") == KIND]
    if not rayjobs:
        found = ", ".join(dict.fromkeys(map(_kind_of, documents))) or "no documents at all"
        raise BadRequest(f"{source}: no RayJob in it (found {found}); give a manifest with kind: RayJob")
    if len(rayjobs) > 1:
        names = ", ".join(str((rayjob.get("metadata") or {}).get("name", "unnamed")) for rayjob in rayjobs)
        raise BadRequest(f"{source}: {len(rayjobs)} RayJobs ({names}); a launch takes one, so split the file")
    rayjob = rayjobs[0]
    if rayjob.get("apiVersion") == LEGACY_API_VERSION:
        rayjob["apiVersion"] = API_VERSION
    if rayjob.get("apiVersion") != API_VERSION:
        raise BadRequest(
            f"{source}: RayJob apiVersion {rayjob.get('apiVersion')!r} is not one KubeRay 1.7 serves; "
            f"write apiVersion: {API_VERSION}"
        )
    if not isinstance(rayjob.get("metadata", {}), dict) or not isinstance(rayjob.get("spec"), dict):
        raise BadRequest(f"{source}: the RayJob's metadata and spec must be mappings")
    spec = rayjob["spec"]
    if not spec.get("rayClusterSpec") and not spec.get("clusterSelector"):
        raise BadRequest(
            f"{source}: the RayJob needs spec.rayClusterSpec (a cluster to create for it) "
            "or spec.clusterSelector (an existing RayCluster to run on)"
        )
    _check_worker_groups(spec, source)
    return rayjob


def _check_worker_groups(spec: dict[str, Any], source: str) -> None:
    """The worker groups trainbot reads and sizes have the CRD's shape (the API server checks the rest)."""
    cluster = spec.get("rayClusterSpec") or {}
    groups = (cluster.get("workerGroupSpecs") or []) if isinstance(cluster, dict) else None
    if not isinstance(groups, list) or not all(isinstance(group, dict) for group in groups):
        raise BadRequest(f"{source}: spec.rayClusterSpec must be a mapping whose workerGroupSpecs is a list of groups")
    for index, group in enumerate(groups):
        for key in ("replicas", "minReplicas", "maxReplicas"):
            if key in group and (not isinstance(group[key], int) or isinstance(group[key], bool)):
                field = f"spec.rayClusterSpec.workerGroupSpecs[{index}].{key}"
                raise BadRequest(f"{source}: {field} must be a whole number, not {group[key]!r}")


def _documents(text: str, source: str) -> list[Any]:
    """The non-empty YAML documents, each a fresh tree: what YAML aliases shared is copied apart."""
    try:
        documents = [document for document in yaml.load_all(text, Loader=_ManifestLoader) if document is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise BadRequest(f"{source}: not valid YAML ({problem}{where})") from None
    except RecursionError:
        raise BadRequest(f"{source}: nested too deeply to be a RayJob") from None
    _check_expanded_size(documents, source)
    try:
        return json.loads(json.dumps(documents))
    except (TypeError, ValueError) as error:
        raise BadRequest(f"{source}: holds a value JSON cannot carry ({error}); write it as a plain string") from None


class _ManifestLoader(yaml.SafeLoader):
    """Safe YAML read as Kubernetes reads it: an unquoted date stays the string it is written as."""


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_expanded_size(documents: list[Any], source: str) -> None:
    """Refuse a tree with more than MAX_MANIFEST_VALUES values, counting no further than that."""
    pending, counted = list(documents), 0
    while pending:
        node = pending.pop()
        counted += 1
        if counted > MAX_MANIFEST_VALUES:
            raise BadRequest(
                f"{source}: expands to more than {MAX_MANIFEST_VALUES:,} values (YAML aliases?); "
                "write the RayJob out plainly"
            )
        if isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def _kind_of(document: Any) -> str:
    if isinstance(document, dict):
        return str(document.get("kind") or "a document without kind")
    return f"a YAML {type(document).__name__}"


def apply_launch(manifest: dict[str, Any], launch: Launch, settings: Settings) -> dict[str, Any]:
    """A team's RayJob, as load_manifest returns it, as this launch: their spec, with only our fields set.

    Set: a fresh name (server-set metadata dropped), trainbot's namespace (theirs must match), our labels over
    theirs on the RayJob and its pod templates, the entrypoint with the launch's words appended, and the
    first worker group's size (with GPUs only when asked for). Everything else, shutdown and TTL
    included, stays as they wrote it. `manifest` is not changed.
    """
    rayjob = copy.deepcopy(manifest)
    rayjob.pop("status", None)
    metadata = rayjob.setdefault("metadata", {})
    for key in SERVER_SET_METADATA:
        metadata.pop(key, None)
    metadata["name"] = launch.name
    own_namespace = metadata.get("namespace")
    if own_namespace and own_namespace != settings.namespace:
        # trainbot follows, logs and cancels its jobs in one namespace; one elsewhere would be lost to it.
        raise BadRequest(
            f"this RayJob is for namespace {own_namespace!r} but trainbot launches in {settings.namespace!r}: "
            f"remove metadata.namespace or set TRAINBOT_NAMESPACE={own_namespace}"
        )
    metadata["namespace"] = settings.namespace
    metadata["labels"] = _mapping(metadata, "labels", "metadata") | launch.labels
    spec = rayjob["spec"]
    _set_entrypoint(spec, launch)
    cluster = spec.get("rayClusterSpec") or None
    groups = (cluster or {}).get("workerGroupSpecs") or []
    for path, pod in _pod_templates(cluster, groups):
        pod_metadata = _mapping(pod, "metadata", path)
        pod_metadata["labels"] = _mapping(pod_metadata, "labels", f"{path}.metadata") | launch.labels
    _size_first_group(groups, launch, on_existing_cluster=cluster is None)
    return rayjob


def _set_entrypoint(spec: dict[str, Any], launch: Launch) -> None:
    mode = spec.get("submissionMode") or DEFAULT_SUBMISSION_MODE
    if mode == "InteractiveMode":
        ignored_because = "it is in InteractiveMode, where KubeRay submits nothing and runs no entrypoint"
    elif mode == DEFAULT_SUBMISSION_MODE and _submitter_has_command(spec):
        ignored_because = "its submitterPodTemplate runs its own command, so KubeRay ignores spec.entrypoint"
    else:
        ignored_because = ""
    if launch.argv and ignored_because:
        raise BadRequest(f"parameters cannot reach this RayJob: {ignored_because}; launch it without parameters")
    if launch.entrypoint:
        spec["entrypoint"] = launch.entrypoint


def _submitter_has_command(spec: dict[str, Any]) -> bool:
    """Whether the submitter's first container (KubeRay's submitter) has a command of its own."""
    template = spec.get("submitterPodTemplate")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    first = containers[0] if isinstance(containers, list) and containers else None
    return isinstance(first, dict) and bool(first.get("command"))


def _pod_templates(cluster: dict[str, Any] | None, groups: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    if cluster is None:
        return []
    head = _mapping(cluster, "headGroupSpec", "spec.rayClusterSpec")
    templates = [("spec.rayClusterSpec.headGroupSpec.template", _mapping(head, "template", "headGroupSpec"))]
    for index, group in enumerate(groups):
        path = f"spec.rayClusterSpec.workerGroupSpecs[{index}]"
        templates.append((f"{path}.template", _mapping(group, "template", path)))
    return templates


def _size_first_group(groups: list[dict[str, Any]], launch: Launch, *, on_existing_cluster: bool) -> None:
    """`launch.workers` replicas in the first worker group, its min/max widened to allow them."""
    if not groups:
        if launch.workers or launch.gpus_per_worker:
            runs_on = "an existing RayCluster (spec.clusterSelector)" if on_existing_cluster else "a head-only cluster"
            raise BadRequest(f"this RayJob runs on {runs_on}, which has no worker group to size; drop --workers/--gpus")
        return
    first, path = groups[0], "spec.rayClusterSpec.workerGroupSpecs[0]"
    first["replicas"] = launch.workers
    if "minReplicas" in first:
        first["minReplicas"] = min(first["minReplicas"], launch.workers)
    if "maxReplicas" in first:
        first["maxReplicas"] = max(first["maxReplicas"], launch.workers)
    if launch.gpus_per_worker:
        pod_spec = _mapping(first["template"], "spec", f"{path}.template")
        containers = pod_spec.get("containers")
        if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
            raise BadRequest(f"{path}.template.spec.containers must list the Ray container first")
        resources = _mapping(containers[0], "resources", f"{path}.template.spec.containers[0]")
        gpus = str(launch.gpus_per_worker)
        _mapping(resources, "limits", "resources")[GPU] = gpus
        # An extended resource's request must equal its limit; a request left at the old count would not.
        if GPU in (resources.get("requests") or {}):
            resources["requests"][GPU] = gpus


def _mapping(parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    """`parent[key]`, created empty when absent; a BadRequest naming the field when it is not a mapping."""
    value = parent.setdefault(key, {})
    if value is None:
        value = parent[key] = {}
    if not isinstance(value, dict):
        raise BadRequest(f"{path}.{key} must be a mapping, not {type(value).__name__}")
    return value
