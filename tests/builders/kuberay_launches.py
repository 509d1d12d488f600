"""KubeRay launches as the tests make them: a tiny-transformer training launch, a launch of a team's own RayJob
manifest, and the status the operator writes on a running RayJob."""

from actions.jobs.backends.rayjob import load_manifest
from actions.jobs.job import Launch, new_job_name
from actions.jobs.planning import training_launch
from actions.jobs.templates import TINY_TRANSFORMER, manifest_template

# The status KubeRay's operator writes on a RayJob whose Ray job runs.
RUNNING = {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "jobId": "raysubmit_1", "rayClusterName": "c"}
TEAM_MANIFEST = """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: team-job, labels: {team: vision}}
spec:
  entrypoint: python train.py
  shutdownAfterJobFinishes: false
  submissionMode: HTTPMode
  rayClusterSpec:
    headGroupSpec: {template: {spec: {containers: [{name: ray-head, image: "rayproject/ray:2.60.0"}]}}}
    workerGroupSpecs:
      - groupName: gpu
        replicas: 1
        minReplicas: 1
        maxReplicas: 2
        template: {spec: {containers: [{name: ray-worker, image: "rayproject/ray:2.60.0"}]}}
"""


def launch_of(workers=2, gpus=0, words=("lr=0.01",)) -> Launch:
    """A tiny-transformer training launch by alice with these parameter `words`."""
    return training_launch(TINY_TRANSFORMER, TINY_TRANSFORMER.parse_params(list(words)), (workers, gpus), "alice")


def team_launch(text: str = TEAM_MANIFEST, argv=()) -> Launch:
    """bob's launch of the RayJob manifest `text`, with `argv` appended to its entrypoint."""
    return Launch(
        name=new_job_name("team-job"),
        kind="train",
        template=manifest_template("team-job"),
        params={},
        workers=1,
        gpus_per_worker=0,
        requester="bob",
        argv=list(argv),
        manifest=load_manifest(text, "team-job.yaml"),
    )
