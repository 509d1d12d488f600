"""The slack-bolt App: slash commands acked at once, answered from a bounded pool of listener threads.

Bolt checks every request's signature and its 5-minute timestamp window (401 otherwise). Each command
acks with nothing, then a lazy listener parses, calls one action and replies ephemerally through the
command's response_url. A mistake a person made gets its message; anything else an incident id, and the
traceback goes to the log only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, App, Respond
from slack_bolt.error import BoltError
from slack_sdk import WebClient

from actions.errors import ActionError, Unavailable
from actions.settings import SettingsError
from bot.blocks import Message, render
from bot.slack_model import answer_model
from bot.slack_train import answer_train

if TYPE_CHECKING:
    from actions.promotions import Promotions
    from actions.settings import Settings

log = logging.getLogger(__name__)

Answer = Callable[[str, str], Message]


def build_slack_app(settings: Settings, promotions: Promotions) -> App:
    token = settings.slack_bot_token.get_secret_value()
    try:
        # Bolt checks the token with auth.test here.
        app = App(
            client=WebClient(token=token, base_url=settings.slack_api_url),
            signing_secret=settings.slack_signing_secret.get_secret_value(),
            # Bolt acks first and runs the lazy listeners on this pool: bounded, so a burst queues.
            listener_executor=ThreadPoolExecutor(settings.slack_workers, thread_name_prefix="slack-listener"),
        )
    except (BoltError, OSError) as error:
        raise Unavailable(
            f"Slack at {settings.slack_api_url} did not accept SLACK_BOT_TOKEN ({error}); "
            "check the token, and TRAINBOT_SLACK_API_URL if a proxy stands between"
        ) from None
    app.command("/train")(ack=_ack, lazy=[_replying(lambda text, user: answer_train(text, user, settings))])
    app.command("/model")(ack=_ack, lazy=[_replying(lambda text, user: answer_model(text, user, promotions))])
    return app


def _ack(ack: Ack) -> None:
    ack()


def _replying(answer: Answer) -> Callable[..., None]:
    """A lazy listener that answers the command ephemerally, whatever happens."""

    def reply(command: dict[str, Any], respond: Respond) -> None:
        respond(**_message_args(_answer(answer, command)), response_type="ephemeral", replace_original=False)

    return reply


def _answer(answer: Answer, command: dict[str, Any]) -> Message:
    try:
        return answer(command.get("text", ""), command["user_id"])
    except (ActionError, SettingsError) as error:
        return render("error", str(error), message=str(error))
    except Exception:
        incident = uuid.uuid4().hex[:12]
        log.exception(
            "incident %s: %s %r by %s", incident, command.get("command"), command.get("text"), command["user_id"]
        )
        text = f"trainbot failed on this command; incident {incident} is in its log"
        return render("error", text, message=text)


def _message_args(message: Message) -> dict[str, Any]:
    return {"text": message.text, "blocks": message.blocks}
