"""The KubeRay backend against the Kubernetes API stand-in (tests/standins/kube_standin.py) over real HTTP: what it
sends, how it reads operator-written statuses, and the typed errors a person gets when the cluster says no."""

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import kmock
import kubernetes
import pytest

from actions.errors import BadRequest, Conflict, Forbidden, NotFound, Unavailable
from actions.jobs.backends.kuberay import DELETED_MESSAGE, KubeRayBackend
from actions.jobs.job import JobState
from actions.settings import Settings
from tests.builders.kuberay_launches import RUNNING, TEAM_MANIFEST, launch_of, team_launch
from tests.standins.crd_schema import RAYJOB, find_crd, missing_reason
from tests.standins.kube_standin import RAYJOBS, ServedStandin

NAMESPACE = "default"


@pytest.fixture
def standin():
    # Without the CRD the stand-in checks names only; tests of schema refusals skip then.
    with ServedStandin(crd=RAYJOB if find_crd(RAYJOB) else None) as served:
        yield served


@pytest.fixture
def kuberay_settings(tmp_path) -> Settings:
    """KubeRay's namespace and a finished RayJob's time to live; nothing else set."""
    return Settings(data_dir=tmp_path, namespace=NAMESPACE, ttl_seconds_after_finished=600)


@pytest.fixture
def backend(standin, kuberay_settings) -> KubeRayBackend:
    return KubeRayBackend(kuberay_settings, standin.api_client())


def creates(standin) -> list[kmock.Request]:
    return list(standin.api[kmock.action.CREATE])


# Submitting.


def test_submit_dry_runs_the_rayjob_then_creates_it(standin, backend):
    launch = launch_of(workers=4, gpus=1)
    status = backend.submit(launch)
    assert (status.name, status.state, status.deployment_status) == (launch.name, JobState.PENDING, "")
    assert [request.params.get("dryRun") for request in creates(standin)] == ["All", None]
    assert all(request.params["fieldValidation"] == "Strict" for request in creates(standin))
    assert [request.data for request in creates(standin)] == [backend.render(launch)] * 2
    stored = standin.rayjob(launch.name)
    assert stored["metadata"]["uid"] and stored["metadata"]["resourceVersion"]
    assert stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 4


def test_a_refused_dry_run_creates_nothing(standin, backend):
    launch = replace(launch_of(), name="Not_A_DNS_1035_Name")
    with pytest.raises(BadRequest):
        backend.submit(launch)
    assert [request.params.get("dryRun") for request in creates(standin)] == ["All"]
    assert standin.rayjob(launch.name) is None


def test_a_team_manifest_is_created_with_its_own_spec(standin, backend):
    launch = team_launch(argv=["--epochs", "3"])
    backend.submit(launch)
    stored = standin.rayjob(launch.name)
    assert stored["metadata"]["labels"]["team"] == "vision"
    assert stored["spec"]["submissionMode"] == "HTTPMode"
    assert stored["spec"]["entrypoint"] == "python train.py --epochs 3"


def test_a_taken_name_is_a_conflict(backend):
    launch = launch_of()
    backend.submit(launch)
    with pytest.raises(Conflict, match=f"a RayJob named {launch.name} already exists in namespace default"):
        backend.submit(launch)


def test_a_missing_crd_says_to_install_kuberay(standin, backend):
    standin.call(standin.api.uninstall, RAYJOBS)
    with pytest.raises(Unavailable, match=r"RayJob CRD \(ray.io/v1\) is not installed .* install the KubeRay operator"):
        backend.submit(launch_of())
    with pytest.raises(Unavailable, match="not installed"):
        backend.status("tiny-transformer-abc123")


def test_a_missing_namespace_is_named(standin):
    backend = KubeRayBackend(Settings(namespace="team-x"), standin.api_client())
    with pytest.raises(
        NotFound, match="namespace team-x does not exist in the cluster: create it or set TRAINBOT_NAMESPACE"
    ):
        backend.submit(launch_of())


def test_a_name_against_kuberays_rule_is_refused_with_its_cause(backend):
    launch = replace(launch_of(), name="a" * 48)
    with pytest.raises(BadRequest, match=r"refused RayJob a{48}: metadata.name: .*no more than 47 characters"):
        backend.submit(launch)


def test_a_manifest_the_crd_refuses_is_a_bad_request_quoting_the_field(standin, backend):
    if standin.crd is None:
        pytest.skip(missing_reason(RAYJOB))
    wrong_port = TEAM_MANIFEST.replace("name: ray-head,", "name: ray-head, ports: [{containerPort: http}],")
    with pytest.raises(BadRequest, match=r"headGroupSpec.template.spec.containers\[0\].ports\[0\].containerPort: "):
        backend.submit(team_launch(wrong_port))
    misspelt = TEAM_MANIFEST.replace("maxReplicas: 2", "maxReplicas: 2\n        replica: 3")
    with pytest.raises(BadRequest, match=r"unknown field 'spec.rayClusterSpec.workerGroupSpecs\[0\].replica'"):
        backend.submit(team_launch(misspelt))


def test_forbidden_names_the_verb_resource_and_namespace(standin, backend):
    standin.call(standin.api.forbid, "create", RAYJOBS)
    with pytest.raises(Forbidden, match=r"may not create rayjobs.ray.io in namespace default: grant it with a Role"):
        backend.submit(launch_of())
    assert standin.call(lambda: len(standin.api.objects)) == 0


def test_rejected_credentials_are_unavailable(standin, backend):
    unauthorized = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized", "code": 401}
    standin.call(lambda: standin.api.override << 401 << unauthorized)
    with pytest.raises(Unavailable, match=r"did not accept trainbot's credentials \(401 Unauthorized\)"):
        backend.status("any-job")


def test_an_unreachable_api_server_is_unavailable(kuberay_settings):
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host="http://127.0.0.1:9"))
    with pytest.raises(Unavailable, match=r"cannot reach the Kubernetes API server at http://127.0.0.1:9"):
        KubeRayBackend(kuberay_settings, client).status("any-job")


def test_no_credentials_at_all_is_unavailable(kuberay_settings, tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "none"))
    with pytest.raises(Unavailable, match=r"no Kubernetes credentials .* give it a kubeconfig"):
        KubeRayBackend(kuberay_settings).status("any-job")


# Reading what the operator wrote.


@pytest.mark.parametrize(
    ("written", "state"),
    [
        ({}, JobState.PENDING),
        ({"jobStatus": "", "jobDeploymentStatus": "Initializing"}, JobState.PENDING),
        ({"jobStatus": "PENDING", "jobDeploymentStatus": "Running"}, JobState.PENDING),
        (RUNNING, JobState.RUNNING),
        ({"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}, JobState.SUCCEEDED),
        ({"jobStatus": "STOPPED", "jobDeploymentStatus": "Complete"}, JobState.STOPPED),
        ({"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": "AppFailed"}, JobState.FAILED),
        ({"jobStatus": "", "jobDeploymentStatus": "Failed", "reason": "SubmissionFailed"}, JobState.FAILED),
        ({"jobStatus": "RUNNING", "jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}, JobState.FAILED),
        ({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed"}, JobState.FAILED),
        ({"jobStatus": "FAILED", "jobDeploymentStatus": "Retrying", "reason": "AppFailed"}, JobState.PENDING),
        ({"jobStatus": "RUNNING", "jobDeploymentStatus": "Suspending"}, JobState.PENDING),
        ({"jobStatus": "", "jobDeploymentStatus": "Suspended"}, JobState.PENDING),
        ({"jobStatus": "", "jobDeploymentStatus": "Waiting"}, JobState.PENDING),
    ],
    ids=lambda value: value.value if isinstance(value, JobState) else value.get("jobDeploymentStatus", "new"),
)
def test_the_operators_status_maps_to_one_state(standin, backend, written, state):
    launch = launch_of()
    backend.submit(launch)
    standin.set_status(launch.name, written)
    status = backend.status(launch.name)
    assert status.state == state
    assert (status.deployment_status, status.reason) == (
        written.get("jobDeploymentStatus", ""),
        written.get("reason", ""),
    )


def test_every_status_field_is_read(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    written = RUNNING | {
        "dashboardURL": "c-head-svc.default.svc.cluster.local:8265",
        "message": "Job is running",
        "startTime": "2026-05-01T10:00:00Z",
        "endTime": "2026-05-01T11:30:00Z",
    }
    standin.set_status(launch.name, written)
    status = backend.status(launch.name)
    assert status.dashboard_url == "c-head-svc.default.svc.cluster.local:8265"
    assert (status.cluster_name, status.submission_id, status.message) == ("c", "raysubmit_1", "Job is running")
    assert status.start_time == datetime(2026, 5, 1, 10, tzinfo=UTC)
    assert status.end_time - status.start_time == timedelta(hours=1, minutes=30)


def test_a_retry_wipes_reason_and_message_and_waits_again(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    failure = {"reason": "AppFailed", "message": "Job entrypoint command failed with exit code 1"}
    seen = []
    for written in [
        RUNNING,
        {"jobStatus": "FAILED", "jobDeploymentStatus": "Retrying", "failed": 1} | failure,
        {"jobStatus": "", "jobDeploymentStatus": "", "failed": 1},
        {"jobStatus": "", "jobDeploymentStatus": "Initializing", "failed": 1, "rayClusterName": "c-2"},
    ]:
        standin.set_status(launch.name, written)
        status = backend.status(launch.name)
        seen.append((status.state, status.deployment_status, status.reason, status.message))
    assert seen == [
        (JobState.RUNNING, "Running", "", ""),
        (JobState.PENDING, "Retrying", failure["reason"], failure["message"]),
        (JobState.PENDING, "", "", ""),
        (JobState.PENDING, "Initializing", "", ""),
    ]


def test_an_unknown_rayjob_is_not_found(backend):
    with pytest.raises(NotFound, match="no RayJob tiny-transformer-zzzzzz in namespace default"):
        backend.status("tiny-transformer-zzzzzz")


def test_a_job_in_another_namespace_is_addressed_as_namespace_slash_name(standin, backend, kuberay_settings):
    standin.call(standin.api.namespaces.add, "team-a")
    team_a = KubeRayBackend(kuberay_settings.model_copy(update={"namespace": "team-a"}), standin.api_client())
    launch = team_launch(TEAM_MANIFEST)
    team_a.submit(launch)
    standin.set_status(launch.name, RUNNING, namespace="team-a")
    assert backend.status(f"team-a/{launch.name}").state == JobState.RUNNING
    with pytest.raises(NotFound, match="in namespace default"):
        backend.status(launch.name)


# Logs.


def test_logs_come_from_the_newest_submitter_pod_tailed(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    started = datetime.now(UTC)
    labels = {"batch.kubernetes.io/job-name": launch.name}
    standin.add_pod(f"{launch.name}-first", labels, "attempt 1\nfailed\n", started)
    standin.add_pod(f"{launch.name}-second", labels, "attempt 2\nstep 1\nstep 2\n", started + timedelta(seconds=30))
    assert backend.logs(launch.name, tail=2) == "step 1\nstep 2\n"
    assert backend.logs(launch.name) == "attempt 2\nstep 1\nstep 2\n"
    (read,) = [request for request in standin.api[kmock.subresource("log")] if request.params.get("tailLines")]
    assert (read.name, read.params["container"]) == (f"{launch.name}-second", "ray-job-submitter")


def test_logs_find_a_submitter_pod_by_the_legacy_job_label(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    standin.add_pod(f"{launch.name}-x", {"job-name": launch.name}, "hello\n", datetime.now(UTC))
    assert backend.logs(launch.name) == "hello\n"


def test_logs_without_a_submitter_pod_come_from_the_ray_dashboard(standin, backend):
    launch = team_launch()  # HTTPMode: KubeRay submits through the dashboard, no submitter pod
    backend.submit(launch)
    dashboard = standin.serve_dashboard({"raysubmit_1": "loading data\nepoch 1\nepoch 2\n"})
    standin.set_status(launch.name, RUNNING | {"dashboardURL": dashboard})
    assert backend.logs(launch.name, tail=2) == "epoch 1\nepoch 2\n"
    assert not list(standin.api[kmock.resource("v1/pods")])


def test_a_dashboard_log_tail_counts_lines_as_tail_does(standin, backend):
    """Before: a form feed and a U+2028 inside two lines made `--tail 3` return one and a half lines."""
    launch = team_launch()
    backend.submit(launch)
    log = "loading\nepoch 1\x0cpage 2\nepoch 2\u2028more\nepoch 3"
    standin.set_status(launch.name, RUNNING | {"dashboardURL": standin.serve_dashboard({"raysubmit_1": log})})
    assert backend.logs(launch.name, tail=3) == "epoch 1\x0cpage 2\nepoch 2\u2028more\nepoch 3"
    assert backend.logs(launch.name, tail=0) == ""


def test_logs_when_neither_a_pod_nor_a_dashboard_answers(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    with pytest.raises(NotFound, match=r"no logs yet: no submitter pod and no Ray dashboard .* New\)"):
        backend.logs(launch.name)
    standin.set_status(launch.name, RUNNING | {"dashboardURL": "127.0.0.1:9"})
    with pytest.raises(Unavailable, match=r"Ray dashboard at http://127.0.0.1:9 .* only from inside the cluster"):
        backend.logs(launch.name)


# Cancelling.


def test_cancel_deletes_the_rayjob_in_the_background(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    standin.set_status(launch.name, RUNNING)
    status = backend.cancel(launch.name)
    assert (status.state, status.message, status.submission_id) == (JobState.STOPPED, DELETED_MESSAGE, "raysubmit_1")
    assert standin.rayjob(launch.name) is None
    (deletion,) = standin.api[kmock.action.DELETE]
    assert deletion.params["propagationPolicy"] == "Background"


def test_cancelling_a_finished_job_keeps_its_end(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    standin.set_status(launch.name, {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"})
    assert backend.cancel(launch.name).state == JobState.SUCCEEDED


def test_cancel_with_suspend_keeps_the_rayjob_and_frees_its_cluster(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    standin.set_status(launch.name, RUNNING)
    status = backend.cancel(launch.name, suspend=True)
    assert (status.name, status.state) == (launch.name, JobState.RUNNING)  # until KubeRay suspends it
    assert standin.rayjob(launch.name)["spec"]["suspend"] is True
    (patch,) = standin.api[kmock.action.UPDATE]
    assert (patch.headers["Content-Type"], patch.data) == ("application/merge-patch+json", {"spec": {"suspend": True}})


def test_suspend_is_refused_for_a_rayjob_kuberay_cannot_suspend(standin, backend):
    launch = team_launch()  # shutdownAfterJobFinishes: false
    backend.submit(launch)
    with pytest.raises(BadRequest, match=r"KubeRay cannot suspend RayJob .* cancel it without suspend"):
        backend.cancel(launch.name, suspend=True)
    assert "suspend" not in standin.rayjob(launch.name)["spec"]


# Observing.


def test_observe_yields_the_list_then_each_change_in_order_and_stops_at_its_timeout(standin, backend):
    first, second = launch_of(), launch_of()
    backend.submit(first)
    backend.submit(second)
    foreign = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "not-ours"}, "spec": {}}
    kubernetes.client.CustomObjectsApi(standin.api_client()).create_namespaced_custom_object(
        "ray.io", "v1", NAMESPACE, "rayjobs", foreign | {"spec": {"clusterSelector": {"ray.io/cluster": "c"}}}
    )
    seen, started = [], time.monotonic()
    for status in backend.observe(timeout_s=0.5):
        seen.append((status.name, status.state, status.message))
        if len(seen) == 2:  # the listed two: change them while the watch has not started yet
            standin.set_status(first.name, RUNNING)
            standin.set_status(second.name, {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"})
            backend.cancel(first.name)
    elapsed = time.monotonic() - started
    assert seen == [
        (first.name, JobState.PENDING, ""),
        (second.name, JobState.PENDING, ""),
        (first.name, JobState.RUNNING, ""),
        (second.name, JobState.SUCCEEDED, ""),
        (first.name, JobState.STOPPED, DELETED_MESSAGE),
    ]
    assert 0.5 <= elapsed < 5  # it ends at its timeout, not at the first change
    (watch,) = standin.api[kmock.action.WATCH]
    assert watch.params["labelSelector"] == "app.kubernetes.io/managed-by=trainbot"


def test_observe_lists_again_when_the_history_is_gone(standin, backend):
    kept, finished, deleted = launch_of(), launch_of(), launch_of()
    for launch in (kept, finished, deleted):
        backend.submit(launch)
    seen = []
    for status in backend.observe(timeout_s=0.5):
        seen.append((status.name, status.state))
        if len(seen) == 3:  # before the watch starts, changes whose history is then compacted away
            standin.set_status(finished.name, {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"})
            backend.cancel(deleted.name)
            standin.call(standin.api.compact)
    assert seen[3:] == [(deleted.name, JobState.STOPPED), (finished.name, JobState.FAILED)]
    assert len(standin.api[kmock.action.LIST]) == 2


def test_observe_stops_at_its_timeout_while_changes_keep_coming(standin, backend):
    launch = launch_of()
    backend.submit(launch)
    started, changes = time.monotonic(), 0
    for _ in backend.observe(timeout_s=0.4):
        changes += 1
        standin.set_status(launch.name, RUNNING | {"message": f"step {changes}"})
        assert time.monotonic() - started < 5, "observe kept yielding long past its timeout"
    assert changes > 3
    # The upper bound only has to tell "stopped" from "never stops"; CI's shared cores once took 0.94 s.
    assert 0.4 <= time.monotonic() - started < 5
