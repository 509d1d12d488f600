"""Doing the work behind a Slack request: what a person can fix is told to them, anything else is an incident
(its traceback in the log under an id, the id told)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actions.errors import ActionError
from bot.incidents import record_incident
from bot.render.blocks import mrkdwn

if TYPE_CHECKING:
    from slack_sdk import WebClient

# attempt_work with the incident counter bound: (work, tell, context).
Attempt = Callable[[Callable[[], None], Callable[[str], None], dict[str, Any]], None]


def tell_privately(client: WebClient, channel: str, user: str) -> Callable[[str], None]:
    """Say something only `user` sees, in `channel`."""
    return lambda text: client.chat_postEphemeral(channel=channel, user=user, text=mrkdwn(text))


def attempt_work(
    work: Callable[[], None], tell: Callable[[str], None], context: dict[str, Any], on_incident: Callable[[], None]
) -> None:
    """Do `work`; tell the person what went wrong if it fails (a traceback goes to the log only)."""
    try:
        work()
    except ActionError as error:
        tell(str(error))
    except Exception:
        incident = record_incident(str(context.get("command") or context.get("type")), count=on_incident)
        tell(f"trainbot failed on this; incident {incident.id} is in its log")
