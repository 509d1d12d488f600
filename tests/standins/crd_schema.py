"""Check a manifest as the API server checks a custom resource: CRD defaults first, then the v1 schema.

jsonschema ignores the `x-kubernetes-*` keys, so CEL rules go unchecked (see shared/kuberay/README.md).
A structural schema also lets unknown fields through, which the API server drops without a word (or
refuses with fieldValidation=Strict); `unknown_fields` names them, so a misspelt key fails a test
instead of vanishing from the cluster's copy.

The CRDs come from the folder TRAINBOT_KUBERAY_CRDS names, else from the shared checkout beside the repo;
without either, the tests that need them skip, saying how to supply them.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

# The shared checkout sits beside the repository: <repo>/../shared.
SHARED_DIR = (Path(__file__).resolve().parents[2] / ".." / "shared").resolve()
KUBERAY_DIR = SHARED_DIR / "kuberay"
SHARED_CRDS = KUBERAY_DIR / "crds"
SAMPLES_DIR = KUBERAY_DIR / "samples"
# A folder of the KubeRay CRDs a person names (a clone has no shared checkout beside it).
CRDS_ENV = "TRAINBOT_KUBERAY_CRDS"
HOW_TO_SUPPLY = (
    f"kubectl get crd rayjobs.ray.io rayclusters.ray.io -o yaml > DIR/crds.yaml, then {CRDS_ENV}=DIR "
    "(one file per CRD, as KubeRay's helm chart ships them, works too)"
)
RAYJOB = "RayJob"
CRD_SUFFIXES = (".yaml", ".yml", ".json")
# An error message quotes the offending value; a whole pod template is not worth reading.
MAX_MESSAGE_CHARS = 300


def crds_dir() -> Path:
    """Where the CRDs are read from: the folder named by TRAINBOT_KUBERAY_CRDS, else the shared checkout's."""
    named = os.environ.get(CRDS_ENV)
    return Path(named).expanduser() if named else SHARED_CRDS


@functools.cache
def crds_in(folder: Path) -> dict[str, dict[str, Any]]:
    """The CustomResourceDefinitions in `folder` by the kind they define, read from every YAML or JSON file there:
    one CRD a file, several documents, or a `kind: List` of them as `kubectl get crd ... -o yaml` writes.
    Parsed once per run: a CRD is over 1 MB."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds: dict[str, dict[str, Any]] = {}
    files = sorted(path for path in folder.iterdir() if path.suffix in CRD_SUFFIXES) if folder.is_dir() else []
    for path in files:
        for document in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):
            is_list = isinstance(document, dict) and document.get("kind") == "List"
            for item in (document.get("items") or []) if is_list else [document]:
                if isinstance(item, dict) and item.get("kind") == "CustomResourceDefinition":
                    crds[item["spec"]["names"]["kind"]] = item
    return crds


def find_crd(kind: str) -> dict[str, Any] | None:
    """The CRD that defines `kind` (RayJob, RayCluster), or None where the CRDs folder has none."""
    return crds_in(crds_dir()).get(kind)


def missing_reason(kind: str) -> str:
    """Why a test of `kind` against its CRD cannot run, and how to let it."""
    return f"no {kind} CRD in {crds_dir()}: {HOW_TO_SUPPLY}"


def require_crd(kind: str) -> str:
    """`kind`, for `problems`, or skip the test saying how to supply its CRD."""
    if find_crd(kind) is None:
        pytest.skip(missing_reason(kind))
    return kind


@dataclass(frozen=True)
class Problem:
    """One reason the API server would refuse the manifest, as `field: message`."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def load_schema(kind: str, version: str = "v1") -> dict[str, Any]:
    """The openAPIV3Schema the CRD of `kind` serves for `version`."""
    crd = find_crd(kind)
    if crd is None:
        raise LookupError(missing_reason(kind))
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return served["schema"]["openAPIV3Schema"]
    raise KeyError(f"the {kind} CRD in {crds_dir()} serves no version {version}")


def with_defaults(schema: dict[str, Any], document: Any) -> Any:
    """A copy of `document` with the schema's defaults filled in, as the API server does before validating.

    A default applies only where its enclosing object exists, and a defaulted value gets its own defaults.
    """
    document = copy.deepcopy(document)
    _fill_defaults(schema, document)
    return document


def _fill_defaults(schema: dict[str, Any], node: Any) -> None:
    if isinstance(node, dict):
        for key, child_schema in (schema.get("properties") or {}).items():
            if key not in node and "default" in child_schema:
                node[key] = copy.deepcopy(child_schema["default"])
            if key in node:
                _fill_defaults(child_schema, node[key])
        values_schema = schema.get("additionalProperties")
        if isinstance(values_schema, dict):
            for value in node.values():
                _fill_defaults(values_schema, value)
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        for item in node:
            _fill_defaults(schema["items"], item)


def schema_problems(schema: dict[str, Any], document: Any) -> list[Problem]:
    """What the schema refuses in `document` (give it with defaults applied)."""
    validator = Draft7Validator(schema)
    return [
        Problem(field_path(error.absolute_path), error.message[:MAX_MESSAGE_CHARS])
        for error in sorted(validator.iter_errors(document), key=lambda error: list(map(str, error.absolute_path)))
    ]


def unknown_fields(schema: dict[str, Any], document: Any) -> list[str]:
    """Paths of keys the schema does not declare (the API server would drop or, when strict, refuse them)."""
    return sorted(_unknown(schema, document, ()))


def _unknown(schema: dict[str, Any], node: Any, path: tuple[str | int, ...]) -> Iterator[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(node, dict):
        declared = schema.get("properties")
        values_schema = schema.get("additionalProperties")
        for key, value in node.items():
            if declared is not None and key in declared:
                yield from _unknown(declared[key], value, (*path, key))
            elif isinstance(values_schema, dict):
                yield from _unknown(values_schema, value, (*path, key))
            elif declared is not None and not values_schema:
                yield field_path((*path, key))
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(node):
            yield from _unknown(schema["items"], item, (*path, index))


def problems(kind: str, document: dict[str, Any], version: str = "v1") -> list[Problem]:
    """Everything the API server would refuse in `document`, a `kind`: schema errors after defaulting, unknown
    fields."""
    schema = load_schema(kind, version)
    unknown = [Problem(path, "unknown field") for path in unknown_fields(schema, document)]
    return schema_problems(schema, with_defaults(schema, document)) + unknown


def field_path(parts: Sequence[str | int]) -> str:
    """`spec.workerGroupSpecs[0].replicas`, the way the API server names a field in its causes."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "<root>"
