"""Every finding id has a runbook, and every runbook has the shape the bot parses.

A runbook is playbooks/<id>.md: front matter (id, title, severity), a `# <title>` heading, then
the six `##` sections in a fixed order, with copy-pasteable ```sh commands under Diagnosis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnosers.findings import FINDING_IDS

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
SECTIONS = ("Meaning", "Symptoms", "Impact", "Diagnosis", "Mitigation", "Collect if it persists")
SEVERITIES = {"critical", "warning", "info"}

# The situations platform teams ask about, and the runbook that must name them.
SITUATIONS = {
    "insufficient-gpu": "RayCluster won't start",
    "image-pull": "RayCluster won't start",
    "host-oom": "head node OOM",
    "gpu-not-detected": "GPU not detected",
    "mlflow-unreachable": "MLflow tracking failure",
    "dashboard-unreachable": "Ray dashboard inaccessible",
    "nccl-timeout": "NCCL timeout",
    "rank-config": "rank mismatch",
    "gpu-oom": "OOM on backward",
    "io-bound": "low GPU utilisation",
    "small-batch": "poor scaling efficiency",
    "comm-bound": "poor scaling efficiency",
}


def _read(finding_id: str) -> str:
    return (PLAYBOOKS / f"{finding_id}.md").read_text(encoding="utf-8")


def _front_matter(text: str) -> dict[str, str]:
    lines = text.splitlines()
    assert lines[0] == "---", "front matter must start on the first line"
    end = lines.index("---", 1)
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        assert sep, f"front matter line is not 'key: value': {line!r}"
        fields[key.strip()] = value.strip()
    return fields


def _headings(text: str) -> list[tuple[str, str, list[str]]]:
    """(marker, heading, body lines) for each `#`/`##` heading outside fenced code."""
    headings: list[tuple[str, str, list[str]]] = []
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith(("# ", "## ")):
            marker, _, heading = line.partition(" ")
            headings.append((marker, heading.strip(), []))
            continue
        if headings:
            headings[-1][2].append(line)
    return headings


def test_one_runbook_per_finding_id() -> None:
    assert len(set(FINDING_IDS)) == 20
    assert {path.stem for path in PLAYBOOKS.glob("*.md")} == set(FINDING_IDS)


@pytest.mark.parametrize("finding_id", FINDING_IDS)
def test_front_matter(finding_id: str) -> None:
    text = _read(finding_id)
    fields = _front_matter(text)
    assert fields.get("id") == finding_id
    assert fields.get("title")
    assert fields.get("severity") in SEVERITIES
    titles = [heading for marker, heading, _ in _headings(text) if marker == "#"]
    assert titles == [fields["title"]]


@pytest.mark.parametrize("finding_id", FINDING_IDS)
def test_sections_in_order(finding_id: str) -> None:
    sections = [heading for marker, heading, _ in _headings(_read(finding_id)) if marker == "##"]
    assert sections == list(SECTIONS)


@pytest.mark.parametrize("finding_id", FINDING_IDS)
def test_diagnosis_has_shell_commands(finding_id: str) -> None:
    bodies = {heading: body for marker, heading, body in _headings(_read(finding_id)) if marker == "##"}
    assert any(line.strip() == "```sh" for line in bodies["Diagnosis"])


@pytest.mark.parametrize(("finding_id", "situation"), sorted(SITUATIONS.items()))
def test_names_the_situation(finding_id: str, situation: str) -> None:
    assert situation.lower() in _read(finding_id).lower()
