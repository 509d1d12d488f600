"""The example bundles `make run` diagnoses: one per verdict, and their metric files stay reproducible."""

import pytest

from diagnosers.engine import diagnose_path
from tests.builders import scenarios
from tests.paths import EXAMPLES

EXPECTED = {
    "failed-gpu-oom": ("failed", "gpu-oom"),
    "failed-image-pull": ("failed", "image-pull"),
    "comm-bound-small-batch": ("comm-bound", "comm-bound"),
    "io-bound-dcgm-only": ("io-bound", "io-bound"),
    "compute-bound": ("compute-bound", "compute-bound"),
    # The ranks wait in collectives for the throttled one: the time goes to collectives, the straggler is why.
    "straggler-throttled-gpu": ("comm-bound", "straggler"),
    "insufficient-evidence": ("insufficient-evidence", None),
}


def test_every_example_is_listed():
    assert {path.name for path in EXAMPLES.iterdir() if path.is_dir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_verdict_and_primary_finding(name):
    verdict, primary = EXPECTED[name]
    diagnosis = diagnose_path(EXAMPLES / name)
    assert diagnosis.verdict == verdict
    if primary:
        assert diagnosis.findings[0].id == primary


def test_examples_cover_every_verdict():
    assert {verdict for verdict, _ in EXPECTED.values()} == {
        "failed",
        "comm-bound",
        "io-bound",
        "compute-bound",
        "insufficient-evidence",
    }


def test_committed_metric_files_match_their_generator(tmp_path):
    scenarios.write_examples(tmp_path)
    for generated in sorted(tmp_path.rglob("*.json*")):
        relative = generated.relative_to(tmp_path)
        assert (EXAMPLES / relative).read_text() == generated.read_text(), relative


def test_the_straggler_leads_the_collective_wait_it_causes():
    diagnosis = diagnose_path(EXAMPLES / "straggler-throttled-gpu")
    assert diagnosis.summary.startswith("Rank 5 holds the others back. Rank 5 is the straggler")
    assert diagnosis.summary.endswith("Runbook: playbooks/straggler.md")
    comm_bound = next(found for found in diagnosis.findings if found.id == "comm-bound")
    assert comm_bound.detail.endswith("This is probably a consequence of straggler.")
    assert comm_bound.confidence < diagnosis.findings[0].confidence
