"""The "Silence 2h" button under an alert thread: a silence in Alertmanager for exactly that thread's
alerts, said in the thread (who, until when) and shown on its parent. Alertmanager down or refusing is
told only to the person who clicked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from slack_bolt import App
from slack_sdk import WebClient

from actions.alerts.silences import silence_thread
from bot.render.alert_messages import silenced_note, thread_parent
from bot.render.blocks import mrkdwn
from bot.slack.alert_poster import post_key
from bot.slack.lanes import ALERTMANAGER, always

if TYPE_CHECKING:
    from actions.alerts.threads import AlertThreads
    from bot.services import Services
    from bot.slack.acked_work import AckedWork, Work
    from bot.slack.attempts import Attempt
    from bot.slack.poster import SlackPoster

SILENCE_ACTION = "alert_silence"
SILENCE_FOR = timedelta(hours=2)


def register_alert_actions(
    app: App, work: AckedWork, services: Services, poster: SlackPoster, attempt: Attempt
) -> None:
    silence_clicked = _silence_clicked(services.alert_threads, services.settings.alertmanager_url, poster, attempt)
    app.action(SILENCE_ACTION)(work.listener(silence_clicked, lane=always(ALERTMANAGER)))


def _silence_clicked(threads: AlertThreads, alertmanager_url: str, poster: SlackPoster, attempt: Attempt) -> Work:
    def silence(body: dict[str, Any], client: WebClient) -> None:
        user, key, channel = body["user"]["id"], body["actions"][0]["value"], body["channel"]["id"]

        def work() -> None:
            now = datetime.now(UTC)
            silenced = silence_thread(threads, alertmanager_url, key, user, now, SILENCE_FOR)
            poster.reply(post_key(key), silenced_note(silenced))
            poster.update(post_key(key), thread_parent(silenced.thread, bool(alertmanager_url), now))

        attempt(work, lambda text: client.chat_postEphemeral(channel=channel, user=user, text=mrkdwn(text)), body)

    return silence
