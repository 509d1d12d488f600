"""Turn a LaunchRequest into a Launch: template, typed parameters, size, name, argv.

`plan_job` is the one way in. Nothing here touches a backend: `dry_run` is what one would be sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from actions.errors import BadRequest
from actions.jobs.backends import KUBERAY, backend_named
from actions.jobs.backends.rayjob import load_manifest
from actions.jobs.job import Launch, new_job_name
from actions.jobs.requests import LaunchRequest, ManifestText, SweepOptions
from actions.jobs.search_space import parse_space, searched
from actions.jobs.templates import JobTemplate, ParamValue, find_template, load_templates, manifest_template
from actions.people import People
from actions.settings import Settings

MAX_TRIALS = 1000
SWEEP_DRIVER = ("python", "-m", "workloads.sweep")
# An MLflow store that only this machine can open; a cluster's sweep driver needs a server URL.
LOCAL_STORE = re.compile(r"^(sqlite|file):|^/")


def templates_of(settings: Settings) -> dict[str, JobTemplate]:
    return load_templates(settings.templates)


def plan_job(settings: Settings, request: LaunchRequest, people: People | None = None) -> Launch:
    """The launch or sweep that `request` asks for: the CLI's and Slack's alike, its requester recorded by name
    (`people`: who is who, by default the config's `people:`)."""
    people = people or People(settings.people)
    request = replace(request, requester=people.name(request.requester))
    if request.manifest is not None:
        return _manifest_launch(request, request.manifest)
    # A sweep's first word is its template whatever it looks like (argparse requires one); a launch's may be
    # the first parameter of someone who forgot the template.
    if request.template is None or (request.sweep is None and "=" in request.template):
        raise BadRequest("name a template first: trainbot launch TEMPLATE [key=value ...] (or --manifest FILE)")
    template = find_template(templates_of(settings), request.template)
    template.authorize(request.requester, people)
    if request.sweep is not None:
        return _sweep(settings, template, request, request.sweep)
    size = template.size(request.workers, request.gpus_per_worker)
    return training_launch(template, template.parse_params(list(request.params)), size, request.requester)


@dataclass(frozen=True)
class DryRun:
    """A planned launch and the document its backend would be sent (a RayJob, a Ray job submission)."""

    launch: Launch
    document: dict[str, Any]


def dry_run(settings: Settings, request: LaunchRequest, people: People | None = None) -> DryRun:
    """What `request` would submit, rendered by the backend it runs on; nothing is sent or stored."""
    launch = plan_job(settings, request, people)
    return DryRun(launch, backend_named(settings, request.backend_name(settings.backend)).render(launch))


def _manifest_launch(request: LaunchRequest, text: ManifestText) -> Launch:
    """A team's own RayJob: their spec, a fresh name, our labels, their entrypoint plus the words."""
    manifest = load_manifest(text.text, text.source)
    template = manifest_template(_template_name(manifest, text.source))
    params = template.parse_params(list(request.params))
    workers, gpus_per_worker = request.workers, request.gpus_per_worker
    # Their size stands unless the person asked for another; rayjob.apply_launch refuses a size
    # for a RayJob that has no worker group.
    if workers is None and gpus_per_worker is None:
        size = (manifest_workers(manifest), 0)
    else:
        size = template.size(manifest_workers(manifest) if workers is None else workers, gpus_per_worker)
    return training_launch(template, params, size, request.requester, manifest)


def training_launch(
    template: JobTemplate,
    params: dict[str, ParamValue],
    size: tuple[int, int],
    requester: str,
    manifest: dict[str, Any] | None = None,
) -> Launch:
    """A training job of `size` (workers, GPUs per worker) under a fresh name."""
    return Launch(
        name=new_job_name(template.name),
        kind="train",
        template=template,
        params=params,
        workers=size[0],
        gpus_per_worker=size[1],
        requester=requester,
        argv=template.argv(params, *size),
        manifest=manifest,
    )


def _sweep(settings: Settings, template: JobTemplate, request: LaunchRequest, options: SweepOptions) -> Launch:
    """One Ray job whose driver (workloads.sweep) runs Ray Tune over the template's trainable."""
    if template.sweep is None:
        raise BadRequest(f"template {template.name} declares no `sweep.trainable`, so it cannot be swept")
    if not 1 <= options.trials <= MAX_TRIALS:
        raise BadRequest(f"--trials {options.trials}: choose 1 to {MAX_TRIALS}")
    tracking_uri = settings.tracking_uri()
    if request.backend_name(settings.backend) == KUBERAY and LOCAL_STORE.match(tracking_uri):
        raise BadRequest(
            "a sweep on kuberay logs to MLflow from the cluster: set TRAINBOT_MLFLOW_TRACKING_URI to an "
            "MLflow server the cluster can reach"
        )
    space = parse_space(template, list(request.params))
    if not searched(space):
        raise BadRequest("nothing to search: give at least one parameter a space, e.g. lr=loguniform(1e-4,1e-2)")
    name = new_job_name(f"{template.name}-sweep")
    size = template.size(request.workers, 0)
    argv = [
        *SWEEP_DRIVER,
        "--trainable", template.sweep.trainable,
        "--space", json.dumps(space, separators=(",", ":")),
        "--trials", str(options.trials),
        "--metric", template.sweep.metric_named(options.metric),
        "--mode", options.mode or template.sweep.mode,
        "--scheduler", options.scheduler,
        "--tracking-uri", tracking_uri,
        "--experiment", sweep_experiment(template.name),
        "--model-name", template.name,
        "--sweep-id", name,
        "--cpus-per-trial", f"{template.sweep.cpus_per_trial:g}",
    ]  # fmt: skip
    return Launch(
        name=name,
        kind="sweep",
        template=template,
        params={"trials": options.trials, **{key: json.dumps(value) for key, value in space.items()}},
        workers=size[0],
        gpus_per_worker=0,
        requester=request.requester,
        argv=argv,
    )


def sweep_experiment(template_name: str) -> str:
    """The MLflow experiment a template's sweeps log to."""
    return f"trainbot/{template_name}"


def manifest_workers(manifest: dict[str, Any]) -> int:
    """Replicas of the RayJob's first worker group (the CRD defaults it to 0), or 0 with no group."""
    groups = (manifest.get("spec", {}).get("rayClusterSpec") or {}).get("workerGroupSpecs") or []
    return int(groups[0].get("replicas", 0)) if groups else 0


def _template_name(manifest: dict[str, Any], source: str) -> str:
    metadata = manifest.get("metadata") or {}
    raw = str(metadata.get("name") or metadata.get("generateName") or source.rsplit("/", 1)[-1])
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower().removesuffix(".yaml")).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)[:32].rstrip("-")
    return name or "rayjob"
