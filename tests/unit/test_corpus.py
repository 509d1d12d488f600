"""The log corpus (tests/corpus): real tools' output in several versions, with what must and must not fire."""

from pathlib import Path

import pytest
import yaml

from diagnosers.engine import diagnose_path
from diagnosers.findings import FINDING_IDS

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(path.parent for path in CORPUS.glob("*/expect.yaml"))


def expectation(case: Path) -> dict:
    return yaml.safe_load((case / "expect.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_corpus_case(case):
    expect = expectation(case)
    diagnosis = diagnose_path(case / "bundle")
    found = {one.id: one for one in diagnosis.findings}
    missing = [finding_id for finding_id in expect.get("present") or [] if finding_id not in found]
    assert not missing, f"{case.name}: expected {missing}; got {list(found)}"
    unwanted = [finding_id for finding_id in expect.get("absent") or [] if finding_id in found]
    assert not unwanted, f"{case.name}: must not report {unwanted}"
    primary = expect.get("primary")
    if primary:
        assert diagnosis.findings[0].id == primary, f"{case.name}: primary {diagnosis.findings[0].id}"
    quote = expect.get("quote")
    if quote:
        target = found[primary or expect["present"][0]]
        quotes = [one for one in target.evidence if quote in one.text]
        assert quotes, f"{case.name}: no evidence line contains {quote!r}"
        if "file" in expect:
            assert any(one.source == expect["file"] for one in quotes)
        if "line" in expect:
            assert any(one.line == expect["line"] for one in quotes)


def test_corpus_ids_are_real_finding_ids():
    for case in CASES:
        expect = expectation(case)
        for finding_id in [*(expect.get("present") or []), *(expect.get("absent") or [])]:
            assert finding_id in FINDING_IDS, f"{case.name}: {finding_id}"
