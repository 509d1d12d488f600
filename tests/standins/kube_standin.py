"""A Kubernetes API stand-in for the official client: kmock 0.8 over real HTTP, plus what it lacks.

kmock's KubernetesScaffold serves HTTP on 127.0.0.1, parses each request into verb, resource, namespace
and name, answers discovery, and keeps a request log that kmock's DSL filters in assertions
(`standin.api[kmock.action.CREATE]`). kmock's KubernetesEmulator is not used: it stores every create,
patch and delete before any reaction runs, so it can neither refuse a request nor dry-run one.
Instead the stand-in keeps objects in a kmock ObjectsArray (with their history) and adds:

- create answering 201 with uid, creationTimestamp, resourceVersion and generation; dryRun=All checks
  but stores nothing; 409 for a taken name, 404 for an unknown namespace, 422 with causes when the body
  breaks the RayJob CRD schema (defaults applied first, tests/standins/crd_schema.py) or the name rule of
  KubeRay's validating webhook (DNS-1035, at most 47 characters); 400 for unknown fields when the
  client asks for fieldValidation=Strict;
- get, list with labelSelector (=, ==, !=, exists, !exists) and paging (limit, continue), merge-patch,
  delete; Kubernetes-shaped 404s; RayClusters and events are served too, stored with `put`;
- watch from a resourceVersion (only later events), timeoutSeconds, labelSelector, and 410 Expired once
  `compact()` forgot the history a watch asks for;
- pod logs as text/plain with tailLines, per container, and the previous container's (previous=true);
- switches: `uninstall(resource)` answers 404 as when a CRD is absent, `forbid(verb, resource)` 403;
- `set_status(...)` writes a RayJob's status as the KubeRay operator does (the whole status at once).

The client is synchronous, so `ServedStandin` runs the asyncio side in a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import attrs
import kmock
import kubernetes

from tests.standins.crd_schema import load_schema, schema_problems, unknown_fields, with_defaults

T = TypeVar("T")
RAYJOBS = kmock.resource("ray.io", "v1", "rayjobs")
PODS = kmock.resource("", "v1", "pods")
RAYCLUSTERS = kmock.resource("ray.io", "v1", "rayclusters")
EVENTS = kmock.resource("", "v1", "events")
VERB_ACTIONS = {
    "create": kmock.action.CREATE,
    "get": kmock.action.FETCH,
    "list": kmock.action.LIST,
    "watch": kmock.action.WATCH,
    "patch": kmock.action.UPDATE,
    "delete": kmock.action.DELETE,
}
MERGE_PATCH = "application/merge-patch+json"
SERVICE_ACCOUNT = "system:serviceaccount:trainbot:trainbot"
# KubeRay's webhook rule (ValidateRayJobMetadata), written out here rather than imported from actions/
# so that the stand-in checks trainbot's names instead of agreeing with them.
RAYJOB_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_RAYJOB_NAME = 47
# The API server ends a watch that names no timeoutSeconds after 30 to 60 minutes.
DEFAULT_WATCH_S = 1800.0
SELECTOR_TERM = re.compile(r"\s*(?P<absent>!)?(?P<key>[\w./-]+)\s*(?:(?P<op>==|!=|=)\s*(?P<value>[\w.-]*))?\s*")
# How long a synchronous test waits for the stand-in's event loop to do what it asked.
LOOP_CALL_TIMEOUT_S = 10.0


def answer(code: int, payload: Any, content_type: str = "application/json") -> kmock.Response:
    """A response naming its status and content type: kmock keeps those a reaction last answered with."""
    return kmock.Response(status=code, payload=payload, headers={"Content-Type": content_type})


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> kmock.Response:
    """A response carrying a Kubernetes Status object, as the API server sends for every failure."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    return answer(code, body | {"reason": reason, "details": details or {}, "code": code})


@attrs.define(kw_only=True)
class KubeStandin(kmock.KubernetesScaffold):
    """The request handler: RayJobs (ray.io/v1) and pods, as much of the API server as trainbot meets."""

    # The kind whose CRD checks creates (crd_schema.RAYJOB); None checks only the webhook's name rule.
    crd: str | None = None
    namespaces: set[str] = attrs.field(factory=lambda: {"default"})
    objects: kmock.ObjectsArray = attrs.field(factory=kmock.ObjectsArray, init=False)
    pod_logs: dict[tuple[str, str], str] = attrs.field(factory=dict, init=False)
    # (namespace, pod, container, previous) -> log; a pod without one here answers pod_logs for any container.
    container_logs: dict[tuple[str, str, str, bool], str] = attrs.field(factory=dict, init=False)
    _revision: int = attrs.field(default=0, init=False)
    # (resourceVersion, event type, resource, object) for watches that resume from a resourceVersion.
    _events: list[tuple[int, str, kmock.resource, dict[str, Any]]] = attrs.field(factory=list, init=False)
    _oldest_watchable: int = attrs.field(default=0, init=False)
    _changed: asyncio.Condition = attrs.field(factory=asyncio.Condition, init=False)
    _closing: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.resources[RAYJOBS] = kmock.ResourceInfo(kind="RayJob", namespaced=True, subresources={"status"})
        self.resources[PODS] = kmock.ResourceInfo(kind="Pod", namespaced=True, subresources={"log"})
        self.resources[RAYCLUSTERS] = kmock.ResourceInfo(kind="RayCluster", namespaced=True, subresources={"status"})
        self.resources[EVENTS] = kmock.ResourceInfo(kind="Event", namespaced=True)
        # Fallbacks, so that a test's own reactions (and forbid) come first.
        self.fallback[kmock.action.CREATE] << self._create
        self.fallback[kmock.action.FETCH] << self._fetch
        self.fallback[kmock.action.LIST] << self._list
        self.fallback[kmock.action.WATCH] << self._watch
        self.fallback[kmock.action.UPDATE] << self._patch
        self.fallback[kmock.action.DELETE] << self._delete

    # Switches and operator-side writes (run them on the stand-in's loop: ServedStandin does).

    def forbid(self, verb: str, resource: kmock.resource) -> None:
        """Answer `verb` on `resource` with 403, as RBAC does for a service account without the rule."""

        def refuse(request: kmock.Request) -> kmock.Response:
            message = (
                f'{_qualified(resource)} is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} resource '
                f'"{resource.plural}" in API group "{resource.group}" in the namespace "{request.namespace}"'
            )
            return status_body(403, "Forbidden", message, {"group": resource.group, "kind": resource.plural})

        self[VERB_ACTIONS[verb], resource] << refuse

    def uninstall(self, resource: kmock.resource) -> None:
        """Serve `resource` no more: 404 for every request, as when its CRD is not installed."""
        del self.resources[resource]

    def compact(self) -> None:
        """Forget the event history so far, as etcd compaction does: older watches get 410 Expired."""
        self._events.clear()
        self._oldest_watchable = self._revision

    async def set_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Replace a RayJob's whole status, as the operator's status update does (absent fields vanish)."""
        stored = self.objects[RAYJOBS, namespace, name]
        changed = copy.deepcopy(stored.raw) | {"status": copy.deepcopy(status)}
        changed["metadata"]["resourceVersion"] = str(self._next_revision())
        stored.history.append(changed)
        await self._publish("MODIFIED", RAYJOBS, changed)

    async def add_pod(self, namespace: str, name: str, labels: dict[str, str], log: str, created: datetime) -> None:
        """A running pod with one container and its log, e.g. the submitter pod of a RayJob's K8s Job."""
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": _timestamp(created),
                "resourceVersion": str(self._next_revision()),
            },
            "spec": {"containers": [{"name": "ray-job-submitter", "image": "rayproject/ray:2.60.0"}]},
            "status": {"phase": "Running"},
        }
        self.objects[PODS, namespace, name] = pod
        self.pod_logs[namespace, name] = log
        await self._publish("ADDED", PODS, pod)

    async def put(self, resource: kmock.resource, obj: dict[str, Any]) -> None:
        """Store an object as its controller (or the kubelet, for events) would write it, whole."""
        stored = copy.deepcopy(obj)
        metadata = stored.setdefault("metadata", {})
        metadata.setdefault("namespace", "default")
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata["resourceVersion"] = str(self._next_revision())
        self._store(resource, metadata["namespace"], metadata["name"], stored)
        await self._publish("ADDED", resource, stored)

    async def close_watches(self) -> None:
        """End every open watch now, so that the server can stop without waiting for their timeouts."""
        self._closing = True
        async with self._changed:
            self._changed.notify_all()

    # The API.

    async def _create(self, request: kmock.Request) -> kmock.Response:
        resource, namespace = request.resource, str(request.namespace)
        if refusal := self._refusal(request):
            return refusal
        if namespace not in self.namespaces:  # only a create checks that its namespace exists
            return status_body(
                404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"}
            )
        if not isinstance(request.data, dict) or not isinstance(request.data.get("metadata", {}), dict):
            return status_body(400, "BadRequest", "the body of the request is not a Kubernetes object")
        created = copy.deepcopy(request.data)
        metadata = created.setdefault("metadata", {})
        name = metadata.get("name")
        if metadata.setdefault("namespace", namespace) != namespace:
            message = "the namespace of the provided object does not match the namespace sent on the request"
            return status_body(400, "BadRequest", message)
        if not name:
            return self._invalid(resource, "", [("metadata.name", "Required value: name or generateName is required")])
        if resource == RAYJOBS:
            created, refusal = self._admit(created, strict=request.params.get("fieldValidation") == "Strict")
            if refusal:
                return refusal
        if (resource, namespace, name) in self.objects and not self.objects[resource, namespace, name].deleted:
            message = f'{_qualified(resource)} "{name}" already exists'
            return status_body(409, "AlreadyExists", message, _details(resource, name))
        created.pop("status", None)  # the status subresource is the operator's, never the creator's
        server_set = {"uid": str(uuid.uuid4()), "creationTimestamp": _timestamp(datetime.now(UTC)), "generation": 1}
        created["metadata"] |= server_set
        if request.params.get("dryRun") == "All":
            return answer(201, created)
        created["metadata"]["resourceVersion"] = str(self._next_revision())
        self._store(resource, namespace, name, created)
        await self._publish("ADDED", resource, created)
        return answer(201, created)

    def _admit(self, rayjob: dict[str, Any], *, strict: bool) -> tuple[dict[str, Any], kmock.Response | None]:
        """The CRD schema (after its defaults) and KubeRay's webhook name rule, as the API server applies them."""
        name = str(rayjob["metadata"].get("name", ""))
        causes: list[tuple[str, str]] = []
        if len(name) > MAX_RAYJOB_NAME or not RAYJOB_NAME.fullmatch(name):
            rule = f"RayJob name should be a DNS-1035 label of no more than {MAX_RAYJOB_NAME} characters"
            causes.append(("metadata.name", f'Invalid value: "{name}": The RayJob metadata is invalid: {rule}'))
        if self.crd is not None:
            schema = load_schema(self.crd)
            if strict and (unknown := unknown_fields(schema, rayjob)):
                message = f"strict decoding error: {', '.join(f'unknown field {path!r}' for path in unknown)}"
                return rayjob, status_body(400, "BadRequest", message)
            rayjob = with_defaults(schema, rayjob)
            causes += [(problem.field, problem.message) for problem in schema_problems(schema, rayjob)]
        return rayjob, self._invalid(RAYJOBS, name, causes) if causes else None

    def _fetch(self, request: kmock.Request) -> kmock.Response:
        resource, namespace, name = request.resource, request.namespace, str(request.name)
        if refusal := self._refusal(request):
            return refusal
        stored = self.stored(resource, namespace, name)
        if stored is None:
            return self._not_found(resource, name)
        if request.subresource == "log":
            return self._pod_log(request, stored)
        return answer(200, stored.raw)

    def _pod_log(self, request: kmock.Request, pod: kmock.Object) -> kmock.Response:
        containers = [container["name"] for container in pod["spec"]["containers"]]
        container = request.params.get("container", containers[0])
        if container not in containers:
            message = f"container {container} is not valid for pod {request.name}"
            return status_body(400, "BadRequest", message)
        previous = request.params.get("previous") == "true"
        key = (str(request.namespace), str(request.name), container, previous)
        if key in self.container_logs:
            text = self.container_logs[key]
        elif previous:  # the API server's answer when the container never restarted
            message = f'previous terminated container "{container}" in pod "{request.name}" not found'
            return status_body(400, "BadRequest", message)
        else:
            text = self.pod_logs.get((str(request.namespace), str(request.name)), "")
        lines = text.splitlines(keepends=True)
        if "tailLines" in request.params:
            lines = lines[max(0, len(lines) - int(request.params["tailLines"])) :]
        return answer(200, "".join(lines).encode(), "text/plain")

    def _list(self, request: kmock.Request) -> kmock.Response:
        resource = request.resource
        if refusal := self._refusal(request):
            return refusal
        selector = parse_selector(request.params.get("labelSelector", ""))
        items = [
            stored.raw
            for (kind, namespace, _), stored in self.objects.items()
            if kind == resource and not stored.deleted and request.namespace in (None, namespace)
            if selector(stored.raw)
        ]
        # The continue token is an offset here; the API server's is opaque, which clients must not read anyway.
        start, limit = int(request.params.get("continue") or 0), int(request.params.get("limit") or 0)
        end = start + limit if limit else len(items)
        metadata = {"resourceVersion": str(self._revision)} | ({"continue": str(end)} if end < len(items) else {})
        listing = {
            "apiVersion": f"{resource.group}/{resource.version}".lstrip("/"),
            "kind": f"{self.resources[resource].kind}List",
            "metadata": metadata,
            "items": items[start:end],
        }
        return answer(200, listing)

    def _watch(self, request: kmock.Request) -> kmock.Response:
        return self._refusal(request) or answer(200, self._events_for(request))

    async def _events_for(self, request: kmock.Request) -> AsyncIterator[Any]:
        yield b""  # the headers now: the client's watch has started even when nothing happens
        selector = parse_selector(request.params.get("labelSelector", ""))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(request.params.get("timeoutSeconds") or DEFAULT_WATCH_S)
        since = int(request.params.get("resourceVersion") or 0)

        def wanted(resource: kmock.resource, obj: dict[str, Any]) -> bool:
            in_namespace = request.namespace in (None, obj["metadata"].get("namespace"))
            return resource == request.resource and in_namespace and selector is not None and selector(obj)

        if since and since < self._oldest_watchable:
            message = f"too old resource version: {since} ({self._oldest_watchable})"
            yield {"type": "ERROR", "object": status_body(410, "Expired", message).payload}
            return
        if not since:  # no resourceVersion: the current objects first, as synthetic ADDED events
            since = self._revision
            for (resource, _, _), stored in list(self.objects.items()):
                if not stored.deleted and wanted(resource, stored.raw):
                    yield {"type": "ADDED", "object": stored.raw}
        while not self._closing:
            for revision, event_type, resource, obj in [event for event in self._events if event[0] > since]:
                since = revision
                if wanted(resource, obj):
                    yield {"type": event_type, "object": obj}
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), deadline - loop.time())
                except TimeoutError:
                    return

    async def _patch(self, request: kmock.Request) -> kmock.Response:
        resource, namespace, name = request.resource, request.namespace, str(request.name)
        if refusal := self._refusal(request):
            return refusal
        if request.headers.get("Content-Type", "").split(";")[0] != MERGE_PATCH:
            message = f"the stand-in accepts {MERGE_PATCH} only, not {request.headers.get('Content-Type')}"
            return status_body(415, "UnsupportedMediaType", message)
        stored = self.stored(resource, namespace, name)
        if stored is None:
            return self._not_found(resource, name)
        changes = {key: value for key, value in request.data.items() if key != "status"}  # status: operator's
        metadata = {**(changes.get("metadata") or {}), "resourceVersion": str(self._next_revision())}
        if "spec" in changes:
            metadata["generation"] = stored.raw["metadata"].get("generation", 1) + 1
        stored.patch({**changes, "metadata": metadata})
        await self._publish("MODIFIED", resource, stored.raw)
        return answer(200, stored.raw)

    async def _delete(self, request: kmock.Request) -> kmock.Response:
        resource, namespace, name = request.resource, request.namespace, str(request.name)
        if refusal := self._refusal(request):
            return refusal
        stored = self.stored(resource, namespace, name)
        if stored is None:
            return self._not_found(resource, name)
        last = copy.deepcopy(stored.raw)
        last["metadata"]["resourceVersion"] = str(self._next_revision())
        stored.delete()
        await self._publish("DELETED", resource, last)
        return answer(200, last)

    # Bookkeeping.

    def _refusal(self, request: kmock.Request) -> kmock.Response | None:
        """404 for a resource not served (as for an absent CRD), 400 for a label selector the stand-in cannot read."""
        if request.resource is None or request.resource not in self.resources:
            return status_body(404, "NotFound", "the server could not find the requested resource")
        if parse_selector(request.params.get("labelSelector", "")) is None:
            message = f"unable to parse requirement: {request.params['labelSelector']!r}"
            return status_body(400, "BadRequest", message)
        return None

    def stored(self, resource: kmock.resource, namespace: str | None, name: str) -> kmock.Object | None:
        """The object as stored now, or None when there is none (never created, or deleted)."""
        key = (resource, namespace, name)
        return self.objects[key] if key in self.objects and not self.objects[key].deleted else None

    def _store(self, resource: kmock.resource, namespace: str, name: str, obj: dict[str, Any]) -> None:
        if (resource, namespace, name) in self.objects:  # deleted before: the same history goes on
            self.objects[resource, namespace, name].create(copy.deepcopy(obj))
        else:
            self.objects[resource, namespace, name] = copy.deepcopy(obj)

    @staticmethod
    def _not_found(resource: kmock.resource, name: str) -> kmock.Response:
        return status_body(404, "NotFound", f'{_qualified(resource)} "{name}" not found', _details(resource, name))

    def _invalid(self, resource: kmock.resource, name: str, causes: list[tuple[str, str]]) -> kmock.Response:
        kind = f"{self.resources[resource].kind}.{resource.group}".rstrip(".")
        message = f'{kind} "{name}" is invalid: [' + ", ".join(f"{field}: {text}" for field, text in causes) + "]"
        details = _details(resource, name) | {
            "causes": [{"reason": "FieldValueInvalid", "message": text, "field": field} for field, text in causes]
        }
        return status_body(422, "Invalid", message, details)

    def _next_revision(self) -> int:
        self._revision += 1
        return self._revision

    async def _publish(self, event_type: str, resource: kmock.resource, obj: dict[str, Any]) -> None:
        """Record the event for watches (in resourceVersion order) and wake the ones waiting."""
        self._events.append((int(obj["metadata"]["resourceVersion"]), event_type, resource, copy.deepcopy(obj)))
        async with self._changed:
            self._changed.notify_all()


def parse_selector(text: str) -> Callable[[dict[str, Any]], bool] | None:
    """A label selector's equality and existence terms as a test of an object; None if it is not one."""
    terms = []
    for part in filter(None, text.split(",")):
        term = SELECTOR_TERM.fullmatch(part)
        if term is None or (term["absent"] and term["op"]):
            return None
        terms.append((term["key"], term["op"], term["value"], bool(term["absent"])))

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        for key, op, value, absent in terms:
            if op is None and (key in labels) == absent:
                return False
            if op in ("=", "==") and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
        return True

    return matches


def _qualified(resource: kmock.resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else str(resource.plural)


def _details(resource: kmock.resource, name: str) -> dict[str, Any]:
    return {"name": name, "group": resource.group, "kind": resource.plural}


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ServedStandin:
    """The stand-in on 127.0.0.1, its asyncio side in a thread of its own, for synchronous tests and clients."""

    crd: str | None = None
    api: KubeStandin = field(init=False)
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kube-standin", daemon=True)
        self._servers = contextlib.AsyncExitStack()

    def __enter__(self) -> Self:
        self._thread.start()
        self.api, self.url = self.run(self._start())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.run(self.api.close_watches())
        self.run(self._servers.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    async def _start(self) -> tuple[KubeStandin, str]:
        api = await self._servers.enter_async_context(KubeStandin(crd=self.crd))
        server = await self._servers.enter_async_context(kmock.Server(api))
        return api, str(server.url).rstrip("/")

    def run(self, work: Awaitable[T]) -> T:
        """Run a coroutine on the stand-in's loop and wait for its result."""

        async def awaited() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(awaited(), self._loop).result(LOOP_CALL_TIMEOUT_S)

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the stand-in's loop (where its state lives) and return its result."""

        async def called() -> T:
            return function(*args)

        return self.run(called())

    def api_client(self) -> kubernetes.client.ApiClient:
        """An official client pointed at the stand-in."""
        return kubernetes.client.ApiClient(kubernetes.client.Configuration(host=self.url))

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig at `path` whose current context is the stand-in (namespace default), for a client that
        finds its cluster as trainbot does."""
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters: [{{name: standin, cluster: {{server: "{self.url}"}}}}]
users: [{{name: standin, user: {{token: t0ken}}}}]
contexts: [{{name: standin, context: {{cluster: standin, user: standin, namespace: default}}}}]
current-context: standin
"""
        )
        return path

    def set_status(self, name: str, status: dict[str, Any], namespace: str = "default") -> None:
        self.run(self.api.set_status(namespace, name, status))

    def add_pod(
        self, name: str, labels: dict[str, str], log: str, created: datetime, namespace: str = "default"
    ) -> None:
        self.run(self.api.add_pod(namespace, name, labels, log, created))

    def put(self, resource: kmock.resource, obj: dict[str, Any]) -> None:
        self.run(self.api.put(resource, obj))

    def set_log(self, pod: str, container: str, text: str, previous: bool = False, namespace: str = "default") -> None:
        """The log of one container of a pod, or of its previous (restarted) instance."""
        self.call(self.api.container_logs.__setitem__, (namespace, pod, container, previous), text)

    def rayjob(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        """A copy of the stored RayJob now, or None when there is none."""

        def read() -> dict[str, Any] | None:
            stored = self.api.stored(RAYJOBS, namespace, name)
            return None if stored is None else copy.deepcopy(stored.raw)

        return self.call(read)

    def serve_dashboard(self, job_logs: dict[str, str], jobs: list[dict[str, Any]] | None = None) -> str:
        """A Ray dashboard answering GET /api/jobs/<id>/logs, and with `jobs` the jobs list, an empty node
        summary and task list too; its address as KubeRay writes it (no scheme)."""

        async def start() -> str:
            dashboard = await self._servers.enter_async_context(kmock.RawHandler())
            for job_id, text in job_logs.items():
                dashboard[f"get /api/jobs/{job_id}/logs"] << {"logs": text}
            if jobs is not None:
                dashboard["get /api/jobs/"] << jobs
                dashboard["get /nodes"] << {"result": True, "data": {"summary": []}}
                dashboard["get /api/v0/tasks"] << {"result": True, "data": {"result": {"result": []}}}
            dashboard.fallback << 404 << b"Job does not exist"
            server = await self._servers.enter_async_context(kmock.Server(dashboard))
            return f"{server.host}:{server.port}"

        return self.run(start())
