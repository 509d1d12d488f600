"""The RayCluster will not start: pods cannot be scheduled, or their image cannot be pulled.

Reads: FailedScheduling / NotTriggerScaleUp / quota events and Unschedulable pod conditions
(JSON or pasted kubectl text), Ray's pending and infeasible resource demands, and
ErrImagePull / ImagePullBackOff / "Failed to pull image" in events, pod states and text.
"""

from __future__ import annotations

import re

from diagnosers.evidence import Evidence
from diagnosers.findings import IMAGE_PULL, INSUFFICIENT_GPU, Finding, Severity
from diagnosers.parsers.frameworks import ray_log
from diagnosers.parsers.platform import k8s_text
from diagnosers.rules.common import finding, first_attr

EMITS = (INSUFFICIENT_GPU, IMAGE_PULL)

_INSUFFICIENT = re.compile(
    r"Insufficient ([\w./-]+)|insufficient (?:unused )?quota for ([\w./-]+)|didn't have enough resources: ([\w./-]+)"
    r"|requested number of devices unavailable for ([\w./-]+)|Node didn't have enough resource: ([\w./-]+)"
)
_PULL_CAUSES = (
    ("toomanyrequests", "the registry is rate-limiting pulls"),
    ("Too Many Requests", "the registry is rate-limiting pulls"),
    ("Rate exceeded", "the registry is rate-limiting pulls"),
    ("NotFound", "the image or tag does not exist"),
    ("manifest unknown", "the image or tag does not exist"),
    ("not found", "the image or tag does not exist"),
    ("unauthorized", "the registry refused the credentials (imagePullSecrets)"),
    ("authentication required", "the registry refused the credentials (imagePullSecrets)"),
    ("pull access denied", "the repository does not exist or needs credentials (imagePullSecrets)"),
    ("denied", "the registry refused the credentials (imagePullSecrets)"),
    ("no basic auth", "the registry refused the credentials (imagePullSecrets)"),
    ("i/o timeout", "the node cannot reach the registry"),
    ("no such host", "the node cannot resolve the registry's name"),
    ("x509", "the node does not trust the registry's TLS certificate"),
    ("no space left", "the node's disk is full"),
    ("InvalidImageName", "the image name is malformed"),
)


def check(evidence: Evidence) -> list[Finding]:
    return [found for found in (_insufficient(evidence), _image_pull(evidence)) if found is not None]


def _insufficient(evidence: Evidence) -> Finding | None:
    unschedulable = evidence.of(k8s_text.UNSCHEDULABLE)
    infeasible = evidence.of(ray_log.INFEASIBLE_DEMAND)
    pending = [signal for signal in evidence.of(ray_log.RESOURCE_DEMAND) if "GPU" in signal.get("demand")]
    signals = [*unschedulable, *infeasible, *pending]
    if not signals:
        return None
    resources = sorted(
        {
            name.rstrip(".")
            for signal in unschedulable
            for names in _INSUFFICIENT.findall(signal.quote.text)
            for name in names
            if name
        }
    )
    demand = next(
        (
            value
            for name in ("demand", "placement", "shapes", "per_trial", "advised")
            if (value := first_attr([*infeasible, *pending], name))
        ),
        "",
    )
    if resources:
        lacking = f"the nodes lack {', '.join(resources)}"
    elif demand:
        lacking = f"no node can hold the resource request {demand}"
    else:
        lacking = "no node fits the pods' requests, selectors or tolerations"
    detail = (
        f"Pods cannot be scheduled: {lacking}. Check free GPUs with `kubectl describe nodes`, lower "
        "--workers/--gpus, make sure the GPU node pool can scale up and that requests, nodeSelector and "
        "tolerations match the GPU nodes."
    )
    confidence = 0.9 if unschedulable or infeasible else 0.6
    # A placement-group bundle or a CPU-only request that cannot be placed is the same failure, not a GPU shortage.
    names_other = (demand and "GPU" not in demand) or (
        resources and not any("gpu" in name.lower() for name in resources)
    )
    title = "Not enough resources to schedule" if names_other else "Not enough GPUs to schedule"
    return finding(INSUFFICIENT_GPU, Severity.CRITICAL, confidence, title, detail, signals)


def _image_pull(evidence: Evidence) -> Finding | None:
    signals = evidence.of(k8s_text.IMAGE_PULL)
    if not signals:
        return None
    image = first_attr(signals, "image") or first_attr(signals, "backoff_image") or first_attr(signals, "unpack_image")
    texts = " ".join(signal.quote.text for signal in signals)
    cause = next((reason for marker, reason in _PULL_CAUSES if marker in texts), "see the kubelet's message")
    named = f" {image}" if image else ""
    detail = (
        f"The image{named} cannot be pulled: {cause}. Check the image name and tag in the RayJob's "
        "rayClusterSpec, the imagePullSecrets, and that the nodes can reach the registry."
    )
    return finding(IMAGE_PULL, Severity.CRITICAL, 0.9, "Container image cannot be pulled", detail, signals)
