"""The diagnosis decodes only the exporter metrics its rules read, and every metric a rule reads is among them."""

import shutil
from pathlib import Path

import pytest

from diagnosers.bundle import load_bundle
from diagnosers.engine import diagnose_path
from diagnosers.evidence import Evidence
from diagnosers.rules import METRICS_READ

ROOT = Path(__file__).resolve().parents[3]
BUNDLES_WITH_METRICS = sorted(
    path.parent.parent
    for path in [
        *(ROOT / "examples" / "bundles").glob("*/prometheus/*.json"),
        *(ROOT / "tests" / "corpus").glob("*/bundle/prometheus/*.json"),
    ]
)


def test_every_metric_a_rule_asks_for_is_one_the_loader_decodes(monkeypatch):
    asked: set[str] = set()
    original = Evidence.metric

    def recording(self: Evidence, *names: str):
        asked.update(names)
        return original(self, *names)

    monkeypatch.setattr(Evidence, "metric", recording)
    assert BUNDLES_WITH_METRICS
    for bundle in dict.fromkeys(BUNDLES_WITH_METRICS):
        diagnose_path(bundle)
    assert asked and asked <= METRICS_READ, sorted(asked - METRICS_READ)


@pytest.mark.parametrize("bundle", sorted(set(BUNDLES_WITH_METRICS))[:3], ids=lambda path: path.name)
def test_a_metric_no_rule_reads_is_passed_over_and_the_diagnosis_is_the_same(tmp_path, bundle):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    before = diagnose_path(copy).to_dict()
    # Unreadable on purpose: decoding it would leave an error note under sources.
    (copy / "prometheus" / "DCGM_FI_PROF_PCIE_RX_BYTES.json").write_text("{ not json")
    assert diagnose_path(copy).to_dict() == before
    noted = load_bundle(copy).sources
    assert "error" in noted.get("prometheus/DCGM_FI_PROF_PCIE_RX_BYTES.json", ""), (
        "without `metrics` every file is read"
    )
