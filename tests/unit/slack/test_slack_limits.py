"""The local Slack refuses what Slack refuses (Block Kit's documented limits, with Slack's error shape),
and what the bot renders is cut to fit them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.render.blocks import clip, render, render_view
from bot.slack.app import OFFER_ACTION
from tests.standins.slack_standin import SlackStandIn, slack_standin

OFFER = SimpleNamespace(kind="offer", text="tiny-transformer v3 was registered", model="tiny-transformer", version=3)


@pytest.fixture(scope="module")
def stand_in() -> Iterator[SlackStandIn]:
    """Its own local Slack: these tests are refused on purpose, which the shared `slack` fixture forbids."""
    with slack_standin() as served:
        yield served


@pytest.fixture(scope="module")
def client(stand_in: SlackStandIn) -> WebClient:
    return WebClient(token="xoxb-test", base_url=stand_in.api_url, timeout=10)


def section(chars: int) -> list[dict[str, Any]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * chars}}]


def fields(count: int, chars: int = 1) -> list[dict[str, Any]]:
    return [{"type": "section", "fields": [{"type": "mrkdwn", "text": "x" * chars}] * count}]


def button(chars: int) -> dict[str, Any]:
    return {"type": "button", "action_id": "b", "text": {"type": "plain_text", "text": "x" * chars}, "value": "v"}


def actions(count: int, chars: int = 1) -> list[dict[str, Any]]:
    return [{"type": "actions", "elements": [button(chars)] * count}]


def context(count: int) -> list[dict[str, Any]]:
    return [{"type": "context", "elements": [{"type": "mrkdwn", "text": "x"}] * count}]


def header(chars: int) -> list[dict[str, Any]]:
    return [{"type": "header", "text": {"type": "plain_text", "text": "x" * chars}}]


def select_option(chars: int) -> list[dict[str, Any]]:
    option = {"text": {"type": "plain_text", "text": "x" * chars}, "value": "v"}
    return [{"type": "section", "text": {"type": "mrkdwn", "text": "pick"},
             "accessory": {"type": "static_select", "action_id": "s", "options": [option]}}]  # fmt: skip


# (blocks at the limit, blocks one past it, Slack's complaint about the latter)
MESSAGE_LIMITS: list[tuple[Callable[[int], list[dict[str, Any]]], int, str]] = [
    (section, 3000, "must be less than 3001 characters [json-pointer:/blocks/0/text/text]"),
    (lambda n: fields(1, n), 2000, "must be less than 2001 characters [json-pointer:/blocks/0/fields/0/text]"),
    (fields, 10, "no more than 10 items allowed [json-pointer:/blocks/0/fields]"),
    (lambda n: actions(1, n), 75, "must be less than 76 characters [json-pointer:/blocks/0/elements/0/text/text]"),
    (actions, 25, "no more than 25 items allowed [json-pointer:/blocks/0/elements]"),
    (context, 10, "no more than 10 items allowed [json-pointer:/blocks/0/elements]"),
    (header, 150, "must be less than 151 characters [json-pointer:/blocks/0/text/text]"),
    (select_option, 75, "must be less than 76 characters [json-pointer:/blocks/0/accessory/options/0/text/text]"),
    (lambda n: section(1) * n, 50, "no more than 50 items allowed [json-pointer:/blocks]"),
]


@pytest.mark.parametrize(("blocks_of", "most", "problem"), MESSAGE_LIMITS)
def test_a_message_at_a_limit_is_posted_and_one_past_it_refused_as_slack_does(client, blocks_of, most, problem):
    assert client.chat_postMessage(channel="C0ML", text="t", blocks=blocks_of(most))["ok"]
    with pytest.raises(SlackApiError) as refused:
        client.chat_postMessage(channel="C0ML", text="t", blocks=blocks_of(most + 1))
    assert refused.value.response.data == {
        "ok": False,
        "error": "invalid_blocks",
        "errors": [problem],
        "response_metadata": {"messages": [f"[ERROR] {problem}"]},
    }


def test_message_text_past_40000_characters_is_too_long(client):
    assert client.chat_postMessage(channel="C0ML", text="x" * 40_000)["ok"]
    with pytest.raises(SlackApiError) as refused:
        client.chat_update(channel="C0ML", ts="1.0", text="x" * 40_001)
    assert refused.value.response.data == {"ok": False, "error": "msg_too_long"}


def modal(title: int, blocks: int) -> dict[str, Any]:
    return {"type": "modal", "title": {"type": "plain_text", "text": "x" * title}, "blocks": section(1) * blocks}


@pytest.mark.parametrize(
    ("view", "problem"),
    [
        (modal(25, 1), "must be less than 25 characters [json-pointer:/view/title/text]"),
        (modal(24, 101), "no more than 100 items allowed [json-pointer:/view/blocks]"),
    ],
)
def test_a_modal_past_its_limits_is_refused(client, view, problem):
    assert client.views_open(trigger_id="t", view=modal(24, 100))["ok"]
    with pytest.raises(SlackApiError) as refused:
        client.views_open(trigger_id="t", view=view)
    assert refused.value.response.data == {
        "ok": False,
        "error": "invalid_arguments",
        "response_metadata": {"messages": [f"[ERROR] {problem}"]},
    }


def test_the_bot_s_messages_and_modals_are_cut_to_fit(client):
    """chat.postMessage and views.open raise SlackApiError on a refusal."""
    huge = "<ray> " + "y" * 20_000
    messages = [
        render(
            "status", "s", status={"name": "job", "state": "FAILED"}, details=[("Message", huge)] * 12, history=[huge]
        ),
        render("code", "c", title=huge, code=huge),
        render("lines", "l", title="t", more=0, lines=[huge] * 80, empty=""),
        render("registry_notice", "n", notice=OFFER, earlier="", targets=[f"{n}-{'t' * 250}" for n in range(30)]),
        render(
            "sweep_results",
            "r",
            job="sweep",
            finished=1,
            trials=1,
            model="m",
            version=1,
            rows=[huge],
            offer='{"model": "m"}',
            target="t" * 255,
        ),
    ]
    for message in messages:
        assert client.chat_postMessage(channel="C0ML", text=message.text, blocks=message.blocks)["ok"]
    view = render_view("reject_modal", request_id="req-1", summary=huge, requester="U01ALICE")
    assert client.views_open(trigger_id="t", view=view)["ok"]


def test_offer_buttons_keep_their_target_in_the_value_whatever_its_length():
    [actions] = [block for block in render("registry_notice", "n", notice=OFFER, earlier="", targets=["t" * 255]).blocks
                 if block["type"] == "actions"]  # fmt: skip
    [offer] = actions["elements"]
    assert json.loads(offer["value"])["target"] == "t" * 255
    assert offer["action_id"].startswith(OFFER_ACTION) and len(offer["text"]["text"]) == 75


def test_clip_marks_the_cut_and_keeps_a_closing_code_fence():
    assert clip("abcdef", 4) == "abc…"
    assert clip("abc", 3) == "abc"
    fenced = clip("```" + "x" * 100 + "```", 20)
    assert (len(fenced), fenced.startswith("```"), fenced.endswith("…```")) == (20, True, True)
