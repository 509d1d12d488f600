"""The Kubernetes source: a RayJob, its RayCluster, their pods, the events about them, the pods' logs.

Objects are saved as the API server sent them (raw bodies, never the client's models), so the files are
what `kubectl get -o json` shows. Statuses: "k8s" for the objects and events, "logs" for the pod logs. A
refusal (403, 404) costs only what was refused: the rest is still collected and the status names it.

Requests, for P pods of C containers: the RayJob, the RayCluster, 1 to 3 pod lists, the namespace's
events in pages of EVENT_PAGE (at most MAX_EVENT_PAGES), and at most 2 logs per container (2 * P * C).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, UNREACHABLE, BundleWriter, error_status
from diagnosers.collect.collector import SourceUnavailable
from diagnosers.collect.deadline import Deadline, DeadlineExceeded
from diagnosers.collect.target import CollectConfig, Target

K8S, LOGS = "k8s", "logs"
RAY_GROUP, RAY_VERSION = "ray.io", "v1"
# KubeRay labels every pod of a RayCluster with the cluster's name.
CLUSTER_LABEL = "ray.io/cluster"
# The submitter K8s Job (K8sJobMode) is named after the RayJob; its pods carry the Job's name in the first
# label, and only in the second before Kubernetes 1.27.
SUBMITTER_JOB_LABELS = ("batch.kubernetes.io/job-name", "job-name")
EVENT_PAGE = 500
# Events live an hour (the API server's --event-ttl); this many pages hold a busy namespace's hour.
MAX_EVENT_PAGES = 20
LOG_CHUNK = 64 << 10
# The phrase each refused request adds to the status: RBAC's verb and resource.
RAYJOBS, RAYCLUSTERS, PODS, POD_LOGS, EVENTS = "rayjobs.ray.io", "rayclusters.ray.io", "pods", "pods/log", "events"
KINDS = {RAYJOBS: "RayJob", RAYCLUSTERS: "RayCluster"}


@dataclass
class _Failures:
    """What a source could not collect, as its bundle.json status."""

    namespace: str
    forbidden: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    def refused(self, error: ApiException, verb: str, resource: str, name: str) -> None:
        if error.status == 403:
            self.forbidden.append(f"`{verb}` on {resource}")
        else:
            self.other.append(_refusal(error, verb, resource, name, self.namespace))

    def status(self) -> str:
        parts = list(dict.fromkeys(self.other))
        if self.forbidden:
            needs = " and ".join(dict.fromkeys(self.forbidden))
            parts.insert(0, f"forbidden: trainbot's service account needs {needs} in {self.namespace}")
        return error_status("; ".join(parts)) if parts else OK


@dataclass
class _Kube:
    """The official client's APIs; every request is limited by the request timeout and the deadline."""

    config: CollectConfig
    namespace: str
    deadline: Deadline

    def __post_init__(self) -> None:
        client = _without_read_retries(self.config.kube_client)
        self.core = kubernetes.client.CoreV1Api(client)
        self.custom = kubernetes.client.CustomObjectsApi(client)

    def raw(self, request: Callable[..., Any], *args: Any, **kwargs: Any) -> urllib3.BaseHTTPResponse:
        """The response unread: bodies are kept as sent, and logs are streamed."""
        timeout = self.deadline.timeout(self.config.request_timeout_s)
        return request(*args, _preload_content=False, _request_timeout=timeout, **kwargs)

    def body(
        self, failures: _Failures, what: tuple[str, str, str], request: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> bytes | None:
        """The body of a request for (verb, resource, name), or None when the API server refused it.

        Connection errors and timeouts propagate: then the source is unreachable, not partly refused.
        """
        try:
            return self.raw(request, *args, **kwargs).data
        except ApiException as error:
            failures.refused(error, *what)
            return None

    def custom_object(self, failures: _Failures, plural: str, resource: str, name: str) -> bytes | None:
        get = self.custom.get_namespaced_custom_object
        return self.body(failures, ("get", resource, name), get, RAY_GROUP, RAY_VERSION, self.namespace, plural, name)


def _without_read_retries(client: kubernetes.client.ApiClient) -> kubernetes.client.ApiClient:
    """A client like `client` whose reads are not retried: urllib3 retries a timed-out GET 3 times by
    default, which would make a hanging API server cost 4 request timeouts instead of one."""
    configuration = copy.deepcopy(client.configuration)
    configuration.retries = urllib3.Retry(total=3, read=0, redirect=3)
    private = kubernetes.client.ApiClient(configuration)
    private.default_headers.update(client.default_headers)
    return private


class _Log(NamedTuple):
    pod: str
    container: str
    previous: bool

    @property
    def path(self) -> str:
        return f"logs/{self.pod}.{self.container}{'.previous' if self.previous else ''}.log"


def collect_kubernetes(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    if config.kube_client is None:
        writer.source(K8S, NOT_CONFIGURED)
        writer.source(LOGS, NOT_CONFIGURED)
        return
    kube = _Kube(config, target.namespace, deadline)
    objects, logs = _Failures(target.namespace), _Failures(target.namespace)
    try:
        pods = _collect_objects(kube, target, writer, objects)
        writer.source(K8S, objects.status())
        _collect_logs(kube, pods, writer, logs)
        writer.source(LOGS, logs.status())
    except urllib3.exceptions.HTTPError as error:
        status = f"{UNREACHABLE}: {config.kube_client.configuration.host}: {_reason(error)}"
        writer.source(LOGS, status)
        raise SourceUnavailable(status) from None
    except DeadlineExceeded:
        # The collector records "k8s" as unreachable; the logs were not reached at all.
        writer.source(LOGS, f"{UNREACHABLE}: the collection deadline passed before the pod logs were read")
        raise


def _collect_objects(kube: _Kube, target: Target, writer: BundleWriter, failures: _Failures) -> list[dict[str, Any]]:
    """Write the k8s/ files that could be read; return the pods, whose logs come next."""
    rayjob = kube.custom_object(failures, "rayjobs", RAYJOBS, target.rayjob)
    if rayjob is not None:
        writer.write_bytes("k8s/rayjob.json", rayjob)
    raycluster = target.raycluster or _cluster_name(rayjob)
    if raycluster and (cluster := kube.custom_object(failures, "rayclusters", RAYCLUSTERS, raycluster)) is not None:
        writer.write_bytes("k8s/raycluster.json", cluster)
    pods = _pods(kube, target.rayjob, raycluster, failures)
    if pods is not None:
        writer.write_json("k8s/pods.json", {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": pods})
    events = _events(kube, _about(target, raycluster, pods or []), failures)
    if events is not None:
        writer.write_json("k8s/events.json", {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": events})
    return pods or []


def _cluster_name(rayjob: bytes | None) -> str:
    status = json.loads(rayjob).get("status") if rayjob else None
    return str(status.get("rayClusterName") or "") if isinstance(status, dict) else ""


def _pods(kube: _Kube, rayjob: str, raycluster: str, failures: _Failures) -> list[dict[str, Any]] | None:
    """The RayCluster's pods and the submitter Job's, as one list; None when every list was refused."""
    listed = [_list_pods(kube, f"{CLUSTER_LABEL}={raycluster}", failures)] if raycluster else []
    for label in SUBMITTER_JOB_LABELS:
        listed.append(submitters := _list_pods(kube, f"{label}={rayjob}", failures))
        if submitters is None or submitters:  # refused (the next would be too) or found
            break
    if all(items is None for items in listed):
        return None
    by_name = {pod["metadata"]["name"]: pod for items in listed for pod in items or []}
    return list(by_name.values())


def _list_pods(kube: _Kube, selector: str, failures: _Failures) -> list[dict[str, Any]] | None:
    body = kube.body(
        failures, ("list", PODS, ""), kube.core.list_namespaced_pod, kube.namespace, label_selector=selector
    )
    return None if body is None else json.loads(body).get("items") or []


def _events(kube: _Kube, wanted: Callable[[dict[str, Any]], bool], failures: _Failures) -> list[dict[str, Any]] | None:
    """The namespace's events about the job, read in pages; None when the first page was refused.

    One list filtered here instead of a field selector per object: a constant number of requests, and the
    events of pods deleted since (KubeRay deletes a finished job's cluster, replaces crashed workers) stay.
    """
    kept: list[dict[str, Any]] = []
    token = None
    for _ in range(MAX_EVENT_PAGES):
        list_events = kube.core.list_namespaced_event
        body = kube.body(failures, ("list", EVENTS, ""), list_events, kube.namespace, limit=EVENT_PAGE, _continue=token)
        if body is None:
            return kept or None
        page = json.loads(body)
        kept += [event for event in page.get("items") or [] if wanted(event)]
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return kept
    failures.other.append(f"only the first {MAX_EVENT_PAGES * EVENT_PAGE} events of {kube.namespace} were read")
    return kept


def _about(target: Target, raycluster: str, pods: list[dict[str, Any]]) -> Callable[[dict[str, Any]], bool]:
    """Whether an event is about the RayJob, its submitter Job, its RayCluster or one of their pods."""
    objects = {("RayJob", target.rayjob), ("Job", target.rayjob), ("RayCluster", raycluster)}
    objects |= {("Pod", pod["metadata"]["name"]) for pod in pods}
    # Pods no longer listed: KubeRay names a RayJob's clusters <rayjob>-raycluster-<5>, their pods after the
    # cluster, and the submitter Job's pods <rayjob>-<5>.
    patterns = [re.escape(target.rayjob) + r"-(raycluster-.+|[a-z0-9]{5})"]
    if target.pod_regex or raycluster:
        patterns.append(target.pod_regex or re.escape(raycluster) + "-.+")
    pod_name = re.compile("|".join(f"(?:{pattern})" for pattern in patterns))

    def wanted(event: dict[str, Any]) -> bool:
        involved = event.get("involvedObject") or {}
        kind, name = involved.get("kind"), str(involved.get("name") or "")
        return (kind, name) in objects or (kind == "Pod" and pod_name.fullmatch(name) is not None)

    return wanted


def _collect_logs(kube: _Kube, pods: list[dict[str, Any]], writer: BundleWriter, failures: _Failures) -> None:
    # Previous containers' logs first: they hold the crash that restarted them, should the deadline come.
    wanted = sorted(_container_logs(pods), key=lambda log: not log.previous)
    for done, log in enumerate(wanted):
        try:
            text = _read_log(kube, log, failures)
        except DeadlineExceeded:
            failures.other.append(f"the collection deadline passed after {done} of {len(wanted)} container logs")
            return
        if text is not None:
            writer.write_bytes(log.path, text)


def _container_logs(pods: list[dict[str, Any]]) -> Iterator[_Log]:
    """Every container that has run: its log, and its previous instance's when it restarted.

    A container that never started (Pending, pulling its image) has no log: asking would only get a 400.
    """
    for pod in pods:
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            restarted = int(container.get("restartCount") or 0) > 0
            if restarted or {"running", "terminated"} & set(container.get("state") or {}):
                yield _Log(pod["metadata"]["name"], container["name"], False)
            if restarted:
                yield _Log(pod["metadata"]["name"], container["name"], True)


def _read_log(kube: _Kube, log: _Log, failures: _Failures) -> bytes | None:
    """The log's last log_max_bytes, read whole and cut here.

    limitBytes would keep the start, where the crash is not; tailLines cannot bound bytes. The kubelet
    serves only the current log file (10 MiB by default), so reading it whole stays bounded.
    """
    read = kube.core.read_namespaced_pod_log
    try:
        response = kube.raw(read, log.pod, kube.namespace, container=log.container, previous=log.previous)
    except ApiException as error:
        if error.status != 400:  # 400: no such log (not started yet, or no previous instance)
            failures.refused(error, "get", POD_LOGS, f"{log.pod}/{log.container}")
        return None
    try:
        return _tail(response.stream(LOG_CHUNK), kube.config.log_max_bytes, kube)
    finally:
        response.release_conn()


def _tail(chunks: Iterator[bytes], limit: int, kube: _Kube) -> bytes:
    """The last `limit` bytes, from a line start when cut; the deadline is checked between chunks."""
    kept = bytearray()
    cut = False
    for chunk in chunks:
        kube.deadline.timeout(kube.config.request_timeout_s)
        kept += chunk
        if len(kept) > 2 * limit:  # trim now and then, not on every chunk
            del kept[:-limit]
            cut = True
    if len(kept) > limit:
        del kept[:-limit]
        cut = True
    newline = kept.find(b"\n") if cut else -1
    return bytes(kept[newline + 1 :])


def _refusal(error: ApiException, verb: str, resource: str, name: str, namespace: str) -> str:
    """What a refused request (other than 403) means, for the status."""
    try:
        body = json.loads(error.body or "{}")
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    message = body.get("message") or error.reason or "no message"
    match error.status:
        case 404 if (body.get("details") or {}).get("name"):
            return f"no {KINDS.get(resource, resource)} {name} in {namespace}"
        case 404:
            return f"the API server does not serve {resource} (is its CRD installed?)"
        case 401:
            return "the API server did not accept trainbot's credentials (401 Unauthorized)"
        case _:
            return f"{verb} {resource} {name}: {error.status} {message}".replace("  ", " ")


def _reason(error: urllib3.exceptions.HTTPError) -> str:
    """The cause of a connection error, without urllib3's pool and URL around it."""
    cause = error.reason if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason else error
    return re.sub(r"^\w*(?:Pool)?\(host=[^)]*\):\s*", "", str(cause)).strip() or type(cause).__name__
