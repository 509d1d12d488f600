"""Every RayJob trainbot can produce passes the KubeRay 1.7 CRD (defaults applied first) and the operator's
own rules; a team's manifest keeps its spec except the fields trainbot sets; bad manifests are refused
with a message that says what to fix. The CRD comes from TRAINBOT_KUBERAY_CRDS or
the shared checkout beside the repo (tests/standins/crd_schema.py), the samples from the shared checkout."""

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from actions.errors import BadRequest
from actions.jobs.backends.rayjob import GPU, MAX_MANIFEST_BYTES, apply_launch, build_rayjob, load_manifest
from actions.jobs.job import Launch, new_job_name
from actions.jobs.planning import training_launch
from actions.jobs.templates import TINY_TRANSFORMER, JobTemplate, manifest_template
from actions.settings import Settings
from tests.standins.crd_schema import RAYJOB, SAMPLES_DIR, problems, require_crd

# The rules the operator checks itself (shared/kuberay/README.md); a RayJob breaking one is accepted by
# the API server and then fails as ValidationFailed.
OPERATOR_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
OPERATOR_MAX_NAME = 47
SUBMISSION_MODES = {"K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"}
OUR_LABELS = {"app.kubernetes.io/managed-by", "trainbot.dev/template", "trainbot.dev/requester", "trainbot.dev/kind"}
SERVER_SET = {"generateName", "resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"}


@pytest.fixture(scope="module")
def rayjob_crd() -> str:
    return require_crd(RAYJOB)


@pytest.fixture
def ml_team_settings(tmp_path) -> Settings:
    """The ml-team namespace, a pinned Ray image and a 900 s time to live, as a team's deployment sets them."""
    return Settings(
        data_dir=tmp_path, namespace="ml-team", image="rayproject/ray:2.60.0-py311", ttl_seconds_after_finished=900
    )


def sample_files() -> list[Any]:
    if not SAMPLES_DIR.is_dir():
        reason = f"{SAMPLES_DIR} is absent: the KubeRay samples come with the shared checkout beside the repo"
        return [pytest.param(None, id="samples-absent", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(path, id=path.name) for path in sorted(SAMPLES_DIR.glob("*.yaml"))]


def template_launch(template: JobTemplate = TINY_TRANSFORMER, words=(), workers=2, gpus=0) -> Launch:
    return training_launch(template, template.parse_params(list(words)), (workers, gpus), "alice@example.com")


def manifest_launch(manifest: dict, argv=(), workers: int | None = None, gpus=0) -> Launch:
    groups = (manifest["spec"].get("rayClusterSpec") or {}).get("workerGroupSpecs") or []
    own_workers = groups[0].get("replicas", 0) if groups else 0
    return Launch(
        name=new_job_name("team-job"),
        kind="train",
        template=manifest_template("team-job"),
        params={},
        workers=own_workers if workers is None else workers,
        gpus_per_worker=gpus,
        requester="bob",
        argv=list(argv),
        manifest=manifest,
    )


def load_sample(path: Path) -> dict:
    return load_manifest(path.read_text(encoding="utf-8"), path.name)


def assert_accepted(rayjob: dict, crd: str) -> None:
    """What the API server and then the KubeRay operator would accept."""
    assert [str(problem) for problem in problems(crd, rayjob)] == []
    name = rayjob["metadata"]["name"]
    assert OPERATOR_NAME.fullmatch(name) and len(name) <= OPERATOR_MAX_NAME, name
    assert rayjob["spec"].get("rayClusterSpec") or rayjob["spec"].get("clusterSelector")
    assert rayjob["spec"].get("submissionMode", "K8sJobMode") in SUBMISSION_MODES


def pod_templates(rayjob: dict) -> list[dict]:
    cluster = rayjob["spec"].get("rayClusterSpec") or {}
    groups = cluster.get("workerGroupSpecs") or []
    return ([cluster["headGroupSpec"]["template"]] if cluster else []) + [group["template"] for group in groups]


def worker_container(rayjob: dict) -> dict:
    return rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]


def without_trainbot_fields(rayjob: dict) -> dict:
    """The manifest less what apply_launch may set when the size and words are the manifest's own."""
    rest = copy.deepcopy(rayjob)
    metadata = rest.get("metadata") or {}
    for key in {"name", "namespace"} | SERVER_SET:
        metadata.pop(key, None)
    for holder in [metadata] + [template.setdefault("metadata", {}) for template in pod_templates(rest)]:
        labels = {key: value for key, value in (holder.pop("labels", None) or {}).items() if key not in OUR_LABELS}
        holder.update({"labels": labels} if labels else {})
    for template in pod_templates(rest):
        if not template["metadata"]:
            del template["metadata"]
    rest.pop("status", None)
    return rest


# Built from templates.


@pytest.mark.parametrize("gpus", [0, 1, 8])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_built_tiny_transformer_passes_the_crd(rayjob_crd, ml_team_settings, workers, gpus):
    assert_accepted(build_rayjob(template_launch(workers=workers, gpus=gpus), ml_team_settings), rayjob_crd)


@pytest.mark.parametrize("gpus", [0, 1, 8])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_built_worker_group_is_exactly_the_workers_asked_for(ml_team_settings, workers, gpus):
    rayjob = build_rayjob(template_launch(workers=workers, gpus=gpus), ml_team_settings)
    (group,) = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (workers, workers, workers)
    resources = worker_container(rayjob)["resources"]
    assert resources["requests"] == {"cpu": "1", "memory": "2Gi"}
    expected_gpus = {GPU: str(gpus)} if gpus else {}
    assert resources["limits"] == {"cpu": "1", "memory": "2Gi"} | expected_gpus
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert GPU not in head["resources"]["limits"]


def test_built_rayjob_runs_the_launch_and_cleans_up_after_itself(ml_team_settings):
    launch = template_launch(words=["lr=0.01", "strategy=fsdp"], workers=4, gpus=1)
    rayjob = build_rayjob(launch, ml_team_settings)
    assert rayjob["metadata"] == {"name": launch.name, "namespace": "ml-team", "labels": launch.labels}
    assert all(template["metadata"]["labels"] == launch.labels for template in pod_templates(rayjob))
    spec = rayjob["spec"]
    assert shlex.split(spec["entrypoint"]) == launch.argv
    assert spec["entrypoint"].startswith("python -m workloads.tiny_transformer")
    assert "--strategy fsdp" in spec["entrypoint"] and "--num-workers 4 --gpus-per-worker 1" in spec["entrypoint"]
    assert yaml.safe_load(spec["runtimeEnvYAML"]) == launch.runtime_env()
    assert (spec["submissionMode"], spec["shutdownAfterJobFinishes"], spec["ttlSecondsAfterFinished"]) == (
        "K8sJobMode",
        True,
        900,
    )
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {port["name"]: port["containerPort"] for port in head["ports"]} == {
        "gcs-server": 6379,
        "dashboard": 8265,
        "client": 10001,
    }
    assert head["image"] == worker_container(rayjob)["image"] == "rayproject/ray:2.60.0-py311"


def test_fsdp_launch_passes_the_crd(rayjob_crd, ml_team_settings):
    rayjob = build_rayjob(template_launch(words=["strategy=fsdp", "d_model=256"], workers=4, gpus=8), ml_team_settings)
    assert_accepted(rayjob, rayjob_crd)
    assert "--strategy fsdp" in rayjob["spec"]["entrypoint"]


def test_a_team_template_brings_its_image_shape_and_runtime_env(rayjob_crd, ml_team_settings):
    template = JobTemplate.model_validate(
        {
            "name": "bert-finetune",
            "entrypoint": ["python", "finetune.py"],
            "params": {"lr": {"type": "float", "default": 1e-4}},
            "cpus_per_worker": 2.5,
            "memory_per_worker": "12Gi",
            "image": "registry.example.com/ml/bert:1.4",
            "runtime_env": {
                "pip": ["transformers==4.44.0", "datasets"],
                "env_vars": {"NCCL_DEBUG": "INFO", "HF_HOME": "/cache/hf"},
                "working_dir": "s3://ml-team/code/bert.zip",
            },
        }
    )
    launch = template_launch(template, workers=3, gpus=2)
    rayjob = build_rayjob(launch, ml_team_settings)
    assert_accepted(rayjob, rayjob_crd)
    runtime_env = yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])
    assert runtime_env["pip"] == ["transformers==4.44.0", "datasets"]
    assert runtime_env["working_dir"] == "s3://ml-team/code/bert.zip"
    assert runtime_env["env_vars"] == {"NCCL_DEBUG": "INFO", "HF_HOME": "/cache/hf", "TRAINBOT_JOB": launch.name}
    worker = worker_container(rayjob)
    assert worker["image"] == "registry.example.com/ml/bert:1.4"
    assert worker["resources"]["requests"] == {"cpu": "2500m", "memory": "12Gi"}
    assert worker["resources"]["limits"] == {"cpu": "2500m", "memory": "12Gi", GPU: "2"}


def test_a_parameter_value_stays_one_word_in_the_entrypoint(ml_team_settings):
    hostile = "two words \"quoted\" 'single' $(rm -rf /); echo `id` && exit"
    template = JobTemplate.model_validate(
        {"name": "notes", "entrypoint": ["python", "run.py"], "params": {"note": {"type": "str", "pattern": ".*"}}}
    )
    rayjob = build_rayjob(template_launch(template, words=[f"note={hostile}"]), ml_team_settings)
    assert shlex.split(rayjob["spec"]["entrypoint"]) == ["python", "run.py", "--note", hostile]


def test_names_are_fresh_dns_1035_labels_within_the_operator_limit(ml_team_settings):
    long_template = JobTemplate.model_validate({"name": "a" * 32, "entrypoint": ["python", "x.py"]})
    names = [build_rayjob(template_launch(long_template), ml_team_settings)["metadata"]["name"] for _ in range(50)]
    assert len(set(names)) == len(names)
    assert all(OPERATOR_NAME.fullmatch(name) and len(name) <= OPERATOR_MAX_NAME for name in names)


# A team's own RayJob.


def test_every_sample_listed_in_the_shared_manifest_is_here():
    if not SAMPLES_DIR.is_dir():
        pytest.skip(f"{SAMPLES_DIR} is absent: the KubeRay samples come with the shared checkout beside the repo")
    listed = {line.split("\t")[0] for line in (SAMPLES_DIR / "MANIFEST.tsv").read_text().splitlines()[1:] if line}
    assert listed and listed == {path.name for path in SAMPLES_DIR.glob("*.yaml")}


@pytest.mark.parametrize("sample", sample_files())
def test_a_sample_launched_as_written_keeps_its_spec_and_passes_the_crd(rayjob_crd, ml_team_settings, sample):
    manifest = load_sample(sample)
    untouched = copy.deepcopy(manifest)
    launch = manifest_launch(manifest)
    ml_team_settings = ml_team_settings.model_copy(
        update={"namespace": manifest["metadata"].get("namespace", "ml-team")}
    )
    rayjob = apply_launch(manifest, launch, ml_team_settings)
    assert manifest == untouched
    assert_accepted(rayjob, rayjob_crd)
    assert without_trainbot_fields(rayjob) == without_trainbot_fields(manifest)
    metadata = rayjob["metadata"]
    assert metadata["name"] == launch.name and "generateName" not in metadata
    assert metadata["namespace"] == manifest["metadata"].get("namespace", "ml-team")
    assert metadata["labels"].items() >= launch.labels.items()
    assert all(template["metadata"]["labels"].items() >= launch.labels.items() for template in pod_templates(rayjob))


@pytest.mark.parametrize("sample", sample_files())
def test_a_sample_takes_our_size_gpus_and_words_where_they_apply(rayjob_crd, ml_team_settings, sample):
    manifest = load_sample(sample)
    groups = (manifest["spec"].get("rayClusterSpec") or {}).get("workerGroupSpecs")
    mode = manifest["spec"].get("submissionMode", "K8sJobMode")
    own_command = (manifest["spec"].get("submitterPodTemplate") or {}).get("spec", {}).get("containers", [{}])[0]
    launch = manifest_launch(manifest, argv=["--lr", "0.1 x"], workers=7, gpus=2)
    if not groups:
        with pytest.raises(BadRequest, match=r"no worker group to size; drop --workers/--gpus"):
            apply_launch(manifest, launch, ml_team_settings)
        return
    if mode == "InteractiveMode" or own_command.get("command"):
        with pytest.raises(BadRequest, match=r"parameters cannot reach this RayJob"):
            apply_launch(manifest, launch, ml_team_settings)
        launch = manifest_launch(manifest, workers=7, gpus=2)
    rayjob = apply_launch(manifest, launch, ml_team_settings)
    assert_accepted(rayjob, rayjob_crd)
    first = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert first["replicas"] == 7 and first.get("minReplicas", 0) <= 7 <= first.get("maxReplicas", 2**31 - 1)
    assert worker_container(rayjob)["resources"]["limits"][GPU] == "2"
    assert rayjob["spec"].get("entrypoint", "") == launch.entrypoint
    if launch.argv:
        assert shlex.split(rayjob["spec"]["entrypoint"])[-2:] == ["--lr", "0.1 x"]
    for key in ("shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "deletionStrategy", "suspend"):
        assert rayjob["spec"].get(key) == manifest["spec"].get(key)


def test_words_stay_on_the_command_line_of_a_block_entrypoint(ml_team_settings):
    manifest = load_manifest(
        "apiVersion: ray.io/v1\nkind: RayJob\nspec:\n  clusterSelector: {ray.io/cluster: c}\n"
        '  entrypoint: |\n    python -c "import ray"\n',
        "block.yaml",
    )
    rayjob = apply_launch(manifest, manifest_launch(manifest, argv=["--lr", "0.1"]), ml_team_settings)
    assert "\n" not in rayjob["spec"]["entrypoint"].strip()


def test_server_set_metadata_and_status_are_dropped_and_the_input_kept(ml_team_settings):
    manifest = load_manifest(
        """
apiVersion: ray.io/v1alpha1
kind: RayJob
metadata:
  name: exported
  namespace: ml-team
  uid: 0b9f4c1e-1111-2222-3333-444455556666
  resourceVersion: "81234"
  creationTimestamp: 2024-05-01T10:00:00Z
  generation: 3
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: 7}]
  labels: {team: vision, app.kubernetes.io/managed-by: kubectl}
spec:
  clusterSelector: {ray.io/cluster: shared-cluster}
  entrypoint: python train.py
status: {jobStatus: SUCCEEDED, jobDeploymentStatus: Complete}
""",
        "exported.yaml",
    )
    launch = manifest_launch(manifest, argv=["--epochs", "3"])
    rayjob = apply_launch(manifest, launch, ml_team_settings)
    assert rayjob["apiVersion"] == "ray.io/v1"
    assert "status" not in rayjob
    assert rayjob["metadata"] == {
        "name": launch.name,
        "namespace": "ml-team",
        "labels": {"team": "vision"} | launch.labels,
    }
    assert rayjob["spec"]["entrypoint"] == "python train.py --epochs 3"
    assert manifest["metadata"]["name"] == "exported" and "status" in manifest


def test_a_manifest_for_another_namespace_is_refused_with_the_fix(ml_team_settings):
    manifest = load_manifest(
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: x, namespace: team-b}\n"
        "spec: {clusterSelector: {ray.io/cluster: c}, entrypoint: python t.py}\n",
        "other.yaml",
    )
    with pytest.raises(
        BadRequest, match=r"namespace 'team-b' but trainbot launches in 'ml-team'.*TRAINBOT_NAMESPACE=team-b"
    ):
        apply_launch(manifest, manifest_launch(manifest), ml_team_settings)


def test_yaml_aliases_are_copied_apart_and_dates_stay_strings(ml_team_settings):
    manifest = load_manifest(
        """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: aliased, annotations: {since: 2024-05-01}}
spec:
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      template: &pod
        spec:
          containers: [{name: ray, image: "rayproject/ray:2.60.0", resources: {limits: {cpu: "1"}}}]
    workerGroupSpecs:
      - {groupName: gpu, replicas: 1, minReplicas: 1, maxReplicas: 4, template: *pod}
""",
        "aliased.yaml",
    )
    rayjob = apply_launch(manifest, manifest_launch(manifest, workers=2, gpus=1), ml_team_settings)
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["resources"]["limits"] == {"cpu": "1"}
    assert worker_container(rayjob)["resources"]["limits"] == {"cpu": "1", GPU: "1"}
    assert rayjob["metadata"]["annotations"] == {"since": "2024-05-01"}


def test_gpu_requests_follow_the_limit_and_the_size_widens_min_and_max(ml_team_settings):
    manifest = load_manifest(
        """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: sized}
spec:
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec: {template: {spec: {containers: [{name: ray-head, image: "ray:2"}]}}}
    workerGroupSpecs:
      - groupName: gpu
        replicas: 4
        minReplicas: 2
        maxReplicas: 4
        template:
          spec:
            containers:
              - name: ray-worker
                image: "ray:2"
                resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}
""",
        "sized.yaml",
    )
    shrunk = apply_launch(manifest, manifest_launch(manifest, workers=1, gpus=4), ml_team_settings)
    first = shrunk["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (first["replicas"], first["minReplicas"], first["maxReplicas"]) == (1, 1, 4)
    assert worker_container(shrunk)["resources"] == {"requests": {GPU: "4"}, "limits": {GPU: "4"}}
    grown = apply_launch(manifest, manifest_launch(manifest, workers=9), ml_team_settings)
    first = grown["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (first["replicas"], first["minReplicas"], first["maxReplicas"]) == (9, 2, 9)
    assert worker_container(grown)["resources"]["limits"] == {GPU: 1}


def test_gpus_for_a_group_without_containers_is_a_bad_request(ml_team_settings):
    manifest = load_manifest(
        "apiVersion: ray.io/v1\nkind: RayJob\nspec:\n  rayClusterSpec:\n    headGroupSpec: {}\n"
        "    workerGroupSpecs: [{groupName: g, replicas: 1, template: {spec: {containers: []}}}]\n",
        "empty-group.yaml",
    )
    with pytest.raises(
        BadRequest, match=r"workerGroupSpecs\[0\]\.template\.spec\.containers must list the Ray container"
    ):
        apply_launch(manifest, manifest_launch(manifest, workers=2, gpus=1), ml_team_settings)


def alias_bomb(levels: int = 7) -> str:
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]" for level in range(1, levels)]
    return "\n".join(lines) + "\nkind: RayJob\napiVersion: ray.io/v1\nspec: {clusterSelector: {a: b}}\n"


def rayjob_with(spec: str) -> str:
    return f"apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {{name: job}}\nspec:\n  {spec}\n"


def two_rayjobs() -> str:
    rayjob = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {{name: {}}}\nspec: {{clusterSelector: {{a: b}}}}\n"
    return rayjob.format("first") + "---\n" + rayjob.format("second")


CLUSTER = "rayClusterSpec:\n    headGroupSpec: {}\n    "
BAD_MANIFESTS = {
    "not-yaml": ("kind: RayJob\nspec: [unclosed\n", r"not valid YAML \(.* at line 3\)"),
    "empty": ("", r"no RayJob in it \(found no documents at all\)"),
    "no-rayjob": ("kind: ConfigMap\n---\nkind: Secret\n---\n- a list\n", "found ConfigMap, Secret, a YAML list"),
    "two-rayjobs": (two_rayjobs(), r"2 RayJobs \(first, second\); a launch takes one"),
    "no-cluster": (rayjob_with("entrypoint: python x.py"), r"needs spec.rayClusterSpec .* or spec.clusterSelector"),
    "unknown-version": (rayjob_with("{}").replace("ray.io/v1", "ray.io/v2"), "write apiVersion: ray.io/v1"),
    "spec-not-a-mapping": ("apiVersion: ray.io/v1\nkind: RayJob\nspec: python x.py\n", "spec must be mappings"),
    "groups-not-a-list": (rayjob_with(CLUSTER + "workerGroupSpecs: some"), "workerGroupSpecs is a list of groups"),
    "replicas-not-a-number": (
        rayjob_with(CLUSTER + "workerGroupSpecs: [{replicas: two}]"),
        r"workerGroupSpecs\[0\]\.replicas must be a whole number",
    ),
    "alias-bomb": (alias_bomb(), r"expands to more than 100,000 values \(YAML aliases\?\)"),
    "nested-too-deeply": ("[" * 1000 + "]" * 1000, "nested too deeply to be a RayJob"),
    "too-large": ("#" * (MAX_MANIFEST_BYTES + 1), r"1,048,577 bytes is more than the 1024 KiB"),
}


@pytest.mark.parametrize(("text", "message"), BAD_MANIFESTS.values(), ids=BAD_MANIFESTS.keys())
def test_a_bad_manifest_is_refused_with_what_to_fix(text, message):
    with pytest.raises(BadRequest, match=message) as refused:
        load_manifest(text, "team/job.yaml")
    assert str(refused.value).startswith("team/job.yaml: ")


def test_a_v1alpha1_rayjob_is_read_as_v1(rayjob_crd, ml_team_settings):
    manifest = load_manifest(
        "apiVersion: ray.io/v1alpha1\nkind: RayJob\nmetadata: {name: old}\n"
        "spec: {entrypoint: python x.py, clusterSelector: {ray.io/cluster: c}}\n",
        "old.yaml",
    )
    assert manifest["apiVersion"] == "ray.io/v1"
    assert_accepted(apply_launch(manifest, manifest_launch(manifest), ml_team_settings), rayjob_crd)
