"""Promotions in Slack: a request is a channel message that mentions its approvers and carries Approve /
Reject; every later change edits that message. Who acts is the Slack user, with the user groups the
policy names that Slack says they are in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actions.promotions.policy import Actor, target_policy
from actions.promotions.store import OPEN_STATES, PromotionRequest, PromotionState
from bot.render.blocks import Message, notice, render, render_view

if TYPE_CHECKING:
    from actions.promotions.service import Promotions
    from bot.slack.poster import SlackPoster
    from bot.slack.user_groups import UserGroups

OUTCOMES = {
    PromotionState.PENDING: "waiting for approval",
    PromotionState.APPROVING: "approved; moving the alias",
    PromotionState.APPROVED: "approved, alias moved",
    PromotionState.REJECTED: "rejected",
    PromotionState.EXPIRED: "expired",
    PromotionState.CANCELLED: "cancelled",
    PromotionState.FAILED: "failed; approve again to retry",
}


class PromotionDesk:
    def __init__(self, poster: SlackPoster, promotions: Promotions, groups: UserGroups) -> None:
        self.poster = poster
        self.promotions = promotions
        self._groups = groups

    def actor(self, user: str) -> Actor:
        """The Slack user, with those of the policy's approver groups they belong to."""
        named = {group for policy in self.promotions.targets.values() for group in policy.approver_groups}
        return Actor(user, self._groups.of(user, named))

    def ask(self, channel: str, request: PromotionRequest) -> Message:
        """Post a new request in `channel` for its approvers; the reply for the one who asked."""
        self.poster.post(channel, self.message(request), key=_key(request.id))
        return notice(f"Asked: {request.id}. Its approvers are mentioned in the channel.")

    def refresh(self, request: PromotionRequest) -> None:
        """Edit the request's message to show where it stands now (if the bot posted one)."""
        if self.poster.find(_key(request.id)) is not None:
            self.poster.update(_key(request.id), self.message(request))

    def message(self, request: PromotionRequest) -> Message:
        policy = target_policy(self.promotions.targets, request.target)
        outcome = OUTCOMES[request.state] + (f": {request.reason}" if request.reason else "")
        text = f"{request.kind} {request.model} v{request.version} to {request.target}: {outcome}"
        return render(
            "promotion",
            text,
            request=request,
            outcome=outcome,
            requester=self.slack_id(request.requester),
            approved_by=[self.slack_id(approver) for approver in request.approvals],
            approvers=[*sorted(map(self.slack_id, policy.approvers)), *sorted(policy.approver_groups)],
            open=request.state in OPEN_STATES and request.state != PromotionState.APPROVING,
        )

    def reject_modal(self, request: PromotionRequest) -> dict:
        summary = f"{request.model} v{request.version} to {request.target}"
        return render_view(
            "reject_modal", request_id=request.id, summary=summary, requester=self.slack_id(request.requester)
        )

    def slack_id(self, who: str) -> str:
        """Whom a message mentions for `who` (a name where nobody's id is known, which shows as text)."""
        return self.promotions.people.slack_id(who)


def _key(request_id: str) -> str:
    return f"promotion:{request_id}"
