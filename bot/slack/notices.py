"""Registry notices from MLflow's webhooks (actions/promotions/registry_events.py), posted to the promotions channel:
a new version with a button per target to request its promotion, an out-of-band alias change as an alert.

A notice is marked posted after Slack took it, so a crash in between posts it again rather than never.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bot.render.blocks import render

if TYPE_CHECKING:
    from actions.promotions.registry_events import Notice
    from actions.promotions.service import Promotions
    from bot.slack.poster import SlackPoster

log = logging.getLogger(__name__)

POLL_S = 2.0
# A round posts at most this many, so a backlog does not hold the channel's pace for long.
PER_ROUND = 2
ROUND_TURN = "turn:notice-poster"


def post_notices(
    poster: SlackPoster, promotions: Promotions, channel: str, since: datetime, limit: int = PER_ROUND
) -> int:
    """Post up to `limit` unposted notices to `channel`, those queued before `since` (the bot's start) said to be
    from an earlier session; how many were posted (none while another bot on this state store posts them: both
    would post the same)."""
    with poster.posts.turn(ROUND_TURN) as ours:
        return _post_unposted(poster, promotions, channel, since, limit) if ours else 0


def _post_unposted(poster: SlackPoster, promotions: Promotions, channel: str, since: datetime, limit: int) -> int:
    posted = 0
    for notice in promotions.events.unposted()[:limit]:
        earlier = _earlier(notice, since)
        message = render(
            "registry_notice", notice.text + earlier, notice=notice, earlier=earlier, targets=list(promotions.targets)
        )
        try:
            poster.post(channel, message)
        except SlackApiError as error:
            log.warning("could not post notice %s to %s: %s", notice.id, channel, error.response.get("error"))
            break
        promotions.events.mark_posted(notice.id, datetime.now(UTC))
        posted += 1
    return posted


def _earlier(notice: Notice, since: datetime) -> str:
    """What a notice queued before `since` says of itself, so nobody takes it for news; else nothing."""
    if notice.created_at is None or notice.created_at >= since:
        return ""
    return f" (from an earlier session, queued {notice.created_at:%Y-%m-%d %H:%M} UTC)"


def start_notice_poster(poster: SlackPoster, promotions: Promotions, channel: str) -> threading.Event:
    """A daemon thread posting notices as they come; set the returned event to stop it."""
    stop, since = threading.Event(), datetime.now(UTC)

    def loop() -> None:
        while not stop.wait(POLL_S):
            try:
                post_notices(poster, promotions, channel, since)
            except Exception:
                log.exception("posting registry notices failed; trying again in %s s", POLL_S)

    threading.Thread(target=loop, name="notice-poster", daemon=True).start()
    return stop


def offer_of(value: str) -> tuple[str, int, str]:
    """The (model, version, target) a "Request <target>" button carries."""
    offer = json.loads(value)
    return str(offer["model"]), int(offer["version"]), str(offer["target"])
