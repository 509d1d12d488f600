"""Check a manifest as the API server checks a custom resource: CRD defaults first, then the v1 schema.

jsonschema ignores the `x-kubernetes-*` keys, so CEL rules go unchecked (see shared/kuberay/README.md).
A structural schema also lets unknown fields through, which the API server drops without a word (or
refuses with fieldValidation=Strict); `unknown_fields` names them, so a misspelt key fails a test
instead of vanishing from the cluster's copy.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator

# The shared checkout sits beside the repository: <repo>/../shared.
SHARED_DIR = (Path(__file__).resolve().parents[2] / ".." / "shared").resolve()
KUBERAY_DIR = SHARED_DIR / "kuberay"
RAYJOB_CRD = KUBERAY_DIR / "crds" / "ray.io_rayjobs.yaml"
SAMPLES_DIR = KUBERAY_DIR / "samples"
# An error message quotes the offending value; a whole pod template is not worth reading.
MAX_MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Problem:
    """One reason the API server would refuse the manifest, as `field: message`."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@functools.cache
def load_schema(crd_path: Path, version: str = "v1") -> dict[str, Any]:
    """The openAPIV3Schema the CRD serves for `version` (parsed once per run: the file is over 1 MB)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(crd_path.read_text(encoding="utf-8"), Loader=loader)
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return served["schema"]["openAPIV3Schema"]
    raise KeyError(f"{crd_path} serves no version {version}")


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


def problems(crd_path: Path, document: dict[str, Any], version: str = "v1") -> list[Problem]:
    """Everything the API server would refuse in `document`: schema errors after defaulting, unknown fields."""
    schema = load_schema(crd_path, version)
    unknown = [Problem(path, "unknown field") for path in unknown_fields(schema, document)]
    return schema_problems(schema, with_defaults(schema, document)) + unknown


def field_path(parts: Sequence[str | int]) -> str:
    """`spec.workerGroupSpecs[0].replicas`, the way the API server names a field in its causes."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "<root>"
