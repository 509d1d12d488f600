"""How a diagnosis reads in Slack, from the example bundles through the real diagnoser: the verdict and the
top findings, runbook links or the runbooks' text, the evidence (or word that it needs a file), within
Slack's limits, and hostile text from a bundle shown as written without pinging anyone."""

from __future__ import annotations

import json
import shutil
from importlib.resources import files
from pathlib import Path

import pytest

from bot.render.blocks import MAX_BLOCKS, MAX_SECTION_CHARS, Message, render
from bot.render.diagnosis_view import (
    QUOTE_CHARS,
    TOP_FINDINGS,
    diagnosis_message,
    evidence_message,
    runbook_posts,
)
from bot.render.report import render_text
from bot.render.runbook_text import runbook_text
from diagnosers.engine import diagnose_path
from tests.builders.hostile_bundle import hostile_bundle
from tests.paths import EXAMPLES
from tests.standins.slack_bot import texts

BASE = "https://runbooks.example/trainbot/playbooks/"
PLAYBOOKS = files("playbooks")


def message_for(bundle: Path, job: str = "llm-finetune-7f3c", base: str = BASE) -> Message:
    return diagnosis_message(diagnose_path(bundle), job=job, runbook_base_url=base, evidence_key="llm-finetune-1a2b")


def section_texts(message: Message) -> list[str]:
    return [block["text"]["text"] for block in message.blocks if block["type"] == "section"]


def within_limits(message: Message) -> bool:
    """At most 50 blocks, and no section or context text over 3,000 characters: Slack refuses more."""
    parts = [block["text"] for block in message.blocks if "text" in block]
    parts += [element for block in message.blocks if block["type"] == "context" for element in block["elements"]]
    return len(message.blocks) <= MAX_BLOCKS and all(len(part["text"]) <= MAX_SECTION_CHARS for part in parts)


@pytest.fixture
def many_findings(tmp_path: Path) -> Path:
    """A failed job whose bundle also has image-pull events, step timings and metrics: five findings."""
    root = shutil.copytree(EXAMPLES / "failed-gpu-oom", tmp_path / "many")
    for example, part in [
        ("failed-image-pull", "k8s"),
        ("straggler-throttled-gpu", "steps"),
        ("straggler-throttled-gpu", "prometheus"),
    ]:
        shutil.copytree(EXAMPLES / example / part, root / part)
    return root


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return hostile_bundle(tmp_path / "hostile")


def test_a_failed_job_shows_the_verdict_the_findings_with_quotes_and_links_and_the_evidence_button():
    message = message_for(EXAMPLES / "failed-gpu-oom")
    assert message.text == "Diagnosis of llm-finetune-7f3c: failed"
    head, oom, timeout = section_texts(message)
    assert head.startswith(":x: *Diagnosis* of `llm-finetune-7f3c`: *failed*\nFailed: GPU out of memory on backward.")
    assert oom.startswith(
        ":red_circle: *critical* `gpu-oom` GPU out of memory on backward (confidence 0.95)"
        " · <https://runbooks.example/trainbot/playbooks/gpu-oom.md|runbook gpu-oom>\nCUDA ran out of memory"
    )
    assert "\n`logs/worker-1.log:13` `(RayTrainWorker pid=2212, ip=10.0.1.12) torch.OutOfMemoryError: CUDA out" in oom
    assert "<https://runbooks.example/trainbot/playbooks/nccl-timeout.md|runbook nccl-timeout>" in timeout
    assert "This is probably a consequence of gpu-oom." in timeout
    [actions] = [block for block in message.blocks if block["type"] == "actions"]
    assert [(e["action_id"], e["text"]["text"], e["value"]) for e in actions["elements"]] == [
        ("diagnosis_evidence", "Show evidence", "llm-finetune-1a2b")
    ]
    assert message.blocks[-1]["elements"][0]["text"] == (
        "Sources: logs ok · k8s ok · ray ok · prometheus not-configured · steps missing"
    )


def test_only_the_top_findings_are_shown_with_two_quotes_each_and_the_rest_is_counted(many_findings):
    diagnosis = diagnose_path(many_findings)
    assert len(diagnosis.findings) == 5
    message = message_for(many_findings)
    findings = section_texts(message)[1:]
    assert len(findings) == TOP_FINDINGS
    assert [text.split("`")[1] for text in findings] == [found.id for found in diagnosis.findings[:TOP_FINDINGS]]
    assert all(text.count("\n`") <= 2 for text in findings)
    assert "and 2 more finding(s): Show evidence lists them all" in texts({"blocks": message.blocks})


def test_without_a_runbook_url_the_thread_gets_each_runbooks_meaning_and_first_steps_and_the_page_as_a_file():
    diagnosis = diagnose_path(EXAMPLES / "failed-gpu-oom")
    message = diagnosis_message(diagnosis, job="llm-finetune-7f3c", runbook_base_url="", evidence_key="k")
    assert "<http" not in json.dumps(message.blocks)
    oom, timeout = runbook_posts(diagnosis)
    assert (oom.message.text, timeout.message.text) == (
        "Runbook: CUDA out of memory",
        "Runbook: NCCL collective timed out",
    )
    shown = texts({"blocks": oom.message.blocks})
    assert shown.startswith(":book: *Runbook: CUDA out of memory* `gpu-oom`\n*Meaning*\n\nA process asked the CUDA")
    assert "severity: critical" not in shown and "---" not in shown  # the front matter is not the runbook
    assert "\n*Mitigation*\n\n1. *Halve the per-GPU micro-batch" in shown and "\n2. *Cut activation memory" in shown
    assert "\n3. " not in shown and "*Symptoms*" not in shown and "*Diagnosis*" not in shown
    assert shown.endswith("Mitigation steps 3 to 7 and the rest of the runbook: `gpu-oom.md`, attached below")
    assert len(shown.splitlines()) < 20  # was the whole page, about 50 lines
    assert (oom.runbook.filename, oom.runbook.page) == ("gpu-oom.md", PLAYBOOKS.joinpath("gpu-oom.md").read_text())
    assert all(within_limits(post.message) for post in (oom, timeout))


def test_a_first_step_with_a_code_block_keeps_it_whole():
    runbook = runbook_text("dataloader-crash")
    shown = texts({"blocks": render("runbook", "Runbook", runbook=runbook).blocks})
    assert "```yaml" not in shown and "```\n" in shown  # fences stay, their language does not show as a line
    assert "emptyDir: {medium: Memory, sizeLimit: 16Gi}\n```" in shown and "\n2. *Use less shared memory" in shown
    assert "\n3. " not in shown


def test_the_runbooks_in_the_thread_are_those_of_the_top_findings(many_findings):
    titles = [post.message.text for post in runbook_posts(diagnose_path(many_findings))]
    assert titles == [
        "Runbook: CUDA out of memory",
        "Runbook: Container image cannot be pulled",
        "Runbook: NCCL collective timed out",
    ]


@pytest.mark.parametrize("example", sorted(path.name for path in EXAMPLES.iterdir()))
def test_every_example_renders_within_slacks_limits_and_its_evidence_fits(example):
    diagnosis = diagnose_path(EXAMPLES / example)
    assert within_limits(message_for(EXAMPLES / example, base=""))
    evidence = evidence_message(diagnosis)
    assert evidence is not None and within_limits(evidence)
    shown = texts({"blocks": evidence.blocks})
    for quote in (quote for found in diagnosis.findings for quote in found.evidence):
        assert f"`{quote.source}:{quote.line}`" in shown
    if not diagnosis.findings:
        assert shown.endswith("No findings, so nothing to quote.")


def test_bundle_text_pings_nobody_and_stays_inside_its_code_span(hostile):
    message = message_for(hostile, job="<!here> job")
    posted = json.dumps(message.blocks, ensure_ascii=False) + message.text
    for ping in ("<!channel>", "<!here>", "<@U02B>"):
        assert ping not in posted
    [finding] = section_texts(message)[1:]
    # The backtick would close the code span: it becomes a look-alike, so the quote stays one span.
    assert "`&lt;!channel&gt; ˋrm -rf /ˋ &amp; &lt;@U02B&gt; rank 0 xxx" in finding  # noqa: RUF001
    quotes = [line for line in finding.splitlines() if line.startswith("`logs/")]
    assert len(quotes) == 2
    assert all(line.endswith("…`") and "x" * QUOTE_CHARS not in line for line in quotes)  # clipped
    assert within_limits(message)


def test_evidence_too_long_for_a_message_is_said_whole_in_the_file_text(hostile):
    diagnosis = diagnose_path(hostile)
    assert sum(len(quote.text) for quote in diagnosis.findings[0].evidence) > MAX_SECTION_CHARS
    assert evidence_message(diagnosis) is None
    whole = render_text(diagnosis, quote_chars=None)
    for quote in diagnosis.findings[0].evidence:
        assert f"> {quote.source}:{quote.line}: {quote.text}" in whole


def test_a_source_status_too_long_for_slack_is_cut_rather_than_refused(tmp_path):
    root = shutil.copytree(EXAMPLES / "insufficient-evidence", tmp_path / "bundle")
    meta = json.loads((root / "bundle.json").read_text())
    meta["sources"]["prometheus"] = "error: " + "upstream said no; " * 300
    (root / "bundle.json").write_text(json.dumps(meta))
    message = message_for(root)
    assert within_limits(message)
    sources = message.blocks[-1]["elements"][0]["text"]
    assert sources.startswith("Sources: logs ok · k8s missing · ray ok · prometheus error: upstream said no;")
    assert len(sources) == MAX_SECTION_CHARS and sources.endswith("…")
