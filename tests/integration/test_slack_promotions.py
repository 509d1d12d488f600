"""The approval flow in Slack end to end: a request posted for its approvers, buttons clicked by the
wrong and the right people, the reject modal, over signed HTTP to the real App, against a real sqlite
MLflow registry and a state store on sqlite and on PostgreSQL, with Slack's side played by the local stand-in."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mlflow import MlflowClient
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient

from actions.promotions.deliveries import Delivery
from actions.promotions.policy import Actor
from actions.promotions.service import Promotions
from actions.promotions.store import PromotionState
from actions.settings import Settings
from actions.state.posts import SlackPosts
from bot.console.local_slack import Call, button_click_body, post_signed, view_submission_body
from bot.services import Services
from bot.slack.app import REJECT_REASON, build_slack_app
from bot.slack.notices import post_notices
from bot.slack.poster import SlackPoster
from bot.web.app import make_app
from tests.builders.model_registry import alias, register
from tests.standins.slack_bot import SECRET, command, serving_in_thread, slack_settings, texts
from tests.standins.slack_standin import SlackStandIn, slack_standin

pytestmark = pytest.mark.integration

ALICE, BOB, CAROL, DAVE = "U01ALICE", "U02B", "U03C", "U04D"
POLICY = {
    "targets": {
        "staging": {"approvers": [BOB]},
        "production": {"approvers": [BOB, CAROL], "approver_groups": ["S0MLLEADS"], "approvals": 2},
    }
}


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with slack_standin() as stand_in:
        stand_in.usergroups = {"S0MLLEADS": [DAVE]}
        yield stand_in
    stand_in.check_within_limits()


@pytest.fixture
def promotion_bot_settings(tmp_path: Path, slack: SlackStandIn, state_store_url: str) -> Settings:
    """A Slack bot with the promotion policy and an MLflow registry in the test's folder, on each dialect."""
    return slack_settings(
        tmp_path,
        slack,
        state_store_url=state_store_url,
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        promotion=POLICY,
    )


@pytest.fixture
def client(promotion_bot_settings: Settings) -> MlflowClient:
    client = MlflowClient(
        tracking_uri=promotion_bot_settings.tracking_uri(), registry_uri=promotion_bot_settings.tracking_uri()
    )
    client.create_experiment("sweeps", artifact_location=str(promotion_bot_settings.data_dir / "artifacts"))
    client.create_registered_model("tiny-transformer")
    for loss in (1.5, 1.2):
        register(client, "tiny-transformer", {"val_loss": loss})
    return client


@pytest.fixture
def bot(promotion_bot_settings: Settings, client: MlflowClient) -> Iterator[str]:
    promotions = Promotions(promotion_bot_settings)
    yield from serving_in_thread(
        make_app(
            promotions,
            SlackRequestHandler(build_slack_app(Services(promotion_bot_settings, promotions=promotions)).app),
        )
    )


def test_a_notice_queued_before_the_bot_started_says_so(promotion_bot_settings, slack):
    promotions = Promotions(promotion_bot_settings)
    posts = SlackPosts(promotion_bot_settings.state_url())
    posts.create_schema()
    web = SlackPoster(WebClient(token="xoxb-test", base_url=slack.api_url), posts)
    queued = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    created = delivery("model_version.created", name="tiny-transformer", version="2")
    promotions.events.receive(created, queued, list(promotions.targets))
    started = datetime.now(UTC)
    promotions.events.receive(delivery("model_version.created", name="tiny-transformer", version="3"), started,
                              list(promotions.targets))  # fmt: skip
    assert post_notices(web, promotions, "C0PROMO", started) == 2
    before, now = [texts(call.params) for call in slack.calls if call.method == "chat.postMessage"]
    assert before.startswith(":package: tiny-transformer v2 ") and "v3" in now
    assert before.splitlines()[0].endswith(" staging (from an earlier session, queued 2026-03-01 09:30 UTC)"), before
    assert "earlier session" not in now


def ask(bot: str, slack: SlackStandIn, text: str, user: str = ALICE) -> Call:
    """`user` (alice) asks with `/model TEXT`; the request's post in the channel."""
    reply = command(bot, slack, "/model", text, user=user)
    assert texts(reply).startswith("Asked: pr-"), reply
    return slack.wait_for("chat.postMessage")[-1]


def click(bot: str, slack: SlackStandIn, posted: Call, action: str, user: str) -> None:
    request_id = next(
        element["value"]
        for block in posted.params["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    )
    answer = post_signed(bot, SECRET, button_click_body(slack, action, request_id, user, posted))
    assert answer.status_code == 200


def ephemeral_to(slack: SlackStandIn, user: str, count: int = 1) -> str:
    said = [call for call in slack.wait_for("chat.postEphemeral", count) if call.params["user"] == user]
    return said[-1].params["text"]


def buttons(call: Call) -> list[str]:
    return [e["action_id"] for block in call.params["blocks"] if block["type"] == "actions" for e in block["elements"]]


def test_a_request_is_posted_for_its_approvers_and_only_an_approver_moves_the_alias(bot, slack, client):
    posted = ask(bot, slack, "promote tiny-transformer 2 staging")
    assert posted.params["channel"] == "C0ML"
    shown = texts(posted.params)
    assert "*Promote* `tiny-transformer` v2 to *staging*: waiting for approval" in shown
    assert "Asked by <@U01ALICE>" in shown and "approvers: <@U02B>" in shown
    assert buttons(posted) == ["promotion_approve", "promotion_reject"]

    click(bot, slack, posted, "promotion_approve", ALICE)
    assert ephemeral_to(slack, ALICE) == "nobody approves their own request; ask an approver for staging"
    click(bot, slack, posted, "promotion_approve", CAROL)
    assert ephemeral_to(slack, CAROL, 2) == "you are not an approver for staging"
    assert alias(client, "tiny-transformer", "staging") is None

    click(bot, slack, posted, "promotion_approve", BOB)
    [edited] = slack.wait_for("chat.update")
    assert (edited.params["channel"], edited.params["ts"]) == ("C0ML", posted.answer["ts"])
    assert "approved, alias moved" in edited.params["text"]
    assert "1/1 approvals by <@U02B>" in texts(edited.params)
    assert buttons(edited) == []
    assert alias(client, "tiny-transformer", "staging") == 2


def test_a_user_groups_member_approves_where_the_policy_names_the_group(bot, slack, client):
    posted = ask(bot, slack, "promote tiny-transformer 2 production")
    assert "<!subteam^S0MLLEADS>" in texts(posted.params)
    click(bot, slack, posted, "promotion_approve", DAVE)
    click(bot, slack, posted, "promotion_approve", BOB)
    edited = slack.wait_for("chat.update", 2)[-1]
    assert "2/2 approvals by <@U04D>, <@U02B>" in texts(edited.params)
    assert alias(client, "tiny-transformer", "production") == 2


def test_reject_asks_why_in_a_modal_and_the_post_shows_the_reason(bot, slack, promotion_bot_settings, client):
    posted = ask(bot, slack, "promote tiny-transformer 1 staging")
    click(bot, slack, posted, "promotion_reject", CAROL)
    assert ephemeral_to(slack, CAROL) == "you are not an approver for staging"
    click(bot, slack, posted, "promotion_reject", BOB)
    [opened] = slack.wait_for("views.open")
    modal = opened.params["view"]
    request_id = modal["private_metadata"]
    assert modal["callback_id"] == REJECT_REASON

    blank = {"reason": {"reason": {"type": "plain_text_input", "value": "  "}}}
    refused = post_signed(bot, SECRET, view_submission_body(REJECT_REASON, request_id, blank, BOB))
    assert refused.json() == {"response_action": "errors", "errors": {"reason": "Say why it is rejected."}}

    reason = {"reason": {"reason": {"type": "plain_text_input", "value": "eval set <!channel> leaked"}}}
    assert post_signed(bot, SECRET, view_submission_body(REJECT_REASON, request_id, reason, BOB)).status_code == 200
    [edited] = slack.wait_for("chat.update")
    assert "rejected: eval set &lt;!channel&gt; leaked" in texts(edited.params)
    assert "<!channel>" not in json.dumps(edited.params)
    assert buttons(edited) == []
    assert Promotions(promotion_bot_settings).store.get(request_id).state == PromotionState.REJECTED
    assert alias(client, "tiny-transformer", "staging") is None


def test_approve_and_rollback_by_command_edit_and_post(bot, slack, client):
    posted = ask(bot, slack, "promote tiny-transformer 1 staging")
    request_id = texts(posted.params).split("`pr-")[1].split("`")[0]
    reply = command(bot, slack, "/model", f"approve pr-{request_id}", user=BOB)
    assert f"pr-{request_id}  tiny-transformer v1 -&gt; staging  approved" in texts(reply)
    assert "approved, alias moved" in slack.wait_for("chat.update")[0].params["text"]
    second = ask(bot, slack, "promote tiny-transformer 2 staging")
    click(bot, slack, second, "promotion_approve", BOB)
    slack.wait_for("chat.update", 2)
    back = ask(bot, slack, "rollback tiny-transformer staging")
    assert "*Roll back* `tiny-transformer` v1 to *staging*" in texts(back.params)


def delivery(event: str, **data: str) -> Delivery:
    return Delivery(str(uuid.uuid4()), event, data, datetime.now(UTC))  # as MLflow names its deliveries


def test_registry_notices_are_posted_and_a_new_version_can_be_requested_from_its_post(
    bot, slack, promotion_bot_settings
):
    promotions = Promotions(promotion_bot_settings)
    posts = SlackPosts(promotion_bot_settings.state_url())
    posts.create_schema()
    web = SlackPoster(WebClient(token="xoxb-test", base_url=slack.api_url), posts)
    started = datetime.now(UTC)
    promotions.events.receive(
        delivery("model_version.created", name="tiny-transformer", version="2"),
        datetime.now(UTC),
        list(promotions.targets),
    )
    promotions.events.receive(
        delivery("model_version_alias.deleted", name="tiny-transformer", alias="<!channel>"),
        datetime.now(UTC),
        list(promotions.targets),
    )

    slack.refusing["chat.postMessage"] = "channel_not_found"
    assert post_notices(web, promotions, "C0PROMO", started) == 0
    assert len(promotions.events.unposted()) == 2  # kept for the next round
    del slack.refusing["chat.postMessage"]
    assert post_notices(web, promotions, "C0PROMO", started) == 2
    assert post_notices(web, promotions, "C0PROMO", started) == 0

    offer, out_of_band = [call for call in slack.calls if call.method == "chat.postMessage" and "ts" in call.answer]
    assert offer.params["channel"] == "C0PROMO"
    assert [e["text"]["text"] for b in offer.params["blocks"] if b["type"] == "actions" for e in b["elements"]] == [
        "Request staging",
        "Request production",
    ]
    assert texts(out_of_band.params).startswith(":rotating_light: tiny-transformer@&lt;!channel&gt; was deleted")

    staging = next(e for b in offer.params["blocks"] if b["type"] == "actions" for e in b["elements"])
    body = button_click_body(slack, staging["action_id"], staging["value"], ALICE, offer)
    assert post_signed(bot, SECRET, body).status_code == 200
    asked = slack.wait_for("chat.postMessage", 4)[-1]
    assert "*Promote* `tiny-transformer` v2 to *staging*: waiting for approval" in texts(asked.params)
    assert asked.params["channel"] == "C0PROMO"


# A bare user id: one that is not inside a mention (<@U02B>), which Slack would show as the raw id.
BARE_USER_ID = re.compile(r"(?<![<@\w])[UW][A-Z0-9]{2,20}\b")


def test_a_person_is_one_name_or_a_mention_and_approvers_work_spelled_either_way(promotion_bot_settings, slack, client):
    """alice asks in the CLI by name and bob approves in Slack by id: the same two people everywhere, mentioned
    by their ids in Slack; carol, whom the config does not name, is her mention; no text shows a bare id."""
    people = {"alice": ALICE, "bob": BOB}
    policy = {"targets": {"staging": {"approvers": ["bob"]}, "production": {"approvers": [BOB, CAROL]}}}
    settings = Settings(**{**promotion_bot_settings.model_dump(), "promotion": policy, "people": people})
    promotions = Promotions(settings)
    asked = promotions.request(Actor("alice"), "tiny-transformer", 1, "staging")  # as `--as alice` in the CLI
    slack_app = build_slack_app(Services(settings, promotions=promotions)).app
    for bot in serving_in_thread(make_app(promotions, SlackRequestHandler(slack_app))):
        approved = command(bot, slack, "/model", f"approve {asked.id}", user=BOB)
        assert "(1/1 approvals by <@U02B>; asked by <@U01ALICE>)" in texts(approved)
        listed = texts(command(bot, slack, "/model", "requests", user=CAROL))
        assert f"`{asked.id}  tiny-transformer v1 -&gt; staging  approved`  (1/1 approvals by <@U02B>" in listed
        trail = texts(command(bot, slack, "/model", "history tiny-transformer", user=CAROL))
        assert "promote` (<@U01ALICE>)" in trail and "approval` (<@U02B>)" in trail
        posted = ask(bot, slack, "promote tiny-transformer 2 production", CAROL)
        assert "Asked by <@U03C> · 0/2 approvals · approvers: <@U02B> <@U03C>" in texts(posted.params)
        click(bot, slack, posted, "promotion_approve", BOB)  # bob by id, the policy names his id here
        assert "1/2 approvals by <@U02B>" in texts(slack.wait_for("chat.update")[-1].params)
        click(bot, slack, posted, "promotion_reject", BOB)
        [opened] = slack.wait_for("views.open")
        assert "asked by <@U03C>" in json.dumps(opened.params["view"])
    assert [request.requester for request in promotions.requests()] == [CAROL, "alice"]
    shown = [json.dumps(call.params) for call in slack.calls if call.method != "auth.test"]
    assert not [found for text in shown for found in BARE_USER_ID.findall(text)], shown
