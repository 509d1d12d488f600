"""The KubeRay backend: RayJobs (ray.io/v1) through the official Kubernetes client.

Every request carries its own timeout, and every API error a person can act on becomes one of
actions.errors with what to do. A job is addressed by its name in the configured namespace, or as
`namespace/name` (a team's manifest may name a namespace of its own).
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from actions.errors import ActionError, BadRequest, Conflict, Forbidden, NotFound, Unavailable
from actions.jobs.backends import KUBERAY
from actions.jobs.backends.rayjob import DEFAULT_SUBMISSION_MODE, apply_launch, build_rayjob
from actions.jobs.job import MANAGED_BY, MANAGER, JobState, JobStatus, Launch, log_tail
from actions.service_failure import failure_reason
from actions.settings import Settings

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"
RAYJOBS = f"{PLURAL}.{GROUP}"
TRAINBOT_JOBS = f"{MANAGED_BY}={MANAGER}"
# urllib3's default retries a timed-out read 3 times: 4 read timeouts before anyone hears of a hanging API
# server. Refused connections are tried once more; an answer (429, 5xx) is the API server's to give.
API_RETRIES = urllib3.Retry(total=None, connect=1, read=0, status=0, other=0, redirect=3, backoff_factor=0.5)
# A watch with no deadline is renewed this often; the server ends it then (timeoutSeconds).
WATCH_WINDOW_S = 300.0
DASHBOARD_TIMEOUT_S = 10.0
# The submitter K8s Job is named after the RayJob; its pods carry the Job's name in these labels
# (the second for Kubernetes before 1.27).
SUBMITTER_JOB_LABELS = ("batch.kubernetes.io/job-name", "job-name")
RAY_STATES = {state.value: state for state in JobState}
# KubeRay is tearing the attempt down (Retrying, Suspending) or holds it (Suspended): another may follow,
# and the jobStatus shown, even FAILED, is the old attempt's.
PAUSED_DEPLOYMENTS = frozenset({"Retrying", "Suspending", "Suspended"})
# KubeRay gave up on the RayJob (a failed submission, a deadline, an invalid spec) whatever Ray said.
FAILED_DEPLOYMENTS = frozenset({"Failed", "ValidationFailed"})
DELETED_MESSAGE = "deleted before it finished"


class KubeRayBackend:
    name = KUBERAY

    def __init__(self, settings: Settings, api_client: kubernetes.client.ApiClient | None = None) -> None:
        """`api_client` is for tests; without it the cluster's credentials are found on first use."""
        self._settings = settings
        self._api_client = api_client
        # (connect, read) seconds for each API request.
        self._timeout = (settings.connect_timeout_s, settings.read_timeout_s)

    def render(self, launch: Launch) -> dict[str, Any]:
        if launch.manifest is not None:
            return apply_launch(launch.manifest, launch, self._settings)
        return build_rayjob(launch, self._settings)

    def submit(self, launch: Launch) -> JobStatus:
        rayjob = self.render(launch)
        namespace = rayjob["metadata"]["namespace"]
        api = kubernetes.client.CustomObjectsApi(self.api_client())
        with self._answering("create", RAYJOBS, namespace, launch.name):
            # The cluster's own CRD and admission judge the RayJob first, with nothing created. Strict:
            # a field the CRD does not know (a typo in a team's manifest) is refused, not dropped.
            for dry_run in ("All", None):
                created = api.create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    rayjob,
                    dry_run=dry_run,
                    field_validation="Strict",
                    _request_timeout=self._timeout,
                )
        return status_of(created)

    def status(self, name: str) -> JobStatus:
        return status_of(self._rayjob(*self._address(name)))

    def logs(self, name: str, tail: int | None = None) -> str:
        """The submitter pod's log (K8sJobMode), else the Ray dashboard's log of the job."""
        namespace, name = self._address(name)
        rayjob = self._rayjob(namespace, name)
        status = status_of(rayjob)
        if rayjob["spec"].get("submissionMode", DEFAULT_SUBMISSION_MODE) == DEFAULT_SUBMISSION_MODE:
            pod = self._submitter_pod(namespace, name)
            if pod is not None:
                return self._pod_log(namespace, pod, tail)
        if status.dashboard_url and status.submission_id:
            return dashboard_log(status.dashboard_url, status.submission_id, tail)
        raise NotFound(
            f"RayJob {name} has no logs yet: no submitter pod and no Ray dashboard in its status "
            f"(deployment status {status.deployment_status or 'New'}); try again once it is Running"
        )

    def capacity(self) -> None:
        """Unknown: each RayJob brings its own RayCluster, which the Kubernetes scheduler (and any queue, such as
        Kueue, or autoscaler) places or holds; nothing here can say whether several fit at once."""

    def cancel(self, name: str, suspend: bool = False) -> JobStatus:
        """Delete the RayJob (KubeRay then deletes its cluster), or with `suspend` only its cluster.

        A suspended RayJob stays, PENDING, until spec.suspend is set back to false.
        """
        namespace, name = self._address(name)
        api = kubernetes.client.CustomObjectsApi(self.api_client())
        if not suspend:
            with self._answering("delete", RAYJOBS, namespace, name):
                last = api.delete_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    propagation_policy="Background",
                    _request_timeout=self._timeout,
                )
            return deleted(status_of(last))
        spec = self._rayjob(namespace, name)["spec"]
        # KubeRay marks such a RayJob ValidationFailed instead of suspending it.
        if spec.get("clusterSelector") or not spec.get("shutdownAfterJobFinishes"):
            raise BadRequest(
                f"KubeRay cannot suspend RayJob {name}: it runs on an existing cluster or keeps its cluster "
                "after it finishes (shutdownAfterJobFinishes is not true); cancel it without suspend to delete it"
            )
        with self._answering("patch", RAYJOBS, namespace, name):
            patched = api.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                {"spec": {"suspend": True}},
                _request_timeout=self._timeout,
            )
        return status_of(patched)

    def observe(self, timeout_s: float | None = None) -> Iterator[JobStatus]:
        """Every RayJob trainbot launched in the namespace, then each change, until `timeout_s` passes.

        A deleted RayJob yields its last status, through `deleted`: STOPPED ("deleted before it
        finished") unless it had already finished. When the API server no longer has the history to
        resume from (410 Gone), the RayJobs are listed again and what changed meanwhile is yielded.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last_seen: dict[str, JobStatus] = {}
        resource_version = yield from self._relisted(last_seen)
        while (window_s := _window(deadline)) > 0:
            try:
                for event_type, rayjob in self._watched(resource_version, window_s):
                    resource_version = rayjob["metadata"]["resourceVersion"]
                    status = status_of(rayjob)
                    if event_type == "DELETED":
                        last_seen.pop(status.name, None)
                        yield deleted(status)
                    else:
                        last_seen[status.name] = status
                        yield status
                    if _window(deadline) <= 0:
                        return
            except _HistoryGone:
                resource_version = yield from self._relisted(last_seen)

    def _relisted(self, last_seen: dict[str, JobStatus]) -> Generator[JobStatus, None, str]:
        """List trainbot's RayJobs, yield what differs from `last_seen`, and return the list's resourceVersion."""
        namespace = self._settings.namespace
        api = kubernetes.client.CustomObjectsApi(self.api_client())
        with self._answering("list", RAYJOBS, namespace):
            listing = api.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector=TRAINBOT_JOBS, _request_timeout=self._timeout
            )
        current = {status.name: status for status in map(status_of, listing["items"])}
        for name in sorted(last_seen.keys() - current.keys()):
            yield deleted(last_seen.pop(name))
        for name, status in current.items():
            if last_seen.get(name) != status:
                last_seen[name] = status
                yield status
        return listing["metadata"]["resourceVersion"]

    def _watched(self, resource_version: str, window_s: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, RayJob) after `resource_version`, for at most `window_s` seconds."""
        namespace = self._settings.namespace
        api = kubernetes.client.CustomObjectsApi(self.api_client())
        watch = kubernetes.watch.Watch()
        events = watch.stream(
            api.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            label_selector=TRAINBOT_JOBS,
            resource_version=resource_version,
            timeout_seconds=max(1, math.ceil(window_s)),
            _request_timeout=(self._timeout[0], window_s),
        )
        with self._answering("watch", RAYJOBS, namespace):
            try:
                for event in events:
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        yield event["type"], event["raw_object"]
            except urllib3.exceptions.ReadTimeoutError:
                return  # nothing happened before the window closed
            finally:
                watch.stop()

    def _rayjob(self, namespace: str, name: str) -> dict[str, Any]:
        api = kubernetes.client.CustomObjectsApi(self.api_client())
        with self._answering("get", RAYJOBS, namespace, name):
            return api.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self._timeout
            )

    def _submitter_pod(self, namespace: str, job_name: str) -> kubernetes.client.V1Pod | None:
        """The newest pod of the submitter K8s Job, if it has one yet."""
        core = kubernetes.client.CoreV1Api(self.api_client())
        for label in SUBMITTER_JOB_LABELS:
            with self._answering("list", "pods", namespace):
                pods = core.list_namespaced_pod(
                    namespace, label_selector=f"{label}={job_name}", _request_timeout=self._timeout
                ).items
            if pods:
                return max(pods, key=lambda pod: pod.metadata.creation_timestamp)
        return None

    def _pod_log(self, namespace: str, pod: kubernetes.client.V1Pod, tail: int | None) -> str:
        core = kubernetes.client.CoreV1Api(self.api_client())
        with self._answering("get", "pods/log", namespace, pod.metadata.name):
            return core.read_namespaced_pod_log(
                pod.metadata.name,
                namespace,
                container=pod.spec.containers[0].name,
                tail_lines=tail,
                _request_timeout=self._timeout,
            )

    def _address(self, name: str) -> tuple[str, str]:
        namespace, _, job = name.rpartition("/")
        return namespace or self._settings.namespace, job

    def api_client(self) -> kubernetes.client.ApiClient:
        """The Kubernetes client this backend (and collection for its jobs) talks through."""
        if self._api_client is None:
            self._api_client = connect(self._settings.kube_context)
        return self._api_client

    @contextmanager
    def _answering(self, verb: str, resource: str, namespace: str, name: str = "") -> Iterator[None]:
        """Turn what the API server (or the way to it) answered into an ActionError saying what to do."""
        try:
            yield
        except ApiException as error:
            if error.status == 410 and verb == "watch":
                raise _HistoryGone from None
            raise api_error(error, verb, resource, namespace, name, self.api_client().configuration.host) from None
        except urllib3.exceptions.HTTPError as error:
            raise Unavailable(
                f"cannot reach the Kubernetes API server at {self.api_client().configuration.host} "
                f"({failure_reason(error, self._timeout[1])}); check that the cluster is up and "
                "TRAINBOT_KUBE_CONTEXT names it"
            ) from None


class _HistoryGone(Exception):
    """410 Gone: the resourceVersion a watch resumes from is older than the API server's history."""


def connect(context: str | None) -> kubernetes.client.ApiClient:
    """A client with the named kubeconfig context; without one, in-cluster credentials, then ~/.kube/config.

    A named context wins over in-cluster credentials: naming one is a choice.
    """
    configuration = kubernetes.client.Configuration()
    configuration.retries = API_RETRIES
    try:
        if context is None:
            try:
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(client_configuration=configuration)
        else:
            kubernetes.config.load_kube_config(context=context, client_configuration=configuration)
    except (kubernetes.config.ConfigException, OSError) as error:
        raise Unavailable(
            f"no Kubernetes credentials ({error}); run trainbot in the cluster with a service account, "
            "or give it a kubeconfig (~/.kube/config, and TRAINBOT_KUBE_CONTEXT to pick a context)"
        ) from None
    return kubernetes.client.ApiClient(configuration)


def api_error(error: ApiException, verb: str, resource: str, namespace: str, name: str, host: str) -> ActionError:
    """The ActionError for an API server's refusal of `verb` on `resource` (its Status body read when present)."""
    try:
        body = json.loads(error.body or "{}")
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    message = body.get("message") or error.reason or "no message"
    details = body.get("details") or {}
    match error.status:
        case 400 if resource == "pods/log":
            return NotFound(f"the submitter pod {name} has no log to show yet ({message}); try again shortly")
        case 400:
            return BadRequest(f"the Kubernetes API server refused to {verb} {resource} {name}: {message}")
        case 401:
            return Unavailable(
                f"the Kubernetes API server at {host} did not accept trainbot's credentials (401 Unauthorized): "
                "renew the kubeconfig token or the service account token"
            )
        case 403:
            return Forbidden(
                f"trainbot's Kubernetes identity may not {verb} {resource} in namespace {namespace}: "
                f"grant it with a Role rule (verbs [{verb}] on {resource}). The API server said: {message}"
            )
        case 404 if details.get("kind") == "namespaces":
            return NotFound(f"namespace {namespace} does not exist in the cluster: create it or set TRAINBOT_NAMESPACE")
        case 404 if resource == RAYJOBS and not details.get("name"):
            return Unavailable(
                f"the RayJob CRD ({GROUP}/{VERSION}) is not installed in the cluster at {host}: "
                "install the KubeRay operator 1.7"
            )
        case 404 if resource == RAYJOBS:
            return NotFound(f"no RayJob {name} in namespace {namespace}")
        case 404:
            return NotFound(f"{resource} {name} in namespace {namespace} is gone ({message}); try again")
        case 409:
            return Conflict(
                f"a RayJob named {name} already exists in namespace {namespace}: launch again for a new name"
            )
        case 422:
            causes = "; ".join(f"{cause.get('field')}: {cause.get('message')}" for cause in details.get("causes", []))
            return BadRequest(f"the cluster refused RayJob {name}: {causes or message}")
        case _:
            return Unavailable(
                f"the Kubernetes API server at {host} answered {error.status} {error.reason} to {verb} {resource}: "
                f"{message}; try again later"
            )


def status_of(rayjob: dict[str, Any]) -> JobStatus:
    """A RayJob's status as KubeRay 1.7 writes it (see ray-operator/apis/ray/v1/rayjob_types.go)."""
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or ""
    return JobStatus(
        name=rayjob["metadata"]["name"],
        state=job_state(status.get("jobStatus") or "", deployment),
        message=status.get("message") or "",
        reason=status.get("reason") or "",
        deployment_status=deployment,
        dashboard_url=status.get("dashboardURL") or "",
        cluster_name=status.get("rayClusterName") or "",
        submission_id=status.get("jobId") or "",
        start_time=_parse_time(status.get("startTime")),
        end_time=_parse_time(status.get("endTime")),
    )


def job_state(job_status: str, deployment_status: str) -> JobState:
    """One state from Ray's jobStatus and KubeRay's jobDeploymentStatus ("" is a job not yet submitted)."""
    if deployment_status in PAUSED_DEPLOYMENTS:
        return JobState.PENDING
    state = RAY_STATES.get(job_status, JobState.PENDING)
    if not state.terminal and deployment_status in FAILED_DEPLOYMENTS:
        return JobState.FAILED
    return state


def deleted(status: JobStatus) -> JobStatus:
    """The status a deleted RayJob leaves: its own if it had finished, else STOPPED, as a stopped Ray job."""
    return status if status.state.terminal else replace(status, state=JobState.STOPPED, message=DELETED_MESSAGE)


def dashboard_log(dashboard: str, job_id: str, tail: int | None) -> str:
    """A job's log from the Ray dashboard (GET /api/jobs/<id>/logs); KubeRay writes its address without scheme."""
    base = dashboard if "://" in dashboard else f"http://{dashboard}"
    url = f"{base.rstrip('/')}/api/jobs/{urllib.parse.quote(job_id, safe='')}/logs"
    try:
        with urllib.request.urlopen(url, timeout=DASHBOARD_TIMEOUT_S) as response:
            text = str(json.load(response).get("logs", ""))
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise NotFound(f"the Ray dashboard at {base} knows no job {job_id}") from None
        raise Unavailable(f"the Ray dashboard at {base} answered {error.code} for the logs of {job_id}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise Unavailable(
            f"cannot read the logs of {job_id} from the Ray dashboard at {base} ({error}); "
            "trainbot reaches it only from inside the cluster"
        ) from None
    return log_tail(text, tail)


def _parse_time(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _window(deadline: float | None) -> float:
    """Seconds to watch for now: what is left before the deadline, or a renewal window without one."""
    return WATCH_WINDOW_S if deadline is None else deadline - time.monotonic()
