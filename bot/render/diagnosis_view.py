"""How a diagnosis looks in Slack: the verdict and the top findings in one message with a "Show evidence"
button, the runbooks for its thread when they are not published anywhere (what to read first as a message,
the whole page as a file), and all the evidence.

Everything quoted from a bundle is a person's (or a program's) text: it goes through `mrkdwn` and `code`
in the templates, so it shows as written and pings nobody.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.render.blocks import Message, render, render_whole
from bot.render.runbook_text import RunbookText, runbook_text

if TYPE_CHECKING:
    from diagnosers.engine import Diagnosis
    from diagnosers.findings import Finding

EVIDENCE_ACTION = "diagnosis_evidence"
# The message answers "what is wrong and what do I do": the few strongest findings, each with a couple of
# quotes cut to a line or two. "Show evidence" has the rest.
TOP_FINDINGS = 3
QUOTES_PER_FINDING = 2
QUOTE_CHARS = 200
DETAIL_CHARS = 1200


def diagnosis_message(diagnosis: Diagnosis, *, job: str, runbook_base_url: str, evidence_key: str) -> Message:
    """The verdict, the summary, the top findings (with a link to each runbook when `runbook_base_url` is set),
    a "Show evidence" button carrying `evidence_key`, and where the evidence came from."""
    top = _top_findings(diagnosis)
    return render(
        "diagnosis",
        f"Diagnosis of {job}: {diagnosis.verdict}",
        diagnosis=diagnosis,
        job=job,
        # The summary names the job the bundle says it is about; said once, in the first line, is enough.
        summary=diagnosis.summary.removeprefix(f"{job}: "),
        top=top,
        more=len(diagnosis.findings) - len(top),
        runbook_base_url=runbook_base_url.rstrip("/"),
        evidence_key=evidence_key,
        quotes_per_finding=QUOTES_PER_FINDING,
        quote_chars=QUOTE_CHARS,
        detail_chars=DETAIL_CHARS,
    )


@dataclass(frozen=True)
class RunbookPost:
    """A runbook for a thread: its Meaning and first Mitigation steps as a message, the whole page as a file."""

    message: Message
    runbook: RunbookText


def runbook_posts(diagnosis: Diagnosis) -> list[RunbookPost]:
    """The runbook of each top finding, for the thread when no URL links them."""
    ids = dict.fromkeys(found.id for found in _top_findings(diagnosis))
    return [
        RunbookPost(render("runbook", f"Runbook: {runbook.title}", runbook=runbook), runbook)
        for runbook in map(runbook_text, ids)
    ]


def evidence_message(diagnosis: Diagnosis) -> Message | None:
    """Every finding with all its quotes, whole; None when that does not fit in one message (post
    `bot.render.report.render_text` as a file instead)."""
    return render_whole("evidence", f"Evidence behind {diagnosis.verdict}", diagnosis=diagnosis)


def _top_findings(diagnosis: Diagnosis) -> list[Finding]:
    return diagnosis.findings[:TOP_FINDINGS]
