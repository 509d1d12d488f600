"""A runbook as Slack text, for a thread where no published runbook can be linked.

The page is playbooks/<id>.md from the package data. The thread gets what to read first: its Meaning and the
first steps of its Mitigation, front matter stripped, its Markdown said in Slack's mrkdwn (headings and
**bold** as *bold*; code fences kept, without their language), in pieces that each fit one section. A
heading starts a new piece, so a section reads as one part of the runbook. The whole page goes beside it as
a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files

from bot.render.blocks import MAX_SECTION_CHARS, mrkdwn

BOLD = re.compile(r"\*\*(.+?)\*\*")
# Lines that start something of their own: a list item (nested too) or a table row.
LINE_STARTS = re.compile(r"\s*(?:(?:[-*]|\d+\.)\s|\|)")
FENCE = "```"
# What the thread shows of a runbook: these parts, Mitigation to its first steps (a page has five to seven).
SHOWN_PARTS = ("*Meaning*", "*Mitigation*")
MITIGATION = "*Mitigation*"
FIRST_STEPS = 2
STEP = re.compile(r"\d+\.\s")


@dataclass(frozen=True)
class RunbookText:
    id: str
    title: str
    pieces: list[str]  # Meaning and the first Mitigation steps: mrkdwn, not yet escaped (the template escapes)
    page: str  # the whole page, Markdown as written
    steps: int  # numbered Mitigation steps in the page
    steps_shown: int  # of them, in `pieces`

    @property
    def filename(self) -> str:
        return f"{self.id}.md"


def runbook_text(finding_id: str) -> RunbookText:
    page = (files("playbooks") / f"{finding_id}.md").read_text(encoding="utf-8")
    front, body = _front_matter(page)
    shown = [part for part in _parts(body) if part[0] in SHOWN_PARTS]
    steps = 0
    for index, part in enumerate(shown):
        if part[0] == MITIGATION:
            shown[index], steps = _first_steps(part)
    title = front.get("title", finding_id)
    return RunbookText(finding_id, title, _pieces(shown), page, steps, min(steps, FIRST_STEPS))


def _front_matter(page: str) -> tuple[dict[str, str], str]:
    if not page.startswith("---\n"):
        return {}, page
    head, _, body = page[len("---\n") :].partition("\n---\n")
    fields = (line.partition(":") for line in head.splitlines())
    return {key.strip(): value.strip() for key, _, value in fields}, body


def _parts(body: str) -> list[list[str]]:
    """The page's parts, each a heading and its paragraphs, in mrkdwn; a fenced block is one paragraph."""
    parts: list[list[list[str]]] = [[[]]]
    in_fence = prose = False
    for line in body.splitlines():
        paragraph = parts[-1][-1]
        if line.startswith(FENCE):
            in_fence, prose = not in_fence, False
            paragraph.append(FENCE)
        elif in_fence:
            paragraph.append(line)
        elif line.startswith("# "):
            continue  # the page's title, which the message's first line already says
        elif line.startswith("#"):
            parts.append([[f"*{line.lstrip('#').strip()}*"], []])
            prose = False
        elif not line.strip():
            parts[-1].append([])
            prose = False
        elif prose and not LINE_STARTS.match(line):
            # Slack keeps line breaks: a sentence wrapped in the page is one line again.
            paragraph[-1] += " " + BOLD.sub(r"*\1*", line.strip())
        else:
            paragraph.append(BOLD.sub(r"*\1*", line))
            prose = True
    return [paragraphs for part in parts if (paragraphs := ["\n".join(lines) for lines in part if lines])]


def _first_steps(part: list[str]) -> tuple[list[str], int]:
    """The Mitigation part up to its first FIRST_STEPS numbered steps (with what leads into them), and how many
    steps it has."""
    kept: list[str] = []
    lines_left = [line for paragraph in part for line in paragraph.splitlines()]
    steps = [index for index, line in enumerate(lines_left) if STEP.match(line)]
    if len(steps) <= FIRST_STEPS:
        return part, len(steps)
    cut = steps[FIRST_STEPS]
    for paragraph in part:
        lines = paragraph.splitlines()
        if cut < len(lines):
            if cut:
                kept.append("\n".join(lines[:cut]))
            break
        kept.append(paragraph)
        cut -= len(lines)
    return kept, len(steps)


def _pieces(parts: list[list[str]]) -> list[str]:
    """Each part's paragraphs joined into pieces of at most a section's length once escaped."""
    pieces: list[str] = []
    for paragraphs in parts:
        pieces.append(paragraphs[0])
        for paragraph in paragraphs[1:]:
            joined = f"{pieces[-1]}\n\n{paragraph}"
            if len(mrkdwn(joined)) <= MAX_SECTION_CHARS:
                pieces[-1] = joined
            else:
                pieces.append(paragraph)
    return pieces
