"""Every line pattern's examples are found by its needles and parsed by its regex (ruff-style fixtures)."""

import io

import pytest

from diagnosers.logscan import RegexMatcher
from diagnosers.parsers.logs import LINE_PATTERNS, LogParser

EXAMPLES = [(pattern.kind, example) for pattern in LINE_PATTERNS for example in pattern.examples]


@pytest.fixture(scope="module")
def parser():
    return LogParser()


@pytest.mark.parametrize(("kind", "example"), EXAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EXAMPLES)])
def test_example_line_gives_its_signal_through_the_scanner(parser, kind, example):
    log = f"unrelated line before\n{example}\nunrelated line after\n".encode()
    parsed = parser.parse("logs/x.log", io.BytesIO(log))
    kinds = {signal.kind for signal in parsed.signals}
    assert kind in kinds
    assert all(signal.quote.line == 2 for signal in parsed.signals if signal.kind == kind)


@pytest.mark.parametrize(("kind", "example"), EXAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EXAMPLES)])
def test_example_line_gives_its_signal_from_a_json_string(parser, kind, example):
    assert kind in {signal.kind for signal in parser.parse_text("k8s/events.json", 7, example)}


def test_regex_fallback_finds_the_same_lines_as_hyperscan(parser):
    log = "\n".join(example for _, example in EXAMPLES).encode()
    fallback = LogParser()
    fallback._scanner._matcher = RegexMatcher(fallback._scanner._needles)
    fast = parser.parse("a.log", io.BytesIO(log))
    slow = fallback.parse("a.log", io.BytesIO(log))
    assert [(s.kind, s.quote.line) for s in fast.signals] == [(s.kind, s.quote.line) for s in slow.signals]


HARMLESS = [
    "Reducing batch size to avoid CUDA out of memory errors later",
    "View the dashboard at http://127.0.0.1:8265",
    "[default] Rendezvous complete for workers. Result:",
    "NCCL_P2P_DISABLE set by environment to 0",
    "CUDA available: True",
    '  Normal   Pulled     2m    kubelet  Successfully pulled image "rayproject/ray:2.9.0-gpu"',
    "Demands:\n (no resource demands)",
    "mlflow.tracking: logged metric loss=0.3 to run 1234",
]


@pytest.mark.parametrize("line", HARMLESS)
def test_harmless_lines_give_no_signal(parser, line):
    assert parser.parse("a.log", io.BytesIO(line.encode())).signals == []
